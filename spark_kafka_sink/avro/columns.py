"""The Avro encoder's column kernels: every row's bytes for one level of a schema, over whole
columns (numpy and Arrow kernels, no loop over rows).

A level's encoding (the top-level rows, or the items of an array column) is a list of *parts*,
written in order for each row, collected by a :class:`Parts`:

- scalar fields (:class:`Varints`, :class:`FixedBytes`, :class:`RaggedBytes`, :class:`Constant`):
  at most a few bytes per row. A run of them becomes one ``rows x width`` byte matrix, each field
  in its own columns (a varint's byte ``k`` is ``z >> 7k``, with the high bit set where more
  follow); a boolean mask of the same shape marks the bytes a row uses (a shorter varint, a shorter
  decimal, an absent row), and flattening the matrix through it gives every row's bytes back to
  back, in row order;
- blobs (:class:`Blob`): a binary Arrow array, one value per row (strings and bytes, the items of
  an array column grouped by row), used as it is: no copy until the join.

:meth:`Parts.join` turns each scalar run into a binary array and joins all parts row by row: the
parts put end to end, then one ``take`` of their values in row order (one ``memcpy`` per part
and row, in C++; faster than ``binary_join_element_wise``). Every part takes a ``present`` mask
(``None``: every row): an absent row writes nothing, which is how a union writes only the branch
a row takes. An absent blob is a null value, which the take writes as nothing. A run keeps its
mask only when some row uses fewer bytes than its widest (an absent row, a shorter varint or
decimal). A part is written a column at a time, and a fixed-width or constant one a *word* column
at a time (8, 4, 2 or 1 bytes of every row as one strided, unaligned numpy array): numpy copies a
tall, narrow block into strided columns much faster that way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union as TypingUnion

import numpy as np
import pyarrow as pa

from ..record.arrow_columns import as_binary, interleave

__all__ = [
    "Blob",
    "Constant",
    "FixedBytes",
    "INT32_MAX",
    "Parts",
    "RaggedBytes",
    "TAKE_MOST_BYTES",
    "Varints",
    "value_lengths",
    "offsets_of",
    "validity",
    "zigzag_column",
]

INT32_MAX = 2 ** 31 - 1
TAKE_MOST_BYTES = 32 << 20
"""The most bytes of parts :meth:`Parts.join` joins with a ``take`` (see
:func:`~spark_kafka_sink.record.arrow_columns.interleave`): a chunk of 65,536 rows of a few
hundred bytes; past that, the join, which holds no copy of them."""


def zigzag_column(values: np.ndarray) -> np.ndarray:
    """The zig-zag form of integers, as uint64: ``(v << 1) ^ (v >> 63)``."""
    values = values.astype(np.int64, copy=False)
    return ((values << np.int64(1)) ^ (values >> np.int64(63))).view(np.uint64)


def validity(array: pa.Array) -> np.ndarray | None:
    """Each element's validity as bool, or ``None`` when the array has no null."""
    if not array.null_count:
        return None
    if pa.types.is_null(array.type):
        return np.zeros(len(array), dtype=bool)
    return array.is_valid().to_numpy(zero_copy_only=False)


def offsets_of(array: pa.Array) -> np.ndarray:
    """The ``len + 1`` offsets of a binary, string, list or map array (large ones too), as
    int64, the array's slice applied."""
    kind = array.type
    wide = (pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)
            or pa.types.is_large_list(kind))
    buffer = array.buffers()[1]
    if buffer is None:
        return np.zeros(len(array) + 1, dtype=np.int64)
    raw = np.frombuffer(buffer, dtype=np.int64 if wide else np.int32)
    return raw[array.offset:array.offset + len(array) + 1].astype(np.int64)


def value_lengths(array: pa.Array) -> np.ndarray:
    """Each value's byte length (binary or large_binary), int64."""
    if not len(array):
        return np.zeros(0, dtype=np.int64)
    return np.diff(offsets_of(array))


# --- parts --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Varints:
    """Zig-zag varints: ``z`` (uint64, or narrower) is the zig-zag form of each row's value."""

    z: np.ndarray
    present: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class FixedBytes:
    """``width`` bytes a row: ``matrix`` is ``rows x width`` uint8."""

    matrix: np.ndarray
    present: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class RaggedBytes:
    """Each row's bytes are the last ``lengths[i]`` columns of its row of ``matrix``."""

    matrix: np.ndarray
    lengths: np.ndarray
    present: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Constant:
    """The same bytes in every row (a union branch, a framing header, a block's end)."""

    data: bytes
    present: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Blob:
    """A binary (or large_binary) array of one value per row; a null value writes nothing."""

    array: pa.Array
    present: np.ndarray | None = None


Scalar = TypingUnion[Varints, FixedBytes, RaggedBytes, Constant]


class Parts:
    """The parts of one level's encoding, in order, for ``rows`` rows."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._parts: list[Scalar | Blob] = []

    def add(self, part: Scalar | Blob) -> None:
        self._parts.append(part)

    def join(self) -> pa.Array:
        """Every row's encoding: a binary array (large_binary past 2 GiB), no nulls."""
        pieces: list[pa.Array] = []
        run: list[Scalar] = []
        for part in self._parts:
            if isinstance(part, Blob):
                if run:
                    pieces.append(_flatten(run, self.rows))
                    run = []
                pieces.append(_masked(part))
            else:
                run.append(part)
        if run:
            pieces.append(_flatten(run, self.rows))
        if not pieces:
            return pa.Array.from_buffers(pa.binary(), self.rows, [
                None, pa.py_buffer(np.zeros(self.rows + 1, dtype=np.int32)), pa.py_buffer(b"")])
        large = sum(_total_bytes(piece) for piece in pieces) > INT32_MAX
        kind = pa.large_binary() if large else pa.binary()
        pieces = [piece if piece.type == kind else piece.cast(kind) for piece in pieces]
        if len(pieces) == 1 and not pieces[0].null_count:
            return pieces[0]
        return interleave(pieces, kind, take_most_bytes=TAKE_MOST_BYTES)


def _total_bytes(array: pa.Array) -> int:
    offsets = offsets_of(array) if len(array) else np.zeros(1, dtype=np.int64)
    return int(offsets[-1] - offsets[0])


def _masked(blob: Blob) -> pa.Array:
    """The blob's array, null where the row is absent."""
    array = blob.array
    if blob.present is None or blob.present.all():
        return array
    keep = blob.present
    valid = validity(array)
    if valid is not None:
        keep = keep & valid
    bitmap = pa.py_buffer(np.packbits(keep, bitorder="little"))
    base = as_binary(array)
    offsets = offsets_of(base)
    dtype = np.int64 if pa.types.is_large_binary(base.type) else np.int32
    data = base.buffers()[2] if base.buffers()[2] is not None else pa.py_buffer(b"")
    return pa.Array.from_buffers(base.type, len(base), [bitmap, pa.py_buffer(offsets.astype(dtype)), data])


def _size_of(z: int) -> int:
    """Bytes of the varint of the zig-zag value ``z``."""
    return max(1, (int(z).bit_length() + 6) // 7)


def _narrow(z: np.ndarray, most: int) -> np.ndarray:
    """``z`` in the narrowest unsigned type that holds ``most``: fewer bytes to shift."""
    if most < 1 << 8:
        return z.astype(np.uint8, copy=False)
    if most < 1 << 32:
        return z.astype(np.uint32, copy=False)
    return z.astype(np.uint64, copy=False)


def _layout(part: Scalar) -> tuple[int, bool]:
    """The columns ``part`` takes in a run's matrix, and whether some row uses fewer of them
    (an absent row, a shorter varint or decimal)."""
    if isinstance(part, Varints):
        if not len(part.z):
            return 1, False
        width = _size_of(part.z.max())
        return width, part.present is not None or (width > 1 and _size_of(part.z.min()) < width)
    if isinstance(part, Constant):
        return len(part.data), part.present is not None
    return part.matrix.shape[1], part.present is not None or isinstance(part, RaggedBytes)


def _flatten(run: list[Scalar], rows: int) -> pa.Array:
    """A run of scalar parts as one binary array: each part written into its columns of one byte
    matrix, then the matrix flattened row by row through the mask of used bytes."""
    layouts = [_layout(part) for part in run]
    widths = [w for w, _ in layouts]
    width = sum(widths)
    matrix = np.empty((rows, width), dtype=np.uint8)
    ragged = any(short for _, short in layouts)
    mask = np.ones((rows, width), dtype=bool) if ragged else None
    sizes = np.zeros(rows, dtype=np.int64) if ragged else None
    at = 0
    for part, w in zip(run, widths):
        used = None if mask is None else mask[:, at:at + w]
        _write(part, w, matrix, at, used, sizes)
        at += w
    if mask is None:
        data = matrix.reshape(-1)
        offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int64) if width else np.zeros(rows + 1, np.int64)
    else:
        data = matrix[mask]
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
    large = len(data) > INT32_MAX
    return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), rows,
                                 [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                  pa.py_buffer(data)])


def _write(part: Scalar, width: int, matrix: np.ndarray, at: int, used: np.ndarray | None,
           sizes: np.ndarray | None) -> None:
    """Write ``part`` into columns ``at`` to ``at + width`` of ``matrix``; where a mask is kept,
    clear the bytes a row does not use in ``used`` (those columns of the mask) and add the bytes
    it does to ``sizes``."""
    present = part.present
    if isinstance(part, Constant):
        _fill_columns(matrix, at, part.data)
        _count_whole(width, present, used, sizes)
    elif isinstance(part, FixedBytes):
        _copy_columns(matrix, at, part.matrix)
        _count_whole(width, present, used, sizes)
    elif isinstance(part, RaggedBytes):
        _copy_columns(matrix, at, part.matrix)
        starts = width - part.lengths
        for k in range(width):
            np.less_equal(starts, k, out=used[:, k])
            if present is not None:
                used[:, k] &= present
        sizes += part.lengths if present is None else np.where(present, part.lengths, 0)
    else:
        _write_varints(part, width, matrix, at, used, sizes)


def _count_whole(width: int, present: np.ndarray | None, used: np.ndarray | None,
                 sizes: np.ndarray | None) -> None:
    if used is None:
        return
    if present is None:
        sizes += width
    else:
        for k in range(width):
            used[:, k] = present
        sizes += present * width


_WORDS = {8: np.dtype(np.uint64), 4: np.dtype(np.uint32), 2: np.dtype(np.uint16), 1: np.dtype(np.uint8)}


def _words(width: int) -> list[tuple[int, int]]:
    """``width`` bytes as words of 8, 4, 2 and 1 bytes: each word's first byte and its size."""
    out, at = [], 0
    while at < width:
        size = next(size for size in _WORDS if size <= width - at)
        out.append((at, size))
        at += size
    return out


def _column_words(array: np.ndarray, at: int, size: int) -> np.ndarray:
    """Bytes ``at`` to ``at + size`` of every row of a C-contiguous 2-d uint8 ``array``, as one
    (unaligned, strided) word per row: numpy copies a column of words in one pass, where a
    column of bytes costs a pass per byte."""
    rows, width = array.shape
    return np.ndarray((rows,), dtype=_WORDS[size], buffer=array, offset=at, strides=(width,))


def _copy_columns(matrix: np.ndarray, at: int, source: np.ndarray) -> None:
    """``matrix[:, at:at + w] = source`` (``rows x w``), a word of each row at a time (one byte
    column at a time when ``source`` is not C-contiguous)."""
    rows, width = source.shape
    if not rows or not width:
        return
    if not source.flags.c_contiguous:
        for k in range(width):
            matrix[:, at + k] = source[:, k]
        return
    for start, size in _words(width):
        _column_words(matrix, at + start, size)[...] = _column_words(source, start, size)


def _fill_columns(matrix: np.ndarray, at: int, data: bytes) -> None:
    """Columns ``at`` to ``at + len(data)`` of every row of ``matrix`` set to ``data``."""
    rows = matrix.shape[0]
    if not rows:
        return
    for start, size in _words(len(data)):
        word = np.frombuffer(data[start:start + size], dtype=_WORDS[size])
        _column_words(matrix, at + start, size)[...] = np.broadcast_to(word, (rows,)).copy()


def _write_varints(part: Varints, width: int, matrix: np.ndarray, at: int, used: np.ndarray | None,
                   sizes: np.ndarray | None) -> None:
    """Every row's varint in columns ``at`` to ``at + width``, a byte position at a time: the
    value shifted by 7 more bits each time (in a narrower type once the rest fits), its low byte
    with the high bit set where the rest is not 0. A row's used bytes are counted in one byte."""
    most = int(part.z.max()) if len(part.z) else 0
    shifted = _narrow(part.z, most)
    present = part.present
    counts = None
    if used is not None:
        used[:, 0] = True if present is None else present
        counts = np.ones(len(shifted), dtype=np.uint8) if present is None else present.astype(np.uint8)
    for k in range(width):
        byte = shifted.astype(np.uint8)
        if k < width - 1:
            most >>= 7
            shifted = _narrow(shifted >> shifted.dtype.type(7), most)
            more = shifted != 0
            np.bitwise_or(byte, np.uint8(0x80), out=byte, where=more)
            if used is not None:
                if present is not None:
                    more &= present
                used[:, k + 1] = more
                counts += more
        matrix[:, at + k] = byte
    if used is not None:
        sizes += counts
