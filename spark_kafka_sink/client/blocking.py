"""BlockingConnection: a small synchronous connection to one broker.

For the embedded broker's readiness probe, admin-style calls and integration tests; the producer
uses the selector-driven network client instead. On connect it negotiates versions with
ApiVersions (at our highest version; on UNSUPPORTED_VERSION it retries at the version the broker
names for ApiVersions, else v0, per KIP-511). One request at a time; all bytes go through
ClientFraming. Every socket operation is bounded by ``timeout_s``. Any error closes the
connection, and socket errors surface as KafkaConnectionError naming the address.

With ``security`` (:class:`~.security.ConnectionSecurity`), the socket is wrapped in TLS (the
handshake bounded by ``timeout_s``; a failure raises :class:`SslAuthenticationError`) and, after
ApiVersions, SASL runs as in the network client (``auth.authenticator``); a refusal raises the
:class:`AuthenticationError` the broker's code names. An OAUTHBEARER token is waited for at most
``timeout_s`` too (it is fetched on the token cache's own thread), so a stuck token endpoint
cannot hold the connection longer.
"""

from __future__ import annotations

import socket
import ssl
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import (
    AuthenticationError, KafkaConnectionError, KafkaError, ProtocolError, SslAuthenticationError,
    raise_for_code,
)
from ..protocol.api_message import ApiMessage
from ..protocol.apis import API_VERSIONS
from ..protocol.frame_buffer import DEFAULT_MAX_FRAME_BYTES
from ..protocol.framing import ClientFraming
from ..protocol.values import Struct
from ..protocol.versions import VersionRange, negotiate
from .api_versions import FIRST_VERSION, api_versions_body, interpret_api_versions
from .auth.authenticator import SaslAuthenticator
from .security import PLAINTEXT, ConnectionSecurity
from .tls import describe_ssl_error

_RECV_BYTES = 256 * 1024


class BlockingConnection:
    """A synchronous connection to one broker; a context manager."""

    def __init__(self, host: str, port: int, *, client_id: str = "spark-kafka-sink",
                 timeout_s: float = 10.0, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 security: ConnectionSecurity = PLAINTEXT):
        self.address = f"{host}:{port}"
        self.timeout_s = timeout_s
        self._framing = ClientFraming(client_id, max_frame_bytes)
        self._sock: socket.socket | None = None
        self._versions: Mapping[int, VersionRange] = MappingProxyType({})
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise self._connection_error("connect", exc) from exc
        try:
            if security.ssl_context is not None:
                self._sock = self._wrap_tls(self._sock, host, security.ssl_context)
            self._versions = self._fetch_api_versions()
            if security.sasl is not None:
                cache = security.sasl.token_cache     # OAUTHBEARER: its token, within timeout_s
                token = cache.token(timeout_s) if cache is not None else None
                self._authenticate(SaslAuthenticator(security.sasl, self.address, token=token))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "BlockingConnection":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def broker_versions(self) -> Mapping[int, VersionRange]:
        """api_key -> the broker's supported VersionRange."""
        return self._versions

    def version_for(self, api: ApiMessage) -> int:
        """The highest version of ``api`` both sides support (UnsupportedVersionError if none)."""
        return negotiate(api, self._versions)

    def request(self, api: ApiMessage, body: Mapping[str, Any] | Struct, *,
                version: int | None = None) -> Struct:
        """Send one request and wait for its response body."""
        out = self._framing.send(api, self.version_for(api) if version is None else version, body)
        self._send(out.data)
        return self._receive()

    def send_oneway(self, api: ApiMessage, body: Mapping[str, Any] | Struct, *,
                    version: int | None = None) -> None:
        """Send a request that gets no response (e.g. Produce with acks=0)."""
        out = self._framing.send(api, self.version_for(api) if version is None else version,
                                 body, expect_response=False)
        self._send(out.data)

    def close(self) -> None:
        """Close the socket; safe to call twice."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    # --- internals ----------------------------------------------------------------------------

    def _fetch_api_versions(self) -> Mapping[int, VersionRange]:
        version = FIRST_VERSION
        response = self.request(API_VERSIONS, api_versions_body(version), version=version)
        outcome = interpret_api_versions(response, version)
        if outcome.retry_version is not None:
            version = outcome.retry_version
            response = self.request(API_VERSIONS, api_versions_body(version), version=version)
            outcome = interpret_api_versions(response, version)
        raise_for_code(response.error_code, f"ApiVersions from {self.address}")
        assert outcome.versions is not None
        return outcome.versions

    def _wrap_tls(self, sock: socket.socket, host: str, context: ssl.SSLContext) -> ssl.SSLSocket:
        try:
            return context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            sock.close()
            raise SslAuthenticationError(f"TLS handshake with {self.address} failed: "
                                         f"{describe_ssl_error(exc)}") from None
        except OSError as exc:
            sock.close()
            raise self._connection_error("TLS handshake with", exc) from exc

    def _authenticate(self, authenticator: SaslAuthenticator) -> None:
        step = authenticator.first_request()
        while step is not None:
            api = step.api
            response = self.request(api, step.body, version=step.version)
            step = authenticator.on_response(api, response)
        if not authenticator.complete:
            raise AuthenticationError(f"{authenticator!r}: the exchange did not complete")

    def _live_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"the connection to {self.address} is closed")
        return self._sock

    def _send(self, data: bytes) -> None:
        sock = self._live_socket()
        try:
            sock.sendall(data)
        except OSError as exc:
            self.close()
            raise self._connection_error("send to", exc) from exc

    def _receive(self) -> Struct:
        sock = self._live_socket()
        try:
            while True:
                response = self._framing.next_response()
                if response is not None:
                    return response.body
                chunk = sock.recv(_RECV_BYTES)
                self._framing.receive_data(chunk)
                if not chunk:
                    raise KafkaConnectionError(
                        f"{self.address} closed the connection while "
                        f"{self._framing.in_flight} request(s) awaited a response")
        except ssl.SSLError as exc:
            self.close()
            if self._versions:
                raise self._connection_error("receive from", exc) from exc
            raise SslAuthenticationError(f"TLS handshake with {self.address} failed: "
                                         f"{describe_ssl_error(exc)}") from None
        except OSError as exc:
            self.close()
            raise self._connection_error("receive from", exc) from exc
        except ProtocolError as exc:
            self.close()
            raise type(exc)(f"{self.address}: {exc}") from None
        except KafkaError:
            self.close()
            raise

    def _connection_error(self, what: str, exc: OSError) -> KafkaConnectionError:
        if isinstance(exc, TimeoutError):
            return KafkaConnectionError(f"{what} {self.address} timed out after {self.timeout_s} s")
        return KafkaConnectionError(f"{what} {self.address} failed: {exc}")
