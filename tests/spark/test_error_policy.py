"""The per-record error policy (``errors.tolerance``, the dead-letter topic) in both modes, with
real Spark and the embedded Apache Kafka, read back with confluent-kafka.

The main write: 100,000 rows, 1% of them bad, ten kinds in equal numbers, every per-record kind
the README lists. The target topic is compacted (a null key is INVALID_RECORD), refuses
timestamps more than an hour old (INVALID_TIMESTAMP) and records over 20,000 bytes
(MESSAGE_TOO_LARGE from the broker, below the producer's ``max.request.size`` of 100,000: the
preflight, which would refuse that setting, is off).
"""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX

from ..helpers import create_topic
from ..verify import consume_all, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

MODES = ["arrow", "rows"]
ROWS = 100_000
TOPIC_MAX_BYTES = 20_000
MAX_REQUEST = 100_000

# kind -> (error class the dead-letter headers name, stage)
KINDS = [
    ("null topic", "RowError", "convert"),
    ("invalid topic", "RowError", "convert"),
    ("partition out of range", "InvalidPartitionError", "convert"),
    ("negative partition", "InvalidPartitionError", "convert"),
    ("null header key", None, "convert"),        # RowError (rows) / RecordContentError (arrow)
    ("negative timestamp", "RecordContentError", "convert"),
    ("over max.request.size", "MessageTooLargeError", "convert"),
    ("over the topic's max.message.bytes", "MessageTooLargeError", "produce"),
    ("null key on a compacted topic", "InvalidRecordError", "produce"),
    ("timestamp too old for the topic", "InvalidTimestampError", "produce"),
]
BAD_EACH = ROWS // 100 // len(KINDS)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def frame(spark, topic: str):
    """``ROWS`` rows; row ``id`` with ``id % 100 == 0`` is bad, of kind ``(id // 100) % 10``."""
    kind = "CASE WHEN id % 100 = 0 THEN CAST((id DIV 100) % 10 AS INT) ELSE -1 END"
    return spark.range(ROWS).selectExpr("id", f"{kind} AS kind").selectExpr(
        "CASE WHEN kind = 8 THEN NULL ELSE CAST(id AS STRING) END AS key",
        "CASE WHEN kind = 6 THEN repeat('x', 150000) WHEN kind = 7 THEN repeat('y', 30000) "
        "ELSE concat('value-', CAST(id AS STRING)) END AS value",
        f"CASE WHEN kind = 0 THEN NULL WHEN kind = 1 THEN 'bad topic!' ELSE '{topic}' END AS topic",
        "CASE WHEN kind = 2 THEN 99 WHEN kind = 3 THEN -1 ELSE NULL END AS partition",
        "CASE WHEN kind = 4 THEN array(named_struct('key', CAST(NULL AS STRING), 'value', binary('x'))) "
        "ELSE array(named_struct('key', 'row', 'value', binary(CAST(id AS STRING)))) END AS headers",
        "CASE WHEN kind = 5 THEN timestamp'1969-12-31 00:00:00Z' "
        "WHEN kind = 9 THEN current_timestamp() - INTERVAL 2 DAYS ELSE current_timestamp() END "
        "AS timestamp").repartition(4)


def target_topic(bootstrap: str, name: str) -> str:
    create_topic(bootstrap, name, 2, configs={
        "cleanup.policy": "compact", "max.message.bytes": str(TOPIC_MAX_BYTES),
        "message.timestamp.before.max.ms": "3600000"})
    return name


def options(kafka, mode: str, **extra) -> dict:
    return {"kafka.bootstrap.servers": kafka.bootstrap_servers, "mode": mode,
            "kafka.max.request.size": str(MAX_REQUEST), "kafka.max.block.ms": "10000",
            "preflight": "false", "errors.tolerance": "all", **extra}


def headers_of(record) -> dict[str, bytes]:
    return {key: value for key, value in record.headers}


@pytest.mark.parametrize("mode", MODES)
def test_bad_rows_of_every_kind_go_to_the_dead_letter_topic_and_the_rest_is_written(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = target_topic(bootstrap, unique(f"policy-{mode}"))
    dlq = unique(f"policy-dlq-{mode}")
    create_topic(bootstrap, dlq, 1)
    sink = KafkaSink(**options(kafka, mode, **{"errors.deadletterqueue.topic.name": dlq}))
    sink.write(frame(spark, topic))

    bad = ROWS // 100
    written = consume_all(bootstrap, topic, 2, expected_count=ROWS - bad, timeout_s=120)
    keys = sorted(int(r.key) for records in written.values() for r in records)
    assert keys == [i for i in range(ROWS) if i % 100]                 # every good row, once
    letters = consume_all(bootstrap, dlq, 1, expected_count=bad, timeout_s=60)[0]
    assert len(letters) == bad
    by_kind: dict[int, list] = {}
    for record in letters:
        headers = headers_of(record)
        row = headers.get("row")
        assert headers[HEADER_PREFIX + "spark.partition.id"] is not None
        assert headers[HEADER_PREFIX + "spark.attempt"] == b"0"
        kind = (int(row) // 100) % 10 if row is not None else 4      # kind 4 lost its only header
        by_kind.setdefault(kind, []).append(headers)
    assert {kind: len(found) for kind, found in by_kind.items()} == {k: BAD_EACH for k in range(10)}
    for kind, (what, cls, stage) in enumerate(KINDS):
        for headers in by_kind[kind]:
            assert headers[HEADER_PREFIX + "stage"] == stage.encode(), what
            name = headers[HEADER_PREFIX + "exception.class.name"].decode()
            if cls is not None:
                assert name.endswith("." + cls), (what, name)
            assert headers[HEADER_PREFIX + "exception.message"], what
    for headers in by_kind[7] + by_kind[8] + by_kind[9]:                # refused by the broker
        assert headers[HEADER_PREFIX + "topic"] == topic.encode()
        assert int(headers[HEADER_PREFIX + "partition"]) in (0, 1)
    oversized = [r for r in letters if HEADER_PREFIX + "value.dropped" in headers_of(r)]
    assert len(oversized) == BAD_EACH and all(r.value == b"" and r.key is None for r in oversized)
    small = [r for r in letters if r.value and r.value.startswith(b"value-")]
    assert small and all(r.key is None or r.key.isdigit() for r in small)

    metrics = sink.last_metrics
    assert metrics["record-send-total"] == ROWS - bad
    assert metrics["record-error-total"] == bad
    assert metrics["dlq-record-send-total"] == bad
    assert metrics["record-skip-total"] == 0
    by_class = {name.split(".")[1]: count for name, count in metrics.items()
                if name.startswith("error.")}
    assert sum(by_class.values()) == bad
    assert by_class["InvalidRecordError"] == by_class["InvalidTimestampError"] == BAD_EACH
    assert by_class["MessageTooLargeError"] == 2 * BAD_EACH
    assert by_class["InvalidPartitionError"] == 2 * BAD_EACH


@pytest.mark.parametrize("mode", MODES)
def test_without_a_dead_letter_topic_bad_rows_are_skipped_and_counted(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = target_topic(bootstrap, unique(f"skip-{mode}"))
    sink = KafkaSink(**options(kafka, mode))
    sink.write(frame(spark, topic))
    bad = ROWS // 100
    written = consume_all(bootstrap, topic, 2, expected_count=ROWS - bad, timeout_s=120)
    assert sum(len(records) for records in written.values()) == ROWS - bad
    metrics = sink.last_metrics
    assert metrics["record-skip-total"] == metrics["record-error-total"] == bad
    assert metrics["dlq-record-send-total"] == 0 and metrics["record-send-total"] == ROWS - bad


@pytest.mark.parametrize("mode", MODES)
def test_the_default_policy_still_fails_the_task_naming_the_first_bad_row(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = target_topic(bootstrap, unique(f"strict-{mode}"))
    df = spark.createDataFrame([("a", "1"), ("b", None), ("c", "3")], "value string, key string")
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode, "topic": topic})
    with pytest.raises(Exception, match="InvalidRecordError") as caught:
        sink.write(df.coalesce(1))
    assert "Compacted topic cannot accept message without key" in str(caught.value)
    assert sum(end_offsets(bootstrap, topic, 2).values()) == 2        # its batch-mates went


@pytest.mark.parametrize("mode", MODES)
def test_a_missing_dead_letter_topic_fails_the_task(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = unique(f"nodlq-{mode}")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame([("a", None), ("b", 5)], "value string, partition int")
    sink = KafkaSink(**{**options(kafka, mode, **{"errors.deadletterqueue.topic.name": unique("gone")}),
                        "kafka.max.block.ms": "3000",
                        "topic": topic})
    with pytest.raises(Exception, match="MetadataTimeoutError|not present in metadata"):
        sink.write(df.coalesce(1))
