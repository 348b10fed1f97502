"""Reading Arrow byte columns as numpy, in one place: offsets, per-element lengths and the binary
view of a string column. ``record/arrow.py`` (encoding), ``producer/arrow/send.py`` (sizing) and
``producer/partitioner.py`` (murmur2 over whole key columns) all read columns through these.

Binary, string and their large variants are read straight from their offsets buffer (numpy, no
Arrow kernel, the array's slice applied); other byte types (binary/string views, fixed-size
binary) are cast to large_binary first.

The other way, :func:`interleave` joins binary columns row by row (row ``i`` of each, one after
another) into one: the record encoder (``record/arrow.py``) builds its records with it, the Avro
encoder (``avro/columns.py``) its bodies.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["as_binary", "binary_offsets", "byte_lengths", "has_offsets", "is_binary_view",
           "interleave", "is_bytes", "is_string_view"]

# binary_view and string_view exist from pyarrow 16 on; before, no array can have them
is_binary_view = getattr(pa.types, "is_binary_view", lambda kind: False)
"""``pa.types.is_binary_view`` where pyarrow has it (16+), else always false."""
is_string_view = getattr(pa.types, "is_string_view", lambda kind: False)
"""``pa.types.is_string_view`` where pyarrow has it (16+), else always false."""


def has_offsets(kind: pa.DataType) -> bool:
    """Whether arrays of ``kind`` keep an offsets buffer this module reads directly."""
    return (pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_large_string(kind))


def is_bytes(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds bytes this module reads: binary or string, any width, views
    included (they are cast; see :func:`as_binary`)."""
    return has_offsets(kind) or is_binary_view(kind) or is_string_view(kind)


def binary_offsets(array: pa.Array) -> np.ndarray:
    """The ``len + 1`` offsets of a binary, string or large variant array, as int64 (its slice
    applied): element ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
    return _offsets_view(array).astype(np.int64)


def _offsets_view(array: pa.Array) -> np.ndarray:
    """:func:`binary_offsets` as they are in the array's buffer (int32 or int64), not copied."""
    kind = array.type
    dtype = np.int64 if pa.types.is_large_binary(kind) or pa.types.is_large_string(kind) else np.int32
    raw = np.frombuffer(array.buffers()[1], dtype=dtype)
    return raw[array.offset:array.offset + len(array) + 1]


def byte_lengths(array: pa.Array, *, null_length: int) -> np.ndarray:
    """Each element's byte length as int64; ``null_length`` for a null (-1 where the record
    format writes a null's length, 0 where only bytes count)."""
    if not len(array):
        return np.zeros(0, dtype=np.int64)
    lengths = np.diff(binary_offsets(array if has_offsets(array.type) else as_binary(array)))
    if array.null_count:
        lengths[array.is_null().to_numpy(zero_copy_only=False)] = null_length
    return lengths


def as_binary(array: pa.Array) -> pa.Array:
    """``array`` as binary or large_binary with the same bytes: strings are viewed (no copy),
    other byte types (views, fixed-size binary) cast to large_binary."""
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array
    if pa.types.is_string(kind):
        return array.view(pa.binary())
    if pa.types.is_large_string(kind):
        return array.view(pa.large_binary())
    return array.cast(pa.large_binary())


def interleave(pieces: list[pa.Array], kind: pa.DataType, memory_pool: pa.MemoryPool | None = None, *,
               take_most_bytes: int | None = None) -> pa.Array:
    """Row ``i`` of every piece joined, for each row, as one array of ``kind`` (``binary``, or
    ``large_binary`` where the result may pass 2 GiB), with no nulls: a null value joins as
    empty. ``pieces``: binary arrays of ``kind``, all of the same length.

    Two kernels give the same bytes. Many short values (the parts of an Avro body, a record's
    head and a short value): the pieces put end to end, their values taken in row order (piece 0
    row 0, piece 1 row 0, ..., piece 0 row 1, ...) with one ``take``, and the result's rows
    start at every ``len(pieces)``-th offset of that; that costs a copy of the pieces but about
    60% of the time of ``binary_join_element_wise`` per value. Longer values, or more bytes than
    stay in the CPU's caches, go through that join, which copies each byte once.

    ``take_most_bytes`` (``None``: :data:`_TAKE_MOST_BYTES`) moves that bound for a caller whose
    pool reuses its memory (the default pool): the Avro encoder's parts of a 65,536-row chunk,
    about 6 MB, take about 25% less time through the take. With the system allocator the
    record encoder uses, the take's two fresh buffers cost more in page faults than it saves."""
    count, rows = len(pieces), len(pieces[0])
    total = sum(_data_bytes(piece) for piece in pieces)
    most = _TAKE_MOST_BYTES if take_most_bytes is None else take_most_bytes
    if total > most or total > _TAKE_MEAN_BYTES * count * rows:
        return pc.binary_join_element_wise(*pieces, pa.scalar(b"", kind), null_handling="replace",
                                           null_replacement=b"", memory_pool=memory_pool)
    combined = pa.concat_arrays(pieces, memory_pool=memory_pool)
    taken = pc.take(combined, _interleaving(count, rows), memory_pool=memory_pool)
    large = pa.types.is_large_binary(kind)
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64 if large else np.int32)[:count * rows + 1:count]
    data = taken.buffers()[2] if taken.buffers()[2] is not None else pa.py_buffer(b"")
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(np.ascontiguousarray(offsets)), data])


def _data_bytes(array: pa.Array) -> int:
    """The bytes of a binary array's values (its slice's)."""
    if not len(array):
        return 0
    offsets = _offsets_view(array)
    return int(offsets[-1]) - int(offsets[0])


_TAKE_MOST_BYTES = 4 << 20
"""The most bytes :func:`interleave` joins with a ``take``: past that (beyond the CPU's caches)
the copy it makes costs more than the take saves."""
_TAKE_MEAN_BYTES = 64
"""The longest mean value :func:`interleave` joins with a ``take``: longer values cost more to copy
twice than their count costs in the join."""


@functools.lru_cache(maxsize=8)
def _interleaving(count: int, rows: int) -> pa.Array:
    """The take indices of :func:`interleave` for ``count`` pieces of ``rows`` rows, kept for the
    next batch of the same shape."""
    dtype = np.int64 if count * rows > (1 << 31) - 1 else np.int32
    at = np.arange(count, dtype=dtype)[None, :] * dtype(rows) + np.arange(rows, dtype=dtype)[:, None]
    return pa.array(at.reshape(-1))
