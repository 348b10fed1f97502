"""The sink as a Python Data Source: ``df.write.format(NAME)`` and ``df.writeStream.format(NAME)``
on Spark 4, without ``foreachBatch`` (see docs/ARCHITECTURE.md).

::

    from spark_kafka_sink.spark.datasource import NAME, register

    register(spark)                                   # once per SparkSession
    (df.write.format(NAME).option("kafka.bootstrap.servers", servers)
       .option("topic", "events").mode("append").save())
    (df.writeStream.format(NAME).option("kafka.bootstrap.servers", servers)
       .option("topic", "events").option("checkpointLocation", path).start())

Where each step runs (PySpark's ``pyspark.sql.worker`` modules):

- ``writer()`` / ``streamWriter()``: in a Python worker on the driver, while Spark plans the
  write. Options (:meth:`SinkConfig.from_options`), schema (:func:`validate_schema`) and the
  cluster (``KafkaSink``'s preflight) are checked there, so a bad one fails ``save()`` /
  ``start()`` with ``KafkaSink``'s message (wrapped by Spark) before any task runs. Exactly-once
  recovery runs here too; neither runs in the commit worker.
- ``write(...)``: in each task. Arrow mode (the default) runs
  :class:`~spark_kafka_sink.spark.arrow_writer.ArrowWriter` on Spark's Arrow batches, as
  ``KafkaSink`` does, but a schema whose columns would need renaming first (a repeated name,
  header fields not named exactly ``key``/``value``) and Spark 4.0 streams write rows:
  :class:`~spark_kafka_sink.spark.partition_writer.PartitionWriter` with a :class:`_Collector` as
  its accumulator. The task returns a :class:`KafkaCommitMessage` carrying its
  :class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics` (and, exactly-once, its transaction).
- ``commit(messages)`` / ``abort(messages)``: in another Python worker on the driver, once the
  tasks are done (for a stream, once per micro-batch, with a fresh ``streamWriter``). ``commit``
  merges the metrics and logs one line (logger ``spark_kafka_sink.spark.datasource``, in that
  worker's stderr: the application gets no metrics object; :func:`_driver_log`); exactly-once, it
  records and commits the tasks' transactions, or aborts them for a replayed batch. ``abort``
  logs what the tasks that succeeded wrote; exactly-once, it aborts what the batch left open and
  records the batch aborted, unless the log shows it committed (a failed replay).

Metrics travel in the commit messages, not in accumulators, so they work on Spark Connect too.
At least once, as ``KafkaSink``: a failed write has nothing to undo (Kafka cannot take records
back), and Spark's retry of a micro-batch sends its records again. ``mode("overwrite")`` is
refused (as Spark's own Kafka sink does); ``complete`` output mode is accepted (every micro-batch
sends the whole result table again); ``update`` is refused by Spark itself for Python Data Sources.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .compat import require_data_source_api

require_data_source_api()  # PySpark 4.0+: a clear error before the imports below fail

from pyspark.sql import datasource as _spark_datasource  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from ..errors import ConfigError
from ..producer.transactions.resumable import ResumableTransaction
from .arrow_writer import ArrowWriter
from .exactly_once import BatchCommit, ExactlyOnceDriver, write_batch_id
from .formats import FormatResolver
from .metrics import SinkTaskMetrics, format_line
from .options import ARROW, SinkConfig
from .partition_writer import PartitionWriter
from .preflight import preflight
from .schema import WriteSchema, validate_schema
from .worker_import import local_workers_problem

DataSourceStreamArrowWriter = getattr(_spark_datasource, "DataSourceStreamArrowWriter", None)

__all__ = ["NAME", "KafkaDataSource", "KafkaCommitMessage", "register", "merge_messages",
           "commit_line", "abort_line"]

log = logging.getLogger(__name__)

NAME = "spark_kafka_sink"
"""The format name: ``df.write.format(NAME)``. Not ``"kafka"``, so that it never shadows Spark's
own Kafka connector when that is on the classpath."""


def register(spark: Any) -> str:
    """Register :class:`KafkaDataSource` with ``spark`` (a SparkSession, classic or Connect) and
    return its format name, :data:`NAME`. Registration lasts for the session. With a local
    master, a warning saying how to fix it when Spark's Python workers cannot import the package
    (:func:`~.worker_import.local_workers_problem`): every write would fail in them."""
    spark.dataSource.register(KafkaDataSource)
    problem = local_workers_problem(spark)
    if problem is not None:
        log.warning("%s: writes will fail: %s", NAME, problem)
    return NAME


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one successful task reports to the driver: its metrics, which partition and attempt
    it was, and when it started and finished writing (epoch seconds, on its executor's clock)."""

    metrics: SinkTaskMetrics
    partition_id: int
    attempt: int
    started_at: float
    finished_at: float
    transaction: ResumableTransaction | None = None
    """Exactly-once: the task's open transaction, for ``commit`` to commit."""


class _Collector:
    """The ``accumulator`` a task's :class:`PartitionWriter` adds its figures to (it adds once, as
    its last step, and only if the task succeeded); here they go into the commit message."""

    __slots__ = ("metrics",)

    def __init__(self) -> None:
        self.metrics: SinkTaskMetrics | None = None

    def add(self, metrics: SinkTaskMetrics) -> None:
        self.metrics = metrics if self.metrics is None else self.metrics.merge(metrics)


class KafkaDataSource(DataSource):
    """The sink as a Python Data Source named :data:`NAME`; write-only. Options are those of
    :class:`~spark_kafka_sink.spark.options.SinkConfig` (as ``KafkaSink``'s)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ConfigError(
                f"save mode 'overwrite' is not supported by {NAME!r}: Kafka cannot replace a topic's "
                f"records, it can only append; use mode('append')")
        config, write_schema = _prepare(self.options, schema)
        _recover_at_planning(config)
        if config.mode == ARROW and _arrow_usable(schema, write_schema):
            return KafkaArrowBatchWriter(config, write_schema)
        return KafkaBatchWriter(config, write_schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is the 'complete' output mode: accepted, as Spark's Kafka sink does (every
        # micro-batch sends the whole result table; Kafka has nothing to truncate).
        config, write_schema = _prepare(self.options, schema)
        _recover_at_planning(config)
        if config.mode == ARROW and KafkaArrowStreamWriter is not None \
                and _arrow_usable(schema, write_schema):
            return KafkaArrowStreamWriter(config, write_schema)
        return KafkaStreamWriter(config, write_schema)

    def reader(self, schema: Any) -> Any:
        raise ConfigError(f"{NAME!r} only writes to Kafka; read with Spark's 'kafka' source "
                          f"(spark-sql-kafka-0-10) or a Kafka consumer")


def _prepare(options: Mapping[str, Any], schema: Any) -> tuple[SinkConfig, WriteSchema]:
    """The validated options and columns, then the cluster and topics checked once
    (:func:`~.preflight.preflight`): the driver-side checks of ``KafkaSink``, so a wrong address
    or password fails the write in seconds, with one message, before any task runs. The config
    returned is the one the tasks get."""
    config = SinkConfig.from_options(dict(options))
    write_schema = validate_schema(schema, config)
    PartitionWriter(config, write_schema)  # its own driver-side checks
    if not _at_planning():  # a stream's commit worker: a fresh stream writer per micro-batch
        return config, write_schema
    return preflight(config).applied(config).for_tasks(), _with_schema_ids(config, write_schema)


def _with_schema_ids(config: SinkConfig, write_schema: WriteSchema) -> WriteSchema:
    """The registry's ids for the Avro sides (:mod:`.formats`), learnt while Spark plans the
    write: the tasks never call the registry. A data source sees no rows here, so a subject per
    topic needs the ``topic`` option."""
    def cannot_learn_topics() -> list[str]:
        raise ConfigError(
            f"{NAME!r} learns the schema ids before any row is read, but with a 'topic' column and "
            f"a subject per topic (TopicNameStrategy, TopicRecordNameStrategy) it cannot know the "
            f"topics: set the 'topic' option, a schema id ('value.schema.id'), or "
            f"value.subject.name.strategy=RecordNameStrategy; or write with KafkaSink "
            f"(foreachBatch), which reads each micro-batch's topics first")

    return FormatResolver(config).with_schema_ids(write_schema, cannot_learn_topics)


_PLANNING_WORKER = "pyspark.sql.worker.write_into_data_source"


def _recover_at_planning(config: SinkConfig) -> None:
    """Exactly-once recovery (see the module docstring), where Spark plans the write: in its
    planning worker, or called directly; never in the commit worker."""
    if not config.exactly_once or not _at_planning():
        return
    with _exactly_once_driver(config) as driver:
        driver.prepare_query()


def _at_planning() -> bool:
    """Whether Spark is planning the write here (its planning worker, or a direct call), not
    committing it (the commit workers build a writer too: a stream's, once per micro-batch)."""
    worker = _spark_worker_module()
    return worker is None or worker == _PLANNING_WORKER


@contextlib.contextmanager
def _exactly_once_driver(config: SinkConfig) -> Iterator[ExactlyOnceDriver]:
    """A driver for one step: Spark calls each step in a Python worker of its own."""
    driver = ExactlyOnceDriver(config)
    try:
        yield driver
    finally:
        driver.close()


def _commit_exactly_once(config: SinkConfig, batch_id: str,
                         messages: Sequence[WriterCommitMessage | None]) -> BatchCommit:
    with _exactly_once_driver(config) as driver:
        return driver.commit_written(batch_id, [m.transaction for m in messages if isinstance(
            m, KafkaCommitMessage) and m.transaction is not None], len(messages))


def _abort_exactly_once(config: SinkConfig, batch_id: str,
                        messages: Sequence[WriterCommitMessage | None]) -> None:
    with _exactly_once_driver(config) as driver:
        driver.abort_batch(batch_id, len(messages))


def _write_task(config: SinkConfig, write_schema: WriteSchema, rows: Iterator[Any],
                **seams: Any) -> KafkaCommitMessage:
    """One task: ``PartitionWriter`` over ``rows``; raises the task's first error. ``seams``
    (``pool``, ``task``) go to ``PartitionWriter``, for tests."""
    started_at = time.time()
    collector = _Collector()
    stats = PartitionWriter(config, write_schema, accumulator=collector, **seams)(rows)
    return KafkaCommitMessage(collector.metrics or SinkTaskMetrics(), stats.partition_id,
                              stats.attempt, started_at, time.time(), stats.transaction)


def _write_arrow_task(config: SinkConfig, write_schema: WriteSchema, batches: Iterator[Any],
                      **seams: Any) -> KafkaCommitMessage:
    """One task in arrow mode: ``ArrowWriter`` over Spark's Arrow batches (``send_arrow``)."""
    started_at = time.time()
    run = ArrowWriter(config, write_schema, **seams).run(batches)
    stats = run.stats()
    return KafkaCommitMessage(run.metrics(), stats.partition_id, stats.attempt, started_at,
                              time.time(), run.transaction)


def _arrow_usable(schema: Any, write_schema: WriteSchema) -> bool:
    """Whether Spark's Arrow batches can go to ``send_arrow`` by column name as they are: no
    repeated column name, and header structs named exactly ``key``/``value``. Otherwise the
    source writes rows (``KafkaSink``'s arrow mode renames columns first; a data source cannot)."""
    names = [field.name for field in schema.fields]
    if len(set(names)) != len(names):
        return False
    headers = write_schema.headers
    return headers is None or \
        schema.fields[headers.index].dataType.elementType.fieldNames() == ["key", "value"]


class _Writer:
    """State shared by the batch and stream writers: the validated config and columns only, so
    the writer pickles small (Spark ships it to every task and to the commit worker)."""

    def __init__(self, config: SinkConfig, write_schema: WriteSchema):
        self.config = config
        self.write_schema = write_schema

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write_task(self.config, self.write_schema, iterator)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class KafkaBatchWriter(_Writer, DataSourceWriter):
    """``df.write.format(NAME)...save()``: one commit (or abort) for the whole write."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        extra = None
        if self.config.exactly_once:
            extra = _commit_exactly_once(self.config, write_batch_id(), messages).figures()
        _driver_log().info("%s", commit_line(None, messages, extra))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.config.exactly_once:
            _abort_exactly_once(self.config, write_batch_id(), messages)
        _driver_log().warning("%s", abort_line(None, messages, self.config.exactly_once))


class KafkaStreamWriter(_Writer, DataSourceStreamWriter):
    """``df.writeStream.format(NAME)...start()``: one commit (or abort) per micro-batch."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        extra = None
        if self.config.exactly_once:
            extra = _commit_exactly_once(self.config, str(batchId), messages).figures()
        _driver_log().info("%s", commit_line(batchId, messages, extra))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.config.exactly_once:
            _abort_exactly_once(self.config, str(batchId), messages)
        _driver_log().warning("%s", abort_line(batchId, messages, self.config.exactly_once))


class _ArrowWrite:
    """``write`` takes Spark's Arrow batches (an Arrow writer base class) and sends them whole."""

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write_arrow_task(self.config, self.write_schema, iterator)


class KafkaArrowBatchWriter(_ArrowWrite, KafkaBatchWriter, DataSourceArrowWriter):
    """The batch writer in arrow mode (the default ``mode``)."""


if DataSourceStreamArrowWriter is not None:
    class KafkaArrowStreamWriter(_ArrowWrite, KafkaStreamWriter, DataSourceStreamArrowWriter):
        """The stream writer in arrow mode (Spark 4.1+)."""
else:  # Spark 4.0 has no Arrow stream writer: streams write rows
    KafkaArrowStreamWriter = None


def _driver_log() -> logging.Logger:
    """The logger for the commit and abort lines, made visible in Spark's commit worker.

    Spark calls ``commit`` / ``abort`` in its own Python worker on the driver, where nothing
    configures logging (root at WARNING, no handler): an INFO line would vanish. There, and only
    there (``__main__`` is a ``pyspark`` module), this logger is set to INFO if its level is
    unset, and, when no handler is on the root logger either, it gets a stderr handler: Spark
    copies the worker's stderr to the driver's, so the line lands in the driver's console or log.
    When Spark's worker logging is on (``spark.sql.pyspark.worker.logging.enabled``, Spark 4.1+),
    Spark's own root handler takes the line instead (``spark.tvf.python_worker_logs()``; Spark
    4.3 collects it for batch writes only). In any other process the application's logging
    config rules, untouched.
    """
    if _in_spark_worker():
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
        if not logging.getLogger().handlers and not any(getattr(h, _OURS, False) for h in log.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            setattr(handler, _OURS, True)
            log.addHandler(handler)
    return log


_OURS = "_spark_kafka_sink_stderr"


def _in_spark_worker() -> bool:
    return (_spark_worker_module() or "").startswith("pyspark.")


_DAEMON = "pyspark.daemon"


def _spark_worker_module() -> str | None:
    """The module a PySpark worker runs, or None outside one: ``__main__``'s, or, in a worker
    forked by PySpark's daemon (``__main__`` is ``pyspark.daemon``; Spark 4.3 starts its planning
    and commit workers so), the worker module the daemon was started for (its first argument)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None) if spec else None
    if name == _DAEMON and len(sys.argv) > 1 and sys.argv[1].startswith("pyspark."):
        return sys.argv[1]
    return name if name and name.startswith("pyspark.") else None


@dataclass(frozen=True)
class MergedMessages:
    """The commit messages of one write or micro-batch, combined.

    ``seconds`` runs from the first task's start to the last task's end (0 without tasks); it
    compares executor clocks, so on a cluster it is as good as their synchronisation.
    ``missing`` counts the tasks without a message (failed, or never run)."""

    metrics: SinkTaskMetrics
    seconds: float
    succeeded: int
    missing: int


def merge_messages(messages: Sequence[WriterCommitMessage | None]) -> MergedMessages:
    """Combine the tasks' messages; ``None`` (a failed task) and foreign messages count as missing."""
    merged = SinkTaskMetrics()
    starts: list[float] = []
    ends: list[float] = []
    missing = 0
    for message in messages:
        if not isinstance(message, KafkaCommitMessage):
            missing += 1
            continue
        merged = merged.merge(message.metrics)
        starts.append(message.started_at)
        ends.append(message.finished_at)
    seconds = max(0.0, max(ends) - min(starts)) if starts else 0.0
    return MergedMessages(merged, seconds, len(starts), missing)


def commit_line(batch_id: int | None, messages: Iterable[WriterCommitMessage | None],
                extra: Mapping[str, float] | None = None) -> str:
    """The one line ``commit`` logs: :func:`format_line` of the merged metrics (and ``extra``
    figures: the transactions'), for micro-batch ``batch_id`` (``None``: a batch write).

    It is logged at INFO by logger ``spark_kafka_sink.spark.datasource`` in the driver's Python
    worker that runs the commit (see :func:`_driver_log` for where it can be read)."""
    merged = merge_messages(list(messages))
    return format_line(batch_id, {**merged.metrics.as_dict(), **(extra or {})}, merged.seconds)


def abort_line(batch_id: int | None, messages: Iterable[WriterCommitMessage | None],
               exactly_once: bool = False) -> str:
    """The line ``abort`` logs: how many tasks failed, and what the others wrote: it stays in
    Kafka at least once (there is nothing to undo; a retried micro-batch sends it again), and is
    aborted, invisible to ``read_committed`` readers, exactly once."""
    merged = merge_messages(list(messages))
    what = "write" if batch_id is None else f"micro-batch {batch_id}"
    figures = format_line(batch_id, merged.metrics.as_dict(), merged.seconds).partition(" s: ")[2]
    fate = ("were aborted (exactly-once: read_committed readers never see them)" if exactly_once
            else "stay in Kafka (at-least-once: Kafka cannot take records back; a retry sends "
                 "them again)")
    return (f"KafkaSink: {what} aborted: {merged.missing} of {merged.missing + merged.succeeded} "
            f"tasks did not succeed. The {merged.succeeded} that did wrote "
            f"{merged.metrics.records_sent} records, which {fate}: {figures}")
