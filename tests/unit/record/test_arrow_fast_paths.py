"""The Arrow encoder's fast paths against their references.

- Planning when every row has one timestamp (per offset-delta width, one cumulative sum): the
  batches must equal the row builder's, also for batches of more than 64 and more than 8,192 rows,
  where an offset delta takes two and three bytes (the hypothesis parity test in test_arrow.py
  draws at most 25 rows).
- The varint column writer against ``write_varint``, row by row, over the whole int64 range,
  with ragged and uniform widths and constant fields.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.record.arrow import _varint_column, encode_batches, plan_batches, prepare_records
from spark_kafka_sink.bytecodec import write_varint

from .test_arrow import arrow_batches, row_batches, rows_of

TS = 1_700_000_000_000


def small_values(n, seed):
    """Values of 0..9 bytes with some nulls: records of 7..17 bytes, so batches hold many rows."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 10, n)
    return pa.array([None if size == 9 else b"v" * int(size) for size in sizes], pa.binary())


@pytest.mark.parametrize("batch_size", [1, 61 + 10, 700, 64 * 12, 16384, 200_000, 1 << 20])
def test_one_timestamp_batches_match_the_row_builder_across_offset_delta_widths(batch_size):
    n = 12_000  # with 1 MiB batches: one batch of more than 8,192 rows (3-byte offset deltas)
    value = small_values(n, batch_size)
    key = pa.array([None if i % 7 == 0 else f"k{i % 100}" for i in range(n)])
    got = encode_batches(value, key, timestamp_ms=TS, batch_size=batch_size)
    assert arrow_batches(got) == row_batches(rows_of(value, key, None, [TS] * n), batch_size)
    if batch_size == 1 << 20:
        assert [(b.start, b.stop) for b in got] == [(0, n)]


def test_one_timestamp_plan_with_segments_matches_each_segment_alone():
    n = 9_000
    value = small_values(n, 7)
    stamps = np.full(n, TS, dtype=np.int64)
    records = prepare_records(value, timestamp_ms=stamps)
    plan = plan_batches(records, 1 << 20, segments=[50, 100, 8_300])
    assert plan.same_timestamp
    expected = []
    for a, b in ((0, 50), (50, 100), (100, 8_300), (8_300, n)):
        alone = plan_batches(prepare_records(value[a:b], timestamp_ms=stamps[a:b]), 1 << 20)
        expected += [(a + int(s), a + int(e), int(z))
                     for s, e, z in zip(alone.starts, alone.stops, alone.sizes)]
    assert list(zip(plan.starts.tolist(), plan.stops.tolist(), plan.sizes.tolist())) == expected


def test_varying_timestamps_take_the_general_planner():
    value = small_values(300, 3)
    stamps = np.full(300, TS, dtype=np.int64)
    stamps[150] += 1
    records = prepare_records(value, timestamp_ms=stamps)
    assert not plan_batches(records, 1 << 20).same_timestamp
    got = encode_batches(value, timestamp_ms=stamps, batch_size=2_000)
    assert arrow_batches(got) == row_batches(rows_of(value, None, None, stamps), 2_000)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 12), st.integers(40, 140)), min_size=1, max_size=400),
       batch_size=st.sampled_from([1, 90, 300, 1_000, 5_000, 1 << 20]),
       stamp=st.sampled_from([0, TS, -(2**61)]))
def test_one_timestamp_parity_for_hundreds_of_rows(sizes, batch_size, stamp):
    """Record bodies around 64 and 128 bytes, where the length varint grows, and batches of up
    to 400 rows (two-byte offset deltas past 64)."""
    value = pa.array([b"x" * size for size in sizes], pa.binary())
    got = encode_batches(value, timestamp_ms=stamp, batch_size=batch_size)
    assert arrow_batches(got) == row_batches(rows_of(value, None, None, [stamp] * len(sizes)), batch_size)


# --- varint columns -----------------------------------------------------------------------------

def expected_rows(n, fields):
    rows = []
    for i in range(n):
        out = bytearray()
        for field in fields:
            write_varint(out, int(field) if isinstance(field, int) else int(field[i]))
        rows.append(bytes(out))
    return rows


int64s = st.integers(-(2**63), 2**63 - 1)
field_values = st.one_of(
    st.integers(-64, 63),  # one byte
    st.integers(-(2**13), 2**13 - 1),  # one or two bytes
    st.integers(0, 2**31 - 1),
    int64s,
)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(0, 40), count=st.integers(1, 5))
def test_varint_column_matches_write_varint(data, n, count):
    fields = []
    for _ in range(count):
        if data.draw(st.booleans()):
            fields.append(data.draw(field_values))
        else:
            fields.append(np.array(data.draw(st.lists(field_values, min_size=n, max_size=n)), dtype=np.int64))
    column = _varint_column(n, fields)
    assert column.type == pa.binary()
    assert column.to_pylist() == expected_rows(n, fields)


@pytest.mark.parametrize("values", [
    [0, 63, -64],  # every varint one byte
    [64, 8191, -8192],  # every varint two bytes: uniform width, no mask
    [0, 64, 2**27, -(2**63), 2**63 - 1],  # ragged up to ten bytes
])
def test_varint_column_widths(values):
    field = np.array(values * 50, dtype=np.int64)
    column = _varint_column(len(field), [field, 0, field])
    assert column.to_pylist() == expected_rows(len(field), [field, 0, field])
