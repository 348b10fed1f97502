"""Rows mode's Avro sides: rows gathered into chunks, each chunk's column encoded as Arrow.

``foreachPartition`` hands the task one ``Row`` at a time; an Avro key or value
(:mod:`.formats`) is encoded over whole columns all the same: :class:`RowFormats` reads the rows
in chunks of :data:`CHUNK_ROWS`, builds each Avro side's column as an Arrow array of the
driver's type (``pa.array``; a ``Row`` is a tuple, which Arrow takes for a struct), encodes it
with the format of each row's topic, and yields the rows again, in order, with that side's field
replaced by the encoded bytes. :class:`~.rows.RowConverter` then sends them as it sends bytes.

Spark gives Python a ``timestamp`` as a naive datetime in the worker's local time
(:mod:`.rows`); Arrow would read a naive datetime as UTC, so such values are made aware first
(``astimezone``), wherever they sit in the column. ``timestamp_ntz`` values are wall-clock
times and go as they are.

A row that cannot be encoded (:class:`~spark_kafka_sink.errors.SerializationError`, naming the
row's position in the partition and the field) is raised where it comes, after the rows before
it, or, with ``tolerant``, yielded as an :class:`Unencodable` for the error policy. A row whose
topic is null or invalid is yielded as it is, for the converter to refuse; one whose topic the
driver resolved no schema id for is a :class:`~.rows.RowError`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from ..errors import SerializationError
from .formats import ColumnEncoder
from .options import topic_name_problem
from .rows import RowError
from .schema import WriteSchema

__all__ = ["CHUNK_ROWS", "RowFormats", "Unencodable"]

CHUNK_ROWS = 512
"""Rows encoded together: one Arrow array per Avro side per topic of a chunk."""


@dataclass(frozen=True)
class Unencodable:
    """A row an Avro side could not encode (``tolerant`` only): the row as Spark gave it and why."""

    row: Sequence[Any]
    error: Exception


class RowFormats:
    """Encodes the Avro sides of a task's rows (see the module docstring)."""

    def __init__(self, schema: WriteSchema, default_topic: str | None, *, tolerant: bool = False,
                 chunk_rows: int = CHUNK_ROWS):
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self._sides = [(schema.encoder(side).side, getattr(schema, side).index, schema.encoder(side),
                        _python_converter(schema.encoder(side).arrow_type))
                       for side in ("key", "value") if schema.encoder(side) is not None]
        self._topic = None if default_topic is not None or schema.topic is None else schema.topic.index
        self._default_topic = default_topic
        self._tolerant = tolerant
        self._chunk_rows = chunk_rows

    def rows(self, rows: Iterable[Sequence[Any]]) -> Iterator[Any]:
        """``rows`` with the Avro sides encoded, in order (see the module docstring)."""
        iterator = iter(rows)
        position = 0
        while True:
            chunk = list(islice(iterator, self._chunk_rows))
            if not chunk:
                return
            yield from self._chunk(chunk, position)
            position += len(chunk)

    def _chunk(self, chunk: list[Sequence[Any]], position: int) -> Iterator[Any]:
        out: list[Any] = [list(row) for row in chunk]
        errors: dict[int, Exception] = {}
        for topic, indices in self._by_topic(chunk):
            for side, index, encoder, convert in self._sides:
                if any(i in errors for i in indices):
                    indices = [i for i in indices if i not in errors]
                self._encode(topic, indices, chunk, out, errors, side, index, encoder, convert, position)
        for i, row in enumerate(chunk):
            error = errors.get(i)
            if error is None:
                yield out[i]
            elif self._tolerant:
                yield Unencodable(row, error)
            else:
                raise error

    def _by_topic(self, chunk: list[Sequence[Any]]) -> list[tuple[str, list[int]]]:
        """The rows of each valid topic (null and invalid topics are left for the converter)."""
        if self._topic is None:
            return [(self._default_topic, list(range(len(chunk))))]
        groups: dict[str, list[int]] = {}
        for i, row in enumerate(chunk):
            topic = row[self._topic]
            if isinstance(topic, str) and topic:
                groups.setdefault(topic, []).append(i)
        return [(topic, rows) for topic, rows in groups.items() if topic_name_problem(topic) is None]

    @staticmethod
    def _encode(topic: str, indices: list[int], chunk: list[Sequence[Any]], out: list[Any],
                errors: dict[int, Exception], side: str, index: int, encoder: ColumnEncoder,
                convert: Callable[[Any], Any] | None, position: int) -> None:
        if not indices:
            return
        fmt = encoder.for_topic(topic)
        if fmt is None:
            for i in indices:
                errors.setdefault(i, RowError(
                    f"row {position + i} of this partition goes to topic {topic!r}, for which the "
                    f"driver registered no {side} schema (the topic was not in the data when the "
                    f"driver looked; is the source deterministic?)"))
            return
        values = [chunk[i][index] for i in indices]
        if convert is not None:
            values = [convert(value) for value in values]
        try:
            column = pa.array(values, type=encoder.arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            column = None
        if column is None:   # one row at a time, to name the rows Arrow cannot take
            for i, value in zip(indices, values):
                try:
                    _one(fmt, value, encoder.arrow_type, out, i, index)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    errors.setdefault(i, SerializationError(position + i, side, f"{type(exc).__name__}: {exc}"))
                except SerializationError as exc:
                    errors.setdefault(i, SerializationError(position + i, exc.path, exc.reason))
            return
        result = fmt.encode(column)
        bodies = result.bodies.to_pylist()
        for j, i in enumerate(indices):
            out[i][index] = bodies[j]
        for failure in result.failures:
            i = indices[failure.row]
            errors.setdefault(i, SerializationError(position + i, failure.path, failure.reason))


def _one(fmt: Any, value: Any, kind: pa.DataType, out: list[Any], i: int, index: int) -> None:
    result = fmt.encode(pa.array([value], type=kind))
    if result.failures:
        raise result.failures[0].error()
    out[i][index] = result.bodies[0].as_py()


def _python_converter(kind: pa.DataType) -> Callable[[Any], Any] | None:
    """A function making the instants of a Python value of Arrow type ``kind`` aware (local time),
    or ``None`` when the type holds none."""
    if pa.types.is_timestamp(kind):
        if kind.tz is None:
            return None
        return lambda value: value if value is None or value.tzinfo is not None \
            else value.astimezone(datetime.timezone.utc)
    if pa.types.is_struct(kind):
        children = [(kind.field(i).name, _python_converter(kind.field(i).type)) for i in range(kind.num_fields)]
        if all(child is None for _, child in children):
            return None

        def struct(value: Any) -> Any:
            if value is None:
                return None
            items = value.items() if isinstance(value, dict) else zip((n for n, _ in children), value)
            converters = dict(children)
            return {name: (item if converters[name] is None else converters[name](item))
                    for name, item in items}
        return struct
    if pa.types.is_map(kind):
        item = _python_converter(kind.item_type)
        if item is None:
            return None
        return lambda value: None if value is None else [
            (k, item(v)) for k, v in (value.items() if isinstance(value, dict) else value)]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = _python_converter(kind.value_type)
        if item is None:
            return None
        return lambda value: None if value is None else [item(v) for v in value]
    return None
