"""The one reader of Arrow byte columns (``record/arrow_columns.py``): lengths and offsets of every
byte type, sliced or not, with nulls, against the values read back in Python."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.record.arrow_columns import (as_binary, binary_offsets, byte_lengths,
                                                  interleave, is_string_view)

VALUES = [b"", b"a", None, b"\xc3\xa9t\xc3\xa9", b"x" * 300, None, b"z"]
VIEWS = [pa.binary_view(), pa.string_view()] if hasattr(pa, "binary_view") else []  # pyarrow 16+
TYPES = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string(), *VIEWS]


def _column(kind: pa.DataType) -> pa.Array:
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind) or is_string_view(kind)
    values = [None if v is None else (v.decode("utf-8") if text else v) for v in VALUES]
    return pa.array(values, kind)


@pytest.mark.parametrize("kind", TYPES, ids=str)
@pytest.mark.parametrize("start, stop", [(0, len(VALUES)), (2, 6), (3, 3)])
def test_lengths_of_every_byte_type_sliced_with_nulls(kind, start, stop):
    column = _column(kind).slice(start, stop - start)
    expected = [-1 if v is None else len(v) for v in VALUES[start:stop]]
    assert byte_lengths(column, null_length=-1).tolist() == expected
    assert byte_lengths(column, null_length=0).tolist() == [max(n, 0) for n in expected]
    binary = as_binary(column)
    assert binary.to_pylist() == VALUES[start:stop]
    offsets = binary_offsets(binary)
    data = binary.buffers()[2]
    got = [None if v is None else data.to_pybytes()[offsets[i]:offsets[i + 1]]
           for i, v in enumerate(binary.to_pylist())]
    assert got == VALUES[start:stop]


def test_a_fixed_size_binary_column_is_read_through_a_cast():
    column = pa.array([b"ab", None, b"cd"], pa.binary(2))
    assert byte_lengths(column, null_length=-1).tolist() == [2, -1, 2]
    assert as_binary(column).type == pa.large_binary()


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()], ids=str)
@pytest.mark.parametrize("long_values", [False, True], ids=["take", "join"])
@pytest.mark.parametrize("start, stop", [(0, 7), (2, 6), (3, 3)])
def test_interleave_joins_each_row_of_sliced_pieces_with_nulls_as_empty(kind, long_values, start, stop):
    """Both kernels (the take for short values, the join past a mean of 64 bytes) give each row's
    pieces back to back, a null as nothing, with no null rows of their own."""
    other = [b"h%d" % i for i in range(7)]
    tail = [None, b"t", b"", None, b"tt", b"\x00", b"ttt"]
    values = [v * (100 if long_values and v else 1) if v is not None else None for v in VALUES]
    pieces = [pa.array(column, kind).slice(start, stop - start) for column in (other, values, tail)]
    joined = interleave(pieces, kind)
    assert joined.type == kind and joined.null_count == 0
    assert joined.to_pylist() == [b"".join(p or b"" for p in row)
                                  for row in zip(other[start:stop], values[start:stop], tail[start:stop])]


@pytest.mark.parametrize("take_most_bytes", [0, 1 << 20], ids=["join", "take"])
def test_interleave_bytes_bound_picks_the_kernel_not_the_bytes(take_most_bytes):
    """``take_most_bytes`` moves where the join takes over; below or past it, the same rows."""
    pieces = [pa.array([b"a", None, b"bc"]), pa.array([b"", b"d", None])]
    joined = interleave(pieces, pa.binary(), take_most_bytes=take_most_bytes)
    assert joined.null_count == 0
    assert joined.to_pylist() == [b"a", b"d", b"bc"]
