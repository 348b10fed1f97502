"""Build -> read round trips for every codec, driven by hypothesis."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.record import CompressionType, RecordBatchBuilder, read_batch, read_batches

INT64_MAX = 2**63 - 1


def buffers(max_size: int = 40) -> st.SearchStrategy:
    """bytes, bytearray or memoryview (possibly a slice) holding arbitrary bytes."""
    raw = st.binary(max_size=max_size)
    return st.one_of(
        raw,
        raw.map(bytearray),
        raw.map(lambda b: memoryview(b"<" + b + b">")[1:-1]),
    )


nullable = st.none() | buffers()
header_keys = st.sampled_from(["h", "trace-id", "", "ключ", "日本", "emoji-\U0001F600"]) | st.text(max_size=6)
headers = st.lists(st.tuples(header_keys, nullable), max_size=4)
timestamps = st.one_of(st.just(0), st.integers(0, 2**45), st.integers(0, INT64_MAX // 2))
records = st.lists(st.tuples(timestamps, nullable, nullable, headers), min_size=1, max_size=12)

producer_state = st.tuples(
    st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    st.one_of(st.just(-1), st.integers(0, 2**15 - 1)),
    st.one_of(st.just(-1), st.integers(0, 2**31 - 1)),
    st.booleans(),
)


def as_bytes(value):
    return None if value is None else bytes(value)


@settings(max_examples=80, deadline=None)
@given(codec=st.sampled_from(list(CompressionType)), rows=records, state=producer_state)
def test_build_then_read(codec, rows, state):
    builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
    for row in rows:
        assert builder.append(*row) is not None
    builder.set_producer_state(*state)
    data = builder.build()

    batch = read_batch(data)
    assert batch.compression_type is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == state
    assert not batch.is_control
    assert batch.magic == 2 and batch.partition_leader_epoch == -1 and batch.base_offset == 0
    assert batch.record_count == len(rows) and batch.last_offset_delta == len(rows) - 1
    assert batch.base_timestamp == rows[0][0]
    assert batch.max_timestamp == max(row[0] for row in rows)
    assert len(data) == batch.size_in_bytes
    if codec is CompressionType.NONE:
        assert len(data) == builder.estimated_size
    for offset, (record, (ts, key, value, hdrs)) in enumerate(zip(batch.records, rows)):
        assert record.offset == offset
        assert record.timestamp_ms == ts
        assert record.key == as_bytes(key)
        assert record.value == as_bytes(value)
        assert record.headers == tuple((k, as_bytes(v)) for k, v in hdrs)


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.tuples(st.sampled_from(list(CompressionType)), records), min_size=1, max_size=4))
def test_concatenated_batches(batches):
    data = b""
    for codec, rows in batches:
        builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
        for row in rows:
            builder.append(*row)
        data += builder.build()
    decoded = list(read_batches(data, allow_partial_tail=False))
    assert [len(b.records) for b in decoded] == [len(rows) for _, rows in batches]


@settings(max_examples=40, deadline=None)
@given(key=nullable, value=st.none() | buffers(400), hdrs=headers, ts=timestamps)
def test_estimate_bounds_the_real_size(key, value, hdrs, ts):
    builder = RecordBatchBuilder()
    builder.append(ts, key, value, hdrs)
    assert len(builder.build()) <= RecordBatchBuilder.estimate_size_upper_bound(key, value, hdrs)
