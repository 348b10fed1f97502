"""A bounds-checked reader of record fields.

:class:`Cursor` decodes fields from a buffer up to a limit and raises :class:`CorruptRecordError`
(never ``IndexError``) when a field runs past it. Varints are decoded by
:func:`spark_kafka_sink.bytecodec.read_uvarint`, the codec the protocol layer uses too.
"""

from __future__ import annotations

from ..bytecodec import (
    UINT32_MAX, UINT64_MAX, VARINT_MAX_BYTES, VARLONG_MAX_BYTES, Buffer, VarintError, read_uvarint,
)
from ..errors import CorruptRecordError


class Cursor:
    """Reads record fields from ``buf[pos:limit]``, advancing ``pos``.

    ``what`` names the thing being read in error messages (e.g. ``"batch at offset 42"``).
    """

    __slots__ = ("buf", "pos", "limit", "what")

    def __init__(self, buf: Buffer, pos: int, limit: int, what: str):
        self.buf = buf
        self.pos = pos
        self.limit = limit
        self.what = what

    def remaining(self) -> int:
        """Bytes left before the limit."""
        return self.limit - self.pos

    def corrupt(self, message: str) -> CorruptRecordError:
        """An error about the thing being read, at the current position."""
        return CorruptRecordError(f"{self.what}: {message} (at byte {self.pos})")

    def varint(self) -> int:
        """A signed zig-zag varint that must fit an int32."""
        try:
            z, self.pos = read_uvarint(self.buf, self.pos, self.limit, VARINT_MAX_BYTES, UINT32_MAX)
        except VarintError as exc:
            raise self.corrupt(f"varint {exc}") from None
        return (z >> 1) ^ -(z & 1)

    def varlong(self) -> int:
        """A signed zig-zag varlong that must fit an int64."""
        try:
            z, self.pos = read_uvarint(self.buf, self.pos, self.limit, VARLONG_MAX_BYTES, UINT64_MAX)
        except VarintError as exc:
            raise self.corrupt(f"varlong {exc}") from None
        return (z >> 1) ^ -(z & 1)

    def int8(self) -> int:
        """One byte, as an unsigned int."""
        if self.pos >= self.limit:
            raise self.corrupt("byte runs past the end")
        byte = self.buf[self.pos]
        self.pos += 1
        return byte

    def raw(self, length: int, what: str) -> bytes:
        """``length`` bytes as a copy; ``what`` names the field in errors."""
        end = self.pos + length
        if length < 0 or end > self.limit:
            raise self.corrupt(f"{what} of {length} bytes overruns the {self.remaining()} bytes left")
        data = bytes(self.buf[self.pos:end])
        self.pos = end
        return data

    def nullable_bytes(self, what: str) -> bytes | None:
        """A varint length then that many bytes; length -1 is ``None``."""
        length = self.varint()
        if length == -1:
            return None
        if length < 0:
            raise self.corrupt(f"invalid {what} length {length}")
        return self.raw(length, what)

    def string(self, what: str) -> str:
        """A varint length (>= 0) then that many UTF-8 bytes."""
        length = self.varint()
        if length < 0:
            raise self.corrupt(f"invalid {what} length {length}")
        try:
            return self.raw(length, what).decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.corrupt(f"{what} is not valid UTF-8: {error}") from None
