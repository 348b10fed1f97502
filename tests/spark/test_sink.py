"""KafkaSink on a local[2] SparkSession against the embedded Apache Kafka, read back with
confluent-kafka: batch writes, a streaming foreachBatch query, and schemas refused on the driver,
each in both modes (``arrow``: mapInArrow + send_arrow, the default; ``rows``: foreachPartition)."""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import random
import uuid
from collections import Counter

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import SchemaError

from ..helpers import create_topic
from ..verify import consume_all, end_offsets
from .streaming import run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.broker]

UTC = datetime.timezone.utc
PARTITIONS = 3
MODES = ["arrow", "rows"]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mode", MODES)
def test_batch_write_with_topic_and_partition_columns(spark, kafka, mode):
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField,
                                   StructType, TimestampType)

    bootstrap = kafka.bootstrap_servers
    topics = [unique("batch-a"), unique("batch-b")]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS)
    header_type = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("headers", header_type), StructField("timestamp", TimestampType()),
        StructField("ignored", StringType())])
    base = datetime.datetime(2023, 3, 26, 0, 30, tzinfo=UTC)
    expected = {}
    data = []
    for i in range(600):
        key = f"key-{i}".encode()
        value = bytes([i % 256, 0, 255]) + f"value-{i}-é".encode()
        headers = [("h", str(i).encode()), ("empty", None)] if i % 2 else []
        ts = base + datetime.timedelta(milliseconds=i * 3_600_001)
        topic, partition = topics[i % 2], i % PARTITIONS
        data.append((key, value, topic, partition, [(k, v) for k, v in headers], ts, "x"))
        expected[(topic, partition, key)] = (value, headers, int(ts.timestamp() * 1000))
    df = spark.createDataFrame(data, schema).repartition(4)

    sink = KafkaSink({"kafka.bootstrap.servers": bootstrap}, **{"kafka.linger.ms": "5"}, mode=mode)
    shipped = pickle.loads(pickle.dumps(sink))  # a sink travels as its options alone
    assert shipped.config == sink.config
    shipped.write(df)

    got = {}
    for topic in topics:
        records = consume_all(bootstrap, topic, PARTITIONS, expected_count=300)
        assert sum(len(part) for part in records.values()) == 300
        for part in records.values():
            for r in part:
                assert (topic, r.partition, r.key) not in got, "a row arrived twice"
                got[(topic, r.partition, r.key)] = (r.value, r.headers, r.timestamp_ms)
    assert got == expected


def test_partition_writer_in_users_foreach_partition(spark, kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("own-foreach")
    create_topic(bootstrap, topic, 1)
    df = spark.range(100).selectExpr("cast(id as string) as key", "concat('v', id) as value")
    writer = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": topic}).partition_writer(df.schema)
    df.foreachPartition(writer)
    stats = df.rdd.mapPartitions(lambda rows: [writer(rows)]).collect()  # the same rows again
    assert sum(s.records_sent for s in stats) == 100 and sum(s.records_failed for s in stats) == 0
    assert sum(s.bytes_sent for s in stats) > 100 * 4
    records = consume_all(bootstrap, topic, 1, expected_count=200)[0]
    assert sorted((r.key, r.value) for r in records) == sorted(
        (str(i).encode(), f"v{i}".encode()) for i in range(100) for _ in range(2))


@pytest.mark.parametrize("mode", MODES)
def test_streaming_foreach_batch_exactly_once(spark, kafka, tmp_path, mode):
    """The acceptance stream: 50,000 rows in 3 micro-batches (availableNow, one file per trigger)
    with keys, binary values, headers and timestamps; every row arrives once, byte-identical, and
    each micro-batch's metrics equal its row count."""
    from pyspark.sql import functions as F

    bootstrap = kafka.bootstrap_servers
    topic = unique("stream")
    create_topic(bootstrap, topic, PARTITIONS)
    source = tmp_path / "in"
    source.mkdir()
    total, files = 50_000, 3
    bounds = [total * f // files for f in range(files + 1)]
    base_ms = 1_700_000_000_000
    rng = random.Random(4)
    values = [rng.randbytes(rng.choice((0, 1, 17, 100, 300))) for _ in range(total)]
    for f in range(files):
        with open(source / f"part-{f}.json", "w") as out:
            for i in range(bounds[f], bounds[f + 1]):
                out.write(json.dumps({"id": i, "ts": base_ms + i * 7, "trace": f"t-{i % 97}",
                                      "payload": base64.b64encode(values[i]).decode()}) + "\n")
    stream = (spark.readStream.schema("id long, ts long, trace string, payload string")
              .option("maxFilesPerTrigger", 1).json(str(source))
              .select(F.concat(F.lit("k-é"), F.col("id").cast("string")).alias("key"),
                      F.unbase64(F.col("payload")).alias("value"),
                      F.array(F.struct(F.lit("trace").alias("key"),
                                       F.col("trace").cast("binary").alias("value")),
                              F.struct(F.lit("none").alias("key"),
                                       F.lit(None).cast("binary").alias("value"))).alias("headers"),
                      F.expr("timestamp_millis(ts)").alias("timestamp")))
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": mode})
    batches = run_available_now(stream, sink, str(tmp_path / "checkpoint"))
    sizes = [bounds[f + 1] - bounds[f] for f in range(files)]
    assert [p["numInputRows"] for p in batches][1:] == sizes[1:]
    if mode == "arrow":
        # Micro-batch 0 is first collected up to driver.write.max.rows + 1 rows (5,001), then,
        # being bigger, written by a job: Spark counts both reads. After it the sink goes to the
        # job at once.
        assert sizes[0] + 5_001 <= batches[0]["numInputRows"] <= sizes[0] * 2
    else:
        assert batches[0]["numInputRows"] == sizes[0]

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=total)
    seen = Counter()
    for part in records.values():
        for r in part:
            i = int(r.key.decode()[3:])
            seen[i] += 1
            assert r.key == f"k-é{i}".encode() and r.value == values[i]
            assert r.headers == [("trace", f"t-{i % 97}".encode()), ("none", None)]
            assert r.timestamp_ms == base_ms + i * 7
    assert len(seen) == total and set(seen.values()) == {1}

    history = sink.metrics_history
    assert [batch_id for batch_id, _ in history] == [p["batchId"] for p in batches]
    for (_, metrics), size in zip(history, sizes):
        assert metrics["record-send-total"] == size
        assert metrics[f"topic.{topic}.record-send-total"] == size
        assert metrics["record-error-total"] == 0 and metrics["task-retried-total"] == 0
        assert metrics["byte-total"] > 0 and metrics["request-total"] > 0
    assert sink.last_metrics == history[-1][1]


BAD_SCHEMAS = {
    "missing value": ("cast(id as string) as key", "value: required column not found"),
    "value of int type": ("cast(id as int) as value", "value: column 'value' has type int; expected string or binary"),
    "headers of the wrong type": ("'v' as value, array('a') as headers",
                                  "headers: column 'headers' has type array<string>"),
    "partition as string": ("'v' as value, '1' as partition",
                            "partition: column 'partition' has type string; expected int"),
    "no topic at all": ("'v' as value", "topic: no 'topic' column and no 'topic' option"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(BAD_SCHEMAS))
def test_bad_schema_fails_on_the_driver_and_sends_nothing(spark, kafka, case, mode):
    bootstrap = kafka.bootstrap_servers
    topic = unique("bad")
    create_topic(bootstrap, topic, 1)
    columns, message = BAD_SCHEMAS[case]
    df = spark.range(10).selectExpr(*[c.strip() for c in columns.split(", ")])
    options = {"kafka.bootstrap.servers": bootstrap, "mode": mode}
    if case != "no topic at all":
        options["topic"] = topic
    with pytest.raises(SchemaError, match="cannot be written to Kafka") as info:
        KafkaSink(**options).write(df)
    assert message in str(info.value)
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


@pytest.mark.parametrize("mode", MODES)
def test_null_topic_fails_the_task_with_the_row_position(spark, kafka, mode):
    topic = unique("null-topic")
    create_topic(kafka.bootstrap_servers, topic, 1)
    df = spark.range(3).selectExpr("cast(id as string) as value",
                                   f"case when id = 2 then null else '{topic}' end as topic")
    with pytest.raises(Exception, match="row 2 of this partition has a null 'topic' and no 'topic' option"):
        KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "mode": mode}).write(df.coalesce(1))
    assert end_offsets(kafka.bootstrap_servers, topic, 1) == {0: 2}  # rows before it were flushed


@pytest.mark.parametrize("mode", MODES)
def test_first_of_a_repeated_column_and_header_fields_in_another_case(spark, kafka, mode):
    """The first ``value`` column is written, as Spark's sink does; header struct fields named
    ``KEY``/``Value`` are accepted (matched without case) and arrive as Kafka headers."""
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    bootstrap = kafka.bootstrap_servers
    topic = unique(f"columns-{mode}")
    create_topic(bootstrap, topic, 1)
    header = StructType([StructField("KEY", StringType()), StructField("Value", BinaryType())])
    schema = StructType([StructField("value", StringType()), StructField("value", BinaryType()),
                         StructField("headers", ArrayType(header)), StructField("other", StringType())])
    data = [(f"first-{i}", b"second", [("h", str(i).encode())], "x") for i in range(5)]
    KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": mode}).write(
        spark.createDataFrame(data, schema).coalesce(1))
    records = consume_all(bootstrap, topic, 1, expected_count=5)[0]
    assert [(r.value, r.headers) for r in records] == [
        (f"first-{i}".encode(), [("h", str(i).encode())]) for i in range(5)]
