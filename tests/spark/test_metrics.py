"""KafkaSink metrics on a local[2] SparkSession against the embedded Apache Kafka, in both modes
(arrow: collected stats rows; rows: an accumulator): the figures after a batch write and a failed
task counting nothing (the per-micro-batch history is checked by test_sink.py's streaming test;
task retries by test_task_retry.py)."""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import KafkaSink

from ..helpers import create_topic
from ..verify import consume_all

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


MODES = ["arrow", "rows"]


@pytest.mark.parametrize("mode", MODES)
def test_write_publishes_the_tasks_metrics(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topics = [unique("metrics-a"), unique("metrics-b")]
    for topic in topics:
        create_topic(bootstrap, topic, 2)
    rows = 1_000
    df = spark.range(0, rows, 1, 4).selectExpr(
        "cast(id as string) as key", "concat('value-', id) as value",
        f"case when id % 4 = 0 then '{topics[0]}' else '{topics[1]}' end as topic")
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode})
    sink.write(df)

    metrics = sink.last_metrics
    assert metrics["record-send-total"] == rows
    assert metrics[f"topic.{topics[0]}.record-send-total"] == 250
    assert metrics[f"topic.{topics[1]}.record-send-total"] == 750
    assert metrics["record-error-total"] == 0 and metrics["task-total"] == 4
    assert metrics["byte-total"] > rows * 6 and metrics["request-total"] >= 1
    assert metrics["batch-total"] >= 1 and metrics["request-latency-avg"] >= 0
    assert sink.metrics_history == [(None, metrics)]
    assert sum(len(p) for p in consume_all(bootstrap, topics[0], 2, expected_count=250).values()) == 250

    sink.write(df.limit(10))  # the next write starts from zero
    assert sink.last_metrics["record-send-total"] == 10
    assert [m["record-send-total"] for _, m in sink.metrics_history] == [rows, 10]


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_task_counts_nothing_and_a_failed_write_publishes_nothing(spark, kafka, mode):
    bootstrap = kafka.bootstrap_servers
    topic = unique("metrics-fail")
    create_topic(bootstrap, topic, 1)
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode})
    good = spark.range(0, 3, 1, 1).selectExpr("cast(id as string) as value", f"'{topic}' as topic")
    sink.write(good)
    published = sink.metrics_history
    assert sink.last_metrics["record-send-total"] == 3

    # partition 0: ids 0-6, all good; partition 1: ids 7-13, six sent, then a null topic
    bad = spark.range(0, 14, 1, 2).selectExpr(
        "cast(id as string) as value", f"case when id = 13 then null else '{topic}' end as topic")
    with pytest.raises(Exception, match="null 'topic'"):
        sink.write(bad)
    assert sink.metrics_history == published and sink.last_metrics == published[-1][1]
    if mode == "arrow":  # no accumulator: the stats rows of a failed job are never collected
        assert sink._accumulator is None
        return
    accumulated = sink._accumulator[1].value  # what the tasks added during the failed write
    assert accumulated.records_sent in (0, 7), "the failed task's 6 records must not be counted"
    assert accumulated.tasks == (accumulated.records_sent == 7)
