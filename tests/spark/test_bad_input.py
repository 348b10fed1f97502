"""The bad-input matrix for the Spark sink, in both modes (``arrow``: mapInArrow + send_arrow,
the default; ``rows``: foreachPartition + send), batch ``write`` on local[2] against the embedded
Apache Kafka, read back with confluent-kafka (issue 6; docs/reliability.md, "Bad input").

A bad schema fails on the driver before any task runs; a bad row fails its task with an error
naming the row's position in its partition; either way the write raises and what reached Kafka
is checked, so nothing is dropped silently. Already covered in ``test_sink.py``: a missing value
column, an int value, ``array<string>`` headers, a string partition, no topic anywhere, and a
null ``topic`` in the column.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import ConfigError, SchemaError

from ..helpers import create_topic
from ..verify import consume_all, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

MODES = ["arrow", "rows"]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def sink(kafka, mode: str, **options) -> KafkaSink:
    return KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "mode": mode, **options})


@pytest.mark.parametrize("mode", MODES)
def test_null_values_null_keys_and_strings_are_written_as_documented(spark, kafka, mode):
    """A null value is a tombstone; a null key is no key; strings are their UTF-8 bytes; a null
    partition lets the partitioner choose; a null headers array is no headers."""
    bootstrap = kafka.bootstrap_servers
    topic = unique(f"odd-good-{mode}")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame(
        [("k-é", "v-é", 0, [("h", None)]), (None, "no key", None, None), ("tomb", None, 0, []),
         (None, None, None, None)],
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    written = sink(kafka, mode, topic=topic)
    written.write(df.coalesce(1))
    records = consume_all(bootstrap, topic, 1, expected_count=4)[0]
    assert [(r.key, r.value, r.headers) for r in records] == [
        ("k-é".encode(), "v-é".encode(), [("h", None)]), (None, b"no key", []), (b"tomb", None, []),
        (None, None, [])]
    assert written.last_metrics["record-send-total"] == 4


# case -> (columns, the problem the SchemaError must state)
BAD_SCHEMAS = {
    "value double": ("cast(id as double) as value", "value: column 'value' has type double; expected string or binary"),
    "value struct": ("named_struct('a', id) as value", "value: column 'value' has type struct<a:bigint>"),
    "value array": ("array(id) as value", "value: column 'value' has type array<bigint>"),
    "value map": ("map('a', id) as value", "value: column 'value' has type map<string,bigint>"),
    "Value in another case": ("'v' as Value", "no column named exactly 'value', but 'Value' differs only in case"),
    "key int": ("'v' as value, cast(id as int) as key", "key: column 'key' has type int; expected string or binary"),
    "key struct": ("'v' as value, named_struct('id', id) as key", "key: column 'key' has type struct<id:bigint>"),
    "partition bigint": ("'v' as value, id as partition", "partition: column 'partition' has type bigint; expected int"),
    "timestamp string": ("'v' as value, 'now' as timestamp", "timestamp: column 'timestamp' has type string"),
    "timestamp_ntz": ("'v' as value, timestamp_ntz'2024-01-01 00:00:00' as timestamp",
                      "timestamp_ntz names no instant"),
    "headers with an int key": ("'v' as value, array(named_struct('key', 1, 'value', binary('x'))) as headers",
                                "headers: column 'headers' has type array<struct<key:int,value:binary>>"),
    "headers as a map": ("'v' as value, map('k', binary('x')) as headers",
                         "headers: column 'headers' has type map<string,binary>"),
    "topic column int": ("'v' as value, cast(id as int) as topic", "topic: column 'topic' has type int; expected string"),
    "two bad columns": ("cast(id as double) as value, cast(id as int) as key", "(2 problems)"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(BAD_SCHEMAS))
def test_a_bad_schema_fails_on_the_driver_naming_the_column(spark, kafka, topic_for_schemas, case, mode):
    columns, problem = BAD_SCHEMAS[case]
    df = spark.range(5).selectExpr(*_split_top_level(columns))
    options = {} if case == "topic column int" else {"topic": topic_for_schemas}
    started = time.monotonic()
    with pytest.raises(SchemaError, match="cannot be written to Kafka") as info:
        sink(kafka, mode, **options).write(df)
    assert problem in str(info.value)
    assert time.monotonic() - started < 10
    assert end_offsets(kafka.bootstrap_servers, topic_for_schemas, 1) == {0: 0}


def _split_top_level(columns: str) -> list[str]:
    """``"a, f(b, c) as x"`` -> ``["a", "f(b, c) as x"]``: split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in columns:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


@pytest.fixture(scope="module")
def topic_for_schemas(kafka):
    name = unique("bad-schema")
    create_topic(kafka.bootstrap_servers, name, 1)
    return name


@pytest.mark.parametrize("name, problem", [
    ("", "must not be empty"), ("  ", "must not be empty"), (".", "cannot be named '.'"),
    ("..", r"cannot be named '\.\.'"), ("bad topic!", "characters other than ASCII letters"),
    ("t" * 250, "at most 249 characters, got 250"), (5, "must be a string, got int")])
def test_an_invalid_topic_option_is_refused_when_the_sink_is_built(kafka, name, problem):
    with pytest.raises(ConfigError, match=f"option 'topic'.*{problem}"):
        sink(kafka, "arrow", topic=name)


# each name once, the two modes sharing them: both check names with the same function, which
# tests/unit/producer/test_topics.py runs over every rule
@pytest.mark.parametrize("mode, bad", [("arrow", "bad topic!"), ("arrow", "t" * 250), ("rows", ""), ("rows", "..")],
                         ids=["arrow-blank", "arrow-250-chars", "rows-empty", "rows-dotdot"])
def test_an_invalid_topic_in_the_column_fails_the_task_naming_the_row(spark, kafka, mode, bad):
    """Rows before it are written first (as with a null topic, in ``test_sink.py``)."""
    bootstrap = kafka.bootstrap_servers
    topic = unique("topic-column")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame([("a", topic), ("b", topic), ("c", bad), ("d", topic)], "value string, topic string")
    with pytest.raises(Exception, match="row 2 of this partition has an invalid 'topic'"):
        sink(kafka, mode).write(df.coalesce(1))
    assert [r.value for r in consume_all(bootstrap, topic, 1, expected_count=2)[0]] == [b"a", b"b"]


# mode -> (what the task fails with, the rows written before it). In arrow mode a bad row fails
# its whole Arrow batch before any of it is queued (send_arrow checks everything first); in rows
# mode the rows before it are sent and flushed.
@pytest.mark.parametrize("mode, written", [("arrow", 0), ("rows", 2)])
def test_a_partition_out_of_range_fails_the_task_naming_the_row(spark, kafka, mode, written):
    bootstrap = kafka.bootstrap_servers
    topic = unique("partition-range")
    create_topic(bootstrap, topic, 2)
    df = spark.createDataFrame([("a", 0), ("b", 1), ("c", 2), ("d", 0)], "value string, partition int")
    with pytest.raises(Exception, match=rf"row 2 of this partition\): InvalidPartitionError: .*invalid partition 2 "
                                        rf"for topic '{topic}': it has 2 partition"):
        sink(kafka, mode, topic=topic).write(df.coalesce(1))
    assert sum(end_offsets(bootstrap, topic, 2).values()) == written


@pytest.mark.parametrize("mode, written", [("arrow", 0), ("rows", 1)])
def test_a_row_over_max_request_size_fails_the_task_naming_the_row(spark, kafka, mode, written):
    bootstrap = kafka.bootstrap_servers
    topic = unique("request-size")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame([(b"a",), (b"x" * 20_000,), (b"c",)], "value binary")
    with pytest.raises(Exception, match=r"row 1 of this partition\): MessageTooLargeError: .*larger than "
                                        r"10000, the value of the max.request.size configuration"):
        sink(kafka, mode, topic=topic, **{"kafka.max.request.size": "10000"}).write(df.coalesce(1))
    assert end_offsets(bootstrap, topic, 1) == {0: written}


@pytest.mark.parametrize("mode, written", [("arrow", 0), ("rows", 1)])
def test_a_header_with_a_null_key_fails_the_task_naming_the_row(spark, kafka, mode, written):
    bootstrap = kafka.bootstrap_servers
    topic = unique("null-header-key")
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame([("a", [("h", b"1")]), ("b", [("h", b"2"), (None, b"3")]), ("c", [])],
                               "value string, headers array<struct<key:string,value:binary>>")
    with pytest.raises(Exception, match="row 1 of this partition.*header with a null key"):
        sink(kafka, mode, topic=topic).write(df.coalesce(1))
    assert end_offsets(bootstrap, topic, 1) == {0: written}


@pytest.mark.parametrize("mode", MODES)
def test_a_row_over_the_topics_max_message_bytes_fails_the_task(spark, kafka, mode):
    """The broker refuses the batch holding the 3,000-byte row (the topic allows 2,048): the
    task fails with MESSAGE_TOO_LARGE naming topic and partition, and the write raises. The
    batch holding it is split, so only that row fails; the rows written (how many depends on
    when the task stops sending) are intact, each once, and never the refused row."""
    bootstrap = kafka.bootstrap_servers
    topic = unique("max-message-bytes")
    create_topic(bootstrap, topic, 1, configs={"max.message.bytes": "2048"})
    values = [f"small-{i}".encode() for i in range(3)] + [b"x" * 3_000] + [f"small-{i}".encode() for i in range(3, 6)]
    df = spark.createDataFrame([(v,) for v in values], "value binary")
    with pytest.raises(Exception, match=rf"records? failed to be written to Kafka; the first error \(topic "
                                        rf"'{topic}', partition 0.*MESSAGE_TOO_LARGE"):
        # the preflight would refuse kafka.max.request.size above the topic's limit on the driver
        sink(kafka, mode, topic=topic, preflight="false").write(df.coalesce(1))
    written = end_offsets(bootstrap, topic, 1)[0]
    records = consume_all(bootstrap, topic, 1, expected_count=written)[0]
    assert len({r.value for r in records}) == written and all(r.value.startswith(b"small-") for r in records)


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_dataframe_writes_nothing_without_error(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = unique("empty")
    create_topic(bootstrap, topic, 1)
    written = sink(kafka, mode, topic=topic)
    for df in (spark.range(0, numPartitions=2).selectExpr("cast(id as string) as value"),
               spark.createDataFrame([], "key string, value binary")):
        written.last_metrics = None
        written.write(df)
        assert written.last_metrics["record-send-total"] == 0
        assert written.last_metrics["record-error-total"] == 0
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


BIG_PARTITION = {"arrow": 2_000_000, "rows": 500_000}
"""Rows in the one partition of the backpressure test, per mode: 20 MB and 5 MB of record batches,
20 and 5 times the 1 MB buffer. Rows mode sends row by row, at a quarter of arrow mode's speed."""


@pytest.mark.heavy
@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", MODES)
def test_a_big_partition_through_a_1_mb_buffer(spark, kafka, mode):
    """Backpressure: a partition of ``BIG_PARTITION`` rows with ``buffer.memory`` of 1 MB completes
    without error, every row is written, and the Python worker's peak RSS stays bounded (read from
    ``/proc`` by ``bench.workers``). Measured on 2 busy cores: arrow (2M rows) 4-24 s and 155 MB,
    rows (2M rows) 37-63 s and 97 MB."""
    from bench.workers import WorkerPeaks

    bootstrap = kafka.bootstrap_servers
    topic = unique(f"big-partition-{mode}")
    create_topic(bootstrap, topic, 2)
    rows = BIG_PARTITION[mode]
    df = spark.range(0, rows, numPartitions=1).selectExpr("cast(id % 10 as string) as value")
    written = sink(kafka, mode, topic=topic, **{"kafka.buffer.memory": str(1 << 20), "kafka.max.block.ms": "60000"})
    peaks = WorkerPeaks(os.getpid())
    started = time.monotonic()
    try:
        written.write(df)
    finally:
        peak_mb = peaks.stop()
    elapsed = time.monotonic() - started
    metrics = written.last_metrics
    assert metrics["record-send-total"] == rows and metrics["record-error-total"] == 0
    assert sum(end_offsets(bootstrap, topic, 2).values()) == rows
    assert peak_mb is not None and peak_mb < 300, f"worker peak RSS {peak_mb} MB"
    print(f"{mode}: {rows:,} rows in {elapsed:.1f} s, worker peak RSS {peak_mb:.0f} MB")
