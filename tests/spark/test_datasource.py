"""The sink as a Python Data Source (``format("spark_kafka_sink")``) on a local[2] SparkSession
against the embedded Apache Kafka, read back with confluent-kafka: a batch save, an availableNow
stream, and options or schemas refused on the driver before anything is sent.

``commit`` runs in a driver-side Python worker, not in this process, so its log line is tested
in ``tests/unit/spark/test_datasource.py`` with fake commit messages."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_kafka_sink.spark.commit_log import CommitLog
from spark_kafka_sink.spark.datasource import NAME, register
from spark_kafka_sink.spark.options import SinkConfig

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

UTC = datetime.timezone.utc
PARTITIONS = 2


def unique(name: str) -> str:
    return f"ds-{name}-{uuid.uuid4().hex[:8]}"


def _json_files(source: Path, total: int, files: int, row: Callable[[int], dict]) -> Path:
    """``files`` JSON files in ``source`` holding ``row(i)`` for ids 0..total-1 in order."""
    source.mkdir()
    for f in range(files):
        with open(source / f"part-{f}.json", "w") as out:
            for i in range(f * total // files, (f + 1) * total // files):
                out.write(json.dumps(row(i)) + "\n")
    return source


@pytest.fixture(scope="module")
def registered(spark):
    assert register(spark) == NAME
    return spark


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_batch_save_with_keys_headers_and_timestamps(registered, kafka, mode):
    from pyspark.sql.types import (ArrayType, BinaryType, StringType, StructField, StructType,
                                   TimestampType)

    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique("batch")
    create_topic(bootstrap, topic, PARTITIONS)
    header_type = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("headers", header_type), StructField("timestamp", TimestampType())])
    base = datetime.datetime(2024, 2, 29, 23, 59, tzinfo=UTC)
    expected = {}
    data = []
    for i in range(300):
        key = f"k-é{i}"
        value = bytes([i % 256, 0]) + f"v{i}".encode()
        headers = [("n", str(i).encode()), ("null", None)] if i % 3 else []
        ts = base + datetime.timedelta(milliseconds=i * 1_001)
        data.append((key, value, headers, ts))
        expected[key.encode()] = (value, headers, int(ts.timestamp() * 1000))
    df = spark.createDataFrame(data, schema).repartition(3)

    (df.write.format(NAME).option("kafka.bootstrap.servers", bootstrap).option("mode", mode)
     .option("kafka.linger.ms", "5").option("topic", topic).mode("append").save())

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=len(expected))
    got = Counter()
    for part in records.values():
        for r in part:
            got[r.key] += 1
            assert (r.value, r.headers, r.timestamp_ms) == expected[r.key]
    assert set(got) == set(expected) and set(got.values()) == {1}


@pytest.mark.parametrize("mode", ["arrow"])   # rows mode's Avro: test_avro.py, with KafkaSink
def test_avro_values_through_the_registry_learnt_while_spark_plans_the_write(registered, kafka, registry, mode):
    """``value.format=avro``: the planning worker registers the schema; the tasks frame the
    bodies with its id; confluent-kafka's deserializer reads them back. A ``topic`` column with a
    subject per topic is refused there: no rows are seen while Spark plans."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique(f"avro-{mode}")
    create_topic(bootstrap, topic, PARTITIONS)
    df = spark.range(200).selectExpr("CAST(id AS STRING) AS key",
                                     "named_struct('id', id, 'day', DATE'2024-02-29' + CAST(id AS INT)) AS value")
    writer = (df.write.format(NAME).option("kafka.bootstrap.servers", bootstrap).option("mode", mode)
              .option("value.format", "avro").option("schema.registry.url", registry.url))
    writer.option("topic", topic).mode("append").save()
    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=200)
    with SchemaRegistryClient(registry.client_conf()) as client:
        deserialize = AvroDeserializer(client)
        got = {r.key: deserialize(r.value, SerializationContext(topic, MessageField.VALUE))
               for part in records.values() for r in part}
    assert got == {str(i).encode(): {"id": i, "day": datetime.date(2024, 2, 29) + datetime.timedelta(days=i)}
                   for i in range(200)}
    by_column = (df.selectExpr(f"'{topic}' AS topic", "value").write.format(NAME)
                 .option("kafka.bootstrap.servers", bootstrap).option("value.format", "avro")
                 .option("schema.registry.url", registry.url).mode("append"))
    with pytest.raises(Exception, match="cannot know the topics"):
        by_column.save()


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_streaming_available_now_writes_every_row_once(registered, kafka, tmp_path, mode):
    from pyspark.sql import functions as F

    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique("stream")
    create_topic(bootstrap, topic, PARTITIONS)
    total, files = 3_000, 3
    source = _json_files(tmp_path / "in", total, files,
                         lambda i: {"id": i, "ts": 1_700_000_000_000 + i})
    stream = (spark.readStream.schema("id long, ts long").option("maxFilesPerTrigger", 1)
              .json(str(source))
              .select(F.col("id").cast("string").alias("key"),
                      F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
                      F.array(F.struct(F.lit("id").alias("key"),
                                       F.col("id").cast("string").cast("binary").alias("value")))
                      .alias("headers"),
                      F.timestamp_millis(F.col("ts")).alias("timestamp")))
    query = (stream.writeStream.format(NAME).option("kafka.bootstrap.servers", bootstrap)
             .option("mode", mode)
             .option("topic", topic).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
    finally:
        query.stop()
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [total // files] * files

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=total)
    seen = Counter()
    for part in records.values():
        for r in part:
            i = int(r.key)
            seen[i] += 1
            assert r.value == f"v{i}".encode() and r.headers == [("id", str(i).encode())]
            assert r.timestamp_ms == 1_700_000_000_000 + i
    assert len(seen) == total and set(seen.values()) == {1}


def test_bad_schema_fails_the_save_on_the_driver_and_sends_nothing(registered, kafka):
    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique("bad-schema")
    create_topic(bootstrap, topic, 1)
    df = spark.range(10).selectExpr("cast(id as int) as value", "'1' as partition")
    with pytest.raises(Exception) as info:
        (df.write.format(NAME).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .mode("append").save())
    message = str(info.value)
    assert "SchemaError: the DataFrame cannot be written to Kafka (2 problems)" in message
    assert "value: column 'value' has type int; expected string or binary" in message
    assert "partition: column 'partition' has type string; expected int" in message
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


def test_bad_schema_fails_the_stream_and_sends_nothing(registered, kafka, tmp_path):
    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique("bad-stream")
    create_topic(bootstrap, topic, 1)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 10).load()  # value is a long
    with pytest.raises(Exception) as info:
        query = (stream.writeStream.format(NAME).option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", topic).option("checkpointLocation", str(tmp_path / "cp")).start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    assert "value: column 'value' has type bigint; expected string or binary" in str(info.value)
    assert end_offsets(bootstrap, topic, 1) == {0: 0}


@pytest.mark.parametrize(("option", "value", "message"), [
    ("topik", "t", "unknown option 'topik'; did you mean 'topic'?"),
    ("kafka.value.serializer", "x", "option 'kafka.value.serializer' is not supported"),
    ("subscribe", "t", "option 'subscribe' is a Kafka source option; the sink does not read it."),
])
def test_bad_option_fails_the_save_clearly(registered, kafka, option, value, message):
    df = registered.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="ConfigError") as info:
        (df.write.format(NAME).option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("topic", "never-written").option(option, value).mode("append").save())
    assert message in str(info.value)


def test_overwrite_mode_is_refused(registered, kafka):
    df = registered.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="save mode 'overwrite' is not supported"):
        (df.write.format(NAME).option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("topic", "never-written").mode("overwrite").save())


def test_an_unreachable_cluster_fails_the_save_on_the_driver_with_one_message(registered):
    """KafkaSink's preflight, on the driver, before any task: not a task per partition waiting
    max.block.ms (60 s) and logging every reconnect."""
    df = registered.range(100).selectExpr("cast(id as string) as value")
    started = time.monotonic()
    with pytest.raises(Exception, match="PreflightError") as info:
        (df.write.format(NAME).option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("topic", "never-written").mode("append").save())
    seconds = time.monotonic() - started
    assert "127.0.0.1:1" in str(info.value) and "preflight=false" in str(info.value)
    assert seconds < 30, f"the save took {seconds:.1f} s to fail"


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_exactly_once_stream_and_save_commit_every_task_transaction(registered, kafka, tmp_path, mode):
    """delivery.guarantee=exactly-once through the Data Source: each micro-batch's transactions
    are committed by ``commit()`` on the driver (the commit log shows the last batch committed),
    a batch save too; read_committed sees every row once and nothing is left open."""
    spark, bootstrap, topic = registered, kafka.bootstrap_servers, unique("eos-stream")
    prefix = unique("eos-ds")
    create_topic(bootstrap, topic, PARTITIONS)
    total, files = 600, 3
    source = _json_files(tmp_path / "in", total, files, lambda i: {"id": i})
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": mode,
               "delivery.guarantee": "exactly-once", "transactional.id.prefix": prefix}
    stream = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(source))
              .selectExpr("cast(id as string) as key", "cast(id as string) as value"))
    query = (stream.writeStream.format(NAME).options(**options)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(180), "the availableNow query did not finish in 180 s"
    finally:
        query.stop()
    assert query.exception() is None
    (spark.range(total, total + 100).selectExpr("cast(id as string) as key",
                                                "cast(id as string) as value")
     .write.format(NAME).options(**options).mode("append").save())

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=total + 100)
    seen = Counter(int(r.key) for part in records.values() for r in part)
    assert set(seen) == set(range(total + 100)) and set(seen.values()) == {1}
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)
    last = CommitLog(SinkConfig.from_options(options)).latest()
    assert last.state == "committed" and last.batch_id.startswith("write-")
    assert last.transactions and all(t.transactional_id.startswith(f"{prefix}-")
                                     for t in last.transactions)


def test_exactly_once_refuses_a_transaction_timeout_above_the_brokers_on_a_new_prefix(registered,
                                                                                      kafka):
    """``save()`` fails on the driver, before any task sends, when the brokers refuse
    ``transaction.timeout.ms`` (their ``transaction.max.timeout.ms`` is 15 minutes), even on a
    prefix with an empty commit log: recovery fences ``<prefix>-0`` at least."""
    bootstrap, topic = kafka.bootstrap_servers, unique("eos-timeout")
    create_topic(bootstrap, topic, 1)
    df = registered.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match=r"transaction\.timeout\.ms \(1200000 ms\) is refused") as info:
        (df.write.format(NAME).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("delivery.guarantee", "exactly-once")
         .option("transactional.id.prefix", unique("eos-timeout"))
         .option("kafka.transaction.timeout.ms", "1200000").mode("append").save())
    assert "Writing job failed" not in str(info.value), "refused by the tasks, not on the driver"
    assert end_offsets(bootstrap, topic, 1) == {0: 0}
