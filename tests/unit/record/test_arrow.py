"""The Arrow encoder against the row builder: same batch boundaries, same bytes, same errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.record import CompressionType, RecordBatchBuilder, read_batch
from spark_kafka_sink.record.arrow import encode_batches, plan_batches, prepare_records

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BIG = bytes(range(256)) * 80  # 20 KiB


# --- the reference: one append per row --------------------------------------------------------

def row_batches(rows, batch_size, codec=CompressionType.NONE, state=None):
    """(start, stop, bytes) of each batch the row builder makes, a new builder per refusal."""
    out, start = [], 0
    builder = RecordBatchBuilder(compression_type=codec, batch_size=batch_size)
    for index, row in enumerate(rows):
        if builder.append(*row) is None:
            out.append((start, index, builder))
            start = index
            builder = RecordBatchBuilder(compression_type=codec, batch_size=batch_size)
            assert builder.append(*row) is not None
    if rows:
        out.append((start, len(rows), builder))
    for _, _, b in out:
        if state:
            b.set_producer_state(*state)
    return [(a, z, b.build()) for a, z, b in out]


def arrow_batches(batches, state=None):
    for batch in batches:
        if state:
            batch.builder.set_producer_state(*state)
    return [(b.start, b.stop, b.builder.build()) for b in batches]


def as_bytes(item):
    return item.encode() if isinstance(item, str) else item


def rows_of(value, key, headers, timestamps):
    """The rows as the row builder takes them, read back from the Arrow columns."""
    values = [as_bytes(v) for v in value.to_pylist()]
    keys = [None] * len(values) if key is None else [as_bytes(k) for k in key.to_pylist()]
    if headers is None:
        hdrs = [()] * len(values)
    else:
        hdrs = [[(h["key"], as_bytes(h["value"])) for h in row or ()] for row in headers.to_pylist()]
    return list(zip([int(t) for t in timestamps], keys, values, hdrs))


# --- strategies -------------------------------------------------------------------------------

blobs = st.one_of(st.binary(max_size=30), st.just(b""), st.just(BIG))
texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "ключ", "日本", "emoji-\U0001F600"]))
header_lists = st.one_of(
    st.none(),
    st.lists(st.tuples(texts, st.none() | st.binary(max_size=10)), max_size=3),
)
timestamps = st.one_of(st.just(0), st.just(1_700_000_000_000), st.integers(0, 2**45),
                       st.integers(-(2**61), 2**61))
ARRAY_TYPES = {"binary": pa.binary(), "large_binary": pa.large_binary(),
               "string": pa.string(), "large_string": pa.large_string()}


@st.composite
def columns(draw):
    """value/key/headers columns of one type each, possibly sliced or chunked, plus timestamps."""
    n = draw(st.integers(1, 25))
    pad = draw(st.sampled_from([(0, 0), (2, 1)]))  # rows sliced off the front and the back
    total = n + sum(pad)

    def column(kind):
        cells = st.none() | (texts if kind.endswith("string") else blobs)
        return pa.array(draw(st.lists(cells, min_size=total, max_size=total)), ARRAY_TYPES[kind])

    value = column(draw(st.sampled_from(sorted(ARRAY_TYPES))))
    key = draw(st.none() | st.sampled_from(sorted(ARRAY_TYPES)).map(column))
    headers = None
    if draw(st.booleans()):
        lists = draw(st.lists(header_lists, min_size=total, max_size=total))
        headers = pa.array([None if row is None else [{"key": k, "value": v} for k, v in row]
                            for row in lists], HEADER_TYPE)
    if pad != (0, 0):
        value, key, headers = (None if c is None else c.slice(pad[0], n) for c in (value, key, headers))
    ts = draw(st.one_of(
        st.lists(timestamps, min_size=n, max_size=n),
        timestamps.map(lambda t: [t] * n),
        st.integers(0, 2**40).map(lambda t: list(range(t, t + 7 * n, 7))),
        st.integers(2**20, 2**40).map(lambda t: list(range(t, t - 7 * n, -7))),
    ))
    if draw(st.booleans()) and n > 1:
        value = pa.chunked_array([value.slice(0, 1), value.slice(1)])
    return value, key, headers, np.array(ts, dtype=np.int64)


# --- byte identity ----------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(cols=columns(), codec=st.sampled_from(list(CompressionType)),
       batch_size=st.sampled_from([1, 90, 200, 700, 5000, 1 << 20]))
def test_byte_identical_to_the_row_builder(cols, codec, batch_size):
    value, key, headers, ts = cols
    rows = rows_of(value, key, headers, ts)
    got = encode_batches(value, key, headers, timestamp_ms=ts, batch_size=batch_size,
                         compression_type=codec)
    assert arrow_batches(got) == row_batches(rows, batch_size, codec)
    for batch in got:
        assert batch.record_count == batch.stop - batch.start
        assert batch.builder.record_count == batch.record_count
        assert batch.builder.is_full


@settings(max_examples=40, deadline=None)
@given(cols=columns(), state=st.tuples(st.integers(0, 2**62), st.integers(0, 2**15 - 1),
                                       st.integers(0, 2**31 - 1), st.booleans()))
def test_producer_state_and_rebuilds_match(cols, state):
    value, key, headers, ts = cols
    rows = rows_of(value, key, headers, ts)
    got = encode_batches(value, key, headers, timestamp_ms=ts, batch_size=300, compression_type="lz4")
    arrow_batches(got)  # built once without state, as a first drain would
    assert arrow_batches(got, state) == row_batches(rows, 300, CompressionType.LZ4, state)


@settings(max_examples=40, deadline=None)
@given(cols=columns())
def test_size_upper_bounds_match_the_builder(cols):
    value, key, headers, ts = cols
    bounds = prepare_records(value, key, headers, timestamp_ms=ts).size_upper_bounds
    expected = [RecordBatchBuilder.estimate_size_upper_bound(k, v, h)
                for _, k, v, h in rows_of(value, key, headers, ts)]
    assert bounds.tolist() == expected


def test_many_rows_split_into_full_batches():
    n = 5000
    value = pa.array([b"v" * (i % 150) for i in range(n)], pa.binary())
    key = pa.array([f"k{i % 100}" for i in range(n)])
    ts = np.arange(n, dtype=np.int64) * 3 + 1_700_000_000_000
    got = encode_batches(value, key, timestamp_ms=ts, batch_size=16384)
    assert len(got) > 20
    assert arrow_batches(got) == row_batches(rows_of(value, key, None, ts), 16384)
    assert all(b.size <= 16384 for b in got)


def test_one_timestamp_for_every_row_and_empty_input():
    value = pa.array([b"a", None, b"c"])
    got = encode_batches(value, timestamp_ms=42, batch_size=1 << 20)
    assert arrow_batches(got) == row_batches([(42, None, v, ()) for v in (b"a", None, b"c")], 1 << 20)
    assert encode_batches(pa.array([], pa.binary()), timestamp_ms=np.zeros(0, np.int64), batch_size=100) == []


def test_plan_reports_boundaries_and_sizes():
    value = pa.array([b"x" * 50] * 10)
    records = prepare_records(value, timestamp_ms=np.zeros(10, np.int64))
    plan = plan_batches(records, 61 + 3 * 57)  # three 57-byte records per batch
    assert plan.starts.tolist() == [0, 3, 6, 9]
    assert plan.stops.tolist() == [3, 6, 9, 10]
    assert plan.sizes.tolist() == [171, 171, 171, 57]


# --- the from-records builder -----------------------------------------------------------------

def test_from_records_behaves_like_an_appended_builder():
    rows = [(1000, b"k", b"v1", [("h", b"x")]), (900, None, b"v2", ()), (1500, b"", None, ())]
    appended = RecordBatchBuilder(compression_type="gzip")
    for row in rows:
        appended.append(*row)
    plain = RecordBatchBuilder()
    for row in rows:
        plain.append(*row)
    section = plain.build()[61:]
    built = RecordBatchBuilder.from_records(memoryview(section), 3, 1000, 1500, compression_type="gzip")
    assert (built.record_count, built.estimated_size, built.base_timestamp, built.max_timestamp) == (
        appended.record_count, appended.estimated_size, 1000, 1500)
    assert built.is_full
    assert built.append(2000, None, b"more") is None
    assert built.append_record(2000, None, b"more") is None
    assert built.build() == appended.build()
    for builder in (built, appended):
        builder.set_producer_state(7, 1, 100, True)
    assert built.build() == appended.build()
    assert read_batch(built.build()).records[2].value is None


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_a_sealed_builder_lets_go_of_the_shared_buffer_and_builds_the_same_bytes(codec):
    rows = [(1000, b"k%d" % i, b"v" * i, ()) for i in range(50)]
    appended = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
    plain = RecordBatchBuilder(batch_size=1 << 20)
    for row in rows:
        appended.append(*row)
        plain.append(*row)
    shared = bytearray(plain.build()[61:])
    built = RecordBatchBuilder.from_records(memoryview(shared), 50, 1000, 1000, compression_type=codec)
    with pytest.raises(BufferError):
        shared.extend(b"x")  # the builder holds a view of it
    built.seal()
    shared.extend(b"x")  # sealed: no view of it is left
    assert built.sealed_size == len(appended.build())
    first = built.build()
    assert first == appended.build()
    for builder in (built, appended):  # a rebuild with new producer state, as for a retry
        builder.set_producer_state(7, 1, 100, False)
    assert built.build() == appended.build() and bytes(first) != bytes(built.build())
    assert [r.value for r in read_batch(first).records] == [row[2] for row in rows]


@pytest.mark.parametrize("args, message", [
    ((b"", 1, 0, 0), "cannot hold"),
    ((b"\x00", 0, 0, 0), "count"),
    ((b"\x00", 1, 2**63, 0), "base_timestamp"),
])
def test_from_records_validates(args, message):
    with pytest.raises(ValueError, match=message):
        RecordBatchBuilder.from_records(*args)


# --- errors -----------------------------------------------------------------------------------

def test_null_header_key_names_the_row():
    headers = pa.array([[], None, [{"key": "a", "value": b"1"}, {"key": None, "value": b"2"}]], HEADER_TYPE)
    with pytest.raises(ValueError, match="row 2 .*null key"):
        encode_batches(pa.array([b"a", b"b", b"c"]), headers=headers, timestamp_ms=0, batch_size=100)


def test_null_header_names_the_row():
    items = pa.array([{"key": "a", "value": b"1"}, None], HEADER_TYPE.value_type)
    headers = pa.ListArray.from_arrays(pa.array([0, 0, 2], pa.int32()), items)
    with pytest.raises(ValueError, match="row 1 has a null header"):
        encode_batches(pa.array([b"a", b"b"]), headers=headers, timestamp_ms=0, batch_size=100)


@pytest.mark.parametrize("column, array, message", [
    ("value", pa.array([1, 2]), "the value column .* got int64"),
    ("key", pa.array([1.5, 2.0]), "the key column .* got double"),
    ("value", [b"a", b"b"], "the value column must be a pyarrow Array"),
    ("headers", pa.array([["a"], ["b"]]), "headers column must be list<struct"),
])
def test_unsupported_types_name_the_column_and_type(column, array, message):
    args = {"value": pa.array([b"a", b"b"]), column: array}
    with pytest.raises(TypeError, match=message):
        encode_batches(**args, timestamp_ms=0, batch_size=100)


@pytest.mark.parametrize("extra, message", [
    ({"key": pa.array([b"k"])}, "key column has 1 rows"),
    ({"headers": pa.array([[]], HEADER_TYPE)}, "headers column has 1 rows"),
    ({"timestamp_ms": np.zeros(3, np.int64)}, "timestamp_ms has 3 rows"),
])
def test_mismatched_lengths(extra, message):
    args = {"timestamp_ms": np.zeros(2, np.int64), **extra}
    with pytest.raises(ValueError, match=message):
        encode_batches(pa.array([b"a", b"b"]), **args, batch_size=100)


def test_float_timestamps_are_refused():
    with pytest.raises(TypeError, match="timestamp_ms"):
        encode_batches(pa.array([b"a"]), timestamp_ms=np.array([1.5]), batch_size=100)


@pytest.mark.parametrize("batch_size", [1, 1 << 20])
def test_a_timestamp_too_far_from_the_base_starts_a_new_batch_like_the_builder(batch_size):
    # an int64 delta from the batch's first timestamp that overflows: never an error that depends
    # on which batch the record joins; the record starts the next batch instead
    ts = np.array([-(2**62), 5, 2**62 + 5, 2**62 + 6, -(2**62)], dtype=np.int64)
    value = pa.array([b"a", b"b", b"c", b"d", b"e"])
    got = encode_batches(value, timestamp_ms=ts, batch_size=batch_size)
    rows = [(int(t), None, v, ()) for t, v in zip(ts, value.to_pylist())]
    assert arrow_batches(got) == row_batches(rows, batch_size)
    if batch_size > 1:
        assert [(b.start, b.stop) for b in got] == [(0, 2), (2, 4), (4, 5)]


@pytest.mark.parametrize("width", range(1, 11))
def test_timestamp_deltas_at_every_varint_width(width):
    """Deltas at both ends of the zig-zag range that takes exactly ``width`` bytes, so the
    widest timestamp-delta varint of the batch is ``width`` bytes long."""
    low = 0 if width == 1 else 1 << (7 * (width - 1))  # smallest zig-zag value of this width
    high = min((1 << (7 * width)) - 1, 2**64 - 1)  # largest
    deltas = [z >> 1 if z % 2 == 0 else -(z >> 1) - 1 for z in (low, low + 1, high - 1, high)]
    ts = np.array([0] + [d for d in deltas if -(2**63) < d < 2**63], dtype=np.int64)
    value = pa.array([b"v"] * len(ts))
    rows = rows_of(value, None, None, ts)
    got = encode_batches(value, timestamp_ms=ts, batch_size=1 << 20)
    assert arrow_batches(got) == row_batches(rows, 1 << 20)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_segments_encode_each_part_as_if_alone(codec):
    from spark_kafka_sink.record.arrow import encode_prepared

    rng = np.random.default_rng(11)
    n = 3_000
    values = pa.array([bytes(rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8)) for _ in range(n)])
    keys = pa.array([None if i % 9 == 0 else f"k{i % 50}" for i in range(n)])
    stamps = 1_700_000_000_000 + rng.integers(-5_000, 5_000, n)
    cuts = [0, 1, 700, 701, 2_000, n]
    segmented = encode_prepared(prepare_records(values, keys, timestamp_ms=stamps), batch_size=4_096,
                                compression_type=codec, segments=cuts[1:-1])
    alone = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        for batch in encode_batches(values[a:b], keys[a:b], timestamp_ms=stamps[a:b], batch_size=4_096,
                                    compression_type=codec):
            alone.append((batch.start + a, batch.stop + a, batch.builder.build()))
    assert [(b.start, b.stop, b.builder.build()) for b in segmented] == alone
    assert not any(b.start < cut < b.stop for b in segmented for cut in cuts)
