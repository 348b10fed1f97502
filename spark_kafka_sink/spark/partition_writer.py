"""PartitionWriter: writes the rows of one Spark task (what ``df.foreachPartition`` calls).

The steps follow Spark's ``KafkaWriteTask`` and DESIGN.md §2:

1. Lease the producer for the sink's config from this Python worker's pool. The attempt number
   comes from ``TaskContext.attemptNumber()``; a retry (attempt > 0) gets a fresh producer.
2. Send every row with the task's :class:`~spark_kafka_sink.producer.tally.DeliveryTally`, which
   counts acknowledged and failed records once per completed batch (a callback per record would
   cost the sending thread about half its speed). Sending stops at the first error seen, whether
   a batch failed or ``send`` raised.
3. Flush (the worker may be SIGKILLed once idle: nothing flushes later), then check again.
4. Release the lease in ``finally``.
5. If any record failed, raise :class:`PartitionWriteError`: how many records failed, and the
   first error with its topic and partition.

The writer keeps only the frozen config and schema (and, from ``KafkaSink``, a Spark
accumulator), so it pickles small. It returns a :class:`TaskStats` (``foreachPartition`` discards
it; ``rdd.mapPartitions`` users can collect it). With an accumulator, a task that succeeded adds
its :class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics` to it as its very last step, after
every record was checked: a failed attempt adds nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..errors import KafkaError
from ..producer.tally import DeliveryTally
from .metrics import task_metrics
from .options import SinkConfig
from .producer_pool import ProducerPool, get_pool
from .rows import RowConverter
from .schema import WriteSchema

log = logging.getLogger(__name__)


class PartitionWriteError(KafkaError):
    """Records of a task's partition could not be written; the task fails (and Spark may retry it)."""


@dataclass(frozen=True)
class TaskStats:
    """What one task wrote: records acknowledged, records failed, and bytes sent to the brokers
    (the producer's ``byte-total`` delta: record batches as sent, after compression)."""

    partition_id: int
    attempt: int
    records_sent: int
    records_failed: int
    bytes_sent: int
    duration_ms: int
    producer_created: bool = False
    """Whether the task's producer was created for it (first use in this worker, or a retry)
    rather than reused from the worker's pool."""


@dataclass(frozen=True)
class _TaskInfo:
    partition_id: int
    attempt: int


def task_info() -> _TaskInfo:
    """The running Spark task's partition id and attempt number; ``(-1, 0)`` outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return _TaskInfo(-1, 0)
    return _TaskInfo(context.partitionId(), context.attemptNumber())


class _Outcome:
    """What a task's records came to: the producer's :class:`DeliveryTally` (acknowledged and
    failed records, counted once per batch on the sender thread) plus a ``send`` that raised."""

    __slots__ = ("tally", "send_error", "send_topic", "send_partition")

    def __init__(self) -> None:
        self.tally = DeliveryTally()
        self.send_error: BaseException | None = None
        self.send_topic: str | None = None
        self.send_partition: int | None = None

    @property
    def acked(self) -> int:
        return self.tally.acked

    @property
    def failed(self) -> int:
        return self.tally.failed + (self.send_error is not None)

    @property
    def topics(self) -> dict[str, int]:
        return self.tally.acked_by_topic

    def record_send_error(self, error: BaseException, topic: str | None, partition: int | None) -> None:
        """``send`` raised for one record (sending stops there)."""
        self.send_error, self.send_topic, self.send_partition = error, topic, partition

    def check(self) -> None:
        failure = self.tally.first_failure
        if failure is None and self.send_error is None:
            return
        if failure is not None:  # a batch failed before send raised: it is the first error
            error, topic, partition = failure.error, failure.topic_partition.topic, failure.topic_partition.partition
        else:
            error, topic, partition = self.send_error, self.send_topic, self.send_partition
        failed = self.failed
        where = f"topic {topic!r}, partition {'not chosen yet' if partition is None else partition}"
        raise PartitionWriteError(
            f"{failed} record{'s' if failed != 1 else ''} failed to be written to Kafka; "
            f"the first error ({where}): {type(error).__name__}: {error}") from error


class PartitionWriter:
    """Writes an iterator of rows to Kafka; see the module docstring.

    ``pool`` (a zero-argument function returning the pool) and ``task`` (returning the task's
    partition id and attempt) are seams for tests; the defaults are this worker's pool and
    Spark's ``TaskContext``. ``accumulator`` (anything with ``add``, normally a Spark accumulator
    of :class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics`) receives each successful task's
    figures.
    """

    def __init__(self, sink_config: SinkConfig, write_schema: WriteSchema, *,
                 pool: Callable[[], ProducerPool] = get_pool,
                 task: Callable[[], _TaskInfo] = task_info,
                 accumulator: Any = None):
        if not isinstance(sink_config, SinkConfig):
            raise TypeError(f"sink_config must be a SinkConfig, got {type(sink_config).__name__}")
        if not isinstance(write_schema, WriteSchema):
            raise TypeError(f"write_schema must be a WriteSchema, got {type(write_schema).__name__}")
        RowConverter(write_schema, sink_config.topic)  # fail here, on the driver, not in tasks
        self.sink_config = sink_config
        self.write_schema = write_schema
        self._pool = pool
        self._task = task
        self.accumulator = accumulator

    def __call__(self, rows: Iterable[Any]) -> TaskStats:
        started = time.monotonic()
        task = self._task()
        config = self.sink_config
        lease = self._pool().acquire(config.producer_config, attempt=task.attempt,
                                     idle_timeout_ms=config.producer_cache_timeout_ms)
        outcome = _Outcome()
        try:
            producer = lease.producer
            before = producer.metrics_snapshot()
            _flushed(producer, lambda: self._send_all(producer, rows, outcome))
            after = producer.metrics_snapshot()
        finally:
            lease.release()
        outcome.check()
        bytes_sent = int(after.values.get("byte-total", 0) - before.values.get("byte-total", 0))
        stats = TaskStats(task.partition_id, task.attempt, outcome.acked, outcome.failed, bytes_sent,
                          int((time.monotonic() - started) * 1000), lease.created)
        log.debug("partition %d (attempt %d) written: %s", task.partition_id, task.attempt, stats)
        if self.accumulator is not None:  # last: only a task that succeeded counts
            self.accumulator.add(task_metrics(before, after, records_sent=outcome.acked,
                                              records_failed=outcome.failed,
                                              topics=outcome.topics, attempt=task.attempt,
                                              producer_created=lease.created))
        return stats

    def _send_all(self, producer: Any, rows: Iterable[Any], outcome: _Outcome) -> None:
        """Send rows until the first error; a ``send`` that raises counts as a failed record.
        Every record is sent with the task's tally, so outcomes are counted once per batch."""
        convert = RowConverter(self.write_schema, self.sink_config.topic).convert
        send = producer.send
        tally = outcome.tally
        for position, row in enumerate(rows):
            if tally.first_failure is not None:
                return
            record = convert(row, position)
            try:
                send(record.topic, record.value, record.key, record.partition, record.timestamp_ms,
                     record.headers, tally)
            except Exception as error:  # noqa: BLE001 - reported with its record by check()
                outcome.record_send_error(error, record.topic, record.partition)
                return

    def __repr__(self) -> str:
        return f"PartitionWriter({self.sink_config!r}, {self.write_schema!r})"


def _flushed(producer: Any, send: Callable[[], None]) -> None:
    """``send()``, then ``producer.flush()`` even if ``send`` raised. A flush error surfaces only
    when ``send`` succeeded, so it never hides the first error."""
    try:
        send()
    except BaseException:
        try:
            producer.flush()
        except Exception:  # noqa: BLE001 - the send error is the one to report
            log.warning("flush after a failed partition write also failed", exc_info=True)
        raise
    producer.flush()
