"""PartitionWriter: writes the rows of one Spark task (what ``df.foreachPartition`` calls).

The steps follow Spark's ``KafkaWriteTask`` and DESIGN.md §2:

1. Lease the producer for the sink's config from this Python worker's pool. The attempt number
   comes from ``TaskContext.attemptNumber()``; a retry (attempt > 0) gets a fresh producer.
2. Send every row, each with a completion hook that keeps the first error. Sending stops at the
   first error seen, whether a callback reported it or ``send`` raised it.
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
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..errors import KafkaError
from ..producer.future import RecordFuture
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
    """Counts completions and keeps the first failure. Completion hooks run on the sender thread."""

    __slots__ = ("acked", "failed", "first_error", "first_topic", "first_partition", "topics",
                 "_lock")

    def __init__(self) -> None:
        self.acked = 0
        self.topics: dict[str, int] = {}
        self.failed = 0
        self.first_error: BaseException | None = None
        self.first_topic: str | None = None
        self.first_partition: int | None = None
        self._lock = threading.Lock()

    def on_done(self, future: RecordFuture) -> None:
        error = future.exception(0)
        tp = future.topic_partition
        if error is None:
            topic = tp.topic
            with self._lock:  # also called on the task's thread when the batch already completed
                self.acked += 1
                self.topics[topic] = self.topics.get(topic, 0) + 1
            return
        self.record_failure(error, tp.topic, tp.partition)

    def record_failure(self, error: BaseException, topic: str | None, partition: int | None) -> None:
        with self._lock:
            self.failed += 1
            if self.first_error is None:
                self.first_error, self.first_topic, self.first_partition = error, topic, partition

    def check(self) -> None:
        error = self.first_error
        if error is None:
            return
        where = (f"topic {self.first_topic!r}, partition "
                 f"{'not chosen yet' if self.first_partition is None else self.first_partition}")
        raise PartitionWriteError(
            f"{self.failed} record{'s' if self.failed != 1 else ''} failed to be written to Kafka; "
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
        """Send rows until the first error; a ``send`` that raises counts as a failed record."""
        convert = RowConverter(self.write_schema, self.sink_config.topic).convert
        send = producer.send
        on_done = outcome.on_done
        for position, row in enumerate(rows):
            if outcome.first_error is not None:
                return
            record = convert(row, position)
            try:
                future = send(record.topic, record.value, record.key, record.partition,
                              record.timestamp_ms, record.headers)
            except Exception as error:  # noqa: BLE001 - reported with its record by check()
                outcome.record_failure(error, record.topic, record.partition)
                return
            future.add_done_callback(on_done)

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
