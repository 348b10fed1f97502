"""SinkTaskMetrics, its accumulator parameter, the per-task deltas, and the writer adding them only
for a task that succeeded: no broker, no SparkSession."""

from __future__ import annotations

import math
import pickle

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.producer.metrics_snapshot import MetricsSnapshot
from spark_kafka_sink.spark.metrics import SinkMetricsParam, SinkTaskMetrics, format_line, task_metrics
from spark_kafka_sink.spark.task import PartitionWriteError
from spark_kafka_sink.spark.rows import RowError

from .test_partition_writer import FakeProducer, make_writer, rows

A = SinkTaskMetrics(records_sent=10, records_failed=0, records_retried=2, bytes_sent=1000, batches=3,
                    requests=2, request_latency_sum_ms=7.5, request_latency_count=2,
                    topics={"a": 6, "b": 4}, tasks=1)
B = SinkTaskMetrics(records_sent=5, records_failed=1, records_retried=0, bytes_sent=300, batches=1,
                    requests=1, request_latency_sum_ms=1.5, request_latency_count=1,
                    topics={"b": 3, "c": 2}, tasks=1, retried_tasks=1, producers_created=1)


def test_merge_is_exact_and_adds_per_topic():
    merged = A.merge(B)
    assert merged == SinkTaskMetrics(15, 1, 2, 1300, 4, 3, 9.0, 3, {"a": 6, "b": 7, "c": 2}, 2, 1, 1)
    assert merged.request_latency_avg_ms == 3.0
    assert A.merge(SinkTaskMetrics()) == A == SinkTaskMetrics().merge(A)
    assert A.topics == {"a": 6, "b": 4}  # inputs untouched


def test_picklable_and_java_names():
    assert pickle.loads(pickle.dumps(A.merge(B))) == A.merge(B)
    flat = A.merge(B).as_dict()
    assert flat["record-send-total"] == 15 and flat["record-error-total"] == 1
    assert flat["record-retry-total"] == 2 and flat["byte-total"] == 1300
    assert flat["batch-total"] == 4 and flat["request-total"] == 3 and flat["task-total"] == 2
    assert flat["request-latency-avg"] == 3.0
    assert flat["task-retried-total"] == 1 and flat["producer-create-total"] == 1
    assert flat["topic.b.record-send-total"] == 7
    assert math.isnan(SinkTaskMetrics().as_dict()["request-latency-avg"])


def test_accumulator_param():
    param = pickle.loads(pickle.dumps(SinkMetricsParam()))
    assert param.zero(A) == SinkTaskMetrics()
    assert param.addInPlace(param.addInPlace(param.zero(A), A), B) == A.merge(B)


def test_task_metrics_are_producer_deltas():
    before = MetricsSnapshot({"byte-total": 100.0, "record-retry-total": 1.0, "request-total": 4.0},
                             averages={"request-latency-avg": (10.0, 4), "batch-size-avg": (400.0, 4)})
    after = MetricsSnapshot({"byte-total": 350.0, "record-retry-total": 3.0, "request-total": 6.0},
                            averages={"request-latency-avg": (13.0, 6), "batch-size-avg": (650.0, 7)})
    got = task_metrics(before, after, records_sent=9, records_failed=0, topics={"t": 9})
    assert got == SinkTaskMetrics(9, 0, 2, 250, 3, 2, 3.0, 2, {"t": 9}, 1)
    retry = task_metrics(before, after, records_sent=9, records_failed=0, topics={"t": 9}, attempt=2,
                         producer_created=True)
    assert (retry.tasks, retry.retried_tasks, retry.producers_created) == (1, 1, 1)


def test_task_metrics_never_negative_when_the_window_rolled():
    before = MetricsSnapshot(averages={"request-latency-avg": (10.0, 4)})
    after = MetricsSnapshot(averages={"request-latency-avg": (3.0, 1)})
    got = task_metrics(before, after, records_sent=1, records_failed=0, topics={})
    assert (got.request_latency_sum_ms, got.request_latency_count) == (3.0, 1)


def test_format_line():
    line = format_line(7, A.as_dict(), 0.25)
    assert line.startswith("KafkaSink: micro-batch 7 written in 0.250 s: record-send-total=10 ")
    assert "request-latency-avg=3.750" in line and "topic.a.record-send-total=6" in line
    assert "request-latency-avg=NaN" in format_line(None, SinkTaskMetrics().as_dict(), 0)


class FakeAccumulator:
    def __init__(self):
        self.added = []

    def add(self, value):
        self.added.append(value)


def test_writer_adds_the_task_metrics_once_it_succeeded():
    producer = FakeProducer()
    writer, _ = make_writer(producer)
    writer.accumulator = accumulator = FakeAccumulator()
    writer(rows(3, "x") + rows(2, "y"))
    [added] = accumulator.added
    assert added.records_sent == 5 and added.topics == {"x": 3, "y": 2} and added.tasks == 1
    assert added.bytes_sent == 50
    assert (added.retried_tasks, added.producers_created) == (0, 1)


@pytest.mark.parametrize("failure", ["callback", "row"])
def test_a_failed_task_adds_nothing(failure):
    producer = FakeProducer(fail_at={1} if failure == "callback" else ())
    writer, _ = make_writer(producer)
    writer.accumulator = accumulator = FakeAccumulator()
    data = rows(4)
    if failure == "row":
        data[2] = data[2].__class__(key="k", value="v", topic=None)
    with pytest.raises((PartitionWriteError, RowError)):
        writer(data)
    assert accumulator.added == []


def test_sink_pickles_without_its_driver_side_metrics():
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t"})
    assert sink.last_metrics is None and sink.metrics_history == []
    sink._publish(3, A, 0.1)
    assert sink.last_metrics == A.as_dict() and sink.metrics_history == [(3, A.as_dict())]
    sink._accumulator = (object(), object())
    state = sink.__getstate__()
    assert set(state) == {"config"}
    shipped = pickle.loads(pickle.dumps(sink))
    assert shipped.config == sink.config
    assert shipped.last_metrics is None and shipped.metrics_history == [] and shipped._accumulator is None


def test_history_is_bounded():
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t"})
    for batch_id in range(150):
        sink._publish(batch_id, A, 0.0)
    history = sink.metrics_history
    assert len(history) == 100 and history[0][0] == 50 and history[-1][0] == 149


class _ConnectSession:
    @property
    def sparkContext(self):
        raise NotImplementedError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext (as Spark Connect does)")


class _ConnectFrame:
    """What the sink touches of a Spark Connect DataFrame: no sparkContext, foreachPartition works."""

    def __init__(self):
        from pyspark.sql.types import StringType, StructField, StructType

        self.sparkSession = _ConnectSession()
        self.schema = StructType([StructField("value", StringType())])
        self.writers = []

    def foreachPartition(self, writer):
        self.writers.append(pickle.loads(pickle.dumps(writer)))

    def mapInArrow(self, writer, schema):
        """The stats rows of two tasks (the writer is only shipped, not run)."""
        self.writers.append((pickle.loads(pickle.dumps(writer)), schema))
        tasks = [SinkTaskMetrics(records_sent=n, topics={"t": n}, tasks=1) for n in (2, 5)]
        return _Collected([{"partition_id": i, "attempt": 0, "duration_ms": 1, "metrics": m.to_json()}
                           for i, m in enumerate(tasks)])


class _Collected:
    def __init__(self, rows):
        self.rows = rows

    def collect(self):
        return self.rows


def test_rows_mode_without_a_spark_context_still_writes_and_publishes_no_metrics():
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t", "mode": "rows",
                        "preflight": "false"})  # no cluster here
    df = _ConnectFrame()
    sink.write(df)
    sink(df, 4)
    assert len(df.writers) == 2 and all(w.accumulator is None for w in df.writers)
    assert sink.last_metrics is None and sink.metrics_history == []


def test_arrow_mode_publishes_the_collected_stats_rows_without_a_spark_context(monkeypatch):
    from spark_kafka_sink.spark import sink as sink_module
    from spark_kafka_sink.spark.arrow_writer import STATS_SCHEMA, ArrowWriter

    monkeypatch.setattr(sink_module, "sink_frame", lambda df, write_schema, **_: df)  # needs no JVM here
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t",
                        "preflight": "false",  # no cluster here
                        "driver.write.max.rows": 0})  # the distributed write
    df = _ConnectFrame()
    sink(df, 7)
    (writer, schema), = df.writers
    assert isinstance(writer, ArrowWriter) and schema == STATS_SCHEMA
    expected = SinkTaskMetrics(records_sent=7, topics={"t": 7}, tasks=2).as_dict()
    assert sink.last_metrics == expected and sink.metrics_history == [(7, expected)]
