"""KafkaSink: the user-facing sink (see docs/ARCHITECTURE.md).

::

    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "events"})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", path).start()   # streaming
    sink.write(df)                                                                   # batch
    df.foreachPartition(sink.partition_writer(df.schema))                            # your own

The options (:class:`~spark_kafka_sink.spark.options.SinkConfig`) are checked when the sink is
built. Option ``mode`` picks how rows reach the producer: ``arrow`` (the default) runs
``df.mapInArrow`` with an :class:`~spark_kafka_sink.spark.arrow_writer.ArrowWriter` (Spark's Arrow
batches whole to ``send_arrow``, one stats row per task, collected on the driver); ``rows`` runs
``df.foreachPartition`` with a :class:`~spark_kafka_sink.spark.partition_writer.PartitionWriter`,
one ``send`` per row. The schema is checked on the driver (:func:`~.schema.validate_schema`) once
per distinct schema, before any task runs: a bad column fails the batch, nothing sent.

Avro (:mod:`~spark_kafka_sink.spark.formats`): the driver learns each subject's schema id before
the first task (with a ``topic`` column, from the micro-batch's distinct topics) and keeps it.

Metrics (:mod:`~spark_kafka_sink.spark.metrics`): every successful task reports its figures, in
its stats row (arrow mode) or to a Spark accumulator (rows mode). After each micro-batch (or
``write``) the driver logs one line and keeps the figures, by Java-style name, in
``sink.last_metrics`` and ``sink.metrics_history`` (the last :data:`HISTORY_SIZE` ``(batch_id,
metrics)`` entries, ``batch_id`` ``None`` for ``write``; notebooks: :mod:`.metrics_table`). A
write that fails publishes nothing. On Spark Connect rows mode collects no metrics. A write that
fails because Spark's workers cannot import the package raises a ``ConfigError`` naming the fix
(:mod:`.worker_import`).

Exactly-once (``delivery.guarantee=exactly-once``, :mod:`~spark_kafka_sink.spark.exactly_once`):
before the job the driver recovers when it must and skips a batch id its commit log shows
committed (a replay); each task writes in its own transaction and hands it back (arrow: in its
stats row; rows: ``rdd.mapPartitions`` returns each task's stats); the driver then commits them
all or, when the job failed, aborts them all once its cancelled tasks have stopped
(:class:`JobWatch`). The commit log records the streaming query's id
(:func:`streaming_query_id`; classic Spark only), so a checkpoint reset is refused, not taken for
a replay. ``spark.speculation=true`` is refused: a speculative twin would fence the attempt Spark
keeps. Rows mode needs classic Spark (``df.rdd``). docs/spark-sink.md, "Metrics": the transaction figures.

A sink pickles as its options alone (no cache, metrics or Spark objects): Spark ships or stores it.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Mapping

from ..errors import ConfigError
from .arrow_writer import STATS_SCHEMA, ArrowWriter, merge_stats, sink_frame, stats_transactions
from .compat import require_foreach_partition
from .driver_write import (
    DRIVER_TASK, SmallBatch, SmallBatchGuess, collect_small, transactional_producer,
)
from .exactly_once import BatchCommit, ExactlyOnceDriver, write_batch_id
from .formats import FormatResolver, distinct_topics
from .metrics import SinkMetricsParam, SinkTaskMetrics, format_line
from .metrics_table import MetricsHistory, SinkMetrics
from .options import ARROW, DELIVERY_GUARANTEE, EXACTLY_ONCE, SinkConfig
from .partition_writer import PartitionWriter
from .preflight import preflight
from .schema import WriteSchema, validate_schema
from .worker_import import worker_import_error, workers_python

log = logging.getLogger(__name__)

HISTORY_SIZE = 100
"""How many ``(batch_id, metrics)`` entries ``KafkaSink.metrics_history`` keeps."""


class KafkaSink:
    """Writes DataFrames to Kafka: ``foreachBatch(sink)``, ``sink.write(df)``, or
    ``df.foreachPartition(sink.partition_writer(df.schema))`` (rows, whatever the mode).

    Options come as keywords (``KafkaSink(**{"kafka.bootstrap.servers": ...})``), as a mapping
    (``KafkaSink({...})``), or both (keywords win).
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, **kwargs: Any):
        merged = {**(options or {}), **kwargs}
        self._config = SinkConfig.from_options(merged)
        self._init_driver_state()

    def _init_driver_state(self) -> None:
        self._schemas: dict[str, WriteSchema] = {}
        self._accumulator: tuple[Any, Any] | None = None  # (SparkContext, accumulator)
        self.last_metrics: SinkMetrics | None = None
        self._history: deque[tuple[int | None, SinkMetrics]] = deque(maxlen=HISTORY_SIZE)
        self._exactly_once: ExactlyOnceDriver | None = None
        self._task_config: SinkConfig | None = None  # after the preflight: what tasks get
        self._formats = FormatResolver(self._config)  # the registry's ids, learnt once
        self._small = SmallBatchGuess(self._config.driver_write_max_rows)
        self._driver_producer: Any = None  # exactly-once: the driver's own writes' producer

    @property
    def metrics_history(self) -> MetricsHistory:
        """The last ``HISTORY_SIZE`` published ``(batch_id, metrics)`` entries, oldest first: a
        list, shown as a table in a notebook (:class:`~.metrics_table.MetricsHistory`)."""
        return MetricsHistory(self._history)

    @property
    def config(self) -> SinkConfig:
        """The validated options."""
        return self._config

    def __call__(self, df: Any, batch_id: int) -> None:
        """``foreachBatch``: write micro-batch ``batch_id`` and log one line about it."""
        self._write(df, batch_id)

    def write(self, df: Any) -> None:
        """Write every row of ``df`` (a batch DataFrame) and wait for all of them; a failed task
        fails the call with the task's error. Logs one line and publishes the metrics."""
        self._write(df, None)

    def _write(self, df: Any, batch_id: int | None) -> None:
        try:
            self._write_batch(df, batch_id)
        except Exception as error:
            explained = worker_import_error(error, workers_python=workers_python(df))
            if explained is None:
                raise
            raise explained from error

    def _write_batch(self, df: Any, batch_id: int | None) -> None:
        started = time.monotonic()
        write_schema = self._write_schema(df.schema)  # on the driver, before any task
        if self._task_config is None:
            self._task_config = preflight(self._config).applied(self._config).for_tasks()
        write_schema = self._with_schema_ids(write_schema, df)
        if self._config.exactly_once:
            figures = self._write_exactly_once(df, write_schema, batch_id)
            self._publish_figures(batch_id, figures, time.monotonic() - started)
            return
        if self._config.mode == ARROW:
            frame = sink_frame(df, write_schema, flat=True)
            small = self._collect_small(frame, batch_id)
            if small is not None:
                metrics = self._driver_writer(write_schema, batch_id).run(small.batches).metrics()
            else:
                metrics = self._write_arrow(frame, write_schema, batch_id)
            self._small.saw(_rows_of(metrics))
        else:
            metrics = self._write_rows(df, write_schema, batch_id)
        seconds = time.monotonic() - started
        if metrics is None:
            what = "write" if batch_id is None else f"micro-batch {batch_id}"
            log.info("KafkaSink: %s written in %.3f s (%s; no metrics in rows mode without a "
                     "SparkContext, e.g. Spark Connect)", what, seconds, self._target())
            return
        self._publish(batch_id, metrics, seconds)

    def _write_arrow(self, frame: Any, write_schema: WriteSchema,
                     batch_id: int | None) -> SinkTaskMetrics:
        """``mapInArrow`` over ``frame`` (the sink's columns, :func:`sink_frame`); the tasks' stats
        rows, merged."""
        writer = ArrowWriter(self._task_config, write_schema, batch_id=batch_id, flat=True)
        return merge_stats(frame.mapInArrow(writer, STATS_SCHEMA).collect())

    def _collect_small(self, frame: Any, batch_id: int | None) -> SmallBatch | None:
        """The whole micro-batch (``frame``, the sink's columns) on the driver when it is small and
        was guessed so (:mod:`.driver_write`); ``None``: write it the distributed way, as every
        ``write(df)``."""
        if batch_id is None or not self._small.try_driver():
            return None
        return collect_small(frame, self._small.max_rows)

    def _driver_writer(self, write_schema: WriteSchema, batch_id: int | None) -> ArrowWriter:
        """The writer a task runs, run by the driver as task 0 (:data:`.driver_write.DRIVER_TASK`)."""
        return ArrowWriter(self._task_config, write_schema, batch_id=batch_id, flat=True,
                           task=lambda: DRIVER_TASK)

    def _write_rows(self, df: Any, write_schema: WriteSchema,
                    batch_id: int | None) -> SinkTaskMetrics | None:
        """``foreachPartition``; the accumulated metrics, or ``None`` without a SparkContext."""
        require_foreach_partition(df)
        accumulator = self._fresh_accumulator(df)
        df.foreachPartition(PartitionWriter(self._task_config, write_schema, accumulator=accumulator,
                                            batch_id=batch_id))
        return None if accumulator is None else accumulator.value

    def _write_exactly_once(self, df: Any, write_schema: WriteSchema,
                            batch_id: int | None) -> dict[str, float]:
        """The exactly-once write (see the module docstring); the batch's figures. Arrow mode
        learns the partition count from the tasks' stats rows, after the job (asking Spark
        before it would compute the upstream twice); rows mode has it from ``df.rdd``, which
        the job then runs on."""
        _refuse_speculation(df)
        driver = self._exactly_once
        if driver is None:
            driver = self._exactly_once = ExactlyOnceDriver(self._config)
        key = write_batch_id() if batch_id is None else str(batch_id)
        rdd = _rows_rdd(df) if self._config.mode != ARROW else None
        partitions = None if rdd is None else rdd.getNumPartitions()
        start = driver.begin_batch(key, partitions,
                                   None if batch_id is None else streaming_query_id(df))
        if start.fenced:                           # recovery fenced <prefix>-0 too
            self._drop_driver_producer()
        if start.replay:
            return {**SinkTaskMetrics().as_dict(), **BatchCommit(key, 0, 0, 0.0, replay=True).figures()}
        jobs = JobWatch.start(df)
        live = None                                # the driver's producer, when it wrote
        try:
            frame = sink_frame(df, write_schema, flat=True) if rdd is None else None
            small = self._collect_small(frame, batch_id) if frame is not None else None
            if small is not None:
                partitions = 1  # the driver wrote as task 0: a failure fences that id alone
                live, created = self._driver_producer_for_batch()
                run = self._driver_writer(write_schema, batch_id).run_in_transaction(
                    live, small.batches, created=created)
                metrics, transactions = run.metrics(), [run.transaction]
            elif rdd is None:
                self._drop_driver_producer()       # task 0 of the job fences <prefix>-0
                rows = frame.mapInArrow(
                    ArrowWriter(self._task_config, write_schema, batch_id=batch_id, flat=True),
                    STATS_SCHEMA).collect()
                metrics, transactions = merge_stats(rows), stats_transactions(rows)
                partitions = max((row["partition_id"] for row in rows), default=-1) + 1
            else:
                self._drop_driver_producer()
                writer = PartitionWriter(self._task_config, write_schema, batch_id=batch_id)
                stats = rdd.mapPartitions(lambda rows: [writer(rows)]).collect()
                metrics = SinkTaskMetrics()
                for task in stats:
                    metrics = metrics.merge(task.metrics)
                transactions = [task.transaction for task in stats if task.transaction is not None]
            if rdd is None:
                self._small.saw(_rows_of(metrics))
        except BaseException:
            self._drop_driver_producer()
            if jobs.watching and not jobs.await_tasks_stopped(TASKS_STOP_TIMEOUT_S):
                log.warning("KafkaSink: tasks of failed micro-batch %s still run %.0f s after the job "
                            "failed; fencing their ids now (a transaction one opens later is "
                            "aborted by the next batch, or after transaction.timeout.ms)", key,
                            TASKS_STOP_TIMEOUT_S)
            try:
                driver.abort_batch(key, partitions)
            except Exception:  # noqa: BLE001 - the job's error is the one to raise
                log.exception("KafkaSink: the transactions of failed micro-batch %s could not be "
                              "aborted; they are aborted when the query restarts, or after "
                              "transaction.timeout.ms", key)
            raise
        try:
            commit = driver.commit_batch(key, transactions, partitions, producer=live)
        except BaseException:
            self._drop_driver_producer()           # the next recovery finishes from the log
            raise
        return {**metrics.as_dict(), **commit.figures()}

    def _driver_producer_for_batch(self) -> tuple[Any, bool]:
        """The driver's transactional producer for its own writes (``<prefix>-0``), kept between
        micro-batches the driver writes, and whether it was made now (``init_transactions()``
        fences what an earlier holder of the id left open)."""
        if self._driver_producer is not None:
            return self._driver_producer, False
        self._driver_producer = transactional_producer(self._task_config, DRIVER_TASK)
        return self._driver_producer, True

    def _drop_driver_producer(self) -> None:
        """Close the driver's transactional producer, if any (a job's task 0, a recovery or an
        abort fences its id; a failed step leaves its state unknown)."""
        producer, self._driver_producer = self._driver_producer, None
        if producer is not None:
            try:
                producer.close(0)
            except Exception:  # noqa: BLE001 - closing is best effort
                log.debug("KafkaSink: closing the driver's transactional producer failed",
                          exc_info=True)

    def _publish(self, batch_id: int | None, metrics: SinkTaskMetrics, seconds: float) -> None:
        self._publish_figures(batch_id, metrics.as_dict(), seconds)

    def _publish_figures(self, batch_id: int | None, figures: dict[str, float],
                         seconds: float) -> None:
        metrics = SinkMetrics(figures, batch_id=batch_id, seconds=seconds)
        self.last_metrics = metrics
        self._history.append((batch_id, metrics))
        log.info("%s", format_line(batch_id, figures, seconds))

    def _fresh_accumulator(self, df: Any) -> Any:
        """A zeroed accumulator of this DataFrame's SparkContext (reused across writes on the
        same context), or ``None`` without one (Spark Connect)."""
        try:
            context = df.sparkSession.sparkContext
        except Exception:  # noqa: BLE001 - Spark Connect raises (PySparkNotImplementedError)
            return None
        if context is None:
            return None
        cached = self._accumulator
        if cached is None or cached[0] is not context:
            accumulator = context.accumulator(SinkTaskMetrics(), SinkMetricsParam())
            self._accumulator = (context, accumulator)
        else:
            accumulator = cached[1]
            accumulator.value = SinkTaskMetrics()
        return accumulator

    def partition_writer(self, schema: Any) -> PartitionWriter:
        """The picklable function for ``df.foreachPartition`` writing rows of ``schema`` (a
        ``StructType``, usually ``df.schema``); the schema is validated here, on the driver, and
        its Avro schemas registered (the topics must be known: the ``topic`` option, or a subject
        that does not name the topic)."""
        return PartitionWriter(self._task_config or self._config.for_tasks(),
                               self._with_schema_ids(self._write_schema(schema), None))

    def _with_schema_ids(self, write_schema: WriteSchema, df: Any) -> WriteSchema:
        """``write_schema`` with the registry's ids for its Avro sides (:mod:`.formats`): asked
        once per subject and cached; with a ``topic`` column and a subject per topic, the
        micro-batch's distinct topics are read first (one more Spark job)."""
        def learn_topics() -> list[str]:
            if df is None:
                raise ConfigError(
                    "partition_writer() cannot learn which topics the rows go to, and each topic has a "
                    "subject of its own (TopicNameStrategy, TopicRecordNameStrategy): set the 'topic' "
                    "option, a schema id, or value.subject.name.strategy=RecordNameStrategy; or "
                    "write with foreachBatch(sink) / sink.write(df)")
            return distinct_topics(sink_frame(df, write_schema))

        return self._formats.with_schema_ids(write_schema, learn_topics)

    def _write_schema(self, schema: Any) -> WriteSchema:
        key = schema.json() if hasattr(schema, "json") else None
        cached = self._schemas.get(key) if key is not None else None
        if cached is None:
            cached = validate_schema(schema, self._config)
            if key is not None:
                self._schemas[key] = cached
        return cached

    def close(self) -> None:
        """Close the driver's exactly-once resources (the commit log's producer)."""
        self._drop_driver_producer()
        if self._exactly_once is not None:
            self._exactly_once.close()
            self._exactly_once = None

    def _target(self) -> str:
        return f"topic {self._config.topic!r}" if self._config.topic else "topics from the 'topic' column"

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._config}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self._config = state["config"]
        self._init_driver_state()

    def __repr__(self) -> str:
        return f"KafkaSink({self._config!r})"


def _rows_of(metrics: SinkTaskMetrics) -> int:
    """How many rows a write had, about: the records its tasks sent or failed."""
    return metrics.records_sent + metrics.records_failed


def _rows_rdd(df: Any) -> Any:
    """``df.rdd`` for exactly-once rows mode, or a clear error where there is none (Spark
    Connect)."""
    try:
        rdd = df.rdd
    except Exception as error:  # noqa: BLE001 - Spark Connect has no df.rdd
        raise _no_rdd(str(error)) from error
    if not hasattr(rdd, "getNumPartitions"):     # PySpark 3.4's Connect: a function stands there
        raise _no_rdd(f"df.rdd is {type(rdd).__name__!r}, not an RDD")
    return rdd


def _no_rdd(why: str) -> ConfigError:
    return ConfigError(f"{DELIVERY_GUARANTEE}={EXACTLY_ONCE!r} in mode='rows' needs classic Spark "
                       f"(it runs on df.rdd), which this session does not have (Spark Connect?): "
                       f"use mode='arrow' (the default): {why}")


TASKS_STOP_TIMEOUT_S = 30.0
"""How long a failed exactly-once job's driver waits for its cancelled tasks to stop before it
fences their ids (Spark kills a cancelled task's Python worker after
``spark.python.task.killTimeout``, 2 s by default)."""
_JOB_GROUP = "spark.jobGroup.id"


class JobWatch:
    """The Spark jobs one write runs: those of the caller's job group (a streaming query's run id
    in ``foreachBatch``) that were not there when it started. After a failed job,
    :meth:`await_tasks_stopped` waits until none of their tasks runs, so that fencing the tasks'
    ids comes after the last task could open a transaction: Spark fails the job at once, while
    its cancelled tasks run on until their Python worker ends or is killed."""

    def __init__(self, tracker: Any, group: str | None, before: frozenset[int]):
        self._tracker = tracker
        self._group = group
        self._before = before

    @classmethod
    def start(cls, df: Any) -> JobWatch:
        """Watch the jobs started from now on (none where Spark cannot say: Spark Connect)."""
        try:
            context = df.sparkSession.sparkContext
            tracker = context.statusTracker()
            group = context.getLocalProperty(_JOB_GROUP)
            return cls(tracker, group, frozenset(tracker.getJobIdsForGroup(group)))
        except Exception:  # noqa: BLE001 - Spark Connect has no sparkContext
            return cls(None, None, frozenset())

    @property
    def watching(self) -> bool:
        """Whether Spark reports the jobs' tasks (classic Spark)."""
        return self._tracker is not None

    def active_tasks(self) -> int:
        """How many tasks of the watched jobs run now."""
        active = 0
        for job in set(self._tracker.getJobIdsForGroup(self._group)) - self._before:
            info = self._tracker.getJobInfo(job)
            for stage in (info.stageIds if info is not None else ()):
                stage_info = self._tracker.getStageInfo(stage)
                active += stage_info.numActiveTasks if stage_info is not None else 0
        return active

    def await_tasks_stopped(self, timeout_s: float, poll_s: float = 0.1) -> bool:
        """Wait until no task of the watched jobs runs; False if some still do after
        ``timeout_s`` (or where Spark cannot say)."""
        if self._tracker is None:
            return False
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.active_tasks() == 0:
                    return True
            except Exception:  # noqa: BLE001 - the status tracker is best effort
                log.debug("KafkaSink: Spark's status tracker failed", exc_info=True)
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)


STREAMING_QUERY_ID = "sql.streaming.queryId"
"""The local property Spark's stream execution sets, on the thread that calls ``foreachBatch``, to
the query's id (``StreamingQuery.id``, kept in the checkpoint)."""


def streaming_query_id(df: Any) -> str | None:
    """The id of the streaming query whose ``foreachBatch`` is writing ``df``, or ``None`` where
    Spark does not say (no ``sparkContext``: Spark Connect)."""
    try:
        value = df.sparkSession.sparkContext.getLocalProperty(STREAMING_QUERY_ID)
    except Exception:  # noqa: BLE001 - Spark Connect raises (no sparkContext)
        return None
    return value or None


def _refuse_speculation(df: Any) -> None:
    """``spark.speculation=true`` with exactly-once is a clear error, on the driver."""
    try:
        value = df.sparkSession.sparkContext.getConf().get("spark.speculation", "false")
    except Exception:  # noqa: BLE001 - Spark Connect: read the session's conf instead
        value = df.sparkSession.conf.get("spark.speculation", "false")
    if str(value).strip().lower() == "true":
        raise ConfigError(
            f"{DELIVERY_GUARANTEE}={EXACTLY_ONCE!r} cannot run with spark.speculation=true: a "
            "speculative copy of a task writes with the same transactional id and would fence the "
            "attempt Spark keeps, aborting its records. Turn speculation off for this query")
