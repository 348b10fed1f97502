"""``admin.committed_batches``: what a read_committed Fetch answer keeps (the commit log's read,
``tail``), as Kafka's consumer decides it: a producer's transactional batches are dropped from its
aborted transaction's first offset up to its abort marker; committed and non-transactional ones
stay. And the reads' arguments, refused before any connection."""

from __future__ import annotations

import struct

import pytest

from spark_kafka_sink.admin import committed_batches, read_partition, read_records
from spark_kafka_sink.record.layout import CONTROL_FLAG, TRANSACTIONAL_FLAG
from spark_kafka_sink.record.reader import Record, RecordBatch

ABORT, COMMIT = 0, 1


def batch(offset: int, producer_id: int, *, transactional: bool = True, marker: int | None = None,
          count: int = 1) -> RecordBatch:
    attributes = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if marker is not None else 0)
    if marker is not None:
        records = (Record(offset, 0, struct.pack(">hh", 0, marker), b"\x00\x00\x00\x00\x00\x00"),)
    else:
        records = tuple(Record(offset + i, 0, b"k", f"{producer_id}@{offset + i}".encode())
                        for i in range(count))
    return RecordBatch(offset, 0, 0, 2, 0, attributes, len(records) - 1, 0, 0, producer_id, 0, 0,
                       len(records), records)


def kept(batches, aborted) -> list[tuple[int, int]]:
    return [(b.base_offset, b.producer_id) for b in committed_batches(batches, aborted)]


def test_an_aborted_transaction_is_dropped_up_to_its_marker_and_the_others_kept():
    batches = [batch(0, 7), batch(1, 8), batch(2, 7, count=2), batch(4, 8, marker=COMMIT),
               batch(5, 7, marker=ABORT), batch(6, 7), batch(7, -1, transactional=False)]
    # producer 7's transaction from offset 0 was aborted (marker at 5); its next one, from 6, not
    assert kept(batches, [(7, 0)]) == [(1, 8), (4, 8), (5, 7), (6, 7), (7, -1)]


def test_an_aborted_transaction_that_starts_before_the_fetch_offset_is_dropped_too():
    # the broker lists every aborted transaction overlapping the range, first offset included
    assert kept([batch(10, 3), batch(11, 3, marker=ABORT), batch(12, 4)], [(3, 2)]) == \
        [(11, 3), (12, 4)]


def test_without_aborted_transactions_every_batch_is_kept():
    batches = [batch(0, 1), batch(1, 1, marker=COMMIT)]
    assert kept(batches, []) == [(0, 1), (1, 1)]


def test_an_unknown_isolation_level_is_refused_before_any_connection():
    with pytest.raises(ValueError, match="isolation_level must be 'read_uncommitted' or "
                                         "'read_committed', got 'serializable'"):
        read_partition("127.0.0.1:1", "t", isolation_level="serializable")


def test_read_records_refuses_bad_arguments_before_any_connection():
    with pytest.raises(ValueError, match="isolation_level must be"):
        read_records("127.0.0.1:1", "t", isolation_level="serializable")
    with pytest.raises(ValueError, match="max_records must be at least 0, got -1"):
        read_records("127.0.0.1:1", "t", max_records=-1)
