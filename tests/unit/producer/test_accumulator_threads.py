"""Many threads appending to ONE partition through ``send()``'s own path, then the batches
decoded: each must be a valid batch whose records have offset deltas 0..n-1, and every record
must be in exactly one of them. This is what the per-deque lock (Java synchronises on the deque)
guarantees; without it, two threads append into the same batch at once. A tiny GIL switch
interval makes the threads interleave inside ``append``; the sticky path (records without a
key), which takes the same lock its own way, gets the same check."""

from __future__ import annotations

import random
import sys
import threading

import pytest

from spark_kafka_sink.producer.accumulator import RecordAccumulator, StickyTarget
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.partitioner import StickyPartitioner, TopicPartitions
from spark_kafka_sink.record import read_batches
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock

TP = TopicPartition("t", 0)
THREADS, PER_THREAD = 8, 1500


@pytest.fixture
def tiny_switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _appends_from_threads(append) -> None:
    start = threading.Barrier(THREADS)

    def run(thread: int) -> None:
        start.wait()
        for i in range(PER_THREAD):
            append(f"{thread}:{i}".encode())

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def _check_batches(accumulator: RecordAccumulator) -> None:
    values = []
    for batch in accumulator.queued_batches(TP):
        batch.close()
        for decoded in read_batches(batch.records()):
            records = decoded.records
            assert [r.offset for r in records] == list(range(len(records)))   # deltas 0..n-1
            assert decoded.last_offset_delta == len(records) - 1
            values.extend(r.value for r in records)
    expected = [f"{t}:{i}".encode() for t in range(THREADS) for i in range(PER_THREAD)]
    assert sorted(values) == sorted(expected)                                 # each exactly once
    for thread in range(THREADS):                                             # per thread in order
        mine = [v for v in values if v.startswith(f"{thread}:".encode())]
        assert mine == [f"{thread}:{i}".encode() for i in range(PER_THREAD)]


def _accumulator(**options) -> RecordAccumulator:
    clock = FakeClock()
    return RecordAccumulator(batch_size=4096, linger_ms=0, retry_backoff_ms=100,
                             retry_backoff_max_ms=1000, delivery_timeout_ms=120_000,
                             buffer_pool=BufferPool(64 << 20, 4096, clock=clock), clock=clock,
                             **options)


def test_concurrent_sends_into_one_partition_make_valid_batches(tiny_switch_interval):
    accumulator = _accumulator()
    queue = accumulator.partition_queue(TP)             # send() caches this handle per partition

    def append(value: bytes) -> None:
        accumulator.append(queue, 1_700_000_000_000, b"k", value, None, None, 0, 0)

    _appends_from_threads(append)
    _check_batches(accumulator)


def test_concurrent_sticky_appends_make_valid_batches(tiny_switch_interval):
    accumulator = _accumulator(partitioner=StickyPartitioner(4096, rng=random.Random(1)))
    sticky = StickyTarget("t", TopicPartitions(1, (0,)))  # one partition: every record goes to TP

    def append(value: bytes) -> None:
        accumulator.append(sticky, 1_700_000_000_000, None, value, None, None, 0, 0)

    _appends_from_threads(append)
    _check_batches(accumulator)
