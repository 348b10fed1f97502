"""Kafka's integer encodings, scalar: the one codec ``protocol/`` and ``record/`` both use (Java's
``ByteUtils``). ``record/arrow.py`` has the vectorised (numpy) form, parity-tested against this.

- integer ranges: ``INT16_MAX``, ``INT32_MIN``/``INT32_MAX``, ``INT64_MIN``/``INT64_MAX``,
  ``UINT32_MAX``, ``UINT64_MAX`` (Java's ``Short/Integer/Long.MAX_VALUE``...);
- unsigned varint: 7 bits a byte, lowest group first, the high bit set on every byte but the last
  (at most :data:`VARINT_MAX_BYTES` = 5 bytes for 32 bits, :data:`VARLONG_MAX_BYTES` = 10 for 64);
- varint / varlong: zig-zag (``(n << 1) ^ (n >> 31 | 63)``: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...),
  then an unsigned varint.

Encoding comes in two forms: checked (``encode_*``: ``EncodeError`` for a value out of range, for
the protocol's fields) and the record builder's unchecked fast path (``write_varint`` appends a
signed int64 to a ``bytearray``; ``size_of_varint`` is its size). Decoding is one bounds-checked
function, :func:`read_uvarint`; each reader turns its :class:`VarintError` into its own error
(``ProtocolError`` for a frame, ``CorruptRecordError`` for a record batch) with its context.
"""

from __future__ import annotations

from typing import Union

from .errors import EncodeError

Buffer = Union[bytes, bytearray, memoryview]

INT16_MAX = (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


class VarintError(ValueError):
    """A varint that cannot be read: ``truncated`` (it runs past the end) or too long / too large.
    Internal: readers turn it into their own error, with their context."""

    def __init__(self, message: str, *, truncated: bool):
        super().__init__(message)
        self.truncated = truncated


# --- zig-zag ------------------------------------------------------------------------------------

def zigzag(value: int) -> int:
    """The unsigned zig-zag form of a signed int64 (unchecked)."""
    return (value << 1) ^ (value >> 63)


def zigzag32(value: int) -> int:
    """The zig-zag form of a signed int32; ``EncodeError`` outside int32."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise EncodeError(f"varint out of int32 range: {value}")
    return ((value << 1) ^ (value >> 31)) & UINT32_MAX


def zigzag64(value: int) -> int:
    """The zig-zag form of a signed int64; ``EncodeError`` outside int64."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise EncodeError(f"varlong out of int64 range: {value}")
    return ((value << 1) ^ (value >> 63)) & UINT64_MAX


def unzigzag(value: int) -> int:
    """The signed value of a zig-zag form."""
    return (value >> 1) ^ -(value & 1)


# --- encoding -----------------------------------------------------------------------------------

def encode_uvarint(value: int) -> bytes:
    """UNSIGNED_VARINT of ``0 <= value < 2**64``; ``EncodeError`` otherwise."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if not 0 <= value <= UINT64_MAX:
        raise EncodeError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """VARINT: a zig-zag int32 as an unsigned varint."""
    return encode_uvarint(zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """VARLONG: a zig-zag int64 as an unsigned varint."""
    return encode_uvarint(zigzag64(value))


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed int64, unchecked; int32 fields use the same encoding) to ``out``:
    the record builder's path, the same bytes as :func:`encode_varlong`."""
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


# --- decoding -----------------------------------------------------------------------------------

def read_uvarint(buf: Buffer, pos: int, limit: int, max_bytes: int = VARINT_MAX_BYTES,
                 max_value: int = UINT32_MAX) -> tuple[int, int]:
    """The unsigned varint at ``buf[pos:limit]`` and the position after it. :class:`VarintError`
    when it runs past ``limit``, takes more than ``max_bytes`` or exceeds ``max_value``."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            raise VarintError("runs past the end", truncated=True)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > max_value:
                raise VarintError(f"does not fit in {max_value.bit_length()} bits", truncated=False)
            return result, pos
        shift += 7
    raise VarintError(f"longer than {max_bytes} bytes", truncated=False)
