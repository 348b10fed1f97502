"""The task skeleton both writers share: rows mode's
:class:`~spark_kafka_sink.spark.partition_writer.PartitionWriter` and arrow mode's
:class:`~spark_kafka_sink.spark.arrow_writer.ArrowWriter` each hand :func:`run_task` their own
``send``; everything around it is here, so both modes run, count and fail alike (docs/ARCHITECTURE.md,
"A record's path", "Executor task"):

1. :func:`task_info` reads the task's partition id and attempt number (a :class:`TaskInfo`) from
   Spark's ``TaskContext``.
2. Lease the producer for the sink's config from this Python worker's pool; a retry
   (attempt > 0) gets a fresh producer. With ``errors.tolerance=all`` the task's
   :class:`Outcome` gets its :class:`~spark_kafka_sink.spark.dead_letters.DeadLetters`.
3. ``send(producer, outcome)``: the writer's own loop, which records its delivery tallies and a
   send that raised in the :class:`Outcome`.
4. Flush, even when ``send`` raised (the worker may be SIGKILLed once idle: nothing flushes
   later), bounded by ``kafka.delivery.timeout.ms`` plus :data:`FLUSH_MARGIN_S`: a stuck producer
   fails the task, naming the records still pending, instead of hanging it. Then wait for every
   outcome (:meth:`Outcome.settle`) and release the lease in ``finally``.
5. If any record failed, raise :class:`PartitionWriteError` (:meth:`Outcome.check`): how many
   records failed, and the first error with its topic, partition and row.

A task that succeeded comes out as a :class:`TaskRun`, which makes its :class:`TaskStats` and
:class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics`.

Exactly-once (``delivery.guarantee``): step 2 creates a transactional producer for the task
instead (transactional id ``<prefix>-<partition id>``, the same for every attempt, so
``init_transactions()`` fences a failed predecessor and aborts what it left open) and begins a
transaction; after step 5 the task hands its open transaction out
(``KafkaProducer.resumable_transaction``) in its run, for the driver to commit
(:mod:`.exactly_once`), and closes the producer, which leaves the transaction open. A task that
fails aborts its transaction first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import KafkaError, KafkaTimeoutError
from ..producer.producer import KafkaProducer
from ..producer.transactions.resumable import ResumableTransaction
from ..producer.tally import DeliveryFailure, DeliveryTally
from .dead_letters import DeadLetters, TaskContext
from .metrics import SinkTaskMetrics, task_metrics
from .options import SinkConfig
from .producer_pool import ProducerPool
from .schema import WriteSchema

__all__ = ["FLUSH_MARGIN_S", "Outcome", "PartitionWriteError", "TaskInfo", "TaskRun", "TaskStats",
           "check_writer_arguments", "run_in_transaction", "run_task", "task_info"]

log = logging.getLogger(__name__)


class PartitionWriteError(KafkaError):
    """Records of a task's partition could not be written; the task fails (and Spark may retry it).
    Both modes raise it, with the same messages."""



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
    transaction: ResumableTransaction | None = None
    """Exactly-once: the task's open transaction, for the driver to commit."""
    metrics: SinkTaskMetrics | None = None
    """The task's figures (what the accumulator gets)."""


@dataclass(frozen=True)
class TaskInfo:
    """The running task's partition id and attempt number (:func:`task_info`; a writer's ``task``
    seam returns one)."""

    partition_id: int
    attempt: int


def task_info() -> TaskInfo:
    """The running Spark task's partition id and attempt number; ``(-1, 0)`` outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return TaskInfo(-1, 0)
    return TaskInfo(context.partitionId(), context.attemptNumber())


class Outcome:
    """What a task's records came to: the delivery tallies of its sends (one
    :class:`DeliveryTally` per task in rows mode, one ``ArrowSendResult`` per ``send_arrow`` call
    in arrow mode; each counts acknowledged and failed records once per batch, on the sender
    thread) plus a send that raised. Shared by both modes, so their errors read the same."""

    __slots__ = ("tallies", "send_error", "send_topic", "send_partition", "send_position",
                 "dead_letters")

    def __init__(self, *tallies: DeliveryTally) -> None:
        self.tallies: list[DeliveryTally] = list(tallies)
        self.dead_letters: DeadLetters | None = None
        """With ``errors.tolerance=all``: the task's bad records (set by :func:`run_task`)."""
        self.send_error: BaseException | None = None
        self.send_topic: str | None = None
        self.send_partition: int | None = None
        self.send_position: int | None = None

    @property
    def tally(self) -> DeliveryTally:
        """The first tally (rows mode's only one)."""
        return self.tallies[0]

    @property
    def acked(self) -> int:
        return sum(tally.acked for tally in self.tallies)

    @property
    def failed(self) -> int:
        return sum(tally.failed for tally in self.tallies) + (self.send_error is not None)

    @property
    def topics(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for tally in self.tallies:
            for topic, count in tally.acked_by_topic.items():
                merged[topic] = merged.get(topic, 0) + count
        return merged

    @property
    def first_failure(self) -> DeliveryFailure | None:
        """The first failed batch of the first tally (in send order) that has one."""
        return next((t.first_failure for t in self.tallies if t.first_failure is not None), None)

    def record_send_error(self, error: BaseException, topic: str | None, partition: int | None,
                          position: int | None = None) -> None:
        """A send raised (sending stops there); ``position``: the row in the task's partition,
        when known."""
        self.send_error, self.send_topic, self.send_partition = error, topic, partition
        self.send_position = position

    def settle(self, timeout_s: float) -> None:
        """After the flush: wait until every tally that can be waited on (``wait(timeout)``, as
        ``ArrowSendResult``) has an outcome for each of its records."""
        for tally in self.tallies:
            wait = getattr(tally, "wait", None)
            if wait is not None and not wait(timeout_s):
                raise PartitionWriteError(
                    f"{tally!r} still had records without an outcome {timeout_s:.0f} s after the "
                    f"flush; failing the task rather than reporting them written")

    def check(self) -> None:
        failure = self.first_failure
        if failure is None and self.send_error is None:
            if self.dead_letters is not None:
                self.dead_letters.check()
            return
        position = None
        if failure is not None:  # a batch failed before send raised: it is the first error
            error, topic, partition = failure.error, failure.topic_partition.topic, failure.topic_partition.partition
        else:
            error, topic, partition = self.send_error, self.send_topic, self.send_partition
            position = self.send_position
        failed = self.failed
        where = f"topic {topic!r}, partition {'not chosen yet' if partition is None else partition}"
        if position is not None:
            where += f", row {position} of this partition"
        raise PartitionWriteError(
            f"{failed} record{'s' if failed != 1 else ''} failed to be written to Kafka; "
            f"the first error ({where}): {type(error).__name__}: {error}") from error


@dataclass(frozen=True)
class TaskRun:
    """A task whose records were all sent, flushed and checked: what its stats and metrics are
    made of (:func:`run_task`)."""

    task: TaskInfo
    outcome: Outcome
    before: Any
    after: Any
    producer_created: bool
    started: float
    transaction: ResumableTransaction | None = None

    def stats(self) -> TaskStats:
        bytes_sent = int(self.after.values.get("byte-total", 0) - self.before.values.get("byte-total", 0))
        return TaskStats(self.task.partition_id, self.task.attempt, self.outcome.acked,
                         self.outcome.failed, bytes_sent, int((time.monotonic() - self.started) * 1000),
                         self.producer_created, self.transaction, self.metrics())

    def metrics(self) -> SinkTaskMetrics:
        outcome = self.outcome
        letters = outcome.dead_letters
        return task_metrics(self.before, self.after, records_sent=outcome.acked,
                            records_failed=outcome.failed, topics=outcome.topics,
                            attempt=self.task.attempt, producer_created=self.producer_created,
                            bad_records=None if letters is None else letters.figures())


def run_task(config: SinkConfig, pool: Callable[[], ProducerPool], task: Callable[[], TaskInfo],
             send: Callable[[Any, Outcome], None], outcome: Outcome,
             batch_id: int | None = None) -> TaskRun:
    """The skeleton of a task in either mode: lease this worker's producer for ``config`` (a
    retry, attempt > 0, gets a fresh one), ``send(producer, outcome)``, flush (even when ``send``
    raised: the worker may be SIGKILLed once idle, so nothing flushes later), wait for every
    outcome, release the lease in ``finally``, then raise the first failed record's error, if any.
    With ``errors.tolerance=all`` the outcome gets the task's :class:`.dead_letters.DeadLetters`
    (``batch_id``: the micro-batch, for their context headers), which ``send`` hands the bad
    records to and settles.
    """
    started = time.monotonic()
    info = task()
    _with_dead_letters(config, info, outcome, batch_id)
    if config.exactly_once:
        return _run_transactional_task(config, info, send, outcome, started)
    lease = pool().acquire(config.producer_config, attempt=info.attempt,
                           idle_timeout_ms=config.producer_cache_timeout_ms)
    try:
        producer = lease.producer
        before = producer.metrics_snapshot()
        _flushed(producer, lambda: send(producer, outcome), config.producer_config.delivery_timeout_ms)
        outcome.settle(config.producer_config.delivery_timeout_ms / 1000)
        after = producer.metrics_snapshot()
    finally:
        lease.release()
    outcome.check()
    return TaskRun(info, outcome, before, after, lease.created, started)


def run_in_transaction(config: SinkConfig, producer: KafkaProducer, info: TaskInfo,
                       send: Callable[[Any, Outcome], None], outcome: Outcome,
                       batch_id: int | None = None, *, created: bool = False) -> TaskRun:
    """:func:`run_task`'s exactly-once steps with a transactional producer the caller keeps (the
    driver's own write of a small micro-batch, ``spark/driver_write.py``): one transaction begun
    on ``producer``, ``send``, flush, settle, check, then handed out (``TaskRun.transaction``) and
    left open, for the caller to commit with the same producer. A failure aborts the transaction
    and raises; the producer is never closed here. ``created``: the producer was made for this
    run (its metrics say so)."""
    started = time.monotonic()
    _with_dead_letters(config, info, outcome, batch_id)
    return _in_transaction(producer, config.producer_config.delivery_timeout_ms, info, send, outcome,
                           started, created)


def _in_transaction(producer: KafkaProducer, timeout_ms: int, info: TaskInfo,
                    send: Callable[[Any, Outcome], None], outcome: Outcome, started: float,
                    created: bool) -> TaskRun:
    """One transaction on ``producer`` (its transactions initialised): begin, send, the flush
    bounded by ``timeout_ms`` (``delivery.timeout.ms``), settle, check, then hand it out open. A
    failure aborts it; ``producer`` stays open."""
    try:
        producer.begin_transaction()
        before = producer.metrics_snapshot()
        _flushed(producer, lambda: send(producer, outcome), timeout_ms)
        outcome.settle(timeout_ms / 1000)
        after = producer.metrics_snapshot()
        outcome.check()
        transaction = producer.resumable_transaction()
    except BaseException:
        _abort_quietly(producer)
        raise
    return TaskRun(info, outcome, before, after, created, started, transaction)


def _with_dead_letters(config: SinkConfig, info: TaskInfo, outcome: Outcome,
                       batch_id: int | None) -> None:
    """With ``errors.tolerance=all``: ``outcome`` gets the task's :class:`DeadLetters`."""
    policy = config.error_policy
    if not policy.tolerant:
        return
    producer_config = config.producer_config
    outcome.dead_letters = DeadLetters(
        policy, TaskContext(batch_id, info.partition_id, info.attempt),
        min(producer_config.max_request_size, producer_config.buffer_memory),
        flush_timeout_s=producer_config.delivery_timeout_ms / 1000 + FLUSH_MARGIN_S)


def _run_transactional_task(config: SinkConfig, info: TaskInfo, send: Callable[[Any, Outcome], None],
                            outcome: Outcome, started: float) -> TaskRun:
    """:func:`run_task` in exactly-once mode (see the module docstring): a producer of the task's
    own, one transaction, handed out open; aborted if anything fails."""
    if info.partition_id < 0:
        raise PartitionWriteError("exactly-once writes run inside Spark tasks: no task partition id")
    producer_config = config.transactional_config(info.partition_id)
    producer = KafkaProducer(producer_config)
    try:
        try:
            producer.init_transactions()
        except BaseException:
            _abort_quietly(producer)
            raise
        return _in_transaction(producer, producer_config.delivery_timeout_ms, info, send, outcome,
                               started, True)
    finally:
        producer.close(producer_config.delivery_timeout_ms / 1000)


def _abort_quietly(producer: KafkaProducer) -> None:
    """Abort the task's transaction on the way out of a failure; its own errors are logged (a
    fenced producer cannot abort, and the next attempt's ``init_transactions()`` aborts it)."""
    try:
        producer.abort_transaction()
    except Exception:  # noqa: BLE001 - the task's own error is the one to raise
        log.warning("could not abort the failed task's transaction", exc_info=True)


def check_writer_arguments(sink_config: Any, write_schema: Any) -> None:
    """``TypeError`` unless a writer (either mode) got a ``SinkConfig`` and a ``WriteSchema``."""
    if not isinstance(sink_config, SinkConfig):
        raise TypeError(f"sink_config must be a SinkConfig, got {type(sink_config).__name__}")
    if not isinstance(write_schema, WriteSchema):
        raise TypeError(f"write_schema must be a WriteSchema, got {type(write_schema).__name__}")


FLUSH_MARGIN_S = 30.0
"""The task's flush waits ``kafka.delivery.timeout.ms`` plus this long at most: by then every
record has an outcome (it is failed at its delivery timeout) unless the producer is stuck."""


def _flushed(producer: Any, send: Callable[[], None], delivery_timeout_ms: int) -> None:
    """``send()``, then ``producer.flush()`` even if ``send`` raised. A flush error surfaces only
    when ``send`` succeeded, so it never hides the first error. The flush is bounded
    (``delivery.timeout.ms`` plus :data:`FLUSH_MARGIN_S`): a stuck producer fails the task with
    what is still pending rather than hanging it."""
    try:
        send()
    except BaseException:
        try:
            _bounded_flush(producer, delivery_timeout_ms)
        except Exception:  # noqa: BLE001 - the send error is the one to report
            log.warning("flush after a failed partition write also failed", exc_info=True)
        raise
    _bounded_flush(producer, delivery_timeout_ms)


def _bounded_flush(producer: Any, delivery_timeout_ms: int) -> None:
    timeout_s = delivery_timeout_ms / 1000 + FLUSH_MARGIN_S
    try:
        producer.flush(timeout_s)
    except KafkaTimeoutError as error:
        raise PartitionWriteError(
            f"the producer's flush did not end within {timeout_s:g} s (kafka.delivery.timeout.ms="
            f"{delivery_timeout_ms} plus {FLUSH_MARGIN_S:g} s): {error}; failing the task rather than "
            f"waiting for ever (records still pending may yet be written)") from error
