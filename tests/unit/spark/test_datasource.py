"""The Python Data Source's driver-side checks, task write and commit/abort lines, without a
SparkSession: Spark runs ``commit`` in a driver-side Python worker, out of reach of ``caplog``,
so the merge of the commit messages and the line it logs are tested here with fake messages."""

from __future__ import annotations

import logging
import pickle

import pytest
from pyspark.sql import Row
from pyspark.sql.datasource import CaseInsensitiveDict, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.errors import ConfigError, SchemaError
from spark_kafka_sink.spark import datasource
from spark_kafka_sink.spark.datasource import (
    NAME,
    KafkaBatchWriter,
    KafkaCommitMessage,
    KafkaDataSource,
    KafkaStreamWriter,
    _Collector,
    _write_task,
    abort_line,
    commit_line,
    merge_messages,
)
from spark_kafka_sink.spark.metrics import SinkTaskMetrics, format_line
from spark_kafka_sink.spark.task import PartitionWriteError, TaskInfo

from .test_partition_writer import FakePool, FakeProducer

BOOTSTRAP = {"kafka.bootstrap.servers": "localhost:9092"}
SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])
LOGGER = "spark_kafka_sink.spark.datasource"


@pytest.fixture(autouse=True)
def preflights(monkeypatch) -> list:
    """The configs the driver-side preflight checked; it passes (no cluster here)."""
    from spark_kafka_sink.spark.preflight import PreflightResult

    checked = []
    monkeypatch.setattr(datasource, "preflight", lambda config: checked.append(config) or PreflightResult())
    return checked


def source(**options) -> KafkaDataSource:
    """As Spark builds it: options in a case-insensitive dict (keys lowercased)."""
    return KafkaDataSource(CaseInsensitiveDict({**BOOTSTRAP, **options}))


def metrics(sent: int, topic: str = "t", **more) -> SinkTaskMetrics:
    return SinkTaskMetrics(records_sent=sent, bytes_sent=10 * sent, requests=1,
                           request_latency_sum_ms=4.0, request_latency_count=1,
                           topics={topic: sent}, tasks=1, **more)


def message(sent: int, start: float, end: float, partition: int = 0, **more) -> KafkaCommitMessage:
    return KafkaCommitMessage(metrics(sent, **more), partition, 0, start, end)


def test_name_and_writers():
    assert KafkaDataSource.name() == NAME == "spark_kafka_sink"
    writer = source(topic="t").writer(SCHEMA, False)
    assert isinstance(writer, KafkaBatchWriter) and isinstance(writer, DataSourceWriter)
    stream_writer = source(topic="t").streamWriter(SCHEMA, False)
    assert isinstance(stream_writer, KafkaStreamWriter) and isinstance(stream_writer, DataSourceStreamWriter)
    assert writer.config.topic == "t" and writer.write_schema.key is not None


def test_arrow_mode_picks_the_arrow_writers_unless_columns_need_renaming():
    from pyspark.sql.datasource import DataSourceArrowWriter
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    from spark_kafka_sink.spark.datasource import KafkaArrowBatchWriter, KafkaArrowStreamWriter

    assert isinstance(source(topic="t").writer(SCHEMA, False), KafkaArrowBatchWriter)
    assert isinstance(source(topic="t").writer(SCHEMA, False), DataSourceArrowWriter)
    if KafkaArrowStreamWriter is not None:
        assert isinstance(source(topic="t").streamWriter(SCHEMA, False), KafkaArrowStreamWriter)
    rows = source(topic="t", mode="rows").writer(SCHEMA, False)
    assert not isinstance(rows, DataSourceArrowWriter)
    odd_headers = StructType([StructField("value", StringType()), StructField("headers", ArrayType(
        StructType([StructField("KEY", StringType()), StructField("Value", BinaryType())])))])
    assert not isinstance(source(topic="t").writer(odd_headers, False), DataSourceArrowWriter)
    repeated = StructType([StructField("value", StringType()), StructField("value", BinaryType())])
    assert not isinstance(source(topic="t").writer(repeated, False), DataSourceArrowWriter)


def test_writer_pickles_as_config_and_columns():
    writer = source(topic="t", **{"kafka.linger.ms": "7"}).writer(SCHEMA, False)
    shipped = pickle.loads(pickle.dumps(writer))
    assert (shipped.config, shipped.write_schema) == (writer.config, writer.write_schema)
    assert len(pickle.dumps(writer)) < 4096


def test_options_are_validated_as_the_sinks():
    with pytest.raises(ConfigError, match="unknown option 'topik'; did you mean 'topic'?"):
        source(topik="t").writer(SCHEMA, False)
    with pytest.raises(ConfigError, match="option 'kafka.bootstrap.servers' is required"):
        KafkaDataSource(CaseInsensitiveDict({"topic": "t"})).streamWriter(SCHEMA, False)
    source(topic="t", checkpointLocation="/cp").streamWriter(SCHEMA, False)  # Spark adds it


def test_schema_is_validated_when_the_writer_is_built():
    bad = StructType([StructField("value", StructType([StructField("a", StringType())]))])
    for build in (lambda s: s.writer(bad, False), lambda s: s.streamWriter(bad, False)):
        with pytest.raises(SchemaError, match="value: column 'value' has type struct<a:string>"):
            build(source(topic="t"))
    with pytest.raises(SchemaError, match="no 'topic' column and no 'topic' option"):
        source().writer(SCHEMA, False)


def test_overwrite_is_refused_for_batch_and_complete_mode_accepted_for_streams():
    with pytest.raises(ConfigError, match="save mode 'overwrite' is not supported.*use mode\\('append'\\)"):
        source(topic="t").writer(SCHEMA, True)
    assert isinstance(source(topic="t").streamWriter(SCHEMA, True), KafkaStreamWriter)


def test_reading_is_refused_clearly():
    with pytest.raises(ConfigError, match="only writes to Kafka"):
        source(topic="t").reader(SCHEMA)


def test_collector_keeps_what_the_partition_writer_adds():
    collector = _Collector()
    assert collector.metrics is None
    collector.add(metrics(2))
    collector.add(metrics(3))
    assert collector.metrics.records_sent == 5 and collector.metrics.tasks == 2


def test_write_task_returns_the_tasks_metrics_in_its_commit_message():
    writer = source(topic="t").writer(SCHEMA, False)
    producer = FakeProducer()
    pool = FakePool(producer)
    rows = iter([Row(key=f"k{i}", value=f"v{i}") for i in range(4)])
    got = _write_task(writer.config, writer.write_schema, rows, pool=lambda: pool,
                      task=lambda: TaskInfo(3, 1))
    assert isinstance(got, KafkaCommitMessage)
    assert (got.partition_id, got.attempt) == (3, 1)
    assert got.metrics.records_sent == 4 and got.metrics.topics == {"t": 4}
    assert got.metrics.tasks == 1 and got.metrics.retried_tasks == 1 and got.metrics.bytes_sent == 40
    assert got.started_at <= got.finished_at
    assert pickle.loads(pickle.dumps(got)) == got
    with pytest.raises(AttributeError):
        got.attempt = 0  # frozen


def test_failed_write_task_raises_and_returns_no_message():
    writer = source(topic="t").writer(SCHEMA, False)
    pool = FakePool(FakeProducer(fail_at={1}))
    with pytest.raises(PartitionWriteError, match="1 record failed"):
        _write_task(writer.config, writer.write_schema, iter([Row(key="k", value="v")] * 3),
                    pool=lambda: pool, task=lambda: TaskInfo(0, 0))


def test_merge_sums_the_messages_and_spans_the_tasks():
    merged = merge_messages([message(3, 10.0, 11.5), None, message(4, 10.5, 12.0, topic="u")])
    assert merged.metrics.records_sent == 7 and merged.metrics.tasks == 2
    assert merged.metrics.topics == {"t": 3, "u": 4}
    assert (merged.seconds, merged.succeeded, merged.missing) == (2.0, 2, 1)
    empty = merge_messages([])
    assert (empty.metrics, empty.seconds, empty.succeeded, empty.missing) == (SinkTaskMetrics(), 0.0, 0, 0)


def test_commit_logs_one_line_with_the_merged_metrics(caplog):
    messages = [message(3, 10.0, 11.0), message(5, 10.2, 11.25, partition=1)]
    merged = metrics(3).merge(metrics(5))
    caplog.set_level(logging.INFO, logger=LOGGER)
    KafkaBatchWriter(*_config_and_schema()).commit(messages)
    KafkaStreamWriter(*_config_and_schema()).commit(messages, 7)
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines == [format_line(None, merged.as_dict(), 1.25), format_line(7, merged.as_dict(), 1.25)]
    assert lines[1].startswith("KafkaSink: micro-batch 7 written in 1.250 s: record-send-total=8 ")
    assert "topic.t.record-send-total=8" in lines[1] and "task-total=2" in lines[1]
    assert commit_line(7, messages) == lines[1]


def test_abort_logs_what_the_succeeded_tasks_left_in_kafka(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    KafkaStreamWriter(*_config_and_schema()).abort([message(6, 1.0, 2.0), None, None], 4)
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert text.startswith("KafkaSink: micro-batch 4 aborted: 2 of 3 tasks did not succeed. The 1 "
                           "that did wrote 6 records, which stay in Kafka (at-least-once")
    assert text.endswith(format_line(4, metrics(6).as_dict(), 1.0).partition(" s: ")[2])
    assert abort_line(None, [None]).startswith("KafkaSink: write aborted: 1 of 1 tasks")


def test_driver_log_is_left_alone_outside_spark_workers(monkeypatch):
    fresh = logging.getLogger(f"{LOGGER}.probe-outside")
    monkeypatch.setattr(datasource, "log", fresh)
    assert datasource._in_spark_worker() is False  # pytest's __main__
    assert datasource._driver_log() is fresh
    assert fresh.level == logging.NOTSET and fresh.handlers == []


def test_driver_log_in_a_spark_worker_logs_info_to_stderr_once(monkeypatch):
    fresh = logging.getLogger(f"{LOGGER}.probe-worker")
    monkeypatch.setattr(datasource, "log", fresh)
    monkeypatch.setattr(datasource, "_in_spark_worker", lambda: True)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # Spark's worker: no handler at all
    try:
        datasource._driver_log()
        datasource._driver_log()
        assert fresh.level == logging.INFO
        assert len(fresh.handlers) == 1 and fresh.handlers[0].stream is datasource.sys.stderr
    finally:
        for handler in fresh.handlers:
            fresh.removeHandler(handler)


def test_driver_log_defers_to_a_root_handler_in_a_spark_worker(monkeypatch):
    fresh = logging.getLogger(f"{LOGGER}.probe-handled")
    monkeypatch.setattr(datasource, "log", fresh)
    monkeypatch.setattr(datasource, "_in_spark_worker", lambda: True)
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.NullHandler()])  # worker logging on
    datasource._driver_log()
    assert fresh.level == logging.INFO and fresh.handlers == []


def _config_and_schema():
    writer = source(topic="t").writer(SCHEMA, False)
    return writer.config, writer.write_schema


@pytest.mark.parametrize(("argv", "recovers"), [
    (["daemon.py", "pyspark.sql.worker.write_into_data_source"], True),
    (["daemon.py", "pyspark.sql.worker.commit_data_source_write"], False),
    (["daemon.py", "pyspark.sql.worker.python_streaming_sink_runner"], False),
])
def test_exactly_once_recovery_runs_in_the_planning_worker_forked_by_the_daemon(monkeypatch, argv,
                                                                                recovers):
    """Spark 4.3 starts its planning and commit workers through ``pyspark.daemon``: the worker
    module is the daemon's argument, and recovery runs in the planning one only."""
    import sys
    import types

    from spark_kafka_sink.spark.options import SinkConfig

    calls = []

    class Driver:
        def __init__(self, config):
            calls.append("new")

        def prepare_query(self):
            calls.append("prepare_query")

        def close(self):
            calls.append("close")

    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="pyspark.daemon")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(datasource, "ExactlyOnceDriver", Driver)
    assert datasource._spark_worker_module() == argv[1]
    datasource._recover_at_planning(SinkConfig.from_options({
        "kafka.bootstrap.servers": "127.0.0.1:9092", "delivery.guarantee": "exactly-once",
        "transactional.id.prefix": "q"}))
    assert calls == (["new", "prepare_query", "close"] if recovers else [])


def test_the_writers_run_the_sinks_preflight_and_the_tasks_get_its_result(monkeypatch, preflights):
    from spark_kafka_sink.spark.preflight import PreflightResult

    writer = source(topic="t").writer(SCHEMA, False)
    stream_writer = source(topic="t").streamWriter(SCHEMA, False)
    assert [c.topic for c in preflights] == ["t", "t"]
    assert writer.config == stream_writer.config == preflights[0]
    monkeypatch.setattr(datasource, "preflight",
                        lambda config: PreflightResult(dlq_max_message_bytes=4096))
    policy = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "t.dlq"}
    assert source(topic="t", **policy).writer(SCHEMA, False).config.error_policy.dlq_max_message_bytes == 4096


def test_a_failed_preflight_fails_the_write_before_any_task(monkeypatch):
    from spark_kafka_sink.spark.preflight import PreflightError

    def unreachable(config):
        raise PreflightError("KafkaSink preflight: cannot reach the cluster at 127.0.0.1:1")

    monkeypatch.setattr(datasource, "preflight", unreachable)
    for build in (lambda: source(topic="t").writer(SCHEMA, False),
                  lambda: source(topic="t").streamWriter(SCHEMA, False)):
        with pytest.raises(PreflightError, match="cannot reach the cluster at 127.0.0.1:1"):
            build()


@pytest.mark.parametrize(("argv", "checks"), [
    (["daemon.py", "pyspark.sql.worker.write_into_data_source"], True),
    (["daemon.py", "pyspark.sql.worker.python_streaming_sink_runner"], False),
])
def test_a_streams_commit_worker_builds_its_writer_without_a_preflight(monkeypatch, preflights,
                                                                        argv, checks):
    """Spark's stream commit worker calls ``streamWriter()`` once per micro-batch: the cluster was
    checked when the query was planned, not again there."""
    import sys
    import types

    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="pyspark.daemon")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", argv)
    source(topic="t").streamWriter(SCHEMA, False)
    assert len(preflights) == int(checks)
