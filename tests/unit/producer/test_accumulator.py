"""RecordAccumulator: readiness, drain per node, retries, expiry, muting, flush, close, threads.

Time is a FakeClock; real threads appear only where blocking is the point, with bounded waits.
``test_append_throughput`` prints the append rate (see it with ``-s``); it asserts nothing.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import pytest

from spark_kafka_sink.client.cluster_snapshot import NO_LEADER, ClusterSnapshot, PartitionInfo
from spark_kafka_sink.errors import KafkaTimeoutError, ProducerClosedError
from spark_kafka_sink.producer.accumulator import (
    NO_DELAY_LIMIT_MS,
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
    StickyTarget,
)
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.transactions.idempotence import Idempotence
from spark_kafka_sink.producer.transactions.manager import TransactionManager
from spark_kafka_sink.record import read_batch
from spark_kafka_sink.structs import Node, TopicPartition

from ..fakes import FakeClock

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))  # leaders: 1, 2, 1
U0 = TopicPartition("u", 0)  # no leader
CLUSTER = ClusterSnapshot(
    [Node(1, "h1", 9092), Node(2, "h2", 9092)],
    [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 2), PartitionInfo("t", 2, 1),
     PartitionInfo("u", 0, NO_LEADER)])
TS = 1_700_000_000_000
BATCH_SIZE = 1024
LINGER_MS = 10
WAIT_S = 5.0


class MidpointRandom:
    """Jitter factor exactly 1.0, so backoffs are the plain exponential values."""

    def uniform(self, low: float, high: float) -> float:
        return (low + high) / 2


@dataclass
class Setup:
    accumulator: RecordAccumulator
    pool: BufferPool
    clock: FakeClock

    @property
    def now(self) -> int:
        return self.clock.monotonic_ms()

    def append(self, tp=T0, value=b"v" * 50, key=b"key", callback=None, max_block_ms=0):
        return RecordAppendResult(*self.accumulator.append(self.accumulator.partition_queue(tp), TS, key,
                                                           value, None, callback, max_block_ms, self.now))

    def fill(self, tp=T0, full_batches: int = 1) -> None:
        """Append until ``tp`` has ``full_batches`` full batches (and one more, just started)."""
        while self.accumulator.queue_size(tp) <= full_batches:
            self.append(tp)
        assert all(b.is_full for b in self.accumulator.queued_batches(tp)[:full_batches])

    def ready(self) -> ReadyCheckResult:
        return self.accumulator.ready(CLUSTER, self.now)

    def drain(self, nodes=(1, 2), max_request_size=1 << 20):
        return self.accumulator.drain(CLUSTER, nodes, max_request_size, self.now)


def setup(*, idempotence: Idempotence | None = None, memory: int = 64 * 1024, **options) -> Setup:
    clock = FakeClock()
    pool = BufferPool(memory, BATCH_SIZE, clock=clock)
    config = dict(batch_size=BATCH_SIZE, linger_ms=LINGER_MS, retry_backoff_ms=100,
                  retry_backoff_max_ms=1000, delivery_timeout_ms=5000, rng=MidpointRandom())
    config.update(options)
    accumulator = RecordAccumulator(buffer_pool=pool, clock=clock, idempotence=idempotence, **config)
    return Setup(accumulator, pool, clock)


def ready_idempotence(producer_id: int = 4242) -> Idempotence:
    state = Idempotence(TransactionManager())
    state.manager.begin_init()
    state.set_producer_id_and_epoch(producer_id, 0)
    return state


def tps(batches) -> list[TopicPartition]:
    return [b.topic_partition for b in batches]


# --- append ---------------------------------------------------------------------------------------

def test_append_fills_the_last_batch_then_starts_a_new_one():
    s = setup()
    first = s.append()
    assert (first.new_batch_created, first.batch_full) == (True, False)
    assert first.appended_bytes == s.accumulator.queued_batches(T0)[0].estimated_size_in_bytes
    second = s.append()
    assert (second.new_batch_created, second.batch_full) == (False, False)
    assert 50 < second.appended_bytes < 80
    results = [s.append() for _ in range(30)]
    started = [i for i, r in enumerate(results) if r.new_batch_created]
    # the record that started the second batch (behind a full one) says so; the ones after it
    # append to a batch with room: the sender was woken already
    assert started and results[started[0]].batch_full
    assert not any(r.batch_full for r in results[started[0] + 1:])
    assert s.accumulator.queue_size(T0) == 2
    assert s.pool.available_memory == 64 * 1024 - 2 * BATCH_SIZE


def test_a_record_bigger_than_batch_size_gets_a_batch_of_its_own_size():
    s = setup()
    result = s.append(value=b"x" * 3000)
    batch, = s.accumulator.queued_batches(T0)
    assert result.new_batch_created and batch.record_count == 1
    assert 3000 < batch.initial_capacity == s.pool.total_memory - s.pool.available_memory
    assert batch.estimated_size_in_bytes <= batch.initial_capacity  # the lease covers it, as in Java


def test_append_after_close_raises():
    s = setup()
    s.append()
    s.accumulator.close()
    with pytest.raises(ProducerClosedError, match="Producer closed while send in progress"):
        s.append()
    with pytest.raises(ProducerClosedError):
        s.append(T1)  # a partition with no batch yet: fails at the pool or at the deque


# --- ready ----------------------------------------------------------------------------------------

def test_linger_readiness_and_next_check_delay():
    s = setup()
    s.append(T0)
    result = s.ready()
    assert result == ReadyCheckResult(frozenset(), LINGER_MS, frozenset())
    s.clock.advance(4)
    s.append(T1)
    assert s.ready().next_ready_check_delay_ms == LINGER_MS - 4  # the earliest partition wins
    s.clock.advance(5)
    assert s.ready().ready_nodes == frozenset()
    s.clock.advance(1)
    result = s.ready()
    assert result.ready_nodes == {1}  # T0 lingered 10 ms; T1 (node 2) only 6
    assert result.next_ready_check_delay_ms == 4


def test_a_full_batch_is_ready_at_once():
    s = setup()
    s.fill(T1)
    assert s.ready().ready_nodes == {2}


def test_nothing_queued_means_no_delay_limit():
    s = setup()
    assert s.ready() == ReadyCheckResult(frozenset(), NO_DELAY_LIMIT_MS, frozenset())


def test_partitions_without_a_leader_are_reported_by_topic():
    s = setup()
    s.append(U0)
    s.append(T0)
    s.clock.advance(LINGER_MS)
    result = s.ready()
    assert result.unknown_leader_topics == {"u"} and result.ready_nodes == {1}


def test_exhausted_memory_makes_every_partition_ready():
    s = setup(memory=2 * BATCH_SIZE)
    s.append(T0)
    s.append(T1)
    blocked = threading.Thread(target=s.append, kwargs=dict(tp=T2, max_block_ms=5_000), daemon=True)
    blocked.start()
    deadline = time.monotonic() + WAIT_S
    while s.pool.queued == 0:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert s.ready().ready_nodes == {1, 2}  # nothing lingered, but a sender waits for memory
    for batches in s.drain().values():
        for batch in batches:
            batch.complete(0)
            s.accumulator.deallocate(batch)
    blocked.join(WAIT_S)
    assert not blocked.is_alive() and s.accumulator.queue_size(T2) == 1


def test_close_and_flush_make_everything_ready():
    s = setup()
    s.append(T0)
    s.accumulator.begin_flush()
    assert s.accumulator.flush_in_progress and s.ready().ready_nodes == {1}
    s2 = setup()
    s2.append(T1)
    s2.accumulator.close()
    assert s2.ready().ready_nodes == {2}


# --- drain ----------------------------------------------------------------------------------------

def test_drain_groups_batches_by_leader_node_and_closes_them():
    s = setup()
    for tp in (T0, T1, T2):
        s.append(tp)
    s.clock.advance(LINGER_MS)
    drained = s.drain(s.ready().ready_nodes)
    assert sorted(drained) == [1, 2]
    assert sorted(tps(drained[1])) == [T0, T2] and tps(drained[2]) == [T1]
    for batch in drained[1] + drained[2]:
        assert batch.is_closed and batch.drained_ms == s.now
        assert read_batch(batch.records()).record_count == 1
    assert not s.accumulator.has_undrained() and s.accumulator.has_incomplete()


def test_drain_takes_one_batch_per_partition_per_call():
    s = setup()
    s.fill(T0)  # two batches queued
    assert len(s.drain()[1]) == 1 and s.accumulator.queue_size(T0) == 1


def test_drain_caps_each_request_and_rotates_fairly_across_calls():
    s = setup()
    for tp in (T0, T2):  # both led by node 1
        s.fill(tp, full_batches=3)
    batch_bytes = s.accumulator.queued_batches(T0)[0].estimated_size_in_bytes
    cap = batch_bytes + 100  # room for one batch per request
    firsts = []
    for _ in range(4):
        drained = s.drain(nodes=[1], max_request_size=cap)[1]
        assert len(drained) == 1
        firsts.append(drained[0].topic_partition)
    assert firsts == [T0, T2, T0, T2]


def test_with_a_codec_the_drain_learns_the_ratio_and_sizes_requests_by_it():
    s = setup(compression_type="lz4")
    ratios = s.accumulator.compression_ratios
    assert ratios is not None and setup().accumulator.compression_ratios is None  # no codec: none
    for tp in (T0, T2):  # both led by node 1
        s.fill(tp, full_batches=2)
    raw = s.accumulator.queued_batches(T0)[0].estimated_size_in_bytes
    # nothing built yet: a batch is expected at 105% of its bytes, so one per request of raw + 100
    assert len(s.drain(nodes=[1], max_request_size=raw + 100)[1]) == 1
    learned = ratios.estimate(T0.topic)
    assert learned == pytest.approx(1.0 - 0.005)  # one batch built: one improving step
    for _ in range(400):  # as if many batches had compressed 10x
        ratios.observe(T0.topic, 10_000, 1_000)
    # now two batches of raw bytes are expected to fit in that request together
    assert len(s.drain(nodes=[1], max_request_size=raw + 100)[1]) == 2


def test_the_first_batch_goes_even_when_bigger_than_the_request_cap():
    s = setup()
    s.append(T0, value=b"x" * 3000)
    s.append(T2)
    drained = s.drain(nodes=[1], max_request_size=100)[1]
    assert tps(drained) == [T0]
    assert tps(s.drain(nodes=[1], max_request_size=100)[1]) == [T2]


def test_a_full_round_moves_the_start_on_by_one():
    s = setup()
    for _ in range(3):
        for tp in (T0, T2):
            s.append(tp)
        s.clock.advance(LINGER_MS)
        s.drain(nodes=[1])
    # rounds started at T0, T2, T0: every partition gets to go first in turn
    s.append(T0)
    s.append(T2)
    assert tps(s.drain(nodes=[1])[1]) == [T2, T0]


# --- retries --------------------------------------------------------------------------------------

def test_retry_backoff_is_jittered_by_twenty_percent():
    s = setup(rng=random.Random(7))
    backoffs = []
    for _ in range(100):
        s.append(T0)
        s.clock.advance(LINGER_MS)
        batch, = s.drain()[1]
        s.accumulator.reenqueue(batch, s.now)  # first retry: 100 ms +- 20 %
        backoffs.append(batch.retry_backoff_ms)
        s.clock.advance(1000)
        assert s.drain()[1] == [batch]
        batch.complete(0)
        s.accumulator.deallocate(batch)
    assert 80 <= min(backoffs) < 90 and 110 < max(backoffs) <= 120 and len(set(backoffs)) > 20


def test_a_retried_batch_goes_back_to_the_front_and_waits_out_its_backoff():
    s = setup()
    s.append(T0)
    s.clock.advance(LINGER_MS)
    batch, = s.drain()[1]
    s.append(T0)  # a newer batch queues behind
    s.accumulator.reenqueue(batch, s.now)
    assert s.accumulator.queued_batches(T0)[0] is batch and batch.attempts == 1 and batch.in_retry
    result = s.ready()
    assert result.ready_nodes == frozenset() and result.next_ready_check_delay_ms == 100
    s.append(T2)
    s.clock.advance(LINGER_MS)  # node 1 becomes ready through T2 ...
    drained = s.drain(nodes=[1])[1]
    assert tps(drained) == [T2]  # ... but T0's retry is still backing off, and nothing overtakes it
    s.clock.advance(90)
    assert s.ready().ready_nodes == {1}
    assert s.drain(nodes=[1])[1] == [batch]


def test_backoff_grows_with_each_attempt():
    s = setup()
    s.append(T0)
    s.clock.advance(LINGER_MS)
    batch, = s.drain()[1]
    waits = []
    for _ in range(5):
        s.accumulator.reenqueue(batch, s.now)
        waits.append(s.ready().next_ready_check_delay_ms)
        s.clock.advance(waits[-1])
        assert s.drain()[1] == [batch]
    assert waits == [100, 200, 400, 800, 1000]


def test_mute_keeps_a_partition_out_while_its_request_is_in_flight():
    s = setup()
    s.append(T0)
    s.clock.advance(LINGER_MS)
    in_flight, = s.drain()[1]
    s.accumulator.mute(T0)
    s.append(T0)
    s.clock.advance(LINGER_MS)
    assert s.ready().ready_nodes == frozenset()
    assert s.drain()[1] == []
    # the request failed: the batch is retried before the newer one, order intact
    s.accumulator.reenqueue(in_flight, s.now)
    s.accumulator.unmute(T0)
    s.clock.advance(100)
    assert s.drain()[1] == [in_flight]
    s.accumulator.mute(T0)
    assert s.drain()[1] == []
    s.accumulator.unmute(T0)
    assert s.drain()[1][0].record_count == 1 and not s.accumulator.has_undrained()


# --- idempotence ----------------------------------------------------------------------------------

def test_sequences_are_assigned_at_drain_and_new_batches_wait_for_a_producer_id():
    state = Idempotence(TransactionManager())
    s = setup(idempotence=state)
    s.append(T0)
    s.clock.advance(LINGER_MS)
    assert s.drain()[1] == []  # no producer id yet
    state.manager.begin_init()
    state.set_producer_id_and_epoch(99, 2)
    batch, = s.drain()[1]
    header = read_batch(batch.records())
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 2, 0)
    s.append(T0)
    s.append(T0)
    s.clock.advance(LINGER_MS)
    assert s.drain()[1] == []  # the first batch of the id/epoch goes alone until acknowledged
    waiting, = s.accumulator.queued_batches(T0)
    assert not waiting.has_sequence and state.next_sequence(T0) == 1  # it used no sequence
    state.handle_completed_batch(batch, base_offset=0)
    second, = s.drain()[1]
    assert second.base_sequence == 1 and state.next_sequence(T0) == 3


def acknowledge_a_first_batch(s: Setup, state: Idempotence) -> None:
    """Drain a first batch of T0 and acknowledge it: until then T0 may have only one batch in
    flight ("First batch alone" in ``idempotence``), after that several."""
    s.append(T0)
    s.clock.advance(LINGER_MS)
    primer, = s.drain(nodes=[1])[1]
    assert primer.topic_partition == T0 and primer.base_sequence == 0
    state.handle_completed_batch(primer, base_offset=0)
    assert not s.accumulator.has_undrained()


def test_reenqueue_with_idempotence_keeps_sequence_order():
    state = ready_idempotence()
    s = setup(idempotence=state)
    acknowledge_a_first_batch(s, state)
    drained = []
    for _ in range(3):
        s.fill(T0)  # keeps a full batch queued; drain takes one per call
        drained.append(s.drain(nodes=[1])[1][0])
    assert [b.base_sequence for b in drained] == sorted(b.base_sequence for b in drained)
    assert drained[0].base_sequence == 1  # right after the acknowledged first batch
    fresh = s.accumulator.queued_batches(T0)
    for batch in (drained[1], drained[2], drained[0]):  # responses come back out of order
        s.accumulator.reenqueue(batch, s.now)
    assert s.accumulator.queued_batches(T0) == drained + fresh
    s.clock.advance(1000)
    assert s.drain(nodes=[1])[1] == [drained[0]]  # retries go one at a time, first in flight first
    assert s.drain(nodes=[1])[1] == []  # the second waits until the first is resolved
    state.handle_completed_batch(drained[0], base_offset=0)
    assert s.drain(nodes=[1])[1] == [drained[1]]


def test_reenqueue_of_an_untracked_batch_is_refused_with_idempotence():
    state = ready_idempotence()
    s = setup(idempotence=state)
    s.append(T0)
    s.clock.advance(LINGER_MS)
    batch, = s.drain()[1]
    state.handle_completed_batch(batch, base_offset=0)
    with pytest.raises(RuntimeError, match="not tracked as part of the in flight requests"):
        s.accumulator.reenqueue(batch, s.now)


# --- expiry ---------------------------------------------------------------------------------------

def test_queued_batches_expire_at_the_delivery_timeout():
    s = setup()
    errors = []
    future = s.append(T0, callback=lambda metadata, error: errors.append(error)).future
    s.clock.advance(4999)
    assert s.accumulator.expired_batches(s.now) == []
    assert s.accumulator.next_expiry_time_ms == s.now + 1
    s.clock.advance(1)
    expired, = s.accumulator.expired_batches(s.now)
    assert not s.accumulator.has_undrained()
    expired.fail(expired.timeout_error(s.now))
    s.accumulator.deallocate(expired)
    with pytest.raises(KafkaTimeoutError, match=r"Expiring 1 record\(s\) for t-0: 5000 ms has passed "
                       "since batch creation"):
        future.result(timeout=0)
    assert len(errors) == 1 and isinstance(errors[0], KafkaTimeoutError)
    assert s.pool.available_memory == s.pool.total_memory and not s.accumulator.has_incomplete()


def test_batches_in_flight_are_not_expired_here():
    s = setup()
    s.append(T0)
    s.clock.advance(LINGER_MS)
    s.drain()
    s.clock.advance(10_000)
    assert s.accumulator.expired_batches(s.now) == []


# --- flush, abort, close --------------------------------------------------------------------------

def test_flush_waits_until_batches_complete_and_their_callbacks_ran():
    s = setup()
    called = []
    s.append(T0, callback=lambda metadata, error: (time.sleep(0.01), called.append(metadata.offset)))
    s.accumulator.begin_flush()
    batch, = s.drain(s.ready().ready_nodes)[1]  # ready at once: no linger during a flush
    threading.Timer(0.02, batch.complete, args=(77,)).start()
    assert s.accumulator.await_flush_completion(timeout_ms=5_000) is True
    assert called == [77] and not s.accumulator.flush_in_progress


def test_flush_gives_up_after_its_timeout():
    s = setup()
    s.append(T0)
    s.accumulator.begin_flush()
    assert s.accumulator.await_flush_completion(timeout_ms=10) is False
    assert not s.accumulator.flush_in_progress


def test_abort_incomplete_batches_fails_queued_and_in_flight_batches_once():
    s = setup()
    calls = []
    s.append(T0, callback=lambda metadata, error: calls.append(("t0", error)))
    s.clock.advance(LINGER_MS)
    s.drain()
    s.append(T1, callback=lambda metadata, error: calls.append(("t1", error)))
    error = ProducerClosedError("Producer is closed forcefully.")
    s.accumulator.abort_incomplete_batches(error)
    assert sorted(calls) == [("t0", error), ("t1", error)]
    assert not s.accumulator.has_incomplete() and not s.accumulator.has_undrained()
    assert s.pool.available_memory == s.pool.total_memory and s.accumulator.closed


# --- threads --------------------------------------------------------------------------------------

def test_concurrent_appends_lose_and_duplicate_nothing():
    s = setup(memory=8 << 20)
    threads, per_thread = 4, 2000
    futures: list = []
    lock = threading.Lock()

    def produce(index):
        mine = [s.append((T0, T1, T2)[i % 3], value=b"%d-%d" % (index, i)).future
                for i in range(per_thread)]
        with lock:
            futures.extend(mine)

    workers = [threading.Thread(target=produce, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT_S * 4)
    s.accumulator.begin_flush()
    values = []
    while s.accumulator.has_undrained():
        for batches in s.drain().values():
            for batch in batches:
                values.extend(r.value for r in read_batch(batch.records()).records)
                batch.complete(0)
                s.accumulator.deallocate(batch)
    assert len(values) == len(set(values)) == threads * per_thread == len(futures)
    assert all(f.done() for f in futures) and s.pool.available_memory == s.pool.total_memory


def test_append_throughput():
    """Not a check: prints records/s of ``append`` for 100-byte values, codec none (see ``-s``)."""
    pool = BufferPool(1 << 40, 16384)
    accumulator = RecordAccumulator(batch_size=16384, linger_ms=5, retry_backoff_ms=100,
                                    retry_backoff_max_ms=1000, delivery_timeout_ms=120_000,
                                    buffer_pool=pool)
    partitions = [accumulator.partition_queue(TopicPartition("bench", p)) for p in range(6)]
    keys = [b"k%d" % i for i in range(100)]
    value = b"x" * 100
    count = 100_000
    now = FakeClock().monotonic_ms()
    start = time.perf_counter()
    for i in range(count):
        accumulator.append(partitions[i % 6], TS, keys[i % 100], value, None, None, 60_000, now)
    elapsed = time.perf_counter() - start
    print(f"\naccumulator.append: {count / elapsed:,.0f} records/s "
          f"({elapsed / count * 1e6:.2f} us/record; 100-byte values, 6 partitions, codec none)")


# --- the sticky partitioner (records without key or partition) ------------------------------------

def sticky_setup(adaptive: bool = False, memory: int = 64 * 1024):
    from spark_kafka_sink.producer.partitioner import StickyPartitioner, TopicPartitions
    partitioner = StickyPartitioner(BATCH_SIZE, adaptive=adaptive, rng=random.Random(3))
    s = setup(partitioner=partitioner, memory=memory)
    return s, partitioner, TopicPartitions(3, (0, 1, 2))


def test_sticky_appends_stay_on_one_partition_for_a_batch_then_switch():
    s, _, view = sticky_setup()
    chosen = []
    for _ in range(60):  # ~3.5 batches' worth of bytes
        future, *_ = s.accumulator.append(StickyTarget("t", view), TS, None, b"v" * 50, None, None, 0,
                                          s.now)
        chosen.append(future.topic_partition.partition)
    per_batch = BATCH_SIZE // 70
    assert len(set(chosen[:per_batch])) == 1  # sticky for (at least) a batch
    assert len(set(chosen)) >= 2
    for tp in (T0, T1, T2):  # switches happen at batch boundaries: only last batches are open
        batches = s.accumulator.queued_batches(tp)
        assert all(batch.is_full for batch in batches[:-1])
    assert sum(len(s.accumulator.queued_batches(tp)) for tp in (T0, T1, T2)) >= 3


def test_the_sticky_open_batch_path_appends_and_switches_as_the_locked_loop_does():
    """A StickyTarget with the partitioner's state takes the one-call path while the current
    partition has an open batch with room; without it every append takes Java's loop. Same
    seeded partitioner, same records (sizes varied, some past batch.size alone), batches drained
    before they fill now and then (as linger.ms does, so a partition's bytes pass 2 x batch.size
    with a batch still open): the same partitions, flags, sizes and batches."""
    rng = random.Random(11)
    steps = [(rng.choice((10, 50, 200, 900, 1500)), rng.random() < 0.15) for _ in range(300)]

    def run(with_state: bool):
        s, partitioner, view = sticky_setup(memory=1 << 20)
        target = StickyTarget("t", view, partitioner.topic_state("t") if with_state else None)
        outcomes, drained = [], []
        for size, drain in steps:
            future, full, new, appended = s.accumulator.append(target, TS, None, b"v" * size, None,
                                                                None, 0, s.now)
            outcomes.append((future.topic_partition.partition, full, new, appended))
            if drain:
                s.clock.advance(LINGER_MS)
                for batches in s.drain().values():
                    drained += [(b.topic_partition.partition, b.record_count) for b in batches]
        queued = [(tp.partition, b.record_count, b.estimated_size_in_bytes)
                  for tp in (T0, T1, T2) for b in s.accumulator.queued_batches(tp)]
        return outcomes, drained, queued

    assert run(with_state=True) == run(with_state=False)


def test_ready_feeds_queue_sizes_to_the_adaptive_partitioner():
    s, partitioner, _ = sticky_setup(adaptive=True)
    s.fill(T0, full_batches=3)
    s.append(T1)
    s.append(T2)
    s.ready()
    stats = partitioner.load_stats("t")
    assert stats is not None and stats.partition_ids == (0, 1, 2)
    weights = [stats.cumulative[0]] + [b - a for a, b in zip(stats.cumulative, stats.cumulative[1:])]
    assert weights[0] < weights[1] == weights[2]  # the longest queue is picked least


def test_ready_refeeds_the_partitioner_only_when_queue_sizes_or_leaders_change():
    """ready() skips rebuilding the load stats when the queues look as they did last time (the
    stats would be equal), and rebuilds them as soon as a size or a leader changes."""
    s, partitioner, _ = sticky_setup(adaptive=True)
    s.fill(T0, full_batches=3)
    s.append(T1)
    s.append(T2)
    s.ready()
    stats = partitioner.load_stats("t")
    assert stats is not None
    s.ready()
    assert partitioner.load_stats("t") is stats  # unchanged queues: not rebuilt
    s.fill(T1, full_batches=3)
    s.fill(T2, full_batches=3)
    s.ready()
    assert partitioner.load_stats("t") is None  # equal queues again: uniform
    moved = ClusterSnapshot(  # partition 2 loses its leader: left out of the stats
        [Node(1, "h1", 9092), Node(2, "h2", 9092)],
        [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 2), PartitionInfo("t", 2, NO_LEADER)])
    result = s.accumulator.ready(moved, s.now)
    assert result.unknown_leader_topics == {"t"}
    assert partitioner.load_stats("t").partition_ids == (0, 1)


def test_ready_looks_leaders_up_again_for_a_new_metadata_snapshot():
    s = setup()
    s.fill(T1, full_batches=1)
    assert s.ready().ready_nodes == {2}
    moved = ClusterSnapshot([Node(1, "h1", 9092), Node(2, "h2", 9092)],
                            [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 1),
                             PartitionInfo("t", 2, 1)])
    assert s.accumulator.ready(moved, s.now).ready_nodes == {1}
    assert s.ready().ready_nodes == {2}


def test_append_reports_the_state_it_left():
    """``append``'s flags and size, record for record, against the partition's deque afterwards:
    ``batch_full`` is "the record made a full batch appear" (it filled the last batch, or
    started one behind a full one), ``new_batch_created`` "the deque grew",
    ``appended_bytes`` what the record added (a new batch: its whole size)."""
    s = setup()
    queue = s.accumulator.partition_queue(T0)
    assert s.accumulator.partition_queue(T0) is queue  # a stable handle
    for i in range(40):
        before = s.accumulator.queued_batches(T0)
        size_before = before[-1].estimated_size_in_bytes if before else 0
        future, batch_full, new_batch_created, appended_bytes = s.accumulator.append(
            queue, TS + i, b"key", b"v" * (30 + 7 * i), None, None, 0, s.now)
        after = s.accumulator.queued_batches(T0)
        last = after[-1]
        assert future.topic_partition == T0
        assert new_batch_created == (len(after) > len(before))
        assert batch_full == (last.is_full or (new_batch_created and len(after) > 1))
        assert last.last_append_full == last.is_full or new_batch_created
        assert appended_bytes == last.estimated_size_in_bytes - (0 if new_batch_created else size_before)
    assert s.accumulator.queue_size(T0) > 2


def test_append_refuses_records_once_closed():
    s = setup()
    queue = s.accumulator.partition_queue(T0)
    s.accumulator.append(queue, TS, b"k", b"v", None, None, 0, s.now)
    s.accumulator.close()
    with pytest.raises(ProducerClosedError, match="Producer closed while send in progress"):
        s.accumulator.append(queue, TS, b"k", b"v", None, None, 0, s.now)
