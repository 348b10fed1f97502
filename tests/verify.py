"""Independent verification: read topics back with confluent-kafka (librdkafka), never our decoder."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition



_NOT_READY = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.UNKNOWN_TOPIC_OR_PART})


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as confluent-kafka's consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list
    timestamp_ms: int
    timestamp_type: int


def consume_all(bootstrap: str, topic: str, partitions: int, *, expected_count: int,
                timeout_s: float = 60.0,
                security: Mapping[str, str] | None = None) -> dict[int, list[ConsumedRecord]]:
    """Every record of ``topic``, per partition, read from the beginning with CRC checks on.

    Returns once every partition has reached its end and at least ``expected_count`` records were
    read; fails (AssertionError) after ``timeout_s`` with what it did read. ``security``: the
    listener's client properties (``security.protocol``, ``ssl.*``, ``sasl.*``), librdkafka names.
    """
    consumer = Consumer({
        **(security or {}),
        "bootstrap.servers": bootstrap,
        "group.id": f"verify-{topic}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "check.crcs": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    })
    got: dict[int, list[ConsumedRecord]] = {p: [] for p in range(partitions)}
    at_eof: set[int] = set()
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            total = sum(len(v) for v in got.values())
            if len(at_eof) == partitions and total >= expected_count:
                return got
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    continue
                raise AssertionError(f"consumer error on {topic}: {msg.error()}")
            at_eof.discard(msg.partition())
            ts_type, ts = msg.timestamp()
            got[msg.partition()].append(ConsumedRecord(
                partition=msg.partition(), offset=msg.offset(), key=msg.key(), value=msg.value(),
                headers=list(msg.headers() or []), timestamp_ms=ts, timestamp_type=ts_type))
        counts = {p: len(v) for p, v in got.items()}
        raise AssertionError(f"timed out after {timeout_s}s reading {topic}: got {counts}, "
                             f"expected {expected_count} in all, partitions at end: {sorted(at_eof)}")
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 10.0) -> dict[int, int]:
    """Each partition's high watermark, as confluent-kafka reads it from the broker.

    A topic created a moment ago may not have its leader in place on the broker yet
    (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PART): such answers are
    asked again until ``timeout_s``; any other error is raised."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-end-{topic}"})
    deadline = time.monotonic() + timeout_s
    try:
        offsets = {}
        for p in range(partitions):
            while True:
                try:
                    offsets[p] = consumer.get_watermark_offsets(
                        CkTopicPartition(topic, p), timeout=max(0.5, deadline - time.monotonic()))[1]
                    break
                except KafkaException as exc:
                    if exc.args[0].code() not in _NOT_READY or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.1)
        return offsets
    finally:
        consumer.close()


def list_offsets(bootstrap: str, topic: str, partitions: int, *, committed: bool,
                 timeout_s: float = 20.0) -> dict[int, int]:
    """Each partition's end as confluent-kafka's admin client lists it (ListOffsets, latest):
    the last stable offset with ``committed`` (READ_COMMITTED; below the high watermark while a
    transaction is open on the partition), else the high watermark."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(
        {CkTopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        isolation_level=level, request_timeout=timeout_s)
    return {tp.partition: future.result(timeout=timeout_s).offset for tp, future in futures.items()}


def assert_no_open_transaction(bootstrap: str, topic: str, partitions: int, *,
                               timeout_s: float = 20.0) -> None:
    """No transaction is open on any partition of ``topic``: each partition's last stable offset
    is its high watermark, so a ``read_committed`` reader is held back by nothing. Asked again for
    up to ``timeout_s``: the coordinator writes the markers of a transaction just ended
    asynchronously, and the last stable offset moves once they are written."""
    deadline = time.monotonic() + timeout_s
    while True:
        high = list_offsets(bootstrap, topic, partitions, committed=False, timeout_s=timeout_s)
        stable = list_offsets(bootstrap, topic, partitions, committed=True, timeout_s=timeout_s)
        if stable == high:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: transactions left open (last stable {stable}, high "
                                 f"{high}) {timeout_s} s after the write")
        time.sleep(0.2)


@dataclass(frozen=True)
class StoredBatch:
    """One record batch as the broker stored it (Kafka's ``DumpLogSegments``): its first offset,
    record count and size in bytes (the 61-byte header included)."""

    base_offset: int
    count: int
    size: int


_BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: \d+ count: (\d+) .* size: (\d+) ")


def stored_batches(kafka, topic: str, partition: int, *, timeout_s: float = 60.0) -> list[StoredBatch]:
    """The record batches of ``topic``-``partition`` in the embedded broker's log files, as Apache
    Kafka's own ``kafka.tools.DumpLogSegments`` reads them: how the broker stored what a producer
    sent, batch by batch, independent of our decoder. Needs the one-node embedded ``kafka``: with
    ``KAFKA_BOOTSTRAP`` (an external cluster, never in CI) the log files are not here, and the
    calling test is skipped."""
    import subprocess

    import pytest

    if not hasattr(kafka, "nodes"):
        pytest.skip("KAFKA_BOOTSTRAP points at an external cluster: its log files are not here")

    from spark_kafka_sink.embedded.java import find_java
    from spark_kafka_sink.embedded.jars import resolve_kafka_jars

    directory = kafka.nodes[0].data_dir / f"{topic}-{partition}"
    segments = sorted(directory.glob("*.log"))
    assert segments, f"no log segment in {directory}"
    out = subprocess.run(
        [find_java(), "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xmx256m", "-cp",
         resolve_kafka_jars().classpath, "kafka.tools.DumpLogSegments", "--files",
         ",".join(map(str, segments))],
        capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode == 0, f"DumpLogSegments failed: {out.stderr[-2000:]}"
    return [StoredBatch(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            for line in out.stdout.splitlines() if (m := _BATCH_LINE.match(line))]
