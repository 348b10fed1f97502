"""KafkaProducer end to end against the embedded Apache Kafka, verified with confluent-kafka.

- 30,000 records over 6 partitions (keys, null keys, headers, timestamps), once per codec: every
  record arrives exactly once, per-key order holds, and the offsets our futures reported are the
  ones the independent consumer sees; at least 10 default batches per partition and more produce
  requests than the 5 an idempotent connection may have in flight.
- Several threads sending at once.
- close() with records still queued delivers them all and leaves no thread or socket behind.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import defaultdict

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import InvalidPartitionError, ProducerClosedError, RecordTooLargeError
from spark_kafka_sink.record import CompressionType

from ..helpers import create_topic
from ..verify import consume_all, end_offsets

pytestmark = pytest.mark.broker

PARTITIONS = 6
# Enough to cross every boundary the exactly-once check is about, not more. A record of
# ``_record`` takes over 100 bytes in a batch (100-byte value; 114 on average with key, headers
# and varints), so a default 16,384-byte batch holds at most 164 of them (143 in practice). The
# keys k0..k99 alone put at least 1,800 of 30,000 records on every partition (keys hash unevenly:
# 6 % to 17 % of the records per partition; the 30 % unkeyed ones come on top), so each partition
# fills at least 11 batches, and all of them about 210 (3.4 MB): at least 4 produce requests even
# at 1 MB each, many more as linger.ms = 5 sends batches as they fill, so the idempotent
# producer's sequences run over more requests than the 5 it may keep in flight per connection.
RECORDS = 30_000
MAX_RECORDS_PER_BATCH = 16_384 // 100 + 1
MIN_BATCHES_PER_PARTITION = 10
MAX_IN_FLIGHT = 5
BASE_TS = 1_700_000_000_000


def _record(i: int) -> dict:
    """Record ``i``: 30 % unkeyed, the rest over k0..k99; headers on every 10th; fixed timestamps."""
    key = None if i % 10 < 3 else f"k{i % 100}".encode()
    headers = [("i", str(i).encode()), ("dup", None), ("dup", b"x")] if i % 10 == 0 else None
    return {"key": key, "value": f"{i:08d}".encode() + b"v" * 92, "headers": headers,
            "timestamp_ms": BASE_TS + i}


def _send_all(producer: KafkaProducer, topic: str, count: int) -> list:
    futures = []
    for i in range(count):
        rec = _record(i)
        futures.append(producer.send(topic, rec["value"], key=rec["key"], headers=rec["headers"],
                                     timestamp_ms=rec["timestamp_ms"]))
    return futures


def _index(value: bytes) -> int:
    return int(value[:8])


def _check_exactly_once(consumed: dict, count: int) -> dict[int, tuple[int, int]]:
    """Every index 0..count-1 exactly once; per-key order kept; returns index -> (partition, offset)."""
    where: dict[int, tuple[int, int]] = {}
    last_by_key: dict[bytes, int] = {}
    for partition, records in consumed.items():
        for m in records:
            i = _index(m.value)
            assert i not in where, f"record {i} arrived twice: {where[i]} and {(partition, m.offset)}"
            where[i] = (partition, m.offset)
            if m.key is not None:
                assert last_by_key.get(m.key, -1) < i, f"key {m.key!r}: {i} after {last_by_key[m.key]}"
                last_by_key[m.key] = i
            rec = _record(i)
            assert (m.key, m.timestamp_ms) == (rec["key"], rec["timestamp_ms"])
            assert m.headers == (rec["headers"] or [])
    missing = [i for i in range(count) if i not in where]
    assert not missing, f"{len(missing)} records missing, first {missing[:10]}"
    return where


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_records_over_many_batches_arrive_exactly_once_in_key_order(kafka, codec):
    topic = f"producer-{codec.name.lower()}-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers,
                        "compression.type": codec.java_name, "linger.ms": 5}) as producer:
        futures = _send_all(producer, topic, RECORDS)
        producer.flush(timeout=120)
        reported = {i: (md.partition, md.offset) for i, md in enumerate(f.result(0) for f in futures)}
        metrics = producer.metrics()
    next_offsets = defaultdict(int)
    for partition, offset in reported.values():
        next_offsets[partition] = max(next_offsets[partition], offset + 1)
    assert end_offsets(kafka.bootstrap_servers, topic, PARTITIONS) == dict(next_offsets)
    consumed = consume_all(kafka.bootstrap_servers, topic, PARTITIONS, expected_count=RECORDS,
                           timeout_s=120)
    assert _check_exactly_once(consumed, RECORDS) == reported
    assert metrics["record-send-total"] >= RECORDS
    assert metrics["record-error-total"] == 0
    # the volume crossed the boundaries it is there for (see RECORDS)
    per_partition = defaultdict(int)
    for partition, _ in reported.values():
        per_partition[partition] += 1
    assert min(per_partition.values()) >= MIN_BATCHES_PER_PARTITION * MAX_RECORDS_PER_BATCH, per_partition
    produce_requests = sum(v for k, v in metrics.items() if k.endswith(".produce-request-total"))
    assert produce_requests > MAX_IN_FLIGHT, produce_requests


def test_sending_from_several_threads(kafka):
    topic = f"threads-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    per_thread, threads_n = 5_000, 4
    results: dict[int, list] = defaultdict(list)
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
        def worker(t: int) -> None:
            for j in range(per_thread):
                i = t * per_thread + j
                results[t].append(producer.send(topic, _record(i)["value"], key=f"k{i % 100}"))
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        producer.flush(60)
        assert all(f.exception(0) is None for fs in results.values() for f in fs)
    consumed = consume_all(kafka.bootstrap_servers, topic, PARTITIONS,
                           expected_count=per_thread * threads_n)
    indexes = sorted(_index(m.value) for records in consumed.values() for m in records)
    assert indexes == list(range(per_thread * threads_n))


def _thread_names() -> set[str]:
    return {t.name for t in threading.enumerate()}


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_close_delivers_pending_records_and_leaves_nothing_open(kafka):
    topic = f"close-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    threads_before, fds_before = _thread_names(), _fd_count()
    producer = KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 10_000})
    futures = _send_all(producer, topic, 20_000)   # linger 10 s: still queued when close() starts
    assert not all(f.done() for f in futures)
    producer.close(timeout=60)
    assert all(f.done() and f.exception(0) is None for f in futures)
    assert _thread_names() == threads_before
    assert _fd_count() == fds_before
    with pytest.raises(ProducerClosedError):
        producer.send(topic, b"late")
    consumed = consume_all(kafka.bootstrap_servers, topic, PARTITIONS, expected_count=20_000)
    _check_exactly_once(consumed, 20_000)


def test_synchronous_errors_name_what_is_wrong(kafka):
    topic = f"errors-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers,
                        "max.request.size": 2_000}) as producer:
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            producer.send(topic, b"x" * 5_000)
        with pytest.raises(TypeError, match="value"):
            producer.send(topic, 42)
        with pytest.raises(TypeError, match="key"):
            producer.send(topic, b"v", key=3.5)
        with pytest.raises(InvalidPartitionError, match="partition 7"):
            producer.send(topic, b"v", partition=7)
        assert [p.partition for p in producer.partitions_for(topic)] == [0, 1]
        md = producer.send(topic, "text value", key="text key", partition=1).result(30)
        assert (md.topic, md.partition, md.offset) == (topic, 1, 0)
