"""Client and server framing: requests to bytes, bytes to responses (no I/O, h11 style).

    request frame  => size INT32, RequestHeader (v1 | v2), request body
    response frame => size INT32, ResponseHeader (v0 | v1), response body

ClientFraming numbers requests with increasing correlation ids (wrapping at the int32 maximum)
and expects responses in request order, as Kafka sends them on one connection. Requests sent
with ``expect_response=False`` (Produce with acks=0) get no response and are not tracked.

After any ProtocolError the framing is unusable: every later call raises again, since the
stream position can no longer be trusted.

ServerFraming is the counterpart for tests and fake brokers: it decodes requests and encodes
responses for a correlation id, so a client can be wired to a fake server in memory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

from ..bytecodec import INT32_MAX
from ..errors import CorrelationIdMismatchError, ProtocolError
from .api_message import ApiMessage
from .apis import API_VERSIONS, BY_KEY
from .frame_buffer import DEFAULT_MAX_FRAME_BYTES, FrameBuffer
from .headers import RequestHeader, ResponseHeader, skip_tagged_fields
from .primitives import INT32, Reader, Writer
from .values import Struct


@dataclass(frozen=True)
class OutgoingRequest:
    """An encoded request: ``parts``, written in order, are its bytes on the wire, size prefix
    included; a record batch of 64 KiB or more is a part of its own, not copied
    (:meth:`~.primitives.Writer.framed_parts`). ``data`` joins them."""

    correlation_id: int
    api: ApiMessage
    version: int
    parts: tuple[bytes | memoryview, ...]

    @property
    def data(self) -> bytes:
        """The whole request as one ``bytes`` (a copy when there are several parts)."""
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    @property
    def size(self) -> int:
        """Bytes on the wire."""
        return sum(len(part) if isinstance(part, bytes) else part.nbytes for part in self.parts)


@dataclass(frozen=True)
class Response:
    """A decoded response, matched to its request. ``version`` is the version decoded, which
    for ApiVersions can be 0 when the broker rejected our version (KIP-511)."""

    correlation_id: int
    api: ApiMessage
    version: int
    body: Struct


@dataclass(frozen=True)
class IncomingRequest:
    """A request as a server sees it. ``body`` is None when ``version`` is outside the range
    we declare for the API (a fake broker then answers UNSUPPORTED_VERSION)."""

    correlation_id: int
    api: ApiMessage
    version: int
    client_id: str | None
    body: Struct | None


def frame(header: bytes, body: bytes) -> bytes:
    """Prefix header + body with their size."""
    return b"".join((INT32.pack(len(header) + len(body)), header, body))


class _Framing:
    """Shared by client and server: the frame buffer and the broken-after-error rule."""

    def __init__(self, max_frame_bytes: int):
        self._frames = FrameBuffer(max_frame_bytes)
        self._error: ProtocolError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the socket; ``b""`` means the peer closed the connection."""
        self._guard(self._frames.feed, data)

    @property
    def eof(self) -> bool:
        return self._frames.eof

    def _guard(self, func, *args):
        if self._error is not None:
            raise ProtocolError(f"connection unusable after an earlier error: {self._error}")
        try:
            return func(*args)
        except ProtocolError as exc:
            self._error = exc
            raise


class ClientFraming(_Framing):
    """The client side of one connection."""

    def __init__(self, client_id: str | None = "spark-kafka-sink",
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, *, first_correlation_id: int = 0):
        super().__init__(max_frame_bytes)
        self.client_id = client_id
        self._next_id = first_correlation_id
        self._pending: deque[tuple[int, ApiMessage, int]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests sent that still await a response."""
        return len(self._pending)

    def send(self, api: ApiMessage, version: int, body: Mapping[str, Any] | Struct,
             expect_response: bool = True) -> OutgoingRequest:
        """Encode a request; track it unless ``expect_response`` is False."""
        if self._error is not None:
            raise ProtocolError(f"connection unusable after an earlier error: {self._error}")
        correlation_id = self._next_id
        header = RequestHeader(api.api_key, version, correlation_id, self.client_id)
        w = Writer()
        w.raw(header.encode(api.request_header_version(version)))
        api.encode_request_into(w, version, body)
        parts = w.framed_parts()
        self._next_id = 0 if correlation_id >= INT32_MAX else correlation_id + 1
        if expect_response:
            self._pending.append((correlation_id, api, version))
        return OutgoingRequest(correlation_id, api, version, parts)

    def next_response(self) -> Response | None:
        """The next complete response, or None until more bytes arrive."""
        return self._guard(self._next_response)

    def _next_response(self) -> Response | None:
        data = self._frames.next_frame()
        if data is None:
            return None
        if not self._pending:
            cid = INT32.unpack_from(data)[0] if len(data) >= 4 else "?"
            raise ProtocolError(f"received a response (correlation id {cid}) "
                                "but no request is pending")
        correlation_id, api, version = self._pending[0]
        r = Reader(data)
        try:
            header = ResponseHeader.decode(r, api.response_header_version(version))
        except ProtocolError as exc:
            raise ProtocolError(f"{api.name} v{version} response header: {exc}") from None
        if header.correlation_id != correlation_id:
            raise CorrelationIdMismatchError(
                f"expected the response to correlation id {correlation_id} "
                f"({api.name} v{version}), got correlation id {header.correlation_id}")
        self._pending.popleft()
        body_version, body = self._decode_body(api, version, memoryview(data)[r.offset:])
        return Response(correlation_id, api, body_version, body)

    @staticmethod
    def _decode_body(api: ApiMessage, version: int, payload: memoryview) -> tuple[int, Struct]:
        try:
            return version, api.decode_response(version, payload)
        except ProtocolError as exc:
            # KIP-511: a broker that does not know our ApiVersions version answers in v0.
            if api is not API_VERSIONS or version == 0:
                raise
            original = exc
        try:
            return 0, api.decode_response(0, payload)
        except ProtocolError:
            raise original from None


class ServerFraming(_Framing):
    """The server side of one connection, for fake brokers in tests."""

    def __init__(self, apis: Mapping[int, ApiMessage] = BY_KEY,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        super().__init__(max_frame_bytes)
        self._apis = apis

    def next_request(self) -> IncomingRequest | None:
        """The next complete request, or None until more bytes arrive."""
        return self._guard(self._next_request)

    def _next_request(self) -> IncomingRequest | None:
        data = self._frames.next_frame()
        if data is None:
            return None
        r = Reader(data)
        header = RequestHeader.decode(r, 1)
        api = self._apis.get(header.api_key)
        if api is None:
            raise ProtocolError(f"request for unknown api key {header.api_key}")
        if api.request_header_version(header.api_version) >= 2:
            skip_tagged_fields(r)
        body = None
        if header.api_version in api.versions:
            body = api.decode_request(header.api_version, memoryview(data)[r.offset:])
        return IncomingRequest(header.correlation_id, api, header.api_version,
                               header.client_id, body)

    @staticmethod
    def encode_response(api: ApiMessage, version: int, correlation_id: int,
                        body: Mapping[str, Any] | Struct) -> bytes:
        """A whole response frame (size prefix included) for ``correlation_id``."""
        header = ResponseHeader(correlation_id).encode(api.response_header_version(version))
        return frame(header, api.encode_response(version, body))

    def respond(self, request: IncomingRequest, body: Mapping[str, Any] | Struct, *,
                version: int | None = None) -> bytes:
        """The response frame to ``request`` (at its version unless ``version`` is given)."""
        return self.encode_response(request.api, request.version if version is None else version,
                                    request.correlation_id, body)
