"""Kafka protocol primitive types: a bounds-checked Reader and a Writer.

Wire formats (integers are big-endian two's complement):

    INT8 | INT16 | INT32 | INT64   1 | 2 | 4 | 8 bytes, signed
    UINT16 | UINT32                2 | 4 bytes, unsigned
    FLOAT64                        8 bytes, IEEE 754 double
    BOOLEAN                        1 byte: 0 is false, anything else is true
    UNSIGNED_VARINT                7 bits a byte, lowest group first; the high bit is set on every
                                   byte but the last (at most 5 bytes for 32 bits, 10 for 64)
    VARINT | VARLONG               zig-zag ((n << 1) ^ (n >> 31 | 63)), then UNSIGNED_VARINT
    UUID                           16 bytes, most significant half first
    STRING                         INT16 length N >= 0, then N bytes of UTF-8
    NULLABLE_STRING                as STRING; length -1 is null
    COMPACT_STRING                 UNSIGNED_VARINT N + 1, then N bytes of UTF-8
    COMPACT_NULLABLE_STRING        as COMPACT_STRING; 0 is null
    BYTES | NULLABLE_BYTES         INT32 length N (-1 is null), then N bytes
    COMPACT_(NULLABLE_)BYTES       UNSIGNED_VARINT N + 1 (0 is null), then N bytes
    RECORDS                        NULLABLE_BYTES (COMPACT_NULLABLE_BYTES in flexible versions)
    ARRAY                          INT32 count N (-1 is null), then N elements
    COMPACT_ARRAY                  UNSIGNED_VARINT N + 1 (0 is null), then N elements
    TAGGED_FIELDS                  UNSIGNED_VARINT count, then for each field in ascending tag
                                   order: UNSIGNED_VARINT tag, UNSIGNED_VARINT size, size bytes

The Reader never raises IndexError or struct.error: running out of input, a negative length other
than the null marker, or a length past the end raises ProtocolError with the offset. Varints and
integer ranges come from :mod:`spark_kafka_sink.bytecodec`, the codec the record layer uses too.
"""

from __future__ import annotations

import struct
import uuid

from ..bytecodec import (
    INT16_MAX, UINT32_MAX, UINT64_MAX, VARINT_MAX_BYTES, VARLONG_MAX_BYTES, VarintError,
    encode_uvarint, encode_varint, encode_varlong, read_uvarint, unzigzag,
)
from ..errors import EncodeError, ProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT8 = struct.Struct(">B")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")


# --- reading ----------------------------------------------------------------------------------

class Reader:
    """Reads primitives from a bytes-like object, from ``offset`` up to ``end``."""

    __slots__ = ("_view", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0,
                 end: int | None = None):
        view = memoryview(data)
        self._view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self._pos = offset
        self._end = len(self._view) if end is None else end

    @property
    def offset(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def _need(self, size: int) -> int:
        pos = self._pos
        if self._end - pos < size:
            raise ProtocolError(
                f"truncated: needed {size} bytes at offset {pos}, have {self._end - pos}")
        self._pos = pos + size
        return pos

    def unpack(self, packer: struct.Struct):
        """One fixed-size value read with a precompiled struct."""
        return packer.unpack_from(self._view, self._need(packer.size))[0]

    def int8(self) -> int:
        return self.unpack(INT8)

    def int16(self) -> int:
        return self.unpack(INT16)

    def int32(self) -> int:
        return self.unpack(INT32)

    def int64(self) -> int:
        return self.unpack(INT64)

    def uint16(self) -> int:
        return self.unpack(UINT16)

    def uint32(self) -> int:
        return self.unpack(UINT32)

    def float64(self) -> float:
        return self.unpack(FLOAT64)

    def boolean(self) -> bool:
        return self.unpack(UINT8) != 0

    def take(self, size: int) -> memoryview:
        """The next ``size`` bytes as a zero-copy view."""
        if size < 0:
            raise ProtocolError(f"negative length {size} at offset {self._pos}")
        pos = self._need(size)
        return self._view[pos:pos + size]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def _uvarint(self, max_bytes: int, limit: int) -> int:
        start = self._pos
        try:
            value, self._pos = read_uvarint(self._view, start, self._end, max_bytes, limit)
        except VarintError as exc:
            if exc.truncated:
                raise ProtocolError(f"truncated: a varint at offset {start} runs past the end "
                                    f"at {self._end}") from None
            raise ProtocolError(f"malformed varint at offset {start}: {exc}") from None
        return value

    def uvarint(self) -> int:
        """UNSIGNED_VARINT up to 32 bits."""
        return self._uvarint(VARINT_MAX_BYTES, UINT32_MAX)

    def varint(self) -> int:
        return unzigzag(self._uvarint(VARINT_MAX_BYTES, UINT32_MAX))

    def varlong(self) -> int:
        return unzigzag(self._uvarint(VARLONG_MAX_BYTES, UINT64_MAX))

    def length(self, compact: bool, wide: bool = False) -> int:
        """A length or count prefix; -1 is null. Other negative values raise ProtocolError."""
        start = self._pos
        if compact:
            size = self.uvarint() - 1
        else:
            size = self.int32() if wide else self.int16()
        if size < -1:
            raise ProtocolError(f"negative length {size} at offset {start}")
        return size

    def nullable_string(self, compact: bool) -> str | None:
        start = self._pos
        size = self.length(compact)
        if size < 0:
            return None
        try:
            return str(self.take(size), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in string at offset {start}: {exc}") from None

    def string(self, compact: bool) -> str:
        start = self._pos
        value = self.nullable_string(compact)
        if value is None:
            raise ProtocolError(f"null string at offset {start} where null is not allowed")
        return value

    def nullable_bytes(self, compact: bool) -> memoryview | None:
        size = self.length(compact, wide=True)
        return None if size < 0 else self.take(size)

    def array_length(self, compact: bool) -> int:
        """An array count (-1 is null), checked against the bytes left (each element >= 1 byte)."""
        start = self._pos
        count = self.length(compact, wide=True)
        if count > self.remaining:
            raise ProtocolError(f"array of {count} elements at offset {start} "
                                f"but only {self.remaining} bytes remain")
        return count


# --- writing ----------------------------------------------------------------------------------

LARGE_PART_BYTES = 64 * 1024
"""Parts at least this large go to the socket as they are, not copied into one request buffer."""


class Writer:
    """Accumulates encoded parts; ``getvalue()`` joins them once."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes | bytearray | memoryview] = []

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def framed(self) -> bytes:
        """Everything written, behind an INT32 size prefix, joined in one copy."""
        return b"".join(self.framed_parts())

    def framed_parts(self, large: int = LARGE_PART_BYTES) -> tuple[bytes | memoryview, ...]:
        """Everything written, behind an INT32 size prefix, as few buffers to write in order:
        runs of small parts joined, parts of ``large`` bytes or more (record batches) passed
        through uncopied, as read-only views."""
        views = [memoryview(part) for part in self._parts]
        out: list[bytes | memoryview] = []
        run: list[bytes | bytearray | memoryview] = [INT32.pack(sum(view.nbytes for view in views))]
        for part, view in zip(self._parts, views):
            if view.nbytes < large:
                run.append(part)
                continue
            out.append(b"".join(run))
            run = []
            out.append(view.toreadonly())
        if run:
            out.append(b"".join(run))
        return tuple(out)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self._parts.append(data)

    def pack(self, packer: struct.Struct, value: int | float) -> None:
        try:
            self._parts.append(packer.pack(value))
        except struct.error as exc:
            raise EncodeError(f"cannot encode {value!r} as {packer.format}: {exc}") from None

    def boolean(self, value: bool) -> None:
        self._parts.append(b"\x01" if value else b"\x00")

    def uvarint(self, value: int) -> None:
        self._parts.append(encode_uvarint(value))

    def varint(self, value: int) -> None:
        self._parts.append(encode_varint(value))

    def varlong(self, value: int) -> None:
        self._parts.append(encode_varlong(value))

    def uuid(self, value: uuid.UUID) -> None:
        self._parts.append(value.bytes)

    def length(self, size: int, compact: bool, wide: bool = False) -> None:
        """A length or count prefix; ``-1`` writes null."""
        if compact:
            self.uvarint(size + 1)
        else:
            self.pack(INT32 if wide else INT16, size)

    def nullable_string(self, value: str | None, compact: bool) -> None:
        if value is None:
            self.length(-1, compact)
            return
        data = value.encode("utf-8")
        if not compact and len(data) > INT16_MAX:
            raise EncodeError(f"string of {len(data)} bytes is longer than {INT16_MAX}")
        self.length(len(data), compact)
        self._parts.append(data)

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None, compact: bool) -> None:
        if value is None:
            self.length(-1, compact, wide=True)
            return
        size = memoryview(value).nbytes
        self.length(size, compact, wide=True)
        self._parts.append(value)
