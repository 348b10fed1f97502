"""Batches the broker refuses as MESSAGE_TOO_LARGE are split and resent, end to end.

Topics with ``max.message.bytes`` = 4096 and producers with the default ``batch.size`` (16384)
and a long linger, so nearly every batch is refused at first: the producer splits it until the
parts fit. Checked with confluent-kafka: every record that fits is in the topic exactly once, in
the order sent per partition (so per key), at the offset its future (or ``ArrowSendResult``)
reported; only the records that are themselves over 4096 bytes fail, with RecordTooLargeError
naming the partition and the size; ``batch-split-total`` counts the splits and the pool gets
back all its memory. Both ``send()`` and ``send_arrow()``, idempotence on and off (off: with one
request in flight, the setting that keeps order without idempotence), and lz4.
"""

from __future__ import annotations

import random
import uuid

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import RecordTooLargeError

from ..helpers import create_topic
from ..verify import consume_all

pytestmark = pytest.mark.broker

PARTITIONS = 3
MAX_MESSAGE_BYTES = 4096
ROWS = 600
OVERSIZED = {137, 138, 400}          # rows whose value alone is over max.message.bytes


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def rows() -> list[tuple[bytes, bytes]]:
    """(key, value): 20 keys, ~100-byte values carrying the row number, three 5,000-byte rows;
    random bytes, so that compression cannot bring a batch under the limit."""
    out = []
    for i in range(ROWS):
        size = 5_000 if i in OVERSIZED else 90 + i % 17
        out.append((b"key-%d" % (i % 20), b"%05d" % i + random.Random(i).randbytes(size)))
    return out


def config(bootstrap: str, idempotent: bool, compression: str) -> dict:
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 2_000, "compression.type": compression,
                "enable.idempotence": str(idempotent).lower(), "delivery.timeout.ms": 60_000}
    if not idempotent:
        settings.update({"max.in.flight.requests.per.connection": 1, "acks": "all"})
    return settings


CASES = [pytest.param(True, "none", id="idempotent"),
         pytest.param(False, "none", id="not-idempotent"),
         pytest.param(True, "lz4", id="idempotent-lz4")]


def check_topic(bootstrap: str, topic: str, sent: list[tuple[bytes, bytes]],
                offsets: dict[int, tuple[int, int]]) -> None:
    """The topic holds exactly the rows that fit, each once, in send order per partition, at
    the offsets reported (``offsets``: row -> (partition, offset))."""
    fitting = [i for i in range(len(sent)) if i not in OVERSIZED]
    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=len(fitting))
    consumed = {(p, r.offset): (r.key, r.value) for p, rs in records.items() for r in rs}
    assert len(consumed) == len(fitting)
    assert {offsets[i]: sent[i] for i in fitting} == consumed
    for partition, rs in records.items():
        numbers = [int(r.value[:5]) for r in rs]
        assert numbers == sorted(numbers), f"partition {partition} out of order"
        assert [r.offset for r in rs] == list(range(len(rs)))


def check_producer_after(producer: KafkaProducer, oversized: int) -> None:
    metrics = producer.metrics()
    assert metrics["batch-split-total"] > 0
    assert metrics["record-error-total"] == oversized
    assert metrics["buffer-available-bytes"] == metrics["buffer-total-bytes"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("idempotent,compression", CASES)
def test_send_splits_refused_batches_and_fails_only_the_records_too_large(kafka, idempotent,
                                                                         compression):
    bootstrap = kafka.bootstrap_servers
    topic = unique("split-send")
    create_topic(bootstrap, topic, PARTITIONS, configs={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    sent = rows()
    outcomes: list = [None] * len(sent)

    def remember(i):
        def callback(metadata, exception):
            assert outcomes[i] is None, f"row {i} reported twice"
            outcomes[i] = exception if exception is not None else metadata
        return callback

    with KafkaProducer(config(bootstrap, idempotent, compression)) as producer:
        futures = [producer.send(topic, value, key=key, callback=remember(i))
                   for i, (key, value) in enumerate(sent)]
        producer.flush(120)
        for i, future in enumerate(futures):
            if i in OVERSIZED:
                error = future.exception(0)
                assert isinstance(error, RecordTooLargeError) and error.code == 10, (i, error)
                assert f"{topic}-" in str(error) and "a record of 5" in str(error)
                assert outcomes[i] is error
            else:
                metadata = future.result(0)
                assert outcomes[i] == metadata
        check_producer_after(producer, len(OVERSIZED))
    offsets = {i: (f.result(0).partition, f.result(0).offset) for i, f in enumerate(futures)
               if i not in OVERSIZED}
    check_topic(bootstrap, topic, sent, offsets)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("idempotent,compression", CASES)
def test_send_arrow_splits_refused_batches_and_counts_every_row_once(kafka, idempotent,
                                                                     compression):
    bootstrap = kafka.bootstrap_servers
    topic = unique("split-arrow")
    create_topic(bootstrap, topic, PARTITIONS, configs={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    sent = rows()
    table = pa.table({"key": pa.array([k for k, _ in sent], pa.binary()),
                      "value": pa.array([v for _, v in sent], pa.binary())})
    with KafkaProducer(config(bootstrap, idempotent, compression)) as producer:
        result = producer.send_arrow(topic, table)
        assert result.wait(120)
        assert (result.acked, result.failed) == (ROWS - len(OVERSIZED), len(OVERSIZED))
        failure = result.first_failure
        assert isinstance(failure.error, RecordTooLargeError) and failure.records == 1
        assert f"{topic}-" in str(failure.error) and "a record of 5" in str(failure.error)
        producer.flush(30)
        check_producer_after(producer, len(OVERSIZED))
    fitting = ROWS - len(OVERSIZED)
    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=fitting)
    assert sum(len(rs) for rs in records.values()) == fitting
    assert sorted(int(r.value[:5]) for rs in records.values() for r in rs) == [
        i for i in range(ROWS) if i not in OVERSIZED]
    for partition, rs in records.items():
        numbers = [int(r.value[:5]) for r in rs]
        assert numbers == sorted(numbers), f"partition {partition} out of order"
        assert all(sent[n] == (r.key, r.value) for n, r in zip(numbers, rs))
        ranges = result.offsets.get(next(tp for tp in result.offsets if tp.partition == partition))
        assert sum(r.count for r in ranges) == len(rs)
        assert [o for r in ranges for o in range(r.first, r.last + 1)] == [r.offset for r in rs]


@pytest.mark.parametrize("idempotent", [True, False])
def test_records_a_compacted_topic_refuses_fail_alone_and_their_batch_mates_arrive(kafka, idempotent):
    """A record without a key in a batch for a compacted topic: the broker refuses that record
    (INVALID_RECORD naming its index); only it fails, every other record arrives once, in order."""
    topic = unique("compacted")
    create_topic(kafka.bootstrap_servers, topic, 1, configs={"cleanup.policy": "compact"})
    config = {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 200,
              "enable.idempotence": idempotent}
    if not idempotent:
        config["max.in.flight.requests.per.connection"] = 1
    keyless = {10, 11, 57}
    with KafkaProducer(config) as producer:
        futures = [producer.send(topic, f"v{i:03d}".encode(),
                                 key=None if i in keyless else f"k{i}".encode(), partition=0)
                   for i in range(100)]
        producer.flush()
    for i in keyless:
        assert "Compacted topic cannot accept message without key" in str(futures[i].exception())
    delivered = [i for i in range(100) if i not in keyless]
    assert all(futures[i].exception() is None for i in delivered)
    consumed = consume_all(kafka.bootstrap_servers, topic, 1, expected_count=len(delivered))
    assert [r.value for r in consumed[0]] == [f"v{i:03d}".encode() for i in delivered]
    assert [futures[i].result().offset for i in delivered] == [r.offset for r in consumed[0]]
