"""Zig-zag varints (Kafka's ``varint``/``varlong``) and a bounds-checked reader for records.

Encoding: ``z = (n << 1) ^ (n >> 63)`` maps signed to unsigned (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...),
then ``z`` is written 7 bits at a time, least significant group first, with the high bit set on
every byte except the last. A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.

:class:`Cursor` decodes fields from a buffer up to a limit and raises :class:`CorruptRecordError`
(never ``IndexError``) when a field runs past it.
"""

from __future__ import annotations

from typing import Union

from ..errors import CorruptRecordError
from .layout import INT32_RANGE, INT64_RANGE

Buffer = Union[bytes, bytearray, memoryview]

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


def zigzag(value: int) -> int:
    """The unsigned zig-zag form of a signed int64."""
    return (value << 1) ^ (value >> 63)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed int64; int32 fields use the same encoding) to ``out``."""
    if 0 <= value < 64:  # the common case: one byte
        out.append(value << 1)
        return
    z = (value << 1) ^ (value >> 63)
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def size_of_varint(value: int) -> int:
    """How many bytes :func:`write_varint` writes for ``value``."""
    if -64 <= value < 64:
        return 1
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


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

    def _unsigned(self, max_bytes: int, kind: str) -> int:
        buf, pos, limit = self.buf, self.pos, self.limit
        result = 0
        for shift in range(0, 7 * max_bytes, 7):
            if pos >= limit:
                raise self.corrupt(f"{kind} runs past the end")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return result
        raise self.corrupt(f"{kind} longer than {max_bytes} bytes")

    def varint(self) -> int:
        """A signed zig-zag varint that must fit an int32."""
        z = self._unsigned(VARINT_MAX_BYTES, "varint")
        value = (z >> 1) ^ -(z & 1)
        if not INT32_RANGE[0] <= value <= INT32_RANGE[1]:
            raise self.corrupt(f"varint {value} does not fit in 32 bits")
        return value

    def varlong(self) -> int:
        """A signed zig-zag varlong that must fit an int64."""
        z = self._unsigned(VARLONG_MAX_BYTES, "varlong")
        value = (z >> 1) ^ -(z & 1)
        if not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise self.corrupt(f"varlong {value} does not fit in 64 bits")
        return value

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
