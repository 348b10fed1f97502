"""What a connection needs for ``security.protocol``: a TLS context and/or SASL credentials.

:meth:`ConnectionSecurity.from_config` reads a ``ProducerConfig`` (or any object with its
attribute names); the blocking connection (admin calls, the probe, tests) takes the result. The
producer's selector gets its TLS transport from ``selector.transport_factory_for`` and its SASL
credentials through ``NetworkSettings``, from the same config.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any

from .auth.jaas import SASL_PROTOCOLS, SaslCredentials, credentials_from_config
from .tls import TLS_PROTOCOLS, build_ssl_context


@dataclass(frozen=True)
class ConnectionSecurity:
    """``ssl_context`` None: plain TCP; ``sasl`` None: no SASL."""

    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl: SaslCredentials | None = None

    @classmethod
    def from_config(cls, config: Any) -> "ConnectionSecurity":
        protocol = getattr(config, "security_protocol", "PLAINTEXT")
        context = build_ssl_context(config) if protocol in TLS_PROTOCOLS else None
        sasl = None
        if protocol in SASL_PROTOCOLS:
            sasl = credentials_from_config(config)
        return cls(context, sasl)


PLAINTEXT = ConnectionSecurity()
