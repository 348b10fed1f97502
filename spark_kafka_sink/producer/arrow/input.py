"""The columns of an Arrow batch that ``send_arrow`` writes, and what it hands back.

:func:`resolve_columns` picks the value, key, headers, timestamp and partition columns of a
``pyarrow.RecordBatch`` or ``Table`` by name and checks their types once, naming the column at
fault. :func:`timestamps_ms` turns the timestamp column into epoch milliseconds.
:class:`ArrowSendResult` is the one object a whole send completes: a
:class:`~.tally.DeliveryTally` that also keeps each partition's offset ranges and can be waited on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import KafkaError, KafkaTimeoutError, RecordContentError
from ...structs import TopicPartition
from ..tally import DeliveryTally

__all__ = ["DEFAULT", "ArrowColumns", "ArrowSendError", "ArrowSendResult", "OffsetRange",
           "resolve_columns", "timestamps_ms"]


DEFAULT = object()
"""Marker for "the conventional column name, if present" (``key``, ``headers``, ...)."""

@dataclass(frozen=True)
class ArrowColumns:
    """The resolved input columns (pyarrow arrays, one chunk each) and the row count.
    ``unencoded``: the errors of the rows a key or value format could not encode (their column
    is null there), by row."""

    rows: int
    value: Any
    key: Any = None
    headers: Any = None
    timestamp: Any = None
    partition: Any = None
    unencoded: tuple[RecordContentError, ...] = ()

    def slice(self, start: int, stop: int) -> ArrowColumns:
        """Rows ``start:stop`` (zero-copy slices of every column)."""
        def cut(array: Any) -> Any:
            return None if array is None else array.slice(start, stop - start)

        return ArrowColumns(stop - start, cut(self.value), cut(self.key), cut(self.headers),
                            cut(self.timestamp), cut(self.partition))

    def filter(self, keep: np.ndarray) -> ArrowColumns:
        """The rows where ``keep`` (a bool array, one per row) is true, in order (one copy)."""
        import pyarrow as pa

        mask = pa.array(keep, type=pa.bool_())

        def take(array: Any) -> Any:
            return None if array is None else array.filter(mask)

        return ArrowColumns(int(keep.sum()), take(self.value), take(self.key), take(self.headers),
                            take(self.timestamp), take(self.partition))


def resolve_columns(data: Any, *, value: Any = "value", key: Any = DEFAULT,
                    headers: Any = DEFAULT, timestamp: Any = DEFAULT,
                    partition: Any = DEFAULT, check_header_keys: bool = True,
                    value_format: Any = None, key_format: Any = None) -> ArrowColumns:
    """The columns of ``data`` (a ``pyarrow.RecordBatch`` or ``Table``) to send.

    ``value_format`` / ``key_format``: a format of :mod:`spark_kafka_sink.avro` (anything whose
    ``encode(column)`` gives ``bodies`` and ``failures``, each failure's ``error()`` a
    :class:`~spark_kafka_sink.errors.SerializationError`) that turns that column, of any type it
    takes, into the record bytes; the rows it cannot encode are in ``unencoded``.

    Each argument is a column name, ``None`` for no such column, or (except ``value``) left at
    its default: the column named ``key``/``headers``/``timestamp``/``partition`` if ``data``
    has one. A name given explicitly must exist. Types: value and key binary or string (any
    width); headers ``list<struct<key: string, value: binary>>``; timestamp an Arrow timestamp
    (any unit and zone) or int64 epoch milliseconds; partition any integer type. A null header
    or header key is a ``RecordContentError`` (a ``ValueError``) naming the input row (``.row``),
    unless ``check_header_keys`` is false (the caller finds such rows itself).
    """
    import pyarrow as pa

    if isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.Table):
        table = data
    else:
        raise TypeError(f"send_arrow takes a pyarrow RecordBatch or Table, got {type(data).__name__}")
    names = set(table.column_names)

    def pick(argument: Any, conventional: str, what: str) -> Any:
        if argument is None:
            return None
        name = conventional if argument is DEFAULT else argument
        if name not in names:
            if argument is DEFAULT:
                return None
            raise ValueError(f"the {what} column {name!r} is not in the input; its columns are "
                             f"{sorted(names)}")
        column = table.column(name)
        return _without_views(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))

    if value is None or value is DEFAULT:
        raise ValueError("send_arrow needs a value column (value='...')")
    unencoded: list[RecordContentError] = []

    def encoded(column: Any, fmt: Any) -> Any:
        if column is None or fmt is None:
            return column
        result = fmt.encode(column)
        unencoded.extend(failure.error() for failure in result.failures)
        return result.bodies

    columns = ArrowColumns(
        rows=table.num_rows,
        value=encoded(pick(value, "value", "value"), value_format),
        key=encoded(pick(key, "key", "key"), key_format),
        headers=pick(headers, "headers", "headers"),
        timestamp=pick(timestamp, "timestamp", "timestamp"),
        partition=pick(partition, "partition", "partition"),
        unencoded=tuple(sorted(unencoded, key=lambda error: error.row)),
    )
    _check_types(columns, check_header_keys)
    return columns


def _without_views(array: Any) -> Any:
    """``array`` with ``binary_view``/``string_view`` (top level, or a header's key or value)
    cast to ``large_binary``/``large_string``: the encoder reads Arrow offsets, which view types
    do not have. Other arrays are returned as they are."""
    import pyarrow as pa

    from ...record.arrow_columns import is_binary_view, is_string_view  # pyarrow: lazily

    def plain(kind: Any) -> Any:
        if is_binary_view(kind):
            return pa.large_binary()
        if is_string_view(kind):
            return pa.large_string()
        return kind

    kind = array.type
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and pa.types.is_struct(kind.value_type):
        item = kind.value_type
        fields = [item.field(i).with_type(plain(item.field(i).type)) for i in range(item.num_fields)]
        if any(f.type != item.field(i).type for i, f in enumerate(fields)):
            lister = pa.large_list if pa.types.is_large_list(kind) else pa.list_
            return array.cast(lister(pa.struct(fields)))
        return array
    target = plain(kind)
    return array if target == kind else array.cast(target)


def _check_types(columns: ArrowColumns, check_header_keys: bool = True) -> None:
    import pyarrow as pa

    from ...record.arrow_columns import is_bytes     # pyarrow loads with the first Arrow send

    for what, array in (("value", columns.value), ("key", columns.key)):
        if array is not None and not is_bytes(array.type):
            raise TypeError(f"the {what} column has type {array.type}; expected binary or string")
    headers = columns.headers
    if headers is not None:
        kind = headers.type
        item = kind.value_type if pa.types.is_list(kind) or pa.types.is_large_list(kind) else None
        ok = (item is not None and pa.types.is_struct(item) and item.num_fields == 2
              and item.field(0).name == "key" and item.field(1).name == "value"
              and (pa.types.is_string(item.field(0).type) or pa.types.is_large_string(item.field(0).type))
              and is_bytes(item.field(1).type))
        if not ok:
            raise TypeError(f"the headers column has type {kind}; expected "
                            f"list<struct<key: string, value: binary>>")
        if check_header_keys:
            _check_header_keys(headers)
    stamp = columns.timestamp
    if stamp is not None and not (pa.types.is_timestamp(stamp.type) or pa.types.is_int64(stamp.type)):
        raise TypeError(f"the timestamp column has type {stamp.type}; expected a timestamp or "
                        f"int64 epoch milliseconds")
    part = columns.partition
    if part is not None and not pa.types.is_integer(part.type):
        raise TypeError(f"the partition column has type {part.type}; expected an integer type")


def _check_header_keys(headers: Any) -> None:
    """A null header, or a header with a null key, is a ``ValueError`` naming its row of the
    input (``.row``), found here, before the rows are reordered by partition."""
    import pyarrow.compute as pc

    items = headers.flatten()  # the headers of every row, in row order (the slice's only)
    if not len(items):
        return
    keys = items.flatten()[0]  # null where the header or its key is null
    if not keys.null_count:
        return
    first = pc.index(keys.is_null(), True).as_py()
    offsets = headers.offsets.to_numpy(zero_copy_only=False)
    row = int(np.searchsorted(offsets, offsets[0] + first, side="right")) - 1
    what = "a null header" if items.is_null()[first].as_py() else "a header with a null key"
    error = RecordContentError(f"headers: row {row} of the input has {what} (Kafka headers need a "
                               f"string key)")
    error.row = row  # type: ignore[attr-defined]
    raise error


_PER_MS = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}


def timestamps_ms(column: Any, rows: int, now_ms: int, name: str = "timestamp", *,
                  negative_ok: bool = False) -> np.ndarray:
    """Epoch milliseconds per row (int64): the column's, floored to whole ms as Spark's sink
    does; ``now_ms`` for a null or for no column. ``ValueError`` naming the column ``name``, the
    first row and its value when a timestamp is negative (before 1970): as in Java, a Kafka
    timestamp is non-negative or null. ``negative_ok``: return them instead (the caller sorts
    those rows out)."""
    import pyarrow as pa

    if column is None:
        return np.full(rows, now_ms, dtype=np.int64)
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        raw = column.cast(pa.int64())  # the stored integers in the column's unit (UTC)
        values = raw.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        values = values * 1000 if unit == "s" else values // _PER_MS[unit]
    else:
        values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if column.null_count:
        values[column.is_null().to_numpy(zero_copy_only=False)] = now_ms
    negative = values < 0
    if not negative_ok and negative.any():
        row = int(np.argmax(negative))
        raise RecordContentError(
            f"row {row}: timestamp {int(values[row])} ms in column {name!r} is negative (before "
            f"1970); Kafka timestamps must be non-negative or null (null: the send time), and "
            f"{int(negative.sum())} row(s) of this column are negative")
    return values


class ArrowSendError(KafkaError):
    """Rows of a ``send_arrow`` failed; the cause is the first failure's error."""


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``first..last`` (inclusive) of one partition, written by one send."""

    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


class ArrowSendResult(DeliveryTally):
    """The outcome of one ``send_arrow``: completes when every row has an outcome.

    Counts as a :class:`DeliveryTally` (``acked``, ``failed``, ``acked_by_topic``,
    ``first_failure``) plus ``offsets``: per partition, the offset ranges the broker gave its
    batches (adjacent ranges merged). ``wait(timeout)`` blocks until all ``rows`` are done;
    ``raise_for_errors()`` raises the first failure. Rows that could not even be queued (the
    producer closed, or no memory within ``max.block.ms``) count as failed, with that error.

    With ``errors_tolerance="all"``, ``rejected`` lists the input rows left out because they
    cannot become records (``check.RejectedRow``: the row and its error), and ``rows``
    counts only the rows sent; ``keep_refused`` keeps the records the broker refuses one by one
    (:meth:`~.tally.DeliveryTally.take_refused`).
    """

    __slots__ = ("rows", "offsets", "rejected", "_done")

    def __init__(self, rows: int, *, keep_refused: bool = False, rejected: tuple = ()):
        super().__init__(keep_refused=keep_refused)
        self.rows = rows
        self.rejected = rejected
        self.offsets: dict[TopicPartition, list[OffsetRange]] = {}
        self._done = threading.Condition(self._lock)

    def _count_locked(self, topic_partition: TopicPartition, records: int,
                      error: BaseException | None, base_offset: int) -> None:
        super()._count_locked(topic_partition, records, error, base_offset)
        if error is None and base_offset >= 0:
            ranges = self.offsets.setdefault(topic_partition, [])
            last = base_offset + records - 1
            if ranges and ranges[-1].last + 1 == base_offset:
                ranges[-1] = OffsetRange(ranges[-1].first, last)
            else:
                ranges.append(OffsetRange(base_offset, last))
        self._refused_locked()

    def _refused_locked(self) -> None:
        if self.acked + self.failed + self.refused >= self.rows:
            self._done.notify_all()

    def not_queued(self, error: BaseException, topic_partition: TopicPartition, records: int) -> None:
        """``records`` rows never reached the accumulator: they fail with ``error``."""
        self.batch_completed(topic_partition, records, error)

    def done(self) -> bool:
        """Whether every row has an outcome."""
        return self.completed >= self.rows

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every row has an outcome; ``False`` if ``timeout`` (s) ran out first."""
        with self._lock:
            return self._done.wait_for(lambda: self.acked + self.failed + self.refused >= self.rows,
                                       timeout)

    def raise_for_errors(self, timeout: float | None = None) -> ArrowSendResult:
        """Wait, then raise the first failure's error (with how many rows failed); ``self``."""
        if not self.wait(timeout):
            raise KafkaTimeoutError(f"{self.rows - self.completed} of {self.rows} rows still had no "
                                    f"outcome after {timeout} s")
        failure = self.first_failure
        if failure is not None:
            error = failure.error
            raise ArrowSendError(f"{self.failed} of {self.rows} rows failed to be written; the first "
                                 f"error ({failure.topic_partition}): {type(error).__name__}: {error}") from error
        return self

    def __repr__(self) -> str:
        extra = "".join(f", {name}={count}" for name, count in
                        (("refused", self.refused), ("rejected", len(self.rejected))) if count)
        return (f"ArrowSendResult(rows={self.rows}, acked={self.acked}, failed={self.failed}"
                f"{extra}, partitions={len(self.offsets)})")
