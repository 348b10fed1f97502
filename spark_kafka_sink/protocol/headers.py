"""Request and response headers.

    RequestHeader v1  => api_key INT16, api_version INT16, correlation_id INT32,
                         client_id NULLABLE_STRING
    RequestHeader v2  => the v1 fields, then TAGGED_FIELDS
                         (client_id stays a non-compact NULLABLE_STRING even in v2)
    ResponseHeader v0 => correlation_id INT32
    ResponseHeader v1 => correlation_id INT32, TAGGED_FIELDS

A flexible API version uses request header v2 and response header v1; the others v1 and v0.
ApiVersions responses always use v0 (see ``ApiMessage.response_header_version``). We write empty
tagged-field sections and skip any tags we read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .primitives import INT16, INT32, Reader, Writer


def skip_tagged_fields(r: Reader) -> None:
    """Read and drop a tagged-field section."""
    for _ in range(r.uvarint()):
        r.uvarint()
        r.take(r.uvarint())


@dataclass(frozen=True)
class RequestHeader:
    """The header in front of every request body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def encode(self, header_version: int) -> bytes:
        w = Writer()
        w.pack(INT16, self.api_key)
        w.pack(INT16, self.api_version)
        w.pack(INT32, self.correlation_id)
        w.nullable_string(self.client_id, compact=False)
        if header_version >= 2:
            w.uvarint(0)
        return w.getvalue()

    @classmethod
    def decode(cls, r: Reader, header_version: int) -> "RequestHeader":
        """Read a header; with ``header_version`` 1 the tagged fields (if any) are left unread,
        so a server can read the key and version first and then call ``skip_tagged_fields``."""
        header = cls(r.int16(), r.int16(), r.int32(), r.nullable_string(compact=False))
        if header_version >= 2:
            skip_tagged_fields(r)
        return header


@dataclass(frozen=True)
class ResponseHeader:
    """The header in front of every response body."""

    correlation_id: int

    def encode(self, header_version: int) -> bytes:
        data = INT32.pack(self.correlation_id)
        return data + b"\x00" if header_version >= 1 else data

    @classmethod
    def decode(cls, r: Reader, header_version: int) -> "ResponseHeader":
        header = cls(r.int32())
        if header_version >= 1:
            skip_tagged_fields(r)
        return header
