"""PartitionWriter: writes the rows of one Spark task (what ``df.foreachPartition`` calls).

The steps follow Spark's ``KafkaWriteTask`` (docs/ARCHITECTURE.md, "A record's path"):

1. Lease the producer for the sink's config from this Python worker's pool. The attempt number
   comes from ``TaskContext.attemptNumber()``; a retry (attempt > 0) gets a fresh producer.
2. Send every row with the task's :class:`~spark_kafka_sink.producer.tally.DeliveryTally`, which
   counts acknowledged and failed records once per completed batch (a callback per record runs
   Python on the sender thread and takes the GIL from the sending one: bench/README.md, "Figures
   behind design choices"). Sending stops at the first error seen, whether a batch failed or
   ``send`` raised.
3. Flush (the worker may be SIGKILLed once idle: nothing flushes later), then check again. The
   flush is bounded by ``kafka.delivery.timeout.ms`` plus a margin (:data:`FLUSH_MARGIN_S`): a
   stuck producer fails the task, naming the records still pending, instead of hanging it.
4. Release the lease in ``finally``.
5. If any record failed, raise :class:`PartitionWriteError`: how many records failed, and the
   first error with its topic and partition.

Avro keys and values are encoded in chunks of rows (:mod:`.row_formats`) before step 2.

With ``errors.tolerance=all`` a bad record (one the converter or ``send`` refuses for itself, or
the broker refuses alone) does not stop step 2: it goes to the task's
:class:`~spark_kafka_sink.spark.dead_letters.DeadLetters`, which writes it to the dead-letter topic
(or skips it) and, after the flush, fails the task only if a dead-letter write failed.

Exactly-once (``delivery.guarantee``): the task writes in a transaction of its own and hands it
out in its stats for the driver to commit, as :mod:`.task` describes.

Steps 1, 3, 4 and 5, and the exactly-once part, are :func:`~spark_kafka_sink.spark.task.run_task`
(:mod:`.task`), shared with arrow mode's :class:`~spark_kafka_sink.spark.arrow_writer.ArrowWriter`
(its sends return one tally each, which :class:`~spark_kafka_sink.spark.task.Outcome` adds up), so
both modes fail with the same message; this module holds step 2, rows mode's own.
:class:`PartitionWriteError`, :class:`TaskStats` and :data:`FLUSH_MARGIN_S` live in :mod:`.task`
and stay importable from here.

The writer keeps only the frozen config and schema (and, from ``KafkaSink``, a Spark
accumulator), so it pickles small. It returns a :class:`TaskStats` (``foreachPartition`` discards
it; ``rdd.mapPartitions`` users can collect it). With an accumulator, a task that succeeded adds
its :class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics` to it as its very last step, after
every record was checked: a failed attempt adds nothing.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from ..errors import is_record_error
from ..producer.tally import DeliveryTally
from .dead_letters import CONVERT, BadRecord
from .options import SinkConfig
from .producer_pool import ProducerPool, get_pool
from .row_formats import RowFormats, Unencodable
from .rows import RowConverter, RowError
from .schema import WriteSchema
from .task import (FLUSH_MARGIN_S, Outcome, PartitionWriteError, TaskInfo, TaskStats,
                   check_writer_arguments, run_task, task_info)

__all__ = ["PartitionWriter", "PartitionWriteError", "TaskStats", "FLUSH_MARGIN_S"]

log = logging.getLogger(__name__)


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
                 task: Callable[[], TaskInfo] = task_info,
                 accumulator: Any = None, batch_id: int | None = None):
        check_writer_arguments(sink_config, write_schema)
        RowConverter(write_schema, sink_config.topic)  # fail here, on the driver, not in tasks
        self.sink_config = sink_config
        self.write_schema = write_schema
        self._pool = pool
        self._task = task
        self.accumulator = accumulator
        self.batch_id = batch_id

    def __call__(self, rows: Iterable[Any]) -> TaskStats:
        tolerant = self.sink_config.error_policy.tolerant
        send = self._send_tolerant if tolerant else self._send_all
        run = run_task(self.sink_config, self._pool, self._task,
                       lambda producer, outcome: send(producer, rows, outcome),
                       Outcome(DeliveryTally(keep_refused=tolerant)), self.batch_id)
        stats = run.stats()
        log.debug("partition %d (attempt %d) written: %s", stats.partition_id, stats.attempt, stats)
        if self.accumulator is not None:  # last: only a task that succeeded counts
            self.accumulator.add(run.metrics())
        return stats

    def _send_all(self, producer: Any, rows: Iterable[Any], outcome: Outcome) -> None:
        """Send rows until the first error; a ``send`` that raises counts as a failed record.
        Every record is sent with the task's tally, so outcomes are counted once per batch."""
        convert = RowConverter(self.write_schema, self.sink_config.topic).convert
        send = producer.send
        tally = outcome.tally
        if self.write_schema.encoders:  # Avro sides: encoded in chunks (raises for a bad row)
            rows = RowFormats(self.write_schema, self.sink_config.topic).rows(rows)
        for position, row in enumerate(rows):
            if tally.first_failure is not None:
                return
            record = convert(row, position)
            try:
                send(record.topic, record.value, record.key, record.partition, record.timestamp_ms,
                     record.headers, tally)
            except Exception as error:  # noqa: BLE001 - reported with its record by check()
                outcome.record_send_error(error, record.topic, record.partition, position)
                return

    def _send_tolerant(self, producer: Any, rows: Iterable[Any], outcome: Outcome) -> None:
        """:meth:`_send_all` with ``errors.tolerance=all``: a row that cannot become a record, or
        that ``send`` refuses for itself alone, goes to the dead letters, as do the records the
        broker refuses one by one; any other error stops the task as there."""
        converter = RowConverter(self.write_schema, self.sink_config.topic)
        convert = converter.convert
        send = producer.send
        tally = outcome.tally
        letters = outcome.dead_letters
        if self.write_schema.encoders:  # Avro sides: encoded in chunks
            rows = RowFormats(self.write_schema, self.sink_config.topic, tolerant=True).rows(rows)
        for position, row in enumerate(rows):
            if tally.first_failure is not None:
                return
            if type(row) is Unencodable:
                letters.handle(producer, converter.salvage(row.row, row.error, position))
                continue
            try:
                record = convert(row, position)
            except RowError as error:
                letters.handle(producer, converter.salvage(row, error, position))
                continue
            try:
                send(record.topic, record.value, record.key, record.partition, record.timestamp_ms,
                     record.headers, tally)
            except Exception as error:  # noqa: BLE001 - a record's own error, or reported by check()
                if not is_record_error(error):
                    outcome.record_send_error(error, record.topic, record.partition, position)
                    return
                letters.handle(producer, BadRecord(CONVERT, record.topic, record.partition,
                                                   record.key, record.value, record.headers or (),
                                                   error, position))
                continue
            if tally.refused:
                letters.handle_refused(producer, (tally,))
        letters.settle(producer, (tally,))

    def __repr__(self) -> str:
        return f"PartitionWriter({self.sink_config!r}, {self.write_schema!r})"
