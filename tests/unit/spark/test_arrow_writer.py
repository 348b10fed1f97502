"""ArrowWriter with a fake pool and a fake ``send_arrow`` producer: no broker, no SparkSession.

The fake checks its input with the producer's own ``resolve_columns``, so the Arrow types Spark
hands ``mapInArrow`` (built here as Spark builds them) are checked against ``send_arrow``'s rules.
"""

from __future__ import annotations

import datetime
import json
import pickle

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import InvalidPartitionError, NotLeaderOrFollowerError
from spark_kafka_sink.producer.arrow.input import DEFAULT, ArrowSendResult, resolve_columns
from spark_kafka_sink.producer.metrics_snapshot import MetricsSnapshot
from spark_kafka_sink.spark.arrow_writer import (
    STATS_SCHEMA,
    ArrowWriter,
    merge_stats,
    rechunk,
    stats_batch,
    stats_transactions,
)
from spark_kafka_sink.spark.metrics import SinkTaskMetrics
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.task import PartitionWriteError, TaskInfo
from spark_kafka_sink.spark.rows import RowError
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema
from spark_kafka_sink.structs import TopicPartition

from .test_partition_writer import FakePool

OPTIONS = {"kafka.bootstrap.servers": "localhost:9092", "producer.cache.timeout": "2m"}
SCHEMA = WriteSchema(value=Column("value", 1, Kind.STRING), key=Column("key", 0, Kind.STRING),
                     topic=Column("topic", 2, Kind.STRING))
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class FakeArrowProducer:
    """``send_arrow`` per the producer's contract: checks the columns (``resolve_columns``),
    then keeps each call's result pending until ``flush()`` (or completes it at once). A call
    listed in ``fail_calls`` fails all its rows; ``raise_at`` maps a call index to an error the
    call raises (nothing queued)."""

    def __init__(self, *, fail_calls=(), raise_at=None, complete_at_once=False, never_complete=False):
        self.calls: list[tuple[str, dict, dict]] = []
        self.pending: list[tuple[ArrowSendResult, str, int, BaseException | None]] = []
        self.fail_calls = set(fail_calls)
        self.raise_at = raise_at or {}
        self.complete_at_once = complete_at_once
        self.never_complete = never_complete
        self.flushes = 0
        self.byte_total = 0

    def send_arrow(self, topic, data, *, value="value", key=DEFAULT, headers=DEFAULT,
                   timestamp=DEFAULT, partition=DEFAULT):
        index = len(self.calls)
        columns = resolve_columns(data, value=value, key=key, headers=headers, timestamp=timestamp,
                                  partition=partition)
        if index in self.raise_at:
            self.calls.append((topic, {}, {}))
            raise self.raise_at[index]
        arguments = {"key": key, "headers": headers, "timestamp": timestamp, "partition": partition}
        self.calls.append((topic, data.to_pydict(), arguments))
        result = ArrowSendResult(columns.rows)
        error = NotLeaderOrFollowerError(f"call {index}") if index in self.fail_calls else None
        if self.complete_at_once:
            self._complete(result, topic, columns.rows, error)
        else:
            self.pending.append((result, topic, columns.rows, error))
        return result

    def _complete(self, result, topic, rows, error):
        if rows:
            result.batch_completed(TopicPartition(topic, 0), rows, error, -1 if error else 0)
        self.byte_total += 10 * rows

    def flush(self, timeout=None):
        self.flushes += 1
        if self.never_complete:
            return
        for pending in self.pending:
            self._complete(*pending)
        self.pending.clear()

    def metrics_snapshot(self):
        return MetricsSnapshot({"byte-total": float(self.byte_total)})

    def sent(self, column="value"):
        return [value for _, data, _ in self.calls for value in data.get(column, [])]


def make_writer(producer, *, attempt=0, schema=SCHEMA, options=OPTIONS, **kwargs):
    pool = FakePool(producer)
    writer = ArrowWriter(SinkConfig.from_options(options), schema, pool=lambda: pool,
                         task=lambda: TaskInfo(4, attempt), **kwargs)
    return writer, pool


def batch(start, count, topic="t"):
    topics = topic if isinstance(topic, list) else [topic] * count
    return pa.RecordBatch.from_pydict({
        "value": [f"v{i}" for i in range(start, start + count)],
        "key": [f"k{i}" for i in range(start, start + count)],
        "topic": topics})


def run(writer, batches):
    out = list(writer(iter(batches)))
    assert len(out) == 1 and out[0].num_rows == 1
    row = out[0].to_pylist()[0]
    return row, SinkTaskMetrics.from_json(row["metrics"])


def test_sends_each_batch_flushes_once_releases_and_yields_one_stats_row():
    producer = FakeArrowProducer()
    writer, pool = make_writer(producer)
    row, metrics = run(writer, [batch(0, 3), batch(3, 2)])
    assert producer.sent() == [f"v{i}" for i in range(5)] and producer.sent("key") == [f"k{i}" for i in range(5)]
    assert [topic for topic, _, _ in producer.calls] == ["t", "t"]
    assert producer.calls[0][2] == {"key": "key", "headers": None, "timestamp": None, "partition": None}
    assert producer.flushes == 1 and pool.leases[0].released == 1
    assert (row["partition_id"], row["attempt"]) == (4, 0) and row["duration_ms"] >= 0
    assert metrics == SinkTaskMetrics(records_sent=5, bytes_sent=50, topics={"t": 5}, tasks=1,
                                      producers_created=1)
    config, attempt, idle = pool.acquired[0]
    assert config == SinkConfig.from_options(OPTIONS).producer_config and (attempt, idle) == (0, 120_000)
    _, again = run(writer, [batch(0, 1)])
    assert again.producers_created == 0  # the second task reuses the pooled producer


def test_stats_row_matches_the_declared_schema():
    out = stats_batch(1, 2, 3, SinkTaskMetrics(records_sent=7, tasks=1))
    names_types = [(f.name, str(f.type)) for f in out.schema]
    assert names_types == [("partition_id", "int32"), ("attempt", "int32"), ("duration_ms", "int64"),
                           ("metrics", "string"), ("transaction", "string")]
    assert STATS_SCHEMA == ("partition_id int, attempt int, duration_ms long, metrics string, "
                            "transaction string")
    assert json.loads(out.column("metrics")[0].as_py())["records_sent"] == 7
    assert out.column("transaction")[0].as_py() is None and stats_transactions(out.to_pylist()) == []


def test_a_stats_row_carries_the_open_transaction_to_the_driver():
    from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
    from spark_kafka_sink.structs import TopicPartition

    value = ResumableTransaction("q-3", 7, 2, (TopicPartition("t", 0), TopicPartition("u", 4)), 2)
    out = stats_batch(3, 0, 10, SinkTaskMetrics(tasks=1), value)
    assert stats_transactions(out.to_pylist()) == [value]


def test_retry_attempt_reaches_the_pool_and_the_metrics():
    writer, pool = make_writer(FakeArrowProducer(), attempt=2)
    row, metrics = run(writer, [batch(0, 1)])
    assert pool.acquired[0][1] == 2 and row["attempt"] == 2
    assert (metrics.retried_tasks, metrics.producers_created) == (1, 1)


def test_empty_partition_flushes_releases_and_reports_zero():
    producer = FakeArrowProducer()
    writer, pool = make_writer(producer)
    _, metrics = run(writer, [])
    assert producer.calls == [] and producer.flushes == 1 and pool.leases[0].released == 1
    assert metrics.records_sent == 0 and metrics.tasks == 1


def test_topic_option_sends_whole_batches_to_it():
    schema = WriteSchema(value=Column("value", 0, Kind.BINARY))
    producer = FakeArrowProducer()
    writer, _ = make_writer(producer, schema=schema, options={**OPTIONS, "topic": "events"})
    data = pa.RecordBatch.from_pydict({"value": pa.array([b"a", None, b"c"], pa.binary())})
    _, metrics = run(writer, [data])
    assert [(topic, data["value"]) for topic, data, _ in producer.calls] == [("events", [b"a", None, b"c"])]
    assert producer.calls[0][2] == {"key": None, "headers": None, "timestamp": None, "partition": None}
    assert metrics.topics == {"events": 3}


def test_rows_are_grouped_by_topic_in_order():
    producer = FakeArrowProducer()
    writer, _ = make_writer(producer)
    _, metrics = run(writer, [batch(0, 6, ["b", "a", "b", "c", "a", "b"])])
    got = {topic: data["value"] for topic, data, _ in producer.calls}
    assert got == {"a": ["v1", "v4"], "b": ["v0", "v2", "v5"], "c": ["v3"]}
    assert metrics.topics == {"a": 2, "b": 3, "c": 1} and metrics.records_sent == 6


def test_null_topic_sends_the_rows_before_it_and_names_its_position_in_the_partition():
    producer = FakeArrowProducer()
    writer, pool = make_writer(producer)
    bad = batch(10, 5, ["t", "t", "u", None, "t"])
    with pytest.raises(RowError, match="row 13 of this partition has a null 'topic' and no 'topic' option"):
        run(writer, [batch(0, 10), bad, batch(15, 5)])
    assert sorted(producer.sent()) == sorted([f"v{i}" for i in range(13)])
    assert producer.flushes == 1 and pool.leases[0].released == 1


def test_invalid_topic_fails_at_its_first_row():
    producer = FakeArrowProducer()
    writer, _ = make_writer(producer)
    with pytest.raises(RowError, match=r"row 2 of this partition has an invalid 'topic': .*'bad topic'"):
        run(writer, [batch(0, 4, ["t", "t", "bad topic", None])])
    assert producer.sent() == ["v0", "v1"]


def test_a_failed_batch_stops_sending_and_fails_with_the_rows_mode_message():
    producer = FakeArrowProducer(fail_calls={1}, complete_at_once=True)
    writer, pool = make_writer(producer)
    with pytest.raises(PartitionWriteError) as info:
        run(writer, [batch(0, 2, "orders"), batch(2, 3, "orders"), batch(5, 2, "orders")])
    assert len(producer.calls) == 2  # the third batch was not sent
    message = str(info.value)
    assert message.startswith("3 records failed to be written to Kafka; the first error "
                              "(topic 'orders', partition 0): NotLeaderOrFollowerError")
    assert isinstance(info.value.__cause__, NotLeaderOrFollowerError)
    assert producer.flushes == 1 and pool.leases[0].released == 1


def test_failures_found_at_flush_are_all_counted():
    producer = FakeArrowProducer(fail_calls={0, 2})
    writer, _ = make_writer(producer)
    with pytest.raises(PartitionWriteError, match=r"^5 records failed .*call 0"):
        run(writer, [batch(0, 2), batch(2, 2), batch(4, 3)])


def test_send_arrow_raising_names_the_row_of_the_partition_through_the_topic_groups():
    error = InvalidPartitionError("b", 9, 3, row=1)
    producer = FakeArrowProducer(raise_at={1: error})
    writer, pool = make_writer(producer)
    # batch 2 (rows 4..7): topic groups b = rows 4, 6 (call 1), a = rows 5, 7 -> b's row 1 is row 6
    with pytest.raises(PartitionWriteError) as info:
        run(writer, [batch(0, 4), batch(4, 4, ["b", "a", "b", "a"]), batch(8, 1)])
    message = str(info.value)
    assert message.startswith("1 record failed to be written to Kafka; the first error (topic 'b', "
                              "partition 9, row 6 of this partition): InvalidPartitionError")
    assert info.value.__cause__ is error
    assert len(producer.calls) == 2 and producer.flushes == 1 and pool.leases[0].released == 1


def test_results_without_an_outcome_after_the_flush_fail_the_task():
    producer = FakeArrowProducer(never_complete=True)
    options = {**OPTIONS, "kafka.delivery.timeout.ms": "20", "kafka.request.timeout.ms": "10",
               "kafka.linger.ms": "0"}
    writer, pool = make_writer(producer, options=options)
    with pytest.raises(PartitionWriteError, match="without an outcome"):
        run(writer, [batch(0, 2)])
    assert pool.leases[0].released == 1


def test_spark_arrow_types_are_what_send_arrow_takes():
    """What Spark's mapInArrow hands Python for the sink columns (string, binary, int32, a
    microsecond timestamp in the session zone, headers as list<struct>) goes through as is."""
    schema = WriteSchema(value=Column("value", 1, Kind.BINARY), key=Column("key", 0, Kind.STRING),
                         partition=Column("partition", 2, Kind.INT),
                         headers=Column("headers", 3, Kind.HEADERS),
                         timestamp=Column("timestamp", 4, Kind.TIMESTAMP))
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, 678_901, tzinfo=datetime.timezone.utc)
    data = pa.RecordBatch.from_arrays([
        pa.array(["k", None], pa.large_string()), pa.array([b"v", None], pa.binary()),
        pa.array([1, None], pa.int32()),
        pa.array([[{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None], HEADERS),
        pa.array([when, None], pa.timestamp("us", tz="Europe/Paris"))],
        names=["value" if n == "x" else n for n in ["key", "value", "partition", "headers", "timestamp"]])
    producer = FakeArrowProducer()
    writer, _ = make_writer(producer, schema=schema, options={**OPTIONS, "topic": "events"})
    _, metrics = run(writer, [data])
    assert metrics.records_sent == 2
    assert producer.calls[0][2] == {"key": "key", "headers": "headers", "timestamp": "timestamp",
                                    "partition": "partition"}


def test_rechunk_concatenates_within_the_row_and_byte_budget():
    batches = [batch(i * 10, 10) for i in range(7)]
    assert [b.num_rows for b in rechunk(iter(batches), 0, 1)] == [10] * 7
    out = list(rechunk(iter(batches), 25, 1 << 30))
    assert [b.num_rows for b in out] == [20, 20, 20, 10]
    assert [v for b in out for v in b.column("value").to_pylist()] == [f"v{i}" for i in range(70)]
    same_size = batches[1:]  # values v10..v69: every batch the same bytes
    one = same_size[0].nbytes
    assert [b.num_rows for b in rechunk(iter(same_size), 1000, 3 * one)] == [30, 30]
    assert [b.num_rows for b in rechunk(iter(same_size), 1000, 3 * one - 1)] == [20, 20, 20]
    assert [b.num_rows for b in rechunk(iter([batch(0, 50)]), 10, 1)] == [50]  # never split


def test_rechunked_writes_name_the_same_row_positions():
    producer = FakeArrowProducer()
    writer, _ = make_writer(producer, rechunk_rows=22)
    bad = batch(20, 5, ["t", None, "t", "t", "t"])
    with pytest.raises(RowError, match="row 21 of this partition"):
        run(writer, [batch(0, 10), batch(10, 10), bad])
    assert sorted(producer.sent()) == sorted(f"v{i}" for i in range(21))
    assert len(producer.calls) == 2  # 20 rows re-chunked in one call, then the prefix


def test_merge_stats_adds_every_task():
    rows = [{"metrics": SinkTaskMetrics(records_sent=n, topics={"t": n}, tasks=1).to_json()} for n in (2, 3)]
    assert merge_stats(rows) == SinkTaskMetrics(records_sent=5, topics={"t": 5}, tasks=2)
    assert merge_stats([]) == SinkTaskMetrics()


def test_writer_pickles_with_the_default_seams_and_checks_its_arguments():
    writer = ArrowWriter(SinkConfig.from_options(OPTIONS), SCHEMA)
    copy = pickle.loads(pickle.dumps(writer))
    assert copy.sink_config == writer.sink_config and copy.write_schema == writer.write_schema
    with pytest.raises(ValueError, match="no 'topic' column"):
        ArrowWriter(SinkConfig.from_options(OPTIONS), WriteSchema(value=Column("value", 0, Kind.STRING)))
    with pytest.raises(ValueError, match="rechunk_rows"):
        ArrowWriter(SinkConfig.from_options(OPTIONS), SCHEMA, rechunk_rows=-1)
