"""BufferPool: accounting, reuse of poolable leases, FIFO blocking, timeout, close."""

from __future__ import annotations

import threading
import time

import pytest

from spark_kafka_sink.errors import BufferExhaustedError, KafkaTimeoutError, ProducerClosedError
from spark_kafka_sink.producer.buffer_pool import BufferPool, MemoryLease

from ..fakes import FakeClock

WAIT_S = 5.0  # upper bound on any real wait in this module; tests normally take milliseconds


class Allocation(threading.Thread):
    """``pool.allocate(size, max_block_ms)`` on its own thread; keeps the lease or the error."""

    def __init__(self, pool: BufferPool, size: int, max_block_ms: int = 5_000, done=None):
        super().__init__(daemon=True)
        self.pool, self.size, self.max_block_ms = pool, size, max_block_ms
        self.lease: MemoryLease | None = None
        self.error: BaseException | None = None
        self.done = done

    def run(self):
        try:
            self.lease = self.pool.allocate(self.size, self.max_block_ms)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        if self.done is not None:
            self.done.append(self)

    def result(self) -> MemoryLease:
        self.join(WAIT_S)
        assert not self.is_alive(), "allocation still blocked"
        if self.error is not None:
            raise self.error
        return self.lease


def wait_until_queued(pool: BufferPool, waiters: int) -> None:
    """Until ``waiters`` threads sleep in the pool (their condition wait released its lock)."""
    deadline = time.monotonic() + WAIT_S
    while pool.queued < waiters:
        assert time.monotonic() < deadline, f"expected {waiters} waiter(s), got {pool.queued}"
        time.sleep(0.001)
    with pool._lock:  # a waiter holds the lock from joining the queue until it sleeps
        pass


@pytest.fixture
def clock():
    return FakeClock()


def test_allocate_and_deallocate_account_for_memory(clock):
    pool = BufferPool(1000, 100, clock=clock)
    lease = pool.allocate(300, max_block_ms=0)
    assert lease.size == 300
    assert (pool.available_memory, pool.unallocated_memory) == (700, 700)
    pool.deallocate(lease)
    assert (pool.available_memory, pool.unallocated_memory) == (1000, 1000)
    pool.deallocate(None)  # ignored, so `finally: pool.deallocate(lease)` needs no check
    assert pool.available_memory == 1000


def test_poolable_leases_are_kept_and_reused(clock):
    pool = BufferPool(1000, 100, clock=clock)
    first = pool.allocate(100, max_block_ms=0)
    pool.deallocate(first)
    assert pool.free_count == 1
    assert (pool.available_memory, pool.unallocated_memory) == (1000, 900)  # free list counts as available
    again = pool.allocate(100, max_block_ms=0)
    assert again is first and pool.free_count == 0
    odd = pool.allocate(150, max_block_ms=0)
    pool.deallocate(odd)  # not poolable: back to plain memory
    assert pool.free_count == 0 and pool.unallocated_memory == 900


def test_a_partial_deallocate_returns_only_that_many_bytes(clock):
    pool = BufferPool(1000, 100, clock=clock)
    lease = pool.allocate(100, max_block_ms=0)
    pool.deallocate(lease, 60)
    assert pool.free_count == 0 and pool.available_memory == 960


def test_part_of_a_larger_lease_given_back_is_not_put_on_the_reuse_list(clock):
    """Giving back batch.size bytes of a larger lease (a split batch's share) returns those bytes
    only: the lease itself, larger than batch.size, must not be handed out again as a
    batch.size one."""
    pool = BufferPool(1000, 100, clock=clock)
    lease = pool.allocate(300, max_block_ms=0)
    pool.deallocate(lease, 100)                   # exactly poolable_size, of a 300-byte lease
    assert pool.free_count == 0 and pool.available_memory == 800
    again = pool.allocate(100, max_block_ms=0)
    assert again is not lease and again.size == 100


def test_large_request_frees_up_pooled_leases(clock):
    pool = BufferPool(300, 100, clock=clock)
    leases = [pool.allocate(100, max_block_ms=0) for _ in range(3)]
    for lease in leases:
        pool.deallocate(lease)
    assert pool.free_count == 3 and pool.unallocated_memory == 0
    big = pool.allocate(250, max_block_ms=0)
    assert big.size == 250 and pool.free_count == 0 and pool.available_memory == 50


def test_request_larger_than_total_memory_fails_at_once(clock):
    pool = BufferPool(1000, 100, clock=clock)
    with pytest.raises(ValueError, match="Attempt to allocate 1001 bytes, but there is a hard limit of 1000"):
        pool.allocate(1001, max_block_ms=60_000)
    assert pool.queued == 0


def test_no_blocking_time_fails_immediately_when_full(clock):
    pool = BufferPool(100, 100, clock=clock)
    pool.allocate(100, max_block_ms=0)
    with pytest.raises(BufferExhaustedError, match="Failed to allocate 100 bytes within the configured "
                       "max blocking time 0 ms. Total memory: 100 bytes. Buffer pool available: 0"):
        pool.allocate(100, max_block_ms=0)
    assert issubclass(BufferExhaustedError, KafkaTimeoutError)
    assert issubclass(BufferExhaustedError, TimeoutError)


def test_allocate_blocks_until_memory_is_freed(clock):
    pool = BufferPool(200, 100, clock=clock)
    held = [pool.allocate(100, max_block_ms=0), pool.allocate(100, max_block_ms=0)]
    waiter = Allocation(pool, 100)
    waiter.start()
    wait_until_queued(pool, 1)
    assert waiter.is_alive()
    clock.advance(7)
    pool.deallocate(held[0])
    assert waiter.result() is held[0]  # the freed poolable lease, reused
    assert pool.queued == 0
    assert pool.wait_time_ns_total == 7_000_000  # bufferpool-wait-time-ns-total, from the clock


def test_waiters_are_served_first_come_first_served(clock):
    pool = BufferPool(300, 100, clock=clock)
    held = [pool.allocate(100, max_block_ms=0) for _ in range(3)]
    served: list[Allocation] = []
    first = Allocation(pool, 200, done=served)   # needs two units
    second = Allocation(pool, 100, done=served)  # one unit would satisfy it, but it came later
    first.start()
    wait_until_queued(pool, 1)
    second.start()
    wait_until_queued(pool, 2)

    pool.deallocate(held[0])  # 100 bytes: all go to the head waiter, which keeps waiting
    time.sleep(0.02)
    assert served == [] and pool.queued == 2 and pool.available_memory == 0
    pool.deallocate(held[1])
    assert first.result().size == 200
    pool.deallocate(held[2])
    assert second.result().size == 100
    assert served == [first, second]


def test_timeout_returns_accumulated_memory_and_raises(clock):
    pool = BufferPool(100, 1000, clock=clock)
    held = [pool.allocate(40, max_block_ms=0), pool.allocate(30, max_block_ms=0),
            pool.allocate(30, max_block_ms=0)]
    waiter = Allocation(pool, 60, max_block_ms=100)
    waiter.start()
    wait_until_queued(pool, 1)
    pool.deallocate(held[1])  # the waiter takes these 30 bytes and still needs 30 more
    with pytest.raises(BufferExhaustedError, match="Failed to allocate 60 bytes within the configured "
                       "max blocking time 100 ms"):
        waiter.result()
    assert pool.queued == 0
    assert pool.available_memory == 30  # what it had accumulated came back


def test_close_wakes_waiters_and_refuses_new_allocations(clock):
    pool = BufferPool(100, 100, clock=clock)
    held = pool.allocate(100, max_block_ms=0)
    waiters = [Allocation(pool, 50, max_block_ms=60_000) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    wait_until_queued(pool, 2)
    pool.close()
    for waiter in waiters:
        with pytest.raises(ProducerClosedError, match="Producer closed while allocating memory"):
            waiter.result()
    with pytest.raises(ProducerClosedError):
        pool.allocate(10, max_block_ms=0)
    pool.deallocate(held)  # returning memory still works
    assert pool.available_memory == 100 and pool.queued == 0
