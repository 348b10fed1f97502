"""Reading Arrow byte columns as numpy, in one place: offsets, per-element lengths and the binary
view of a string column. ``record/arrow.py`` (encoding), ``producer/arrow/send.py`` (sizing) and
``producer/partitioner.py`` (murmur2 over whole key columns) all read columns through these.

Binary, string and their large variants are read straight from their offsets buffer (numpy, no
Arrow kernel, the array's slice applied); other byte types (binary/string views, fixed-size
binary) are cast to large_binary first.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["as_binary", "binary_offsets", "byte_lengths", "has_offsets", "is_binary_view",
           "is_bytes", "is_string_view"]

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
    kind = array.type
    dtype = np.int64 if pa.types.is_large_binary(kind) or pa.types.is_large_string(kind) else np.int32
    raw = np.frombuffer(array.buffers()[1], dtype=dtype)
    return raw[array.offset:array.offset + len(array) + 1].astype(np.int64)


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
