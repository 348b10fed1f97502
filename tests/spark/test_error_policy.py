"""The per-record error policy (``errors.tolerance``, the dead-letter topic) in both modes, with
real Spark and the embedded Apache Kafka, read back with confluent-kafka.

The main write: 20,000 rows, 1% of them bad, ten kinds in equal numbers, every per-record kind
docs/bad-records.md lists. The target topic is compacted (a null key is INVALID_RECORD), refuses
timestamps more than an hour old (INVALID_TIMESTAMP) and records over 20,000 bytes
(MESSAGE_TOO_LARGE from the broker, below the producer's ``max.request.size`` of 100,000: the
preflight, which would refuse that setting, is off).
"""

from __future__ import annotations

import time
import uuid

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.embedded.ports import free_ports
from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX
from spark_kafka_sink.spark.preflight import PreflightError

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

MODES = ["arrow", "rows"]
# 20,000 rows: 200 bad ones, 20 of each kind (one of each in every 1,000 rows), and each record
# the broker refuses in a batch of good rows (99 good ones for every bad one). More rows would
# only repeat that pattern.
ROWS = 20_000
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
    assert len(oversized) == BAD_EACH and all(r.value == b"" and r.key.isdigit() for r in oversized)
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
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode, "topic": topic,
                        "kafka.max.request.size": str(TOPIC_MAX_BYTES)})     # passes the preflight
    with pytest.raises(Exception, match="InvalidRecordError") as caught:
        sink.write(df.coalesce(1))
    assert "Compacted topic cannot accept message without key" in str(caught.value)
    assert sum(end_offsets(bootstrap, topic, 2).values()) == 2        # its batch-mates went


@pytest.mark.parametrize("mode", MODES)
def test_an_unwritable_dead_letter_topic_fails_the_task(spark, kafka, mode):
    """The dead-letter topic refuses the dead letter (it is compacted; the bad row has no key):
    the task fails saying so, rather than counting the row as handled."""
    bootstrap = kafka.bootstrap_servers
    topic, dlq = unique(f"unwritable-{mode}"), unique(f"unwritable-dlq-{mode}")
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, dlq, 1, configs={"cleanup.policy": "compact"})
    df = spark.createDataFrame([("a", "k", None), ("b", None, 9)],
                               "value string, key string, partition int")
    sink = KafkaSink(**{**options(kafka, mode, **{"errors.deadletterqueue.topic.name": dlq}),
                        "topic": topic})
    with pytest.raises(Exception, match="DeadLetterError") as raised:
        sink.write(df.coalesce(1))
    assert "could not be written to the dead-letter topic" in str(raised.value)
    assert "Compacted topic cannot accept message without key" in str(raised.value)
    assert end_offsets(bootstrap, dlq, 1) == {0: 0} and sink.last_metrics is None


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


@pytest.mark.parametrize("mode", MODES)
def test_dead_letters_fit_a_dead_letter_topic_with_a_small_max_message_bytes(spark, kafka, mode):
    """The preflight passes the dead-letter topic's max.message.bytes (3,000) to the tasks: a bad
    row of 2,500 bytes with 4 KB of its own headers becomes a dead letter of its context headers
    (it used to be sent whole, refused, sent again with its headers, refused, and failed the
    task), and a 2 MB invalid topic is cut in its header (it used to make the dead letter itself
    too large for max.request.size)."""
    bootstrap = kafka.bootstrap_servers
    topic, dlq = unique(f"small-dlq-target-{mode}"), unique(f"small-dlq-{mode}")
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, dlq, 1, configs={"max.message.bytes": "3000"})
    own = [("h%d" % i, b"y" * 400) for i in range(10)]
    rows = [("good", "k0", topic, None, [("h", b"1")]),
            ("v" * 2500, "k1", topic, -1, own),
            ("small", "k2", "x" * 2_000_000, None, [("h", b"2")])]
    df = spark.createDataFrame(rows, "value string, key string, topic string, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode, "errors.tolerance": "all",
                        "errors.deadletterqueue.topic.name": dlq})
    sink.write(df.coalesce(1))
    assert [r.value for r in consume_all(bootstrap, topic, 1, expected_count=1)[0]] == [b"good"]
    letters = {r.key: r for r in consume_all(bootstrap, dlq, 1, expected_count=2)[0]}
    cut = letters[None]
    headers = headers_of(cut)
    assert cut.value == b"" and not any(name.startswith("h") for name in headers)
    assert headers[HEADER_PREFIX + "value.dropped"].startswith(b"2500 bytes: ")
    assert headers[HEADER_PREFIX + "key.dropped"].startswith(b"2 bytes: ")
    assert headers[HEADER_PREFIX + "headers.dropped"].startswith(b"10 header(s), 4020 bytes: ")
    assert headers[HEADER_PREFIX + "exception.class.name"].endswith(b"InvalidPartitionError")
    huge = letters[b"k2"]
    assert huge.value == b"small" and headers_of(huge)["h"] == b"2"
    named = headers_of(huge)[HEADER_PREFIX + "topic"]
    assert len(named) == 1024 and named.endswith(b"...[truncated, 2000000 bytes]")
    assert sink.last_metrics["dlq-record-send-total"] == 2


# --- the driver's preflight ---------------------------------------------------------------------

def _preflight_fails(spark, options: dict, match: str) -> str:
    """The write fails on the driver within seconds with ``match``, and no task ran."""
    df = spark.range(5).selectExpr("cast(id as string) as value")
    sink = KafkaSink(**options)
    started = time.monotonic()
    with pytest.raises(PreflightError, match=match) as raised:
        sink.write(df)
    assert time.monotonic() - started < 8
    assert sink.last_metrics is None
    return str(raised.value)


def test_preflight_a_missing_topic_fails_on_the_driver_naming_the_option(spark, kafka):
    bootstrap = kafka.bootstrap_servers
    missing = unique("missing")
    _preflight_fails(spark, {"kafka.bootstrap.servers": bootstrap, "topic": missing},
                     f"option 'topic': topic '{missing}' does not exist")
    topic = unique("present")
    create_topic(bootstrap, topic, 1)
    dlq = unique("missing-dlq")
    _preflight_fails(spark, {"kafka.bootstrap.servers": bootstrap, "topic": topic,
                             "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq},
                     f"option 'errors.deadletterqueue.topic.name': topic '{dlq}' does not exist")
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


def test_preflight_creates_the_dead_letter_topic_when_given_a_replication_factor(spark, kafka):
    bootstrap = kafka.bootstrap_servers
    topic, dlq = unique("present"), unique("made-dlq")
    create_topic(bootstrap, topic, 1)
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": topic, "errors.tolerance": "all",
                        "errors.deadletterqueue.topic.name": dlq,
                        "errors.deadletterqueue.topic.replication.factor": "1"})
    sink.write(spark.createDataFrame([("a", 0), ("b", 9)], "value string, partition int").coalesce(1))
    assert end_offsets(bootstrap, topic, 1) == {0: 1} and end_offsets(bootstrap, dlq, 1) == {0: 1}


def test_preflight_max_request_size_above_the_topics_max_message_bytes(spark, kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("small-messages")
    create_topic(bootstrap, topic, 1, configs={"max.message.bytes": "50000"})
    _preflight_fails(spark, {"kafka.bootstrap.servers": bootstrap, "topic": topic},
                     f"kafka.max.request.size=1048576 exceeds the max.message.bytes=50000 of topic "
                     f"'{topic}' \\(option 'topic'\\)")


def test_preflight_an_unreachable_cluster_fails_within_seconds(spark):
    port = free_ports(1)[0]
    _preflight_fails(spark, {"kafka.bootstrap.servers": f"127.0.0.1:{port}", "topic": "t"},
                     f"cannot reach the cluster at kafka.bootstrap.servers='127.0.0.1:{port}'")


def test_preflight_a_wrong_password_fails_on_the_driver_without_showing_it(spark, secured_kafka):
    protocol, mechanism, wrong = "SASL_SSL", "SCRAM-SHA-512", "Wrong-Password-4471"
    client = {"bootstrap.servers": secured_kafka.bootstrap_for(protocol),
              **secured_kafka.client_properties(protocol, mechanism=mechanism), "sasl.password": wrong}
    options = {f"kafka.{name}": value for name, value in client.items()}
    message = _preflight_fails(spark, {**options, "topic": "t"}, "refused the client: .*Authentication")
    assert wrong not in message


def test_preflight_false_skips_the_checks(spark, kafka):
    missing = unique("missing")
    sink = KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": missing,
                        "preflight": "false", "kafka.max.block.ms": "2000"})
    with pytest.raises(Exception, match="MetadataTimeoutError|not present in metadata") as raised:
        sink.write(spark.range(1).selectExpr("cast(id as string) as value"))
    assert not isinstance(raised.value, PreflightError)


@pytest.mark.parametrize("mode", MODES)
def test_exactly_once_dead_letters_commit_in_the_tasks_transactions(spark, kafka, mode):
    """With exactly-once, the dead letters (found before sending, and refused by the broker: a
    null key on a compacted topic) are written in the task's transaction and committed with the
    good rows: read_committed sees both topics whole, no transaction is left open."""
    bootstrap = kafka.bootstrap_servers
    topic = unique(f"eos-policy-{mode}")
    create_topic(bootstrap, topic, 2, configs={"cleanup.policy": "compact"})
    dlq = unique(f"eos-policy-dlq-{mode}")
    create_topic(bootstrap, dlq, 1)
    rows = 2_000
    df = spark.range(0, rows, 1, 2).selectExpr(
        "CASE WHEN id % 50 = 1 THEN NULL ELSE CAST(id AS STRING) END AS key",
        "CAST(id AS STRING) AS value",
        "CASE WHEN id % 50 = 2 THEN 7 ELSE NULL END AS partition")
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode, "topic": topic,
                        "delivery.guarantee": "exactly-once",
                        "transactional.id.prefix": unique(f"eos-policy-{mode}"),
                        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq})
    try:
        sink.write(df)
    finally:
        sink.close()
    bad = 2 * rows // 50
    written = consume_all(bootstrap, topic, 2, expected_count=rows - bad)      # read_committed
    assert sorted(int(r.value) for p in written.values() for r in p) == [
        i for i in range(rows) if i % 50 not in (1, 2)]
    letters = consume_all(bootstrap, dlq, 1, expected_count=bad)[0]
    assert sorted(int(r.value) for r in letters) == [i for i in range(rows) if i % 50 in (1, 2)]
    stages = {headers_of(r)[HEADER_PREFIX + "stage"] for r in letters}
    assert stages == {b"convert", b"produce"}
    assert_no_open_transaction(bootstrap, topic, 2)
    assert_no_open_transaction(bootstrap, dlq, 1)
    assert sink.last_metrics["dlq-record-send-total"] == bad
    assert sink.last_metrics["transaction-commit-total"] == 2
