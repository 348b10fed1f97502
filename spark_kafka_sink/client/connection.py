"""Connection: the protocol state of one live connection, no I/O.

It owns the connection's :class:`ClientFraming` (correlation ids, in-order responses) and, once
the ApiVersions handshake is done, the broker's version ranges, from which every later request's
version is negotiated. The network client creates one when the selector reports the socket
connected and drops it when the connection goes away, so nothing carries over to a reconnect.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterator, Mapping

from ..errors import UnsupportedVersionError
from ..protocol.api_message import ApiMessage
from ..protocol.framing import ClientFraming, OutgoingRequest, Response
from ..protocol.values import Struct
from ..protocol.versions import VersionRange, negotiate


class Connection:
    """Framing plus negotiated versions for the connection to ``node_id``."""

    __slots__ = ("node_id", "_framing", "_versions")

    def __init__(self, node_id: int, client_id: str | None, max_frame_bytes: int):
        self.node_id = node_id
        self._framing = ClientFraming(client_id, max_frame_bytes)
        self._versions: Mapping[int, VersionRange] | None = None

    @property
    def versions(self) -> Mapping[int, VersionRange] | None:
        """The broker's ranges (api key -> VersionRange); None before ApiVersions completed."""
        return self._versions

    def set_versions(self, versions: Mapping[int, VersionRange]) -> None:
        self._versions = MappingProxyType(dict(versions))

    def version_for(self, api: ApiMessage, requested: int | None = None,
                    max_version: int | None = None) -> int:
        """The version to send ``api`` at: the highest both sides support (at most
        ``max_version`` when given), or ``requested`` after checking that both sides support it.
        UnsupportedVersionError otherwise."""
        if self._versions is None:
            raise UnsupportedVersionError(
                f"node {self.node_id}: the broker's API versions are not known yet")
        try:
            best = negotiate(api, self._versions)
        except UnsupportedVersionError as exc:
            raise UnsupportedVersionError(f"node {self.node_id}: {exc}") from None
        if requested is None and max_version is not None and best > max_version:
            requested = max_version
        if requested is None:
            return best
        theirs = self._versions[api.api_key]
        if not (api.min_version <= requested <= api.max_version and requested in theirs):
            raise UnsupportedVersionError(
                f"node {self.node_id}: {api.name} v{requested} is not supported by both sides "
                f"(this client: v{api.min_version}-v{api.max_version}, the broker: {theirs})")
        return requested

    def encode(self, api: ApiMessage, version: int, body: Mapping[str, Any] | Struct,
               expect_response: bool) -> OutgoingRequest:
        """The request's bytes (size prefix included) and its correlation id."""
        return self._framing.send(api, version, body, expect_response)

    def receive(self, data: bytes) -> Iterator[Response]:
        """Feed bytes from the socket and yield the responses now complete, in request order.

        Raises ProtocolError (a bad frame, a correlation id mismatch) once the responses before
        the bad one were yielded: the connection is then unusable and must be closed.
        """
        self._framing.receive_data(data)
        while (response := self._framing.next_response()) is not None:
            yield response
