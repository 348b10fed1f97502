"""ArrowWriter: the arrow-mode task, what ``df.mapInArrow`` calls (``KafkaSink``'s default mode).

Rows mode turns every row into a Python ``Row`` and calls ``send`` once per record; here the
task gets Spark's Arrow batches (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each) and
hands each one, whole, to ``KafkaProducer.send_arrow``, which partitions and encodes columns
rather than rows. The rest of the task is rows mode's skeleton, :func:`~.task.run_task`: lease
this worker's producer (a retry gets a fresh one), send, flush, wait for every result, release the
lease in ``finally``, raise :class:`~.task.PartitionWriteError` if any record failed.

On the driver, :func:`sink_frame` selects only the sink columns, under their conventional names
(``value``, ``key``, ``topic``, ``partition``, ``headers``, ``timestamp``), by position, so a
repeated or oddly named column cannot confuse ``send_arrow``; header structs whose field names
differ in case are cast to ``key``/``value``. What Spark hands the task for them: string ->
``string``, binary -> ``binary``, int -> ``int32``, timestamp -> ``timestamp[us, tz=<session
zone>]``, headers -> ``list<struct<key: string, value: binary>>``; ``send_arrow`` takes them as
they are.

Topics. With the ``topic`` option every batch goes to it. Otherwise a batch's rows are grouped by
the ``topic`` column (dictionary-encoded, then a stable sort: one ``send_arrow`` per topic, rows
in their order), each distinct topic name checked once per task. A null or invalid topic fails
the task naming the row's position in the partition, as in rows mode, and, as there, the rows
before it are sent first.

With ``errors.tolerance=all`` (:mod:`.dead_letters`) such rows are masked out of the batch
instead, and ``send_arrow(errors_tolerance="all", keep_refused=True)`` leaves out the rows that
cannot become records (``result.rejected``) and keeps those the broker refuses: all go to the
task's dead letters, one Python step per bad row only.

Sending stops at the first failure seen between batches (a failed batch, or a ``send_arrow``
that raised). A task that succeeded yields ONE stats row (:data:`STATS_SCHEMA`): its partition,
attempt, duration, :class:`~spark_kafka_sink.spark.metrics.SinkTaskMetrics` as JSON and, in
exactly-once mode, its open transaction as JSON (:func:`stats_transactions`); the driver collects
and merges them (:func:`merge_stats`): no accumulator, so it works on Spark Connect too.

Re-chunking: Spark's batches are concatenated up to ``rechunk_rows`` rows or ``rechunk_bytes``
bytes (a batch is never split; one copy; 0: off) before they are sent. Off for bytes columns (no
gain in ``bench.spark``, more worker RSS: bench/README.md); on with an Avro side, whose encoder's
fixed cost per ``send_arrow`` call (numpy passes per field) then spreads over more rows.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..errors import InvalidPartitionError, SerializationError
from ..producer.transactions.resumable import ResumableTransaction
from .dead_letters import CONVERT, BadRecord, as_bytes
from .metrics import SinkTaskMetrics
from .options import TOPIC, SinkConfig, topic_name_problem
from .producer_pool import ProducerPool, get_pool
from .rows import RowError
from .schema import HEADERS_TYPE, Kind, WriteSchema
from .task import (
    Outcome, TaskInfo, TaskRun, check_writer_arguments, run_in_transaction, run_task, task_info,
)

__all__ = ["ArrowWriter", "FlatStruct", "STATS_SCHEMA", "decimal_from_unscaled", "flat_structs", "merge_stats",
           "rechunk", "sink_frame", "stats_transactions",
           "AVRO_RECHUNK_ROWS", "DEFAULT_RECHUNK_ROWS", "DEFAULT_RECHUNK_BYTES", "UNSCALED_PRECISION"]

log = logging.getLogger(__name__)

STATS_SCHEMA = ("partition_id int, attempt int, duration_ms long, metrics string, "
                "transaction string")
"""The one row a successful arrow-mode task yields (``mapInArrow``'s output schema)."""

DEFAULT_RECHUNK_ROWS = 0
"""Rows to concatenate Spark's Arrow batches up to before sending; 0: send them as they come."""
AVRO_RECHUNK_ROWS = 65_536
"""Rows to concatenate Spark's Arrow batches up to when a key or value is written as Avro."""
DEFAULT_RECHUNK_BYTES = 16 * 1024 * 1024
"""The byte bound of a re-chunked batch (Arrow buffer sizes), when re-chunking is on."""
UNSCALED_PRECISION = 18
"""The most digits of a decimal struct field :func:`sink_frame` sends as its unscaled long."""

_SINK_COLUMNS = ("value", "key", "topic", "partition", "headers", "timestamp")


def sink_frame(df: Any, write_schema: WriteSchema, *, flat: bool = False) -> Any:
    """``df`` reduced to its sink columns under their conventional names (driver side).

    Columns are picked by position (``toDF`` renames every column first), so the first of a
    repeated name is the one validated, as in rows mode. The headers column is cast to
    ``array<struct<key:string,value:binary>>`` when its struct's field names differ in case.
    ``flat``: an Avro side's struct goes as its fields, and a null flag when Spark says it can be
    null (:func:`flat_structs`).
    The projection is one ``selectExpr`` of SQL strings: one call into Spark per write, where
    building each column took several (about 30-50 ms per micro-batch with a 10-field struct).
    """
    fields = df.schema.fields
    positional = df.toDF(*[f"_sink_{i}" for i in range(len(fields))])
    flattened = {spec.side: spec for spec in flat_structs(write_schema)} if flat else {}
    expressions = []
    for name in _SINK_COLUMNS:
        column = getattr(write_schema, name)
        if column is None:
            continue
        source = _quoted(f"_sink_{column.index}")
        if column.kind is Kind.HEADERS:
            names = fields[column.index].dataType.elementType.fieldNames()
            if names != ["key", "value"]:
                source = f"CAST({source} AS {HEADERS_TYPE})"
        spec = flattened.get(name)
        if spec is not None:
            for i, (field, alias) in enumerate(zip(spec.fields, spec.columns)):
                part = _flat_field(f"{source}.{_quoted(field)}", spec.decimal(i))
                expressions.append(f"{part} AS {_quoted(alias)}")
            if spec.nulls is not None:
                expressions.append(f"{source} IS NULL AS {_quoted(spec.nulls)}")
            continue
        expressions.append(f"{source} AS {_quoted(name)}")
    return positional.selectExpr(*expressions)


def _quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier, whatever it holds."""
    return "`" + name.replace("`", "``") + "`"


def _flat_field(field: str, decimal: tuple[int, int] | None) -> str:
    """A struct field (a SQL expression) as :func:`sink_frame` exports it: as it is, or a decimal
    of ``(precision, scale)`` as its unscaled value, a long: ``field * 10^scale`` (the literal a
    decimal of ``scale + 1`` digits) is exact (its type has at most ``precision + scale + 2 <=
    38`` digits and scale ``scale``, its value is whole) and fits a long (at most 18 digits)."""
    if decimal is None:
        return field
    scale = decimal[1]
    return f"CAST({field} * {10 ** scale}BD AS BIGINT)" if scale else f"CAST({field} AS BIGINT)"


@dataclass(frozen=True)
class FlatStruct:
    """An Avro side's struct column as the tasks get it from :func:`sink_frame` with ``flat``:
    its ``fields`` in the columns ``columns``, and ``nulls`` true where the struct is null (no such
    column, ``None``, when Spark's schema says the struct is never null). Spark's
    Arrow export of a struct costs its JVM more than that of the same fields as columns, and that
    of a decimal (a ``BigDecimal`` per value) more than that of a long (bench/README.md): a field
    with ``decimals[i]`` ``(precision, scale)`` goes as its unscaled value, a long.
    :meth:`rebuild` puts the struct back together in the task, copying only those (one pass)."""

    side: str
    fields: tuple[str, ...]
    nullable: tuple[bool, ...]
    columns: tuple[str, ...]
    nulls: str | None
    decimals: tuple[tuple[int, int] | None, ...] = ()
    """Per field, ``(precision, scale)`` of a decimal sent as its unscaled long, else ``None``;
    empty: none is."""

    def decimal(self, i: int) -> tuple[int, int] | None:
        """``(precision, scale)`` of field ``i`` if it goes as its unscaled long, else ``None``."""
        return self.decimals[i] if self.decimals else None

    def rebuild(self, batch: Any) -> Any:
        """``batch`` with :attr:`columns` (and :attr:`nulls`) replaced by the struct column
        :attr:`side`, where the first of them was."""
        import pyarrow as pa

        names = batch.schema.names
        children = [batch.column(name) for name in self.columns]
        for i, decimal in enumerate(self.decimals):
            if decimal is not None:
                children[i] = decimal_from_unscaled(children[i], *decimal)
        struct = pa.StructArray.from_arrays(
            children, fields=[pa.field(field, child.type, nullable=nullable)
                              for field, child, nullable in zip(self.fields, children, self.nullable)],
            mask=None if self.nulls is None else batch.column(self.nulls))
        mine = set(self.columns) if self.nulls is None else {*self.columns, self.nulls}
        at = names.index(self.columns[0])
        kept = [(name, batch.column(name)) for name in names if name not in mine]
        kept.insert(sum(1 for name in names[:at] if name not in mine), (self.side, struct))
        return pa.RecordBatch.from_arrays([array for _, array in kept], names=[name for name, _ in kept])


def flat_structs(write_schema: WriteSchema) -> tuple[FlatStruct, ...]:
    """The Avro sides of ``write_schema`` whose column is a struct (of at least one field) whose
    field names differ without case: Spark picks a field by name without case by default, so one
    that only case tells from another goes whole. Its decimal fields of at most
    :data:`UNSCALED_PRECISION` digits go as their unscaled longs."""
    import pyarrow as pa

    out = []
    for encoder in write_schema.encoders:
        kind = encoder.arrow_type
        if pa.types.is_struct(kind) and kind.num_fields:
            fields = [kind.field(i) for i in range(kind.num_fields)]
            if len({field.name.lower() for field in fields}) != len(fields):
                continue
            decimals = tuple((f.type.precision, f.type.scale)
                             if pa.types.is_decimal(f.type) and f.type.precision <= UNSCALED_PRECISION else None
                             for f in fields)
            out.append(FlatStruct(encoder.side, tuple(f.name for f in fields), tuple(f.nullable for f in fields),
                                  tuple(f"_sink_{encoder.side}_{i}" for i in range(len(fields))),
                                  f"_sink_{encoder.side}_null" if encoder.nullable else None,
                                  decimals if any(decimals) else ()))
    return tuple(out)


def decimal_from_unscaled(column: Any, precision: int, scale: int) -> Any:
    """An Arrow int64 column of unscaled values as ``decimal128(precision, scale)``, nulls kept:
    per value, the low word the value and the high word its sign (Arrow's little-endian
    layout), one pass over the column. The values must have at most ``precision`` digits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.decimal128(precision, scale)
    rows = len(column)
    if rows == 0:
        return pa.array([], kind)
    values = np.frombuffer(column.buffers()[1], dtype=np.int64, count=column.offset + rows)[column.offset:]
    words = np.empty((rows, 2), dtype=np.int64)
    words[:, 0] = values
    np.right_shift(values, 63, out=words[:, 1])
    validity = None
    if column.null_count:
        validity = column.buffers()[0] if column.offset == 0 else pc.is_valid(column).buffers()[1]
    return pa.Array.from_buffers(kind, rows, [validity, pa.py_buffer(words)], column.null_count)


def rechunk(batches: Iterable[Any], max_rows: int, max_bytes: int) -> Iterator[Any]:
    """Arrow batches concatenated until one more would pass ``max_rows`` rows or ``max_bytes``
    bytes (a batch alone over the budget goes as it is); ``max_rows`` 0: unchanged. Holds at most
    the budget plus one batch."""
    if max_rows <= 0:
        yield from batches
        return
    pending: list[Any] = []
    rows = size = 0
    for batch in batches:
        if pending and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield pending[0] if len(pending) == 1 else _concat(pending)
            pending, rows, size = [], 0, 0
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if pending:
        yield pending[0] if len(pending) == 1 else _concat(pending)


def _concat(batches: list[Any]) -> Any:
    """The batches as one (``pa.concat_batches`` from pyarrow 19 on; before, through a table)."""
    import pyarrow as pa

    concat = getattr(pa, "concat_batches", None)
    if concat is not None:
        return concat(batches)
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


class ArrowWriter:
    """Writes an iterator of Arrow batches to Kafka; yields one stats row. See the module docstring.

    ``pool`` and ``task`` are seams for tests, as in ``PartitionWriter``; the defaults are this
    worker's pool and Spark's ``TaskContext``. ``rechunk_rows`` ``None``: :data:`AVRO_RECHUNK_ROWS`
    with an Avro side, else :data:`DEFAULT_RECHUNK_ROWS` (module docstring). The writer keeps only the frozen config and
    schema, so it pickles small.
    """

    def __init__(self, sink_config: SinkConfig, write_schema: WriteSchema, *,
                 pool: Callable[[], ProducerPool] = get_pool,
                 task: Callable[[], TaskInfo] = task_info,
                 rechunk_rows: int | None = None,
                 rechunk_bytes: int = DEFAULT_RECHUNK_BYTES, batch_id: int | None = None,
                 flat: bool = False):
        check_writer_arguments(sink_config, write_schema)
        if write_schema.topic is None and sink_config.topic is None:
            raise ValueError("no 'topic' column and no 'topic' option: validate_schema should have "
                             "refused this schema")
        if rechunk_rows is None:
            rechunk_rows = AVRO_RECHUNK_ROWS if write_schema.encoders else DEFAULT_RECHUNK_ROWS
        if rechunk_rows < 0 or rechunk_bytes < 1:
            raise ValueError(f"rechunk_rows must be >= 0 and rechunk_bytes >= 1, got "
                             f"{rechunk_rows} and {rechunk_bytes}")
        self.sink_config = sink_config
        self.write_schema = write_schema
        self.rechunk_rows = rechunk_rows
        self.rechunk_bytes = rechunk_bytes
        self.batch_id = batch_id
        self.flat = flat
        self._pool = pool
        self._task = task

    def run(self, batches: Iterable[Any]) -> TaskRun:
        """Write every batch (the task's whole partition) and check; the task's run. Raises the
        task's first error."""
        return run_task(self.sink_config, self._pool, self._task,
                        lambda producer, outcome: self._send_all(producer, batches, outcome), Outcome(),
                        self.batch_id)

    def run_in_transaction(self, producer: Any, batches: Iterable[Any], *,
                           created: bool = False) -> TaskRun:
        """:meth:`run` in a transaction of ``producer``, which the caller keeps and commits with
        (the driver's own write: :func:`~.task.run_in_transaction`)."""
        return run_in_transaction(self.sink_config, producer, self._task(),
                                  lambda producer, outcome: self._send_all(producer, batches, outcome),
                                  Outcome(), self.batch_id, created=created)

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        run = self.run(batches)
        stats = run.stats()
        log.debug("partition %d (attempt %d) written: %s", stats.partition_id, stats.attempt, stats)
        yield stats_batch(stats.partition_id, stats.attempt, stats.duration_ms, run.metrics(),
                          run.transaction)

    def _send_all(self, producer: Any, batches: Iterable[Any], outcome: Outcome) -> None:
        """Send batch after batch until the first failure; ``position`` counts the rows of the
        task's partition, so errors name a row as rows mode does."""
        sender = _BatchSender(producer, self.write_schema, self.sink_config.topic, outcome)
        letters = outcome.dead_letters
        position = 0
        structs = flat_structs(self.write_schema) if self.flat else ()
        for batch in rechunk(batches, self.rechunk_rows, self.rechunk_bytes):
            if outcome.first_failure is not None or outcome.send_error is not None:
                return
            for spec in structs:
                batch = spec.rebuild(batch)
            if not sender.send(batch, position):
                return
            position += batch.num_rows
            if letters is not None:
                letters.handle_refused(producer, outcome.tallies)
        if letters is not None:
            letters.settle(producer, outcome.tallies)

    def __repr__(self) -> str:
        return f"ArrowWriter({self.sink_config!r}, {self.write_schema!r})"


class _BatchSender:
    """One task's ``send_arrow`` calls: the column arguments, the topics already checked."""

    __slots__ = ("_producer", "_send_arrow", "_columns", "_topic", "_outcome", "_checked",
                 "_letters", "_encoders", "_formats")

    def __init__(self, producer: Any, schema: WriteSchema, default_topic: str | None, outcome: Outcome):
        self._producer = producer
        self._send_arrow = producer.send_arrow
        self._columns = {name: (name if getattr(schema, name) is not None else None)
                         for name in ("key", "headers", "timestamp", "partition")}
        self._letters = outcome.dead_letters
        if self._letters is not None:  # errors.tolerance=all
            self._columns.update(errors_tolerance="all", keep_refused=True)
        self._topic = default_topic
        self._outcome = outcome
        self._checked: set[str] = set()
        self._encoders = schema.encoders
        self._formats: dict[str, dict[str, Any] | None] = {}

    def send(self, batch: Any, position: int) -> bool:
        """Send ``batch`` (its first row is row ``position`` of the partition); ``False`` once a
        ``send_arrow`` raised. A null or invalid topic raises :class:`RowError` after the rows
        before it were sent (with ``errors.tolerance=all``: the row goes to the dead letters)."""
        if self._topic is not None:
            return self._send(self._topic, batch, None, position)
        if self._letters is not None:
            return self._send_tolerant(batch, position)
        bad_row, problem = self._first_bad_topic(batch.column(TOPIC))
        good = batch if bad_row is None else batch.slice(0, bad_row)
        for topic, rows, indices in _by_topic(good):
            if not self._send(topic, rows, indices, position):
                return False
        if bad_row is not None:
            raise RowError(f"row {position + bad_row} of this partition {problem}")
        return True

    def _send_tolerant(self, batch: Any, position: int) -> bool:
        """:meth:`send` with ``errors.tolerance=all`` and a topic column: rows with a null or
        invalid topic go to the dead letters (one mask over the batch), the others are sent."""
        import pyarrow as pa

        bad = self._bad_topics(batch.column(TOPIC))
        if bad is None:
            good, rows = batch, None
        else:
            for row in np.flatnonzero(bad).tolist():
                topic = batch.column(TOPIC)[row].as_py()
                problem = ("a null 'topic' and no 'topic' option is set" if topic is None
                           else f"an invalid 'topic': {topic_name_problem(topic)}")
                error = RowError(f"row {position + row} of this partition has {problem}")
                self._letters.handle(self._producer, arrow_bad_record(batch, row, error, position))
            rows = np.flatnonzero(~bad)
            good = batch.filter(pa.array(~bad))
        for topic, part, indices in _by_topic(good):
            if rows is not None:
                indices = rows if indices is None else rows[indices]
            if not self._send(topic, part, indices, position, batch):
                return False
        return True

    def _bad_topics(self, column: Any) -> np.ndarray | None:
        """A mask of the rows whose topic is null or invalid, or ``None`` when there is none."""
        import pyarrow.compute as pc

        bad = None
        if column.null_count:
            bad = column.is_null().to_numpy(zero_copy_only=False).copy()
        for topic in pc.unique(column).to_pylist():
            if topic is None or topic in self._checked:
                continue
            if topic_name_problem(topic) is None:
                self._checked.add(topic)
                continue
            rows = pc.equal(column, topic).fill_null(False).to_numpy(zero_copy_only=False)
            bad = rows if bad is None else bad | rows
        return bad

    def _send(self, topic: str, batch: Any, indices: np.ndarray | None, position: int,
              whole: Any = None) -> bool:
        """``send_arrow`` of ``batch``, whose rows are rows ``indices`` of ``whole`` (``None``:
        ``batch`` is the task's batch itself)."""
        if batch.num_rows == 0:
            return True
        formats = self._formats_for(topic)
        if formats is None:
            return self._unresolved(topic, batch, indices, position, whole)
        try:
            result = self._send_arrow(topic, batch, value="value", **self._columns, **formats)
        except Exception as error:  # noqa: BLE001 - reported with its row by check()
            row = getattr(error, "row", None)
            if row is not None:
                row = position + int(row if indices is None else indices[row])
                error = _at_position(error, row)
            self._outcome.record_send_error(error, topic, getattr(error, "partition", None), row)
            return False
        self._outcome.tallies.append(result)
        for rejected in result.rejected:  # errors.tolerance=all: rows that are no records
            row = rejected.row if indices is None else int(indices[rejected.row])
            source = batch if indices is None else (whole if whole is not None else batch)
            self._letters.handle(self._producer, arrow_bad_record(
                source, row, _at_position(rejected.error, position + row), position, topic))
        return True

    def _formats_for(self, topic: str) -> dict[str, Any] | None:
        """``send_arrow``'s ``key_format``/``value_format`` for ``topic`` (empty for bytes), or
        ``None`` when the driver resolved no schema id for it."""
        formats = self._formats.get(topic, False)
        if formats is False:
            formats = {}
            for encoder in self._encoders:
                found = encoder.for_topic(topic)
                if found is None:
                    formats = None
                    break
                formats[f"{encoder.side}_format"] = found
            self._formats[topic] = formats
        return formats

    def _unresolved(self, topic: str, batch: Any, indices: np.ndarray | None, position: int,
                    whole: Any) -> bool:
        """Rows for a topic the driver resolved no schema id for (it was not in the data when
        the driver looked: a source that is not deterministic): each one a bad record."""
        sides = " and ".join(encoder.side for encoder in self._encoders if encoder.for_topic(topic) is None)
        for row in range(batch.num_rows):
            at = row if indices is None else int(indices[row])
            error = RowError(f"row {position + at} of this partition goes to topic {topic!r}, for which "
                             f"the driver registered no {sides} schema (the topic was not in the "
                             f"micro-batch when the driver looked; is the source deterministic?)")
            if self._letters is None:
                self._outcome.record_send_error(error, topic, None, position + at)
                return False
            self._letters.handle(self._producer, arrow_bad_record(
                whole if whole is not None and indices is not None else batch, at, error, position, topic))
        return True

    def _first_bad_topic(self, column: Any) -> tuple[int | None, str]:
        """The first row with a null or invalid topic and what is wrong, or ``(None, "")``."""
        import pyarrow.compute as pc

        first: int | None = None
        problem = ""
        if column.null_count:
            first = pc.index(pc.is_null(column), True).as_py()
            problem = (f"has a null 'topic' and no {TOPIC!r} option is set; fill the column or set "
                       f"the option")
        for topic in pc.unique(column).to_pylist():
            if topic is None or topic in self._checked:
                continue
            reason = topic_name_problem(topic)
            if reason is None:
                self._checked.add(topic)
                continue
            row = pc.index(column, topic).as_py()
            if first is None or row < first:
                first, problem = row, f"has an invalid 'topic': {reason}"
        return first, problem


def arrow_bad_record(batch: Any, row: int, error: BaseException, position: int,
                     topic: str | None = None) -> BadRecord:
    """Row ``row`` of ``batch`` (the sink columns; row ``position + row`` of the partition) as a
    bad record of the ``convert`` stage: its key, value (as JSON when it is no bytes: an Avro
    column's), headers with a key, partition."""
    values = _row_values(batch, row)
    raw = as_bytes

    headers = [(h["key"], raw(h["value"])) for h in values.get("headers") or ()
               if h is not None and h["key"] is not None]
    partition = getattr(error, "partition", None) if isinstance(error, InvalidPartitionError) \
        else values.get("partition")
    return BadRecord(CONVERT, values.get("topic", topic) if topic is None else topic, partition,
                     raw(values.get("key")), raw(values.get("value")), headers, error,
                     position + row)


def _row_values(batch: Any, row: int) -> dict[str, Any]:
    """Row ``row`` of ``batch`` as Python values by column, maps as dicts (as rows mode gets
    them from Spark)."""
    one = batch.slice(row, 1)
    try:
        return one.to_pylist(maps_as_pydicts="lossy")[0]
    except TypeError:  # pyarrow before 16 gives maps as lists of pairs only
        values = one.to_pylist()[0]
        return {name: _maps_as_dicts(values[name], one.schema.field(name).type) for name in values}


def _maps_as_dicts(value: Any, kind: Any) -> Any:
    """``value`` (of Arrow type ``kind``) with every map's list of pairs a dict."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(kind):
        return {key: _maps_as_dicts(item, kind.item_type) for key, item in value}
    if pa.types.is_struct(kind):
        return {kind.field(i).name: _maps_as_dicts(value[kind.field(i).name], kind.field(i).type)
                for i in range(kind.num_fields)}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [_maps_as_dicts(item, kind.value_type) for item in value]
    return value


def _at_position(error: BaseException, row: int) -> BaseException:
    """A key or value encoding error renamed for row ``row`` of the task's partition (the
    producer names the row of the batch it was given)."""
    if isinstance(error, SerializationError):
        return SerializationError(row, error.path, error.reason)
    return error


def _by_topic(batch: Any) -> Iterator[tuple[str, Any, np.ndarray | None]]:
    """``(topic, rows, indices)`` per distinct topic of a batch without null topics: its rows in
    their order, and their positions in ``batch`` (``None``: all of them, as they are)."""
    import pyarrow.compute as pc

    if batch.num_rows == 0:
        return
    encoded = pc.dictionary_encode(batch.column(TOPIC))
    topics = encoded.dictionary.to_pylist()
    if len(topics) == 1:
        yield topics[0], batch, None
        return
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    grouped = batch.take(order)
    start = 0
    for code, count in enumerate(np.bincount(codes, minlength=len(topics))):
        if count:
            yield topics[code], grouped.slice(start, count), order[start:start + count]
        start += count


def stats_batch(partition_id: int, attempt: int, duration_ms: int, metrics: SinkTaskMetrics,
                transaction: ResumableTransaction | None = None) -> Any:
    """The task's one stats row as an Arrow batch of :data:`STATS_SCHEMA` (``transaction``:
    exactly-once, the task's open transaction as JSON)."""
    import pyarrow as pa

    schema = pa.schema([("partition_id", pa.int32()), ("attempt", pa.int32()),
                        ("duration_ms", pa.int64()), ("metrics", pa.string()),
                        ("transaction", pa.string())])
    shipped = None if transaction is None else json.dumps(transaction.as_dict())
    return pa.RecordBatch.from_pydict({"partition_id": [partition_id], "attempt": [attempt],
                                       "duration_ms": [duration_ms], "metrics": [metrics.to_json()],
                                       "transaction": [shipped]}, schema=schema)


def stats_transactions(rows: Iterable[Any]) -> list[ResumableTransaction]:
    """The transactions the collected stats rows carry (exactly-once), one per task."""
    return [ResumableTransaction.from_dict(json.loads(row["transaction"])) for row in rows
            if row["transaction"] is not None]


def merge_stats(rows: Iterable[Any]) -> SinkTaskMetrics:
    """The collected stats rows (``Row`` or mapping with a ``metrics`` JSON field) merged."""
    merged = SinkTaskMetrics()
    for row in rows:
        merged = merged.merge(SinkTaskMetrics.from_json(row["metrics"]))
    return merged

