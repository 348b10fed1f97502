"""One encoder per kind of Avro value, each over a whole Arrow column (see :mod:`.columns`).

:mod:`.plan` builds a tree of these from a schema and an Arrow type; each node writes its part
of every row into a :class:`Level` (the parts of one level of nesting, and the rows that fail):

- ``encode(array, present, level)``: ``present`` (bool per row, or ``None`` for all) says which
  rows hold a value here (a union's other branches, a null parent's fields hold none). A null in
  a present row where the schema has no null fails the row; so does a value the schema cannot
  hold (a decimal with too many digits, a string outside an enum, a binary of the wrong size for
  a fixed, a timestamp out of range, a null map key). A failed row's bytes are still written
  (its body is dropped at the end), so the layout of the other rows never depends on it;
- records write their fields in the schema's order into the same level; arrays and maps encode
  their items as a level of their own, joined into one binary array, and take each row's items
  as one zero-copy slice of it (the Arrow offsets): ``count, items, 0`` (``0`` alone when empty);
  their items' failures are lifted to the rows that hold them, the path naming the item.

Paths are the plan's (``value.address.zip``; ``[]`` for an array's items, ``{}`` for a map's
values), and a lifted failure names the item: ``value.tags[3]``, ``value.attrs["k"]``.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..record.arrow_columns import as_binary
from .columns import (Blob, Constant, FixedBytes, Parts, RaggedBytes, Varints, value_lengths,
                      offsets_of, validity, zigzag_column)
from .schema import decimal_bytes_for_precision

__all__ = [
    "ArrayEncoder",
    "BooleanEncoder",
    "BytesEncoder",
    "ConstantEncoder",
    "DecimalEncoder",
    "Encoder",
    "EnumEncoder",
    "Fault",
    "FixedEncoder",
    "FloatEncoder",
    "IntEncoder",
    "Level",
    "MapEncoder",
    "MemberUnionEncoder",
    "NULL_REASON",
    "NullEncoder",
    "RecordEncoder",
    "TimestampEncoder",
    "UnionEncoder",
    "varint",
]

INT64_MAX = 2 ** 63 - 1
NULL_REASON = "null, but the Avro schema has no null here"
"""The reason a row fails for a null its schema does not allow."""


def varint(value: int) -> bytes:
    """The zig-zag varint of one int (a union branch, a constant count)."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# --- levels and faults --------------------------------------------------------------------------

@dataclass(frozen=True)
class Fault:
    """Rows (of one level, ascending) that cannot be encoded, each with its path and reason."""

    rows: np.ndarray
    paths: list[str]
    reasons: list[str]


class Level:
    """The parts and the failed rows of one level of nesting, ``rows`` rows."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.parts = Parts(rows)
        self.faults: list[Fault] = []

    def add(self, part) -> None:
        self.parts.add(part)

    def fail(self, bad: np.ndarray, path: str, reason: str | Callable[[np.ndarray], list[str]]) -> None:
        """Fail the rows where ``bad`` is true; ``reason``: one for all, or a function of the
        failed rows' indices giving one each (called only when some row failed)."""
        rows = np.flatnonzero(bad)
        if len(rows):
            reasons = [reason] * len(rows) if isinstance(reason, str) else reason(rows)
            self.faults.append(Fault(rows, [path] * len(rows), list(reasons)))


def _where(present: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
    return mask if present is None else mask & present


def _and(present: np.ndarray | None, valid: np.ndarray | None) -> np.ndarray | None:
    if valid is None:
        return present
    return valid if present is None else present & valid


def _rows(array: pa.Array, width: int) -> np.ndarray:
    """A fixed-width column's values as a ``rows x width`` uint8 matrix, zero-copy, whatever
    lies under its nulls."""
    buffer = array.buffers()[1]
    if buffer is None or not len(array):
        return np.zeros((len(array), width), dtype=np.uint8)
    data = np.frombuffer(buffer, dtype=np.uint8)
    start = array.offset * width
    return data[start:start + len(array) * width].reshape(len(array), width)


def _values(array: pa.Array, dtype) -> np.ndarray:
    """A fixed-width column's values as numpy, zero-copy."""
    return _rows(array, np.dtype(dtype).itemsize).reshape(-1).view(dtype)


def _taken(array: pa.Array, rows: np.ndarray) -> list:
    """The Python values of ``array`` at ``rows`` (failed rows only: for their messages)."""
    return array.take(pa.array(rows)).to_pylist()


# --- the encoders -------------------------------------------------------------------------------

class Encoder(abc.ABC):
    """One schema node over one column: ``path`` names it in failures."""

    accepts_null = False  # a union with a null branch, or null itself
    null_reason = NULL_REASON

    def __init__(self, path: str) -> None:
        self.path = path

    def encode(self, array: pa.Array, present: np.ndarray | None, level: Level) -> None:
        """Write this node's part of every row of ``array`` (those ``present``) into ``level``."""
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if array.null_count and not self.accepts_null:
            level.fail(_where(present, ~validity(array)), self.path, self.null_reason)
        self.write(array, present, level)

    @abc.abstractmethod
    def write(self, array: pa.Array, present: np.ndarray | None, level: Level) -> None:
        """Write every row's bytes of this node (nulls already judged by :meth:`encode`)."""


class NullEncoder(Encoder):
    """Avro ``null``: nothing."""

    accepts_null = True

    def write(self, array, present, level):
        return


class ConstantEncoder(Encoder):
    """The same bytes for every row, whatever the column (a record field the column lacks,
    written as its union's null branch)."""

    accepts_null = True

    def __init__(self, path: str, data: bytes) -> None:
        super().__init__(path)
        self.data = data

    def encode(self, array, present, level):
        self.write(array, present, level)  # no column to look at (``array`` may be None)

    def write(self, array, present, level):
        level.add(Constant(self.data, present))


class BooleanEncoder(Encoder):
    """``boolean``: one byte, 0 or 1."""

    def write(self, array, present, level):
        buffer = array.buffers()[1]
        bits = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
        values = np.unpackbits(bits, bitorder="little")[array.offset:array.offset + len(array)]
        level.add(FixedBytes(values.reshape(-1, 1), present))


class IntEncoder(Encoder):
    """``int`` or ``long`` from an integer or ``date32`` column: a zig-zag varint."""

    def __init__(self, path: str, dtype) -> None:
        super().__init__(path)
        self.dtype = np.dtype(dtype)

    def write(self, array, present, level):
        level.add(Varints(zigzag_column(_values(array, self.dtype)), present))


class TimestampEncoder(Encoder):
    """``long`` from a timestamp column, its unit scaled by ``10 ** exponent`` (multiplied, or
    divided rounding down); a value the scaling takes out of a long fails its row."""

    def __init__(self, path: str, exponent: int, target: str) -> None:
        super().__init__(path)
        self.exponent = exponent
        self.target = target

    def write(self, array, present, level):
        values = _values(array, np.int64)
        if self.exponent > 0:
            factor = 10 ** self.exponent
            limit = INT64_MAX // factor
            overflow = (values > limit) | (values < -limit)
            if array.null_count:
                overflow &= validity(array)
            level.fail(_where(present, overflow), self.path,
                       lambda rows: [f"{v} does not fit {self.target} in a long"
                                     for v in _taken(array.cast(pa.int64()), rows)])
            values = values * np.int64(factor)
        elif self.exponent < 0:
            values = np.floor_divide(values, np.int64(10 ** -self.exponent))
        level.add(Varints(zigzag_column(values), present))


class FloatEncoder(Encoder):
    """``float`` (4 bytes) or ``double`` (8), little-endian IEEE 754."""

    def __init__(self, path: str, dtype) -> None:
        super().__init__(path)
        self.dtype = np.dtype(dtype).newbyteorder("<")

    def write(self, array, present, level):
        level.add(FixedBytes(_rows(array, self.dtype.itemsize), present))


class BytesEncoder(Encoder):
    """``string`` or ``bytes``: the length, then the bytes."""

    def __init__(self, path: str, null_reason: str = NULL_REASON) -> None:
        super().__init__(path)
        self.null_reason = null_reason

    def write(self, array, present, level):
        data = as_binary(array)
        level.add(Varints(zigzag_column(value_lengths(data)), present))
        level.add(Blob(data, present))


class FixedEncoder(Encoder):
    """``fixed``: ``size`` bytes, no length; from a binary column, a value of another length
    fails its row."""

    def __init__(self, path: str, size: int, name: str) -> None:
        super().__init__(path)
        self.size = size
        self.name = name

    def write(self, array, present, level):
        if pa.types.is_fixed_size_binary(array.type):
            level.add(FixedBytes(_rows(array, self.size), present))
            return
        data = as_binary(array)
        lengths = value_lengths(data)
        wrong = lengths != self.size
        if array.null_count:
            wrong &= validity(array)
        level.fail(_where(present, wrong), self.path,
                   lambda rows: [f"{n} bytes do not fit fixed {self.name} of {self.size} bytes"
                                 for n in lengths[rows].tolist()])
        level.add(Blob(data, present))


class EnumEncoder(Encoder):
    """``enum``: the symbol's index; a string outside the symbols fails its row."""

    def __init__(self, path: str, symbols: Sequence[str], name: str) -> None:
        super().__init__(path)
        self.symbols = tuple(symbols)
        self.name = name

    def write(self, array, present, level):
        if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            array = array.cast(pa.large_string())
        index = pc.index_in(array, value_set=pa.array(self.symbols, array.type))
        if index.null_count:
            unknown = ~validity(index)
            if array.null_count:
                unknown &= validity(array)
            listed = ", ".join(self.symbols[:10]) + (", ..." if len(self.symbols) > 10 else "")
            level.fail(_where(present, unknown), self.path,
                       lambda rows: [f"{json.dumps(v)} is not a symbol of enum {self.name} ({listed})"
                                     for v in _taken(array, rows)])
            index = index.fill_null(0)
        level.add(Varints(zigzag_column(_values(index, np.int32)), present))


class DecimalEncoder(Encoder):
    """A decimal column as the ``decimal`` logical type: the unscaled value's two's complement,
    big-endian, in the fewest bytes after a length (``bytes``), or sign-extended to ``size`` bytes
    (``fixed``). A value with more digits than ``precision`` fails its row. ``cast``: the
    decimal128 type to bring the column to first (a larger scale, another decimal width)."""

    def __init__(self, path: str, precision: int, size: int | None, cast: pa.DataType | None) -> None:
        super().__init__(path)
        self.precision = precision
        self.size = size
        self.cast = cast

    def write(self, array, present, level):
        if self.cast is not None and array.type != self.cast:
            array = array.cast(self.cast)
        raw = _rows(array, 16)
        words = raw.view("<u8")
        low, high = words[:, 0], words[:, 1].view("<i8")
        if self.precision <= 38:  # a decimal128 never has 39 digits
            limit = 10 ** self.precision
            too_big = _at_least(high, low, limit) | _below(high, low, 1 - limit)
            if array.null_count:
                too_big &= validity(array)
            level.fail(_where(present, too_big), self.path,
                       lambda rows: [f"{v} has more digits than decimal({self.precision}, {array.type.scale}) holds"
                                     for v in _taken(array, rows)])
        big_endian = raw[:, ::-1]
        if self.size is not None:
            level.add(FixedBytes(_sign_extended(big_endian, high, self.size), present))
            return
        width = min(16, decimal_bytes_for_precision(self.precision))
        matrix = np.ascontiguousarray(big_endian[:, 16 - width:])
        lengths = _minimal_lengths(matrix, high)
        level.add(Varints(zigzag_column(lengths), present))
        level.add(RaggedBytes(matrix, lengths, present))


def _at_least(high: np.ndarray, low: np.ndarray, bound: int) -> np.ndarray:
    """Where the 128-bit value ``(high, low)`` is ``>= bound``."""
    b_high, b_low = np.int64(bound >> 64), np.uint64(bound & (2 ** 64 - 1))
    return (high > b_high) | ((high == b_high) & (low >= b_low))


def _below(high: np.ndarray, low: np.ndarray, bound: int) -> np.ndarray:
    """Where the 128-bit value ``(high, low)`` is ``< bound`` (``bound`` may be negative)."""
    b_high, b_low = np.int64(bound >> 64), np.uint64(bound & (2 ** 64 - 1))
    return (high < b_high) | ((high == b_high) & (low < b_low))


def _sign_extended(big_endian: np.ndarray, high: np.ndarray, size: int) -> np.ndarray:
    """The last ``size`` bytes of each 16-byte value, or the value with sign bytes in front."""
    if size <= 16:
        return np.ascontiguousarray(big_endian[:, 16 - size:])
    sign = np.where(high < 0, np.uint8(0xFF), np.uint8(0)).astype(np.uint8)
    return np.hstack([np.repeat(sign[:, None], size - 16, axis=1), big_endian])


def _minimal_lengths(matrix: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Bytes of each value's shortest two's complement (Java's ``BigInteger.toByteArray``): a
    leading byte goes while it is all sign bits and the next byte's top bit is the sign too."""
    rows, width = matrix.shape
    if width == 1:
        return np.ones(rows, dtype=np.int64)
    sign = np.where(high < 0, np.uint8(0xFF), np.uint8(0)).astype(np.uint8)[:, None]
    redundant = (matrix[:, :-1] == sign) & ((matrix[:, 1:] & np.uint8(0x80)) == (sign & np.uint8(0x80)))
    leading = np.where(redundant.all(axis=1), width - 1, np.argmin(redundant, axis=1))
    return (width - leading).astype(np.int64)


class RecordEncoder(Encoder):
    """``record``: each field in the schema's order; ``fields`` pairs the column's child index
    (``None`` for a field the column lacks) with the field's encoder."""

    def __init__(self, path: str, fields: Sequence[tuple[int | None, Encoder]]) -> None:
        super().__init__(path)
        self.fields = tuple(fields)

    def write(self, array, present, level):
        present = _and(present, validity(array))
        for index, encoder in self.fields:
            encoder.encode(None if index is None else array.field(index), present, level)


class UnionEncoder(Encoder):
    """A column written to one branch of a union (``value_index``); a null row to its ``null``
    branch (``null_index``; ``None``: a null fails the row)."""

    def __init__(self, path: str, value_index: int, null_index: int | None, inner: Encoder) -> None:
        super().__init__(path)
        self.value_index = value_index
        self.null_index = null_index
        self.inner = inner
        self.accepts_null = null_index is not None

    def write(self, array, present, level):
        valid = validity(array)
        if valid is None or self.null_index is None:
            level.add(Constant(varint(self.value_index), present))
            self.inner.encode(array, present, level)
            return
        branch = np.where(valid, np.uint8(2 * self.value_index), np.uint8(2 * self.null_index))
        level.add(Varints(branch, present))
        self.inner.encode(array, _and(present, valid), level)


class MemberUnionEncoder(Encoder):
    """A struct of ``member0``, ``member1``, ... written to a union of several types (Spark's
    complex unions): each row takes the first member that is not null. ``members``: per member,
    its branch's index and encoder. A row with none set takes the ``null`` branch, or fails."""

    def __init__(self, path: str, members: Sequence[tuple[int, Encoder]], null_index: int | None) -> None:
        super().__init__(path)
        self.members = tuple(members)
        self.null_index = null_index
        self.accepts_null = null_index is not None

    def write(self, array, present, level):
        rows = len(array)
        chosen = np.full(rows, -1, dtype=np.int64)
        for position in reversed(range(len(self.members))):
            set_here = validity(array.field(position))
            chosen = np.where(True if set_here is None else set_here, position, chosen)
        valid = validity(array)
        if valid is not None:
            chosen = np.where(valid, chosen, -1)
        unset = chosen < 0
        if self.null_index is None:  # a null struct failed already (the union has no null)
            level.fail(_where(present, unset if valid is None else unset & valid), self.path,
                       "no member of the union is set, and the Avro union has no null")
        branches = np.array([index for index, _ in self.members] + [self.null_index or 0], dtype=np.int64)
        level.add(Varints(zigzag_column(branches[chosen]), present))  # -1: the last entry, the null branch
        for position, (_, encoder) in enumerate(self.members):
            encoder.encode(array.field(position), _and(present, chosen == position), level)


class ArrayEncoder(Encoder):
    """``array``: a list column's items as one block: ``count, items, 0``, or ``0`` if empty."""

    def __init__(self, path: str, items: Encoder) -> None:
        super().__init__(path)
        self.items = items

    def write(self, array, present, level):
        if pa.types.is_fixed_size_list(array.type):
            array = array.cast(pa.list_(array.type.value_field))
        offsets, values, item_present = _items(array, present)
        sub = Level(len(values))
        self.items.encode(values, item_present, sub)
        _add_blocks(level, sub, offsets, present)
        _lift(level, sub, offsets, f"{self.path}[]", lambda items, within: [f"{self.path}[{i}]" for i in within])


class MapEncoder(Encoder):
    """``map``: a map column's entries as one block of key and value pairs. The entries are the
    struct items of a map column, or of a list of ``struct<key, value>`` (``fields``: the key's
    and the value's child index), where an entry or a key may be null: that fails its row."""

    def __init__(self, path: str, values: Encoder, fields: tuple[int, int] = (0, 1)) -> None:
        super().__init__(path)
        self.keys = BytesEncoder(f"{path}{{}}", null_reason="a map key is null")
        self.values = values
        self.fields = fields

    def write(self, array, present, level):
        offsets, entries, item_present = _items(array, present)
        keys = entries.field(self.fields[0])
        sub = Level(len(entries))
        if entries.null_count:
            sub.fail(_where(item_present, ~validity(entries)), f"{self.path}{{}}", "a map entry is null")
        self.keys.encode(keys, item_present, sub)
        self.values.encode(entries.field(self.fields[1]), item_present, sub)
        _add_blocks(level, sub, offsets, present)
        _lift(level, sub, offsets, f"{self.path}{{}}",
              lambda items, within: [f"{self.path}[{json.dumps(k)}]" for k in _taken(_keys(entries, keys), items)])


def _keys(entries: pa.Array, keys: pa.Array) -> pa.Array:
    """The keys of a map's entries, null where the entry itself is."""
    return pc.if_else(entries.is_valid(), keys, pa.scalar(None, keys.type)) if entries.null_count else keys


def _items(array: pa.Array, present: np.ndarray | None) -> tuple[np.ndarray, pa.Array, np.ndarray | None]:
    """A list or map column's offsets (from 0), its items in those rows, and which are present."""
    offsets = offsets_of(array)
    first = int(offsets[0])
    offsets = offsets - first
    values = array.values.slice(first, int(offsets[-1]))
    item_present = None
    rows_present = _and(present, validity(array))
    if rows_present is not None:
        item_present = np.repeat(rows_present, np.diff(offsets))
    return offsets, values, item_present


def _add_blocks(level: Level, sub: Level, offsets: np.ndarray, present: np.ndarray | None) -> None:
    """Each row's block: its item count, its items' bytes (one slice of the joined items), and
    the closing zero count when it has items."""
    joined = sub.parts.join()
    item_offsets = offsets_of(joined) if len(joined) else np.zeros(1, dtype=np.int64)
    large = pa.types.is_large_binary(joined.type)
    data = joined.buffers()[2] if len(joined) and joined.buffers()[2] is not None else pa.py_buffer(b"")
    row_offsets = item_offsets[offsets].astype(np.int64 if large else np.int32)
    rows = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(row_offsets), data])
    counts = np.diff(offsets)
    level.add(Varints(zigzag_column(counts), present))
    level.add(Blob(rows, present))
    level.add(Constant(b"\x00", _and(present, counts > 0) if present is not None else counts > 0))


def _lift(level: Level, sub: Level, offsets: np.ndarray, marker: str,
          item_paths: Callable[[np.ndarray, np.ndarray], list[str]]) -> None:
    """The items' failures as failures of the rows that hold them, the item named in the path
    (``marker``, the items' path, becomes ``item_paths``' name for it)."""
    for fault in sub.faults:
        rows = np.searchsorted(offsets, fault.rows, side="right") - 1
        names = item_paths(fault.rows, (fault.rows - offsets[rows]).tolist())
        paths = [name + path[len(marker):] if path.startswith(marker) else path
                 for name, path in zip(names, fault.paths)]
        level.faults.append(Fault(rows, paths, fault.reasons))
