"""Spark's own Kafka source as a second witness of what KafkaSink writes, beside confluent-kafka.

Both modes (``arrow``: mapInArrow + send_arrow; ``rows``: foreachPartition) write the same rows,
each to its own topic, with every sink column set: the topic and partition from columns, binary
keys (some null), values (one empty, some tombstones), explicit timestamps (some with microseconds,
which the sink floors to the millisecond, as Spark's sink does) and headers (several per row, a
repeated key, null values; rows with an empty or a null headers array carry none). One process
(``kafka_source_job``) then reads both topics with ``spark.read.format("kafka")`` and
``includeHeaders``; every field of every record must equal what confluent-kafka's consumer reads,
offsets included, and what was written.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
import uuid
from collections import Counter

import pytest

from spark_kafka_sink import KafkaSink

from ..helpers import create_topic
from ..verify import consume_all
from .session import run_script

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

MODES = ["arrow", "rows"]
ROWS = 300
PARTITIONS = 3
TIMEOUT_S = 240
UTC = datetime.timezone.utc
BASE = datetime.datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)  # 1_000_000_000_000 ms


def headers_of(i: int) -> list[tuple[str, bytes | None]] | None:
    """Several headers with a repeated key and null values; none (empty or null) on some rows."""
    kind = i % 4
    if kind == 0:
        return []
    if kind == 1:
        return None
    if kind == 2:
        return [("trace", f"t-{i}".encode()), ("dup", b"first"), ("dup", b"second"), ("nothing", None)]
    return [("clé-é", bytes([i % 256, 0, 255])), ("dup", b""), ("", f"{i}".encode()), ("dup", None)]


def rows_of(topic: str) -> list[tuple]:
    """The rows written to ``topic``: (key, value, topic, partition, headers, timestamp)."""
    data = []
    for i in range(ROWS):
        key = None if i % 5 == 3 else f"k-é-{i}".encode() + bytes([i % 256])
        value = None if i % 11 == 7 else (b"" if i == 1 else bytes([i % 256, 0]) + f"v-{i}".encode())
        stamp = (datetime.datetime(1970, 1, 1, tzinfo=UTC) if i == 0 else
                 BASE + datetime.timedelta(milliseconds=i * 86_400_007, microseconds=(i % 3) * 499))
        data.append((key, value, topic, i % PARTITIONS, headers_of(i), stamp))
    return data


def expected_record(row: tuple) -> tuple:
    """A written row as a record read back (without its offset): headers as a tuple, none as ()."""
    key, value, topic, partition, headers, stamp = row
    millis = (stamp - datetime.datetime(1970, 1, 1, tzinfo=UTC)) // datetime.timedelta(milliseconds=1)
    return topic, partition, key, value, millis, tuple(headers or ())


def spark_records(found: list[dict]) -> dict[str, list[tuple]]:
    """Spark's records per topic as (topic, partition, offset, key, value, timestamp_ms, headers),
    in (partition, offset) order; every one must be CreateTime (Spark's timestampType 0)."""
    def raw(text: str | None) -> bytes | None:
        return None if text is None else bytes.fromhex(text)

    out: dict[str, list[tuple]] = {}
    for r in found:
        assert r["timestamp_type"] == 0, f"not CreateTime: {r}"
        headers = tuple((k, raw(v)) for k, v in r["headers"] or ())
        out.setdefault(r["topic"], []).append((r["topic"], r["partition"], r["offset"], raw(r["key"]),
                                               raw(r["value"]), r["timestamp_ms"], headers))
    return {topic: sorted(records, key=lambda t: (t[1], t[2])) for topic, records in out.items()}


def confluent_records(bootstrap: str, topic: str) -> list[tuple]:
    """The same tuples from confluent-kafka's consumer (CreateTime is its timestamp type 1)."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    out = []
    for partition, records in consume_all(bootstrap, topic, PARTITIONS, expected_count=ROWS).items():
        for r in records:
            assert r.timestamp_type == TIMESTAMP_CREATE_TIME, f"not CreateTime: {r}"
            out.append((topic, partition, r.offset, r.key, r.value, r.timestamp_ms, tuple(r.headers)))
    return sorted(out, key=lambda t: (t[1], t[2]))


@pytest.fixture(scope="module")
def witnessed(spark, kafka, tmp_path_factory, request):
    """Each mode's topic written by KafkaSink, then read by one Spark Kafka-source process:
    ``{"topics": {mode: topic}, "rows": {mode: rows}, "spark": {topic: records}, "connector": v}``."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField,
                                   StructType, TimestampType)

    bootstrap = kafka.bootstrap_servers
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("headers", ArrayType(header)),
                         StructField("timestamp", TimestampType())])
    topics, written = {}, {}
    for mode in MODES:
        topic = topics[mode] = f"spark-source-{mode}-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, PARTITIONS)
        written[mode] = rows_of(topic)
        df = spark.createDataFrame(written[mode], schema).repartition(2)
        KafkaSink({"kafka.bootstrap.servers": bootstrap}, mode=mode).write(df)

    out = tmp_path_factory.mktemp("kafka-source") / "records.json"
    began = time.monotonic()
    code, output = run_script("tests.spark.kafka_source_job", bootstrap, str(out), *topics.values(),
                              timeout_s=TIMEOUT_S)
    if code == 2:
        pytest.fail("Spark's Kafka connector could not be put on the classpath (spark.jars.packages): "
                    f"no version resolved: {json.loads(out.read_text())['tried']}\n{output[-3000:]}",
                    pytrace=False)
    assert code == 0, f"the Spark Kafka-source job failed (exit {code}):\n{output[-4000:]}"
    result = json.loads(out.read_text())
    failed = "".join(f"; {version} failed first: {why}" for version, why in result["tried"])
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\nSpark's Kafka source: connector {result['connector']}{failed} "
              f"(its process took {time.monotonic() - began:.0f} s)")  # in the test output
    return {"topics": topics, "rows": written, "spark": spark_records(result["records"]),
            "connector": result["connector"]}


@pytest.mark.parametrize("mode", MODES)
def test_spark_kafka_source_and_confluent_read_what_the_sink_wrote(witnessed, kafka, mode):
    topic = witnessed["topics"][mode]
    by_spark = witnessed["spark"].get(topic, [])
    by_confluent = confluent_records(kafka.bootstrap_servers, topic)

    assert len(by_spark) == ROWS, f"Spark's Kafka source ({witnessed['connector']}) read {len(by_spark)}"
    assert by_spark == by_confluent  # every field, offsets included
    for partition in range(PARTITIONS):
        offsets = [r[2] for r in by_spark if r[1] == partition]
        assert offsets == list(range(len(offsets))), f"partition {partition}: offsets {offsets[:10]}..."
    without_offset = Counter(r[:2] + r[3:] for r in by_spark)
    assert without_offset == Counter(expected_record(row) for row in witnessed["rows"][mode])
