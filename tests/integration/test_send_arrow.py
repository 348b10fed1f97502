"""KafkaProducer.send_arrow end to end against the embedded Apache Kafka, verified with
confluent-kafka: every row once, per-key order, keyed partitions as Java's, offsets as reported,
headers and timestamps; explicit partitions and sticky runs; backpressure with a tiny
buffer.memory; and the errors raised before anything is queued."""

from __future__ import annotations

import datetime
import uuid
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import InvalidPartitionError, RecordTooLargeError
from spark_kafka_sink.producer.partitioner import partition_for_key
from spark_kafka_sink.record import CompressionType

from ..helpers import create_topic
from ..verify import consume_all, end_offsets, stored_batches

pytestmark = pytest.mark.broker

PARTITIONS = 6
BASE_TS = 1_700_000_000_000
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def rows_table(start: int, count: int) -> pa.Table:
    """Rows ``start..start+count``: keys k0..k99 (every 7th null), 100-byte values carrying the
    row number, a header on every 10th row, millisecond timestamps."""
    ids = np.arange(start, start + count)
    keys = pa.array([None if i % 7 == 0 else f"k{i % 100}" for i in ids.tolist()], pa.string())
    values = pa.array([f"{i:08d}".encode() + b"v" * 92 for i in ids.tolist()], pa.binary())
    headers = pa.array([[("i", str(i).encode())] if i % 10 == 0 else None for i in ids.tolist()], HEADERS)
    stamps = pa.array(BASE_TS + ids, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.table({"key": keys, "value": values, "headers": headers, "timestamp": stamps})


def check_rows(consumed: dict, count: int) -> None:
    seen = Counter()
    last_by_key: dict[bytes, int] = {}
    for partition, records in consumed.items():
        for m in records:
            i = int(m.value[:8])
            seen[i] += 1
            assert m.timestamp_ms == BASE_TS + i
            assert m.headers == ([("i", str(i).encode())] if i % 10 == 0 else [])
            if m.key is not None:
                assert m.key == f"k{i % 100}".encode()
                assert partition == partition_for_key(m.key, PARTITIONS)
                assert last_by_key.get(m.key, -1) < i, "per-key order"
                last_by_key[m.key] = i
            else:
                assert i % 7 == 0
    assert len(seen) == count and set(seen.values()) == {1}, "every row exactly once"


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD],
                         ids=lambda c: c.name.lower())
def test_rows_arrive_once_with_the_offsets_reported(kafka, codec):
    bootstrap = kafka.bootstrap_servers
    topic = unique(f"arrow-{codec.name.lower()}")
    create_topic(bootstrap, topic, PARTITIONS)
    # 4 calls of 10,000 rows of ~115 bytes: the offsets of each call continue those of the call
    # before, and every partition holds several batches (the least-keyed one gets 8.6 % of the
    # rows, ~390 KB: at least 4 batches of 64 KiB even once the codec's ratio estimate has
    # improved as far as the ~70 batches of this input can take it, 1 - 70 * 0.005).
    total, chunk = 40_000, 10_000
    with KafkaProducer({"bootstrap.servers": bootstrap, "compression.type": codec.java_name,
                        "batch.size": 65536}) as producer:
        results = [producer.send_arrow(topic, rows_table(start, chunk).to_batches()[0])
                   for start in range(0, total, chunk)]
        for result in results:
            assert result.wait(60) and result.raise_for_errors() is result
            assert result.acked == chunk and result.failed == 0
        assert sum(r.acked_by_topic[topic] for r in results) == total
    consumed = consume_all(bootstrap, topic, PARTITIONS, expected_count=total)
    check_rows(consumed, total)
    reported = {(tp.partition, offset) for r in results for tp, ranges in r.offsets.items()
                for span in ranges for offset in range(span.first, span.last + 1)}
    assert reported == {(p, m.offset) for p, records in consumed.items() for m in records}


def test_explicit_partitions_and_sticky_runs(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-partitions")
    create_topic(bootstrap, topic, PARTITIONS)
    count = 6_000
    data = pa.table({"value": pa.array([b"x" * 100] * count),
                     "partition": pa.array([i % 3 if i % 2 else None for i in range(count)], pa.int32())})
    with KafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 16384}) as producer:
        result = producer.send_arrow(topic, data)
        result.raise_for_errors(60)
    offsets = end_offsets(bootstrap, topic, PARTITIONS)
    assert sum(offsets.values()) == count
    explicit = {p: sum(1 for i in range(count) if i % 2 and i % 3 == p) for p in range(3)}
    sticky_rows = count // 2  # 300,000 bytes of unkeyed rows: runs of ~16 KiB over several partitions
    assert sum(offsets.values()) - sum(explicit.values()) == sticky_rows
    assert sum(1 for p in range(PARTITIONS) if offsets[p] > explicit.get(p, 0)) >= 2


def test_a_tiny_buffer_memory_applies_backpressure_without_errors(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-backpressure")
    create_topic(bootstrap, topic, PARTITIONS)
    total = 60_000  # 6 MB of values through a 1 MB buffer
    with KafkaProducer({"bootstrap.servers": bootstrap, "buffer.memory": 1 << 20,
                        "batch.size": 65536}) as producer:
        result = producer.send_arrow(topic, rows_table(0, total))
        result.raise_for_errors(60)
        assert producer.metrics()["buffer-available-bytes"] <= 1 << 20
    check_rows(consume_all(bootstrap, topic, PARTITIONS, expected_count=total), total)


def test_send_arrow_after_send_keeps_the_partition_order(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-order")
    create_topic(bootstrap, topic, 1)
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 1000}) as producer:
        producer.send(topic, b"first", partition=0)
        producer.send_arrow(topic, pa.table({"value": [b"second", b"third"]}), partition=None)
        producer.send(topic, b"fourth", partition=0)
        producer.flush()
    values = [m.value for m in consume_all(bootstrap, topic, 1, expected_count=4)[0]]
    assert values == [b"first", b"second", b"third", b"fourth"]


def test_errors_are_raised_before_anything_is_queued(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-errors")
    create_topic(bootstrap, topic, 2)
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.request.size": 10_000}) as producer:
        big = pa.table({"value": [b"a", b"b" * 20_000, b"c"]})
        with pytest.raises(RecordTooLargeError, match=r"row 1 of the input is \d+ bytes.*max.request.size") as info:
            producer.send_arrow(topic, big)
        assert info.value.row == 1 and info.value.partition in (0, 1)
        with pytest.raises(InvalidPartitionError, match="row 1: invalid partition 5"):
            producer.send_arrow(topic, pa.table({"value": [b"a", b"b"], "partition": [0, 5]}))
        with pytest.raises(TypeError, match="the value column has type int64"):
            producer.send_arrow(topic, pa.table({"value": [1, 2]}))
        empty = producer.send_arrow(topic, pa.table({"value": pa.array([], pa.binary())}))
        assert empty.done() and empty.rows == 0
        producer.flush()
    assert end_offsets(bootstrap, topic, 2) == {0: 0, 1: 0}


def test_timestamps_from_a_microsecond_column(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-ts")
    create_topic(bootstrap, topic, 1)
    when = datetime.datetime(2024, 2, 29, 12, 0, 0, 123_456, tzinfo=datetime.timezone.utc)
    data = pa.table({"value": [b"v"], "timestamp": pa.array([when], pa.timestamp("us", tz="UTC"))})
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        producer.send_arrow(topic, data).raise_for_errors(30)
    [record] = consume_all(bootstrap, topic, 1, expected_count=1)[0]
    assert record.timestamp_ms == int(when.timestamp() * 1000) // 1


def test_a_large_input_goes_in_chunks_in_order(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-chunks")
    create_topic(bootstrap, topic, PARTITIONS)
    total = 12_000  # 12 MB of values: more than one 8 MB encoding pass
    data = pa.table({"key": pa.array([f"k{i % 100}" for i in range(total)]),
                     "value": pa.array([f"{i:08d}".encode() + b"v" * 992 for i in range(total)])})
    with KafkaProducer({"bootstrap.servers": bootstrap, "buffer.memory": 4 << 20}) as producer:
        result = producer.send_arrow(topic, data)
        result.raise_for_errors(60)
        assert result.acked == total
    seen, last_by_key = 0, {}
    for records in consume_all(bootstrap, topic, PARTITIONS, expected_count=total).values():
        for m in records:
            i = int(m.value[:8])
            assert last_by_key.get(m.key, -1) < i
            last_by_key[m.key] = i
            seen += 1
    assert seen == total


def test_a_record_too_large_in_a_later_chunk_stops_everything(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-late-big")
    create_topic(bootstrap, topic, 1)
    values = [b"x" * 100_000] * 99 + [b"y" * 300_000]  # about 10 MB: two encoding passes
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.request.size": 200_000}) as producer:
        with pytest.raises(RecordTooLargeError, match="row 99 of the input"):
            producer.send_arrow(topic, pa.table({"value": values}))
        producer.flush()
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


def test_with_errors_tolerance_all_bad_rows_are_left_out_and_refused_records_kept(kafka):
    """``errors_tolerance="all"``: the rows that cannot become records are named in ``rejected``
    and the others sent in one piece; ``keep_refused``: a record the broker refuses alone (a null
    key on a compacted topic) is kept with its error, and its batch-mates are written."""
    bootstrap = kafka.bootstrap_servers
    topic = unique("arrow-tolerant")
    create_topic(bootstrap, topic, 2, configs={"cleanup.policy": "compact"})
    data = pa.table({
        "key": [b"a", b"b", None, b"d", b"e", b"f"],
        "value": [b"1", b"2" * 20_000, b"3", b"4", b"5", b"6"],
        "partition": pa.array([0, 1, 0, 7, 1, -1], pa.int32()),
        "headers": pa.array([[("h", b"x")], None, [], [], [(None, b"y")], []], HEADERS)})
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.request.size": 10_000}) as producer:
        result = producer.send_arrow(topic, data, errors_tolerance="all", keep_refused=True)
        producer.flush()
        assert result.wait(30)
        assert [(r.row, type(r.error).__name__) for r in result.rejected] == [
            (1, "MessageTooLargeError"), (3, "InvalidPartitionError"), (4, "RecordContentError"),
            (5, "InvalidPartitionError")]
        assert result.rows == 2 and result.acked == 1 and result.refused == 1 and result.failed == 0
        refused, = result.take_refused()
        assert (refused.key, refused.value, refused.topic_partition.partition) == (None, b"3", 0)
        assert "Compacted topic cannot accept message without key" in str(refused.error)
    records = consume_all(bootstrap, topic, 2, expected_count=1)
    assert [(r.key, r.value, r.headers) for p in records.values() for r in p] == [(b"a", b"1", [("h", b"x")])]


@pytest.mark.parametrize("settings, largest", [
    ({}, 1 << 20),                          # batch.size not set: bulk batches of up to 1 MiB
    ({"batch.size": 16384}, 16384),         # set: honoured exactly
    ({"max.request.size": 262144}, 262144),  # not set, and capped by max.request.size
], ids=["default", "explicit", "capped"])
def test_record_batches_are_sized_for_bulk_writes_unless_batch_size_is_set(kafka, settings, largest):
    topic = unique("bulk")
    create_topic(kafka.bootstrap_servers, topic, 1)
    count = 40_000  # about 4.4 MB in one partition: several 1 MiB batches
    table = pa.table({"value": pa.array([i.to_bytes(4, "big") * 25 for i in range(count)], pa.binary())})
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers, **settings}) as producer:
        result = producer.send_arrow(topic, table)
        producer.flush()
    assert result.failed == 0 and result.acked == count
    assert sum(len(part) for part in consume_all(kafka.bootstrap_servers, topic, 1,
                                                 expected_count=count).values()) == count

    batches = stored_batches(kafka, topic, 0)
    assert sum(b.count for b in batches) == count
    sizes = [b.size for b in batches]
    assert max(sizes) <= largest, sizes
    # every batch but the input's last is full: within one record of the limit
    assert all(size > largest - 200 for size in sizes[:-1]), sizes


def test_with_a_codec_batches_fill_batch_size_once_compressed(kafka):
    """As Java counts batch.size: against a batch's expected compressed size. Compressible rows
    start at batch.size uncompressed and, once the producer has seen how well they compress,
    travel in batches that are about batch.size after compression."""
    topic = unique("lz4-bulk")
    create_topic(kafka.bootstrap_servers, topic, 1)
    rows, calls, limit = 20_000, 12, 16_384
    table = pa.table({"value": pa.array([b"event-%08d " % i + b"x" * 90 for i in range(rows)], pa.binary())})
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers, "compression.type": "lz4",
                        "batch.size": limit}) as producer:
        for _ in range(calls):  # the estimate improves with each batch built (Java's steps)
            result = producer.send_arrow(topic, table)
            producer.flush()
            assert result.failed == 0 and result.acked == rows
    assert sum(len(part) for part in consume_all(kafka.bootstrap_servers, topic, 1,
                                                 expected_count=rows * calls).values()) == rows * calls

    batches = stored_batches(kafka, topic, 0)
    assert sum(b.count for b in batches) == rows * calls
    first, last = batches[0], batches[-2]  # the last one holds a call's remainder
    # the first batch: batch.size of uncompressed records, which lz4 shrinks a lot
    assert first.size < limit // 4, first
    # later: many more records per batch, about batch.size once compressed
    print(f"lz4 batches: first {first}, late {last}, {len(batches)} in all")
    assert last.count > 10 * first.count and limit // 2 < last.size <= 2 * limit, (first, last)
