"""``KafkaProducer.send_arrow``: whole Arrow batches through the producer, vectorised.

The steps, each over whole columns (no Python loop over rows):

1. resolve and check the columns (:func:`~.input.resolve_columns`), timestamps in ms;
2. choose every row's partition (:func:`~.plan.plan_partitions`) and group the rows;
3. sort the rows by partition (one ``take`` per column), encode the batch-independent parts of
   the records in one pass (:func:`~spark_kafka_sink.record.arrow.prepare_records`) and check
   each record against ``max.request.size`` and ``buffer.memory``, naming the first row too
   large;
4. only when every row passed: split each partition's rows into ``batch.size`` batches and encode
   them, all partitions in one pass (:func:`~spark_kafka_sink.record.arrow.encode_prepared` with
   a segment per partition). A large input is encoded and queued in consecutive row chunks of a
   bounded size (:func:`row_chunks`), so one send holds at most one chunk's encoded copy beyond
   ``buffer.memory``; every chunk is size-checked before the first is queued;
5. queue the batches, one partition after another in turns so that every leader gets work early,
   with :meth:`~.accumulator.RecordAccumulator.queue_encoded_batch`: memory from the buffer pool (this
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

from ...errors import RecordTooLargeError
from ...record.arrow import (ArrowRecords, EncodedBatch, encode_prepared, encoder_memory_pool,
                            prepare_records)
from ...record.arrow_columns import byte_lengths
from ...structs import TopicPartition
from .input import ArrowColumns
from .plan import PartitionPlan

__all__ = ["PreparedRows", "prepare_rows", "encode_rows", "row_chunks", "turns", "row_sizes"]


@dataclass(frozen=True)
class PreparedRows:
    """A chunk's rows in partition order, prepared once: partition ``partitions[i]`` holds rows
    ``starts[i]:starts[i + 1]`` of ``records`` (``starts`` ends with the row count)."""

    topic: str
    records: ArrowRecords
    partitions: tuple[int, ...]
    starts: np.ndarray


def row_sizes(columns: ArrowColumns) -> np.ndarray:
    """A cheap per-row size (key and value bytes plus a record's fixed overhead), which is what
    the sticky partitioner counts for rows without a key."""
    sizes = byte_lengths(columns.value, null_length=0)
    if columns.key is not None:
        sizes = sizes + byte_lengths(columns.key, null_length=0)
    return sizes + 8


def row_chunks(sizes: np.ndarray, budget: int, max_rows: int | None = None) -> list[tuple[int, int]]:
    """Consecutive row ranges of at most ``budget`` bytes each (by ``sizes``; a row larger than
    the budget is a range of its own) and at most ``max_rows`` rows: how ``send_arrow`` bounds
    the memory one encoding pass takes, whatever the size of the input. The row cap matters for
    tiny rows, whose per-row work arrays (varints, lengths, offsets) outweigh their bytes."""
    ends = np.cumsum(sizes, dtype=np.int64)
    chunks, start, done = [], 0, 0
    while start < len(sizes):
        stop = max(start + 1, int(np.searchsorted(ends, done + budget, side="right")))
        if max_rows is not None:
            stop = min(stop, start + max_rows)
        chunks.append((start, stop))
        start, done = stop, int(ends[stop - 1])
    return chunks


def prepare_rows(topic: str, columns: ArrowColumns, timestamps: np.ndarray, plan: PartitionPlan,
                 max_record_size: int, limit_name: str, *, row_offset: int = 0) -> PreparedRows:
    """Step 3: the rows sorted by partition (one ``take`` per column; none when they all go to
    one partition), prepared in one pass and size-checked (``RecordTooLargeError`` naming the
    input row, ``row_offset`` plus its row in ``columns``, with ``.row`` and ``.partition``)."""
    groups = plan.groups
    starts = np.concatenate(([0], np.cumsum([len(group.rows) for group in groups]))).astype(np.int64)
    order = None if len(groups) == 1 else np.concatenate([group.rows for group in groups])
    pool = encoder_memory_pool()

    def pick(array: Any) -> Any:
        return array if array is None or order is None else pc.take(array, order, memory_pool=pool)

    records = prepare_records(pick(columns.value), pick(columns.key), pick(columns.headers),
                              timestamp_ms=timestamps if order is None else timestamps[order])
    bounds = records.size_upper_bounds
    if len(bounds) and int(bounds.max()) > max_record_size:
        too_large = np.flatnonzero(bounds > max_record_size)
        first = int(too_large[0])
        row = row_offset + (first if order is None else int(order[first]))
        partition = groups[int(np.searchsorted(starts, first, side="right")) - 1].partition
        error = RecordTooLargeError(
            f"row {row} of the input is {int(bounds[first])} bytes when serialized, which is larger "
            f"than {max_record_size}, the value of the {limit_name} configuration "
            f"({len(too_large)} row(s) are too large)")
        error.row, error.partition = row, partition
        raise error
    return PreparedRows(topic, records, tuple(group.partition for group in groups), starts)


def encode_rows(prepared: PreparedRows, *, batch_size: int, compression_type: Any,
                compression_level: int | None) -> list[list[tuple[TopicPartition, EncodedBatch]]]:
    """Step 4: the batches of every partition, encoded in one pass (a batch never spans two
    partitions: each partition's first row starts a segment)."""
    batches = encode_prepared(prepared.records, batch_size=batch_size,
                              compression_type=compression_type, compression_level=compression_level,
                              segments=prepared.starts[1:-1].tolist())
    per_partition: list[list[tuple[TopicPartition, EncodedBatch]]] = [[] for _ in prepared.partitions]
    targets = [TopicPartition(prepared.topic, partition) for partition in prepared.partitions]
    first_rows = np.fromiter((batch.start for batch in batches), dtype=np.int64, count=len(batches))
    indices = (np.searchsorted(prepared.starts, first_rows, side="right") - 1).tolist()
    for batch, index in zip(batches, indices):
        per_partition[index].append((targets[index], batch))
    return per_partition


def turns(per_partition: list[list[Any]]) -> list[Any]:
    """The items of every list, one list after another in turns: ``[[a1, a2], [b1]]`` gives
    ``[a1, b1, a2]`` (step 5: every partition's first batch is queued before any second one)."""
    out = []
    depth = max((len(items) for items in per_partition), default=0)
    for level in range(depth):
        out.extend(items[level] for items in per_partition if level < len(items))
    return out
