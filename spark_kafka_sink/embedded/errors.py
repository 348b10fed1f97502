"""Why the embedded broker or the testing kit's schema registry could not be set up: one
:class:`BrokerLaunchError` subclass per cause.

Each message says what failed and what to do, and carries the evidence (the tail of Maven's or
Ivy's output, the tail of the node's log) so that a failed test run explains itself.
"""

from __future__ import annotations

from ..errors import BrokerLaunchError

__all__ = [
    "BrokerLaunchError",
    "BrokerStartError",
    "JarResolutionError",
    "JavaNotFoundError",
    "PortInUseError",
    "RegistryStartError",
    "StorageFormatError",
]


class JavaNotFoundError(BrokerLaunchError):
    """No usable ``java``: 17 or later on ``JAVA_HOME`` or ``PATH`` for Kafka, 21 or later for the
    schema registry (``embedded/apicurio.py``)."""


class JarResolutionError(BrokerLaunchError):
    """Maven or Ivy could not fetch the Kafka jars or the Apicurio Registry archive (or neither
    tool is available), or the archive could not be unpacked."""


class PortInUseError(BrokerLaunchError):
    """A port the broker must listen on is already taken."""

    def __init__(self, message: str, port: int):
        super().__init__(message)
        self.port = port


class StorageFormatError(BrokerLaunchError):
    """``kafka.tools.StorageTool format`` failed for a node."""


class BrokerStartError(BrokerLaunchError):
    """A node exited during start-up, or the cluster was not ready in time."""


class RegistryStartError(BrokerLaunchError):
    """The testing kit's schema registry exited during start-up, or did not answer in time."""


def tail(text: str, lines: int = 60) -> str:
    """The last ``lines`` lines of ``text``, marked when cut."""
    parts = text.rstrip("\n").splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return "\n".join([f"[... {len(parts) - lines} earlier lines cut ...]", *parts[-lines:]])
