"""BufferPool: bounds the bytes the producer holds (``buffer.memory``), blocking FIFO when full.

As Java's ``BufferPool``, with one honest difference: **the pool accounts for memory, it does not
hand out the bytes the records are written into.** ``allocate`` returns a :class:`MemoryLease`, a
claim on ``size`` bytes of the budget; the batch's ``RecordBatchBuilder`` encodes into its own
``bytearray``. Encoding into a preallocated pooled ``bytearray`` (slice assignment at an offset)
was slower than appending to a fresh one (``+=`` is a single optimised C call; bench/README.md,
"Figures behind design choices"), and it would not save the final copy the builder makes anyway;
so pooled bytes would cost speed and buy nothing. What the pool still bounds for real: a batch
never holds more than its lease (the builder's size limit is the lease size, and the first,
possibly oversized, record is covered because the lease is
``max(batch.size, that record's upper bound)``), so buffered record bytes stay within
``buffer.memory`` plus the allocator's slack.

Leases of exactly ``poolable_size`` (``batch.size``) go back to a free list and are handed out
again, as Java keeps its free ``ByteBuffer`` s; this keeps Java's accounting (``available_memory``
counts the free list, ``unallocated_memory`` does not, a large request first "frees up" pooled
leases) and is the seam where a writer that does fill pooled buffers (a vectorised encoder) could
plug in. Reusing a lease object saves nothing measurable by itself.

Rules (from Java, plus strict FIFO):

- A request larger than ``total_memory`` fails at once (``ValueError``): it could never be met.
- A request is met at once from free memory when **nobody is waiting**. Otherwise it joins the
  back of the waiter queue. (Java lets a newcomer take memory freed for a waiter that has not
  woken yet; here newcomers never overtake, so a large request cannot starve.)
- Only the head waiter is woken when memory is freed. It keeps what it can take (partial grants
  accumulate) until it has ``size`` bytes, then leaves the queue and wakes the next waiter if
  memory is left.
- A waiter that runs out of ``max_block_ms`` gives back what it accumulated and raises
  :class:`BufferExhaustedError`; after ``close()`` every waiter gives it back and raises
  :class:`ProducerClosedError`, and so does every later ``allocate``. ``deallocate`` still works.

Thread safety: every method may be called from any thread; one lock guards all state, and each
waiter sleeps on its own condition of that lock.
"""

from __future__ import annotations

import threading
from collections import deque

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import BufferExhaustedError, ProducerClosedError


class MemoryLease:
    """A claim on ``size`` bytes of the pool's budget; give it back with ``deallocate``."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size

    def __repr__(self) -> str:
        return f"MemoryLease(size={self.size})"


class BufferPool:
    """The ``buffer.memory`` budget, shared by all partitions' batches; see the module docstring."""

    def __init__(self, total_memory: int, poolable_size: int, *, clock: Clock = SYSTEM_CLOCK):
        if total_memory < 0:
            raise ValueError(f"total_memory must be >= 0, got {total_memory}")
        if poolable_size < 1:
            raise ValueError(f"poolable_size must be >= 1, got {poolable_size}")
        self._total_memory = total_memory
        self._poolable_size = poolable_size
        self._clock = clock
        self._lock = threading.Lock()
        self._free: deque[MemoryLease] = deque()  # leases of poolable_size, ready for reuse
        self._waiters: deque[threading.Condition] = deque()
        self._non_pooled_available = total_memory
        self._wait_time_ns_total = 0
        self._closed = False

    # --- allocation -----------------------------------------------------------------------------

    def allocate(self, size: int, max_block_ms: int) -> MemoryLease:
        """A lease on ``size`` bytes, waiting up to ``max_block_ms`` behind earlier waiters."""
        if size > self._total_memory:
            raise ValueError(f"Attempt to allocate {size} bytes, but there is a hard limit of "
                             f"{self._total_memory} on memory allocations.")
        with self._lock:
            if self._closed:
                raise ProducerClosedError("Producer closed while allocating memory")
            try:
                if not self._waiters:
                    lease = self._take_now(size)
                    if lease is not None:
                        return lease
                return self._wait_for(size, max_block_ms)
            finally:
                self._signal_next_waiter_if_memory_available()

    def _take_now(self, size: int) -> MemoryLease | None:
        """A lease if ``size`` bytes are free right now, else ``None``. Lock held."""
        if size == self._poolable_size and self._free:
            return self._free.popleft()
        if self._non_pooled_available + len(self._free) * self._poolable_size < size:
            return None
        self._free_up(size)
        self._non_pooled_available -= size
        return MemoryLease(size)

    def _wait_for(self, size: int, max_block_ms: int) -> MemoryLease:
        """Queue as a waiter and collect ``size`` bytes as they are freed. Lock held."""
        condition = threading.Condition(self._lock)
        self._waiters.append(condition)
        accumulated = 0
        remaining_ns = max(0, max_block_ms) * 1_000_000
        try:
            while True:
                if self._waiters[0] is condition:  # only the head waiter takes memory
                    if accumulated == 0 and size == self._poolable_size and self._free:
                        return self._free.popleft()
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self._non_pooled_available)
                    self._non_pooled_available -= got
                    accumulated += got
                    if accumulated == size:
                        accumulated = 0  # handed over in the lease; nothing to give back
                        return MemoryLease(size)
                remaining_ns -= self._await(condition, remaining_ns, size, max_block_ms)
        finally:
            self._non_pooled_available += accumulated
            self._waiters.remove(condition)

    def _await(self, condition: threading.Condition, remaining_ns: int, size: int,
               max_block_ms: int) -> int:
        """Sleep until woken or out of time; the nanoseconds spent. Raises on timeout or close."""
        start = self._clock.monotonic_ns()
        try:
            woken = condition.wait(remaining_ns / 1e9) if remaining_ns > 0 else False
        finally:
            waited = max(0, self._clock.monotonic_ns() - start)
            self._wait_time_ns_total += waited
        if self._closed:
            raise ProducerClosedError("Producer closed while allocating memory")
        if not woken:
            raise BufferExhaustedError(
                f"Failed to allocate {size} bytes within the configured max blocking time "
                f"{max_block_ms} ms. Total memory: {self._total_memory} bytes. Buffer pool "
                f"available: {self._available_locked()} bytes. Poolable size: "
                f"{self._poolable_size} bytes")
        return waited

    def _free_up(self, size: int) -> None:
        """Turn pooled leases back into plain memory until ``size`` bytes are unpooled. Lock held."""
        while self._free and self._non_pooled_available < size:
            self._non_pooled_available += self._free.pop().size

    def _signal_next_waiter_if_memory_available(self) -> None:
        if self._waiters and (self._non_pooled_available > 0 or self._free):
            self._waiters[0].notify()

    # --- release --------------------------------------------------------------------------------

    def deallocate(self, lease: MemoryLease | None, size: int | None = None) -> None:
        """Give back ``size`` bytes (default: the whole lease) and wake the head waiter.

        A lease of exactly ``poolable_size`` returned whole goes to the free list for reuse.
        ``None`` is ignored, so ``finally: pool.deallocate(lease)`` needs no check.
        """
        if lease is None:
            return
        if size is None:
            size = lease.size
        with self._lock:
            if size == self._poolable_size and lease.size == size:
                self._free.append(lease)
            else:
                self._non_pooled_available += size
            if self._waiters:
                self._waiters[0].notify()

    def close(self) -> None:
        """Refuse new allocations and fail every waiter with :class:`ProducerClosedError`."""
        with self._lock:
            self._closed = True
            for condition in self._waiters:
                condition.notify()

    # --- state and metrics ----------------------------------------------------------------------

    def _available_locked(self) -> int:
        return self._non_pooled_available + len(self._free) * self._poolable_size

    @property
    def available_memory(self) -> int:
        """Bytes not leased: unallocated plus the free list (``buffer-available-bytes``)."""
        with self._lock:
            return self._available_locked()

    @property
    def unallocated_memory(self) -> int:
        """Bytes neither leased nor in the free list."""
        with self._lock:
            return self._non_pooled_available

    @property
    def queued(self) -> int:
        """Threads waiting for memory (``waiting-threads``); > 0 means memory is exhausted."""
        return len(self._waiters)

    @property
    def free_count(self) -> int:
        """Poolable leases in the free list."""
        return len(self._free)

    @property
    def wait_time_ns_total(self) -> int:
        """Total nanoseconds senders spent waiting (``bufferpool-wait-time-ns-total``)."""
        return self._wait_time_ns_total

    @property
    def total_memory(self) -> int:
        """``buffer.memory`` (``buffer-total-bytes``)."""
        return self._total_memory

    @property
    def poolable_size(self) -> int:
        """The lease size kept in the free list (``batch.size``)."""
        return self._poolable_size

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"BufferPool(total_memory={self._total_memory}, poolable_size={self._poolable_size}, "
                f"available={self.available_memory}, queued={self.queued})")
