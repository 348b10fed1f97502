"""PartitionWriter with a fake pool and producer: no broker, no SparkSession."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql import Row

from spark_kafka_sink.errors import NotLeaderOrFollowerError, RecordTooLargeError
from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark import partition_writer, task as task_module
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.partition_writer import PartitionWriter
from spark_kafka_sink.spark.rows import RowError
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema
from spark_kafka_sink.spark.task import PartitionWriteError, TaskInfo, TaskStats, task_info
from spark_kafka_sink.producer.metrics_snapshot import MetricsSnapshot
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.structs import TopicPartition

OPTIONS = {"kafka.bootstrap.servers": "localhost:9092", "producer.cache.timeout": "2m"}
SCHEMA = WriteSchema(value=Column("value", 1, Kind.STRING), key=Column("key", 0, Kind.STRING),
                     topic=Column("topic", 2, Kind.STRING))


class FakeFuture:
    """Completes when the producer says so, as a batch of one record: tells the record's
    DeliveryTally (the writer's) or calls its plain callback."""

    def __init__(self, topic: str, partition: int, callback):
        self.topic_partition = TopicPartition(topic, partition)
        self.callback = callback

    def complete(self, error: BaseException | None = None) -> None:
        if isinstance(self.callback, DeliveryTally):
            self.callback.batch_completed(self.topic_partition, 1, error)
        elif self.callback is not None:
            self.callback(None if error else object(), error)


class FakeProducer:
    """Keeps sends pending until flush(); ``fail_at`` makes that send's future fail (``errors``
    at flush) or ``raise_at`` makes ``send`` itself raise."""

    def __init__(self, *, fail_at=(), raise_at=None, complete_at_once=False, flush_error=None):
        self.sent: list[tuple] = []
        self.pending: list[tuple[FakeFuture, BaseException | None]] = []
        self.fail_at = set(fail_at)
        self.raise_at = raise_at
        self.complete_at_once = complete_at_once
        self.flush_error = flush_error
        self.flushes = 0
        self.byte_total = 0

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        index = len(self.sent)
        if index == self.raise_at:
            raise RecordTooLargeError("too big")
        self.sent.append((topic, value, key, partition, timestamp_ms, headers))
        future = FakeFuture(topic, 0 if partition is None else partition, callback)
        error = NotLeaderOrFollowerError(f"record {index}") if index in self.fail_at else None
        if self.complete_at_once:
            future.complete(error)
            self.byte_total += 10
        else:
            self.pending.append((future, error))
        return future

    def flush(self, timeout=None):
        self.flushes += 1
        for future, error in self.pending:
            future.complete(error)
            self.byte_total += 10
        self.pending.clear()
        if self.flush_error is not None:
            raise self.flush_error

    def metrics_snapshot(self):
        return MetricsSnapshot({"byte-total": float(self.byte_total)})


class FakeLease:
    def __init__(self, producer, created):
        self.producer = producer
        self.created = created
        self.released = 0

    def release(self):
        self.released += 1


class FakePool:
    def __init__(self, producer):
        self.producer = producer
        self.acquired: list[tuple] = []
        self.leases: list[FakeLease] = []

    def acquire(self, config, *, attempt=0, idle_timeout_ms=None):
        self.acquired.append((config, attempt, idle_timeout_ms))
        lease = FakeLease(self.producer, created=not self.leases or attempt > 0)
        self.leases.append(lease)
        return lease


def make_writer(producer, *, attempt=0, schema=SCHEMA, options=OPTIONS):
    pool = FakePool(producer)
    writer = PartitionWriter(SinkConfig.from_options(options), schema, pool=lambda: pool,
                             task=lambda: TaskInfo(4, attempt))
    return writer, pool


def rows(count, topic="t"):
    return [Row(key=f"k{i}", value=f"v{i}", topic=topic) for i in range(count)]


def test_writes_every_row_flushes_releases_and_returns_stats():
    producer = FakeProducer()
    writer, pool = make_writer(producer)
    stats = writer(iter(rows(5)))
    assert producer.sent == [("t", f"v{i}".encode(), f"k{i}".encode(), None, None, None) for i in range(5)]
    assert producer.flushes == 1 and pool.leases[0].released == 1
    assert stats == TaskStats(partition_id=4, attempt=0, records_sent=5, records_failed=0,
                              bytes_sent=50, duration_ms=stats.duration_ms, producer_created=True,
                              metrics=stats.metrics)
    assert stats.transaction is None and stats.metrics.records_sent == 5
    assert writer(iter(rows(1))).producer_created is False  # the second task reuses it
    config, attempt, idle = pool.acquired[0]
    assert config == SinkConfig.from_options(OPTIONS).producer_config
    assert (attempt, idle) == (0, 120_000)


def test_attempt_number_is_passed_to_the_pool():
    writer, pool = make_writer(FakeProducer(), attempt=2)
    stats = writer(iter(rows(1)))
    assert (stats.attempt, stats.producer_created) == (2, True)
    assert pool.acquired[0][1] == 2


def test_empty_partition_still_flushes_and_releases():
    producer = FakeProducer()
    writer, pool = make_writer(producer)
    assert writer(iter([])).records_sent == 0
    assert producer.flushes == 1 and pool.leases[0].released == 1


def test_first_callback_error_stops_sending_and_fails_with_count_topic_partition():
    producer = FakeProducer(fail_at={2, 3}, complete_at_once=True)
    writer, pool = make_writer(producer)
    with pytest.raises(PartitionWriteError) as info:
        writer(iter(rows(10, topic="orders")))
    assert len(producer.sent) == 3  # record 2 failed before record 3 was sent
    message = str(info.value)
    assert message.startswith("1 record failed to be written to Kafka")
    assert "topic 'orders', partition 0" in message and "NotLeaderOrFollowerError" in message
    assert "record 2" in message
    assert isinstance(info.value.__cause__, NotLeaderOrFollowerError)
    assert producer.flushes == 1 and pool.leases[0].released == 1


def test_errors_found_at_flush_are_all_counted():
    producer = FakeProducer(fail_at={1, 3, 4})
    writer, pool = make_writer(producer)
    with pytest.raises(PartitionWriteError, match=r"^3 records failed .*record 1"):
        writer(iter(rows(6)))
    assert len(producer.sent) == 6 and producer.flushes == 1 and pool.leases[0].released == 1


def test_send_that_raises_counts_as_failed_and_names_the_requested_partition():
    schema = WriteSchema(value=Column("value", 0, Kind.BINARY), partition=Column("partition", 1, Kind.INT))
    producer = FakeProducer(raise_at=1)
    writer, pool = make_writer(producer, schema=schema, options={**OPTIONS, "topic": "big"})
    with pytest.raises(PartitionWriteError, match=r"1 record failed.*topic 'big', partition 7.*MESSAGE_TOO_LARGE: too big"):
        writer(iter([Row(value=b"a", partition=7), Row(value=b"b", partition=7), Row(value=b"c", partition=7)]))
    assert len(producer.sent) == 1 and producer.flushes == 1 and pool.leases[0].released == 1


def test_row_error_flushes_what_was_sent_and_releases():
    producer = FakeProducer()
    writer, pool = make_writer(producer)
    bad = [*rows(2), Row(key="k", value="v", topic=None)]
    with pytest.raises(RowError, match="row 2 of this partition has a null 'topic'"):
        writer(iter(bad))
    assert len(producer.sent) == 2 and producer.flushes == 1 and pool.leases[0].released == 1


def test_flush_error_is_raised_and_the_lease_released():
    producer = FakeProducer(flush_error=TimeoutError("flush timed out"))
    writer, pool = make_writer(producer)
    with pytest.raises(TimeoutError):
        writer(iter(rows(2)))
    assert pool.leases[0].released == 1


def test_flush_error_does_not_hide_the_row_error():
    producer = FakeProducer(flush_error=TimeoutError("flush timed out"))
    writer, pool = make_writer(producer)
    with pytest.raises(RowError):
        writer(iter([Row(key="k", value="v", topic=None)]))
    assert pool.leases[0].released == 1


def test_writer_pickles_with_the_default_seams():
    writer = PartitionWriter(SinkConfig.from_options(OPTIONS), SCHEMA)
    copy = pickle.loads(pickle.dumps(writer))
    assert copy.sink_config == writer.sink_config and copy.write_schema == writer.write_schema


def test_no_topic_anywhere_is_refused_when_built():
    schema = WriteSchema(value=Column("value", 0, Kind.STRING))
    with pytest.raises(ValueError, match="no 'topic' column"):
        PartitionWriter(SinkConfig.from_options(OPTIONS), schema)


def test_task_info_outside_a_task():
    assert task_info() == TaskInfo(-1, 0)


def test_the_shared_names_stay_importable_from_the_rows_writer_module():
    """The task skeleton moved to spark/task.py; the public names users may import from here stay."""
    for name in ("PartitionWriteError", "TaskStats", "FLUSH_MARGIN_S"):
        assert getattr(partition_writer, name) is getattr(task_module, name)


def test_a_stuck_flush_fails_the_task_at_the_delivery_timeout_plus_a_margin_naming_what_is_pending():
    from spark_kafka_sink.errors import KafkaTimeoutError
    from spark_kafka_sink.spark.task import FLUSH_MARGIN_S

    class StuckProducer(FakeProducer):
        def __init__(self):
            super().__init__()
            self.timeouts = []

        def flush(self, timeout=None):
            self.timeouts.append(timeout)
            if timeout is None:
                raise AssertionError("an unbounded flush of a stuck producer hangs the task for ever")
            raise KafkaTimeoutError(f"flush did not complete within {timeout} s: 2 records in 1 batch "
                                    "(topic 't' partition 0) still without an outcome")
    producer = StuckProducer()
    writer, pool = make_writer(producer, options={**OPTIONS, "kafka.delivery.timeout.ms": "40000"})
    with pytest.raises(PartitionWriteError) as info:
        writer(iter(rows(2)))
    assert producer.timeouts == [40 + FLUSH_MARGIN_S] and pool.leases[0].released == 1
    assert str(info.value) == (
        f"the producer's flush did not end within {40 + FLUSH_MARGIN_S:g} s (kafka.delivery.timeout.ms=40000 "
        f"plus {FLUSH_MARGIN_S:g} s): flush did not complete within {40 + FLUSH_MARGIN_S} s: 2 records in 1 "
        "batch (topic 't' partition 0) still without an outcome; failing the task rather than waiting for "
        "ever (records still pending may yet be written)")


# --- exactly-once: the task's own transaction ----------------------------------------------------

EOS_OPTIONS = {**OPTIONS, "delivery.guarantee": "exactly-once", "transactional.id.prefix": "q"}


class FakeTransactionalProducer(FakeProducer):
    """A task's transactional producer: its transactional calls, in order, in ``calls``."""

    made: list[FakeTransactionalProducer] = []

    def __init__(self, config, **kw):
        super().__init__(**kw)
        self.config = config
        self.calls: list[str] = []
        FakeTransactionalProducer.made.append(self)

    def init_transactions(self, timeout=None):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def resumable_transaction(self):
        self.calls.append("hand out")
        return ResumableTransaction(self.config.transactional_id, 7, 0, (TopicPartition("t", 0),), 2)

    def abort_transaction(self, timeout=None):
        self.calls.append("abort")

    def close(self, timeout=None):
        self.calls.append("close")


@pytest.fixture
def task_producers(monkeypatch):
    """The transactional producers exactly-once tasks create; ``fail_at`` for the next ones."""
    options = {}
    FakeTransactionalProducer.made = []
    monkeypatch.setattr(task_module, "KafkaProducer",
                        lambda config: FakeTransactionalProducer(config, **options))
    return FakeTransactionalProducer.made, options


def eos_writer():
    return PartitionWriter(SinkConfig.from_options(EOS_OPTIONS), SCHEMA,
                           pool=lambda: pytest.fail("exactly-once tasks use no pooled producer"),
                           task=lambda: TaskInfo(4, 1))


def test_an_exactly_once_task_hands_its_transaction_out_open(task_producers):
    made, _ = task_producers
    stats = eos_writer()(iter(rows(3)))
    [producer] = made
    assert producer.config.transactional_id == "q-4"
    assert producer.calls == ["init", "begin", "hand out", "close"]   # not committed, not aborted
    assert stats.transaction.transactional_id == "q-4" and stats.records_sent == 3


def test_a_failed_exactly_once_task_aborts_its_own_transaction_before_closing(task_producers):
    """The task does not leave its records to the driver's later fence: it aborts them itself."""
    made, options = task_producers
    options["fail_at"] = {1}
    with pytest.raises(PartitionWriteError, match="record 1"):
        eos_writer()(iter(rows(3)))
    [producer] = made
    assert producer.calls == ["init", "begin", "abort", "close"]


def test_an_exactly_once_task_whose_row_is_refused_aborts_too(task_producers):
    made, _ = task_producers
    with pytest.raises(RowError):
        eos_writer()(iter([*rows(1), Row(key="k", value="v", topic=None)]))
    assert made[0].calls == ["init", "begin", "abort", "close"]


def test_an_exactly_once_write_outside_a_spark_task_is_refused(task_producers):
    made, _ = task_producers
    writer = PartitionWriter(SinkConfig.from_options(EOS_OPTIONS), SCHEMA,
                             task=lambda: TaskInfo(-1, 0))
    with pytest.raises(PartitionWriteError, match="exactly-once writes run inside Spark tasks"):
        writer(iter(rows(1)))
    assert made == []
