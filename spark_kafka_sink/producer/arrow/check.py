"""``send_arrow(errors_tolerance="all")``: the rows that cannot become records, found as a mask.

With the default tolerance (``"none"``) ``send_arrow`` raises at the first bad row and queues
nothing. With ``"all"`` every row is checked first, over whole columns, and the bad ones are left
out: :func:`find_bad_rows` returns them as :class:`RejectedRow` values (the input row and the
error ``send_arrow`` would have raised for it), the good rows go on in one piece. A row is bad
when it has

- a null header, or a header with a null key (:class:`~spark_kafka_sink.errors.RecordContentError`);
- a negative timestamp (``RecordContentError``);
- an explicit partition that is negative or not below the topic's partition count
  (:class:`~spark_kafka_sink.errors.InvalidPartitionError`);
- a record larger than ``max.request.size`` or ``buffer.memory`` when serialized
  (:class:`~spark_kafka_sink.errors.RecordTooLargeError`);
- a key or value its format (``value_format``) could not encode
  (:class:`~spark_kafka_sink.errors.SerializationError`; :func:`merge_rejected`).

Only the bad rows cost a Python step each; a batch without any costs a few numpy passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidPartitionError, RecordContentError, RecordTooLargeError
from ...record import RecordBatchBuilder
from ...record.arrow_columns import byte_lengths
from .input import ArrowColumns

__all__ = ["RejectedRow", "find_bad_rows", "merge_rejected"]

_HEADER_SLACK = 10   # bytes per header beyond its key and value (two varint lengths)
_RECORD_SLACK = 128  # a batch header and a record's varints, generously


@dataclass(frozen=True)
class RejectedRow:
    """A row of a ``send_arrow`` input that was not sent, and why."""

    row: int
    error: Exception


def find_bad_rows(topic: str, columns: ArrowColumns, timestamps: np.ndarray, partitions: int,
                  max_record_size: int, limit_name: str) -> list[RejectedRow]:
    """The rows of ``columns`` that cannot become records of ``topic`` (``partitions``
    partitions; ``timestamps`` as :func:`~.input.timestamps_ms` gave them, negatives
    kept), in row order; a row with several problems is named for the first found (headers,
    timestamp, partition, size)."""
    found: dict[int, Exception] = {}
    if columns.headers is not None:
        for row, what in _bad_header_rows(columns.headers):
            found.setdefault(row, RecordContentError(
                f"row {row} of the input has {what} in the headers column (Kafka headers need a "
                f"string key)"))
    for row in np.flatnonzero(timestamps < 0).tolist():
        found.setdefault(row, RecordContentError(
            f"row {row}: timestamp {int(timestamps[row])} ms is negative (before 1970); Kafka "
            f"timestamps must be non-negative or null"))
    if columns.partition is not None:
        explicit = columns.partition
        values = explicit.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        for row in np.flatnonzero((values < 0) | (values >= partitions)).tolist():
            found.setdefault(row, InvalidPartitionError(topic, int(values[row]), partitions, row=row))
    for row, size in _too_large(columns, max_record_size):
        found.setdefault(row, RecordTooLargeError(
            f"row {row} of the input is {size} bytes when serialized, which is larger than "
            f"{max_record_size}, the value of the {limit_name} configuration"))
    return [RejectedRow(row, found[row]) for row in sorted(found)]


def merge_rejected(unencoded: tuple[Exception, ...], rejected: list[RejectedRow]) -> list[RejectedRow]:
    """The rows a key or value format could not encode (errors with their ``row``) and those
    :func:`find_bad_rows` found, in row order; a row in both is named for its encoding."""
    found = {error.row: error for error in unencoded}
    for bad in rejected:
        found.setdefault(bad.row, bad.error)
    return [RejectedRow(row, found[row]) for row in sorted(found)]


def _bad_header_rows(headers: Any) -> list[tuple[int, str]]:
    """``(row, what)`` for every row holding a null header or a header with a null key."""
    items = headers.flatten()  # the headers of every row, in row order (the slice's only)
    if not len(items):
        return []
    keys = items.flatten()[0]  # null where the header or its key is null
    if not keys.null_count:
        return []
    bad = np.flatnonzero(keys.is_null().to_numpy(zero_copy_only=False))
    offsets = headers.offsets.to_numpy(zero_copy_only=False)
    rows = np.searchsorted(offsets, offsets[0] + bad, side="right") - 1
    null_items = items.is_null().to_numpy(zero_copy_only=False)
    out: dict[int, str] = {}
    for row, item in zip(rows.tolist(), bad.tolist()):
        out.setdefault(row, "a null header" if null_items[item] else "a header with a null key")
    return sorted(out.items())


def _too_large(columns: ArrowColumns, limit: int) -> list[tuple[int, int]]:
    """``(row, serialized size bound)`` of every row over ``limit``: a cheap bound over the
    columns first, the exact ``RecordBatchBuilder`` bound for the rows it does not clear."""
    sizes = byte_lengths(columns.value, null_length=0) + _RECORD_SLACK
    if columns.key is not None:
        sizes = sizes + byte_lengths(columns.key, null_length=0)
    headers = columns.headers
    if headers is not None and len(headers):
        items = headers.flatten()
        offsets = headers.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = offsets - offsets[0]
        if len(items):
            fields = items.flatten()
            item_bytes = (byte_lengths(fields[0], null_length=0)
                          + byte_lengths(fields[1], null_length=0) + _HEADER_SLACK)
            summed = np.concatenate(([0], np.cumsum(item_bytes)))
            sizes = sizes + (summed[offsets[1:]] - summed[offsets[:-1]])
    candidates = np.flatnonzero(sizes > limit)
    out = []
    for row in candidates.tolist():
        size = RecordBatchBuilder.estimate_size_upper_bound(*_row_parts(columns, row))
        if size > limit:
            out.append((row, size))
    return out


def _row_parts(columns: ArrowColumns, row: int) -> tuple[Any, Any, Any]:
    """One row's key, value and headers as Python values."""
    def scalar(array: Any) -> Any:
        value = None if array is None else array[row].as_py()
        return value.encode("utf-8") if isinstance(value, str) else value

    headers = None if columns.headers is None else columns.headers[row].as_py()
    pairs = None if headers is None else [
        (h["key"], h["value"].encode("utf-8") if isinstance(h["value"], str) else h["value"])
        for h in headers if h is not None and h["key"] is not None]
    return scalar(columns.key), scalar(columns.value), pairs
