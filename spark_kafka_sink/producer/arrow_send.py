"""``KafkaProducer.send_arrow``: whole Arrow batches through the producer, vectorised.

The steps, each over whole columns (no Python loop over rows):

1. resolve and check the columns (:func:`~.arrow_input.resolve_columns`), timestamps in ms;
2. choose every row's partition (:func:`~.arrow_plan.plan_partitions`) and group the rows;
3. per partition, encode the batch-independent parts of the records
   (:func:`~spark_kafka_sink.record.arrow.prepare_records`) and check each record against
   ``max.request.size`` and ``buffer.memory``, naming the first row too large;
4. only when every row passed: split each partition's rows into ``batch.size`` batches and encode
   them (:func:`~spark_kafka_sink.record.arrow.encode_prepared`). A large input is encoded and
   queued in consecutive row chunks of a bounded size (:func:`row_chunks`), so one send holds
   at most one chunk's encoded copy beyond ``buffer.memory``; every chunk is size-checked
   before the first is queued;
5. queue the batches, one partition after another in turns so that every leader gets work early,
   with :meth:`~.accumulator.RecordAccumulator.append_batch`: memory from the buffer pool (this
   blocks within ``max.block.ms`` when the pool is exhausted: backpressure), then the ordinary
   sender path (drain per leader, idempotent sequences, retries, expiry, metrics).

So a bad column, a record too large or an invalid partition raises before anything is queued.
A failure while queuing (the producer closed, no memory within ``max.block.ms``) marks the rows
not queued as failed in the result, with that error: nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.compute as pc

from ..errors import RecordTooLargeError
from ..record.arrow import (ArrowRecords, EncodedBatch, encode_prepared, encoder_memory_pool,
                            prepare_records)
from ..structs import TopicPartition
from .arrow_input import ArrowColumns
from .arrow_plan import PartitionGroup, PartitionPlan

__all__ = ["PreparedPartition", "prepare_partitions", "encode_partitions", "row_chunks", "turns",
           "row_sizes"]


@dataclass(frozen=True)
class PreparedPartition:
    """One partition's rows of the input (``rows``: input row indices), prepared for encoding."""

    topic_partition: TopicPartition
    rows: np.ndarray
    records: ArrowRecords


def row_sizes(columns: ArrowColumns) -> np.ndarray:
    """A cheap per-row size (key and value bytes plus a record's fixed overhead), which is what
    the sticky partitioner counts for rows without a key."""
    sizes = _lengths(columns.value)
    if columns.key is not None:
        sizes = sizes + _lengths(columns.key)
    return sizes + 8


def _lengths(array: Any) -> np.ndarray:
    return pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def row_chunks(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive row ranges of at most ``budget`` bytes each (by ``sizes``; a row larger than
    the budget is a range of its own): how ``send_arrow`` bounds the memory one encoding pass
    takes, whatever the size of the input."""
    ends = np.cumsum(sizes, dtype=np.int64)
    chunks, start, done = [], 0, 0
    while start < len(sizes):
        stop = max(start + 1, int(np.searchsorted(ends, done + budget, side="right")))
        chunks.append((start, stop))
        start, done = stop, int(ends[stop - 1])
    return chunks


def prepare_partitions(topic: str, columns: ArrowColumns, timestamps: np.ndarray,
                       plan: PartitionPlan, max_record_size: int, limit_name: str, *,
                       row_offset: int = 0) -> list[PreparedPartition]:
    """Step 3: each partition's records prepared and size-checked (``RecordTooLargeError``
    naming the input row: ``row_offset`` plus the row in ``columns``)."""
    prepared = []
    for group in plan.groups:
        records = prepare_records(*_take(columns, group, plan), timestamp_ms=timestamps[group.rows])
        bounds = records.size_upper_bounds
        too_large = np.flatnonzero(bounds > max_record_size)
        if len(too_large):
            first = int(too_large[0])
            error = RecordTooLargeError(
                f"row {row_offset + int(group.rows[first])} of the input is {int(bounds[first])} bytes when "
                f"serialized, which is larger than {max_record_size}, the value of the {limit_name} "
                f"configuration ({len(too_large)} row(s) of partition {group.partition} are too large)")
            error.row, error.partition = row_offset + int(group.rows[first]), group.partition
            raise error
        prepared.append(PreparedPartition(TopicPartition(topic, group.partition), group.rows, records))
    return prepared


def _take(columns: ArrowColumns, group: PartitionGroup, plan: PartitionPlan) -> tuple:
    """The group's value, key and headers columns (the input itself when it is all one group)."""
    whole = len(group.rows) == plan.row_count  # all rows, in input order (the sort is stable)
    pool = encoder_memory_pool()
    pick = (lambda array: array) if whole else (lambda array: pc.take(array, group.rows, memory_pool=pool))
    return tuple(None if array is None else pick(array)
                 for array in (columns.value, columns.key, columns.headers))


def encode_partitions(prepared: list[PreparedPartition], *, batch_size: int, compression_type: Any,
                      compression_level: int | None) -> list[list[tuple[TopicPartition, EncodedBatch]]]:
    """Step 4: every partition's batches, encoded."""
    return [[(part.topic_partition, batch)
             for batch in encode_prepared(part.records, batch_size=batch_size,
                                          compression_type=compression_type,
                                          compression_level=compression_level)]
            for part in prepared]


def turns(per_partition: list[list[Any]]) -> list[Any]:
    """The items of every list, one list after another in turns: ``[[a1, a2], [b1]]`` gives
    ``[a1, b1, a2]`` (step 5: every partition's first batch is queued before any second one)."""
    out = []
    depth = max((len(items) for items in per_partition), default=0)
    for level in range(depth):
        out.extend(items[level] for items in per_partition if level < len(items))
    return out
