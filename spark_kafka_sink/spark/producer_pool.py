"""ProducerPool: one cached KafkaProducer per producer config, shared by the tasks of a Python worker.

Modelled on Spark's ``InternalKafkaProducerPool`` (see docs/ARCHITECTURE.md): keyed by the full config,
ref-counted, idle eviction, an injectable clock, a shutdown path. A Python worker adds two
reasons to replace a producer: a task retry and a fork.

- **Key.** The whole frozen :class:`~spark_kafka_sink.config.ProducerConfig`. Equal settings
  give the same producer; any difference gives another one.
- **Leases and ref counts.** :meth:`ProducerPool.acquire` returns a :class:`PooledProducer` lease
  and adds one to the entry's count. :meth:`PooledProducer.release` (idempotent; also the context
  manager's exit) takes one off. When the count reaches 0 the entry records when it became idle.
- **Idle eviction.** :meth:`ProducerPool.evict_idle` closes entries that have had no lease for
  longer than the idle timeout, and closing a producer closes its connections. A daemon evictor
  thread calls it every ``evictor_interval_ms``, or every idle timeout when a cached entry's is
  shorter (the sink's ``producer.cache.timeout``; at most every ``MIN_EVICTOR_WAIT_MS``). So a
  producer idle for its timeout ``T`` is closed at the latest ``max(T, MIN_EVICTOR_WAIT_MS)`` later,
  however long the interval. An acquire that brings a shorter timeout wakes the thread to
  reschedule. The thread starts on the first ``acquire``, and ``close()`` stops it. It reads the
  injected clock, so tests call ``evict_idle`` themselves with a fake clock.
- **Replacement on a task retry.** ``acquire(config, attempt=n)`` with ``n > 0`` (Spark's
  ``TaskContext.attemptNumber()``) *retires* the cached producer and creates a fresh one. The
  failed attempt may have left the old producer in a bad state: fenced, out of memory, or holding
  failed batches. A retired producer still serves the leases it already has, because a
  concurrent task may be using it. It is closed when the last of those leases is released.
- **Replacement after a fork**, seen as a new pid from the injected ``getpid``. A forked child
  inherits the entries but not their sender threads. So every inherited entry is *dropped*:
  forgotten without ``close()`` or ``flush()``, which could block forever on a thread that does
  not exist in the child. New producers are created on demand.

Closing is bounded (``close(timeout=close_timeout_s)``, 30 s by default), and it always happens
outside the pool's lock. So a slow close never blocks the tasks acquiring other producers. A
failing close is logged, not raised. Creating a producer happens under the lock. That guarantees
one producer per config, and ``KafkaProducer()`` does no network I/O.

No pyspark here: what comes from Spark (the attempt number, the process id) is passed in.

**No exit hook will flush for you.** Spark SIGKILLs idle Python workers, so ``atexit`` handlers and
finalisers never run. Each task must flush its producer and check its callbacks before it returns,
and release its lease in ``finally`` (the partition writer does this). The pool only closes
producers that are idle or retired, or all of them on :func:`shutdown_pool`.
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..clock import SYSTEM_CLOCK, Clock
from ..config import ProducerConfig
from ..producer.producer import KafkaProducer

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_MS = 600_000
"""Idle time after which an unused producer is closed (10 min, Spark's ``producer.cache.timeout``)."""
DEFAULT_EVICTOR_INTERVAL_MS = 60_000
"""How often the evictor thread looks for idle producers (Spark's evictor runs every minute too);
more often while a cached producer has a shorter idle timeout."""
MIN_EVICTOR_WAIT_MS = 100
"""The evictor's shortest period, whatever the idle timeouts (``producer.cache.timeout=0`` included)."""
DEFAULT_CLOSE_TIMEOUT_S = 30.0
"""Bound on delivering what is pending when the pool closes a producer."""

ProducerFactory = Callable[[ProducerConfig], KafkaProducer]


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of the pool's state and its lifetime counters."""

    entries: int
    """Producers cached (one per config), in use or idle."""
    in_use: int
    """Cached producers with at least one lease."""
    leases: int
    """Leases not yet released, including those on retired producers."""
    created_total: int
    """Producers the factory created."""
    evicted_total: int
    """Producers closed after idling past the timeout."""
    retired_total: int
    """Producers replaced because a task was a retry."""
    dropped_total: int
    """Producers inherited across a fork and dropped without being closed."""


class _State(enum.Enum):
    CACHED = "cached"    # in the map: served to new leases
    RETIRED = "retired"  # replaced on a retry; closed when its last lease is released
    CLOSED = "closed"    # closed by the pool (or about to be, outside the lock)
    DROPPED = "dropped"  # inherited across a fork: forgotten, never closed


class _Entry:
    """One producer with its lease count. Guarded by the pool's lock."""

    __slots__ = ("config", "producer", "refs", "idle_since_ms", "idle_timeout_ms", "state")

    def __init__(self, config: ProducerConfig, producer: KafkaProducer, idle_timeout_ms: int):
        self.config = config
        self.producer = producer
        self.refs = 0
        self.idle_since_ms: int | None = None  # set whenever refs == 0
        self.idle_timeout_ms = idle_timeout_ms
        self.state = _State.CACHED

    def idle_expired(self, now_ms: int) -> bool:
        return self.refs == 0 and now_ms - self.idle_since_ms > self.idle_timeout_ms


class PooledProducer:
    """A lease on a pooled producer: use ``producer``, then ``release()`` (or use ``with``).

    After release the producer may be closed at any time; do not keep using it. ``created`` says
    whether this acquire created the producer (first use of the config in this process, or a
    task retry) rather than reusing a cached one.
    """

    __slots__ = ("_pool", "_entry", "_released", "created")

    def __init__(self, pool: ProducerPool, entry: _Entry, created: bool):
        self._pool = pool
        self._entry = entry
        self._released = False  # guarded by the pool's lock
        self.created = created

    @property
    def producer(self) -> KafkaProducer:
        return self._entry.producer

    @property
    def config(self) -> ProducerConfig:
        return self._entry.config

    def release(self) -> None:
        """Return the lease. Calling it again does nothing."""
        self._pool._release(self)

    def __enter__(self) -> PooledProducer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        origin = "created" if self.created else "cached"
        return f"PooledProducer({self._entry.producer!r}, {origin}, {state})"


class ProducerPool:
    """Cached producers keyed by config, with ref counts and idle eviction; see the module docstring.

    ``factory(config)`` creates a producer (anything with ``close(timeout=...)``). ``clock`` times
    idleness (``monotonic_ms``). ``getpid`` detects a fork. ``evictor_interval_ms=0`` turns the
    evictor thread off. Thread-safe.
    """

    def __init__(self, *, factory: ProducerFactory = KafkaProducer, clock: Clock = SYSTEM_CLOCK,
                 idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS, getpid: Callable[[], int] = os.getpid,
                 evictor_interval_ms: int = DEFAULT_EVICTOR_INTERVAL_MS,
                 close_timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S):
        _check_non_negative(idle_timeout_ms=idle_timeout_ms, evictor_interval_ms=evictor_interval_ms)
        if not close_timeout_s > 0:
            raise ValueError(f"close_timeout_s must be positive, got {close_timeout_s}")
        self._factory = factory
        self._clock = clock
        self._idle_timeout_ms = idle_timeout_ms
        self._getpid = getpid
        self._evictor_interval_ms = evictor_interval_ms
        self._close_timeout_s = close_timeout_s
        self._lock = threading.Lock()
        self._entries: dict[ProducerConfig, _Entry] = {}
        self._retired: set[_Entry] = set()  # retired entries that still have leases
        self._pid = getpid()
        self._closed = False
        self._evictor: _Evictor | None = None
        self._created_total = self._evicted_total = self._retired_total = self._dropped_total = 0
        # A fork can happen while another thread holds the lock; the child gets a fresh one.
        os.register_at_fork(after_in_child=functools.partial(_renew_lock, weakref.ref(self)))

    # --- leases -------------------------------------------------------------------------------

    def acquire(self, config: ProducerConfig | Mapping[str, Any], *, attempt: int = 0,
                idle_timeout_ms: int | None = None) -> PooledProducer:
        """A lease on the producer for ``config``, created on first use.

        ``attempt`` is the Spark task's attempt number. Above 0, the cached producer is retired
        and a fresh one is created. ``idle_timeout_ms`` overrides the pool's idle timeout for this
        entry (the latest acquire's value wins), e.g. from the sink's ``producer.cache.timeout``.
        """
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        if idle_timeout_ms is not None:
            _check_non_negative(idle_timeout_ms=idle_timeout_ms)
        config = ProducerConfig.coerce(config)
        to_close: list[_Entry] = []
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the producer pool is closed")
                self._check_fork_locked()
                entry = self._entries.get(config)
                if entry is not None and attempt > 0:
                    to_close += self._retire_locked(entry)
                    entry = None
                created = entry is None
                if created:
                    entry = self._create_locked(config)
                entry.refs += 1
                entry.idle_since_ms = None
                if idle_timeout_ms is not None:
                    entry.idle_timeout_ms = idle_timeout_ms
                self._start_evictor_locked()
                if self._evictor is not None and self._evictor_wait_ms_locked() < self._evictor.wait_ms:
                    self._evictor.wake()  # a shorter timeout than it sleeps for: reschedule
                return PooledProducer(self, entry, created)
        finally:
            self._close_entries(to_close)

    def _release(self, lease: PooledProducer) -> None:
        to_close: list[_Entry] = []
        with self._lock:
            if lease._released:
                return
            lease._released = True
            self._check_fork_locked()
            entry = lease._entry
            entry.refs -= 1
            if entry.refs > 0:
                return
            if entry.state is _State.CACHED:
                entry.idle_since_ms = self._clock.monotonic_ms()
            elif entry.state is _State.RETIRED:
                self._retired.discard(entry)
                entry.state = _State.CLOSED
                to_close.append(entry)
            # CLOSED: the pool already closed it. DROPPED: inherited across a fork, never closed.
        self._close_entries(to_close)

    def _create_locked(self, config: ProducerConfig) -> _Entry:
        entry = _Entry(config, self._factory(config), self._idle_timeout_ms)
        self._entries[config] = entry
        self._created_total += 1
        log.debug("producer pool: created %r", entry.producer)
        return entry

    def _retire_locked(self, entry: _Entry) -> list[_Entry]:
        """Take ``entry`` out of the map. Returns it if it can be closed now (no leases)."""
        del self._entries[entry.config]
        self._retired_total += 1
        log.info("producer pool: task retry, replacing %r (%d lease(s) left on it)", entry.producer, entry.refs)
        if entry.refs == 0:
            entry.state = _State.CLOSED
            return [entry]
        entry.state = _State.RETIRED
        self._retired.add(entry)
        return []

    def _check_fork_locked(self) -> None:
        """After a fork, forget every inherited producer without closing it: its threads stayed
        in the parent."""
        pid = self._getpid()
        if pid == self._pid:
            return
        dropped = [*self._entries.values(), *self._retired]
        for entry in dropped:
            entry.state = _State.DROPPED
        self._entries.clear()
        self._retired.clear()
        self._dropped_total += len(dropped)
        self._evictor = None  # its thread did not survive the fork either
        log.info("producer pool: pid %d -> %d (forked); dropped %d inherited producer(s) unclosed",
                 self._pid, pid, len(dropped))
        self._pid = pid

    # --- eviction, close, stats ---------------------------------------------------------------

    def evict_idle(self, now_ms: int | None = None) -> int:
        """Close the producers that have had no lease for longer than their idle timeout.

        ``now_ms`` is monotonic milliseconds and defaults to the clock's. Returns how many
        producers were closed.
        """
        with self._lock:
            self._check_fork_locked()
            now = self._clock.monotonic_ms() if now_ms is None else now_ms
            expired = [entry for entry in self._entries.values() if entry.idle_expired(now)]
            for entry in expired:
                del self._entries[entry.config]
                entry.state = _State.CLOSED
            self._evicted_total += len(expired)
        if expired:
            log.info("producer pool: closing %d idle producer(s)", len(expired))
        self._close_entries(expired)
        return len(expired)

    def close(self) -> None:
        """Stop the evictor and close every producer, in use or not. Later acquires raise."""
        with self._lock:
            self._check_fork_locked()
            self._closed = True
            entries = [*self._entries.values(), *self._retired]
            self._entries.clear()
            self._retired.clear()
            for entry in entries:
                entry.state = _State.CLOSED
            evictor, self._evictor = self._evictor, None
        if evictor is not None:
            evictor.stop(self._close_timeout_s)
        in_use = [entry for entry in entries if entry.refs > 0]
        if in_use:
            log.warning("producer pool: closing %d producer(s) still in use (%d lease(s) held)",
                        len(in_use), sum(entry.refs for entry in in_use))
        self._close_entries(entries)

    def stats(self) -> PoolStats:
        with self._lock:
            self._check_fork_locked()
            cached = self._entries.values()
            return PoolStats(
                entries=len(cached), in_use=sum(1 for entry in cached if entry.refs > 0),
                leases=sum(entry.refs for entry in cached) + sum(entry.refs for entry in self._retired),
                created_total=self._created_total, evicted_total=self._evicted_total,
                retired_total=self._retired_total, dropped_total=self._dropped_total)

    def _close_entries(self, entries: list[_Entry]) -> None:
        """Close producers, each bounded by ``close_timeout_s``. Never call this holding the lock."""
        for entry in entries:
            try:
                entry.producer.close(timeout=self._close_timeout_s)
            except Exception:  # noqa: BLE001 - one failed close must not stop the others, or a task
                log.warning("producer pool: closing %r failed", entry.producer, exc_info=True)

    def _start_evictor_locked(self) -> None:
        if self._evictor is None and self._evictor_interval_ms > 0:
            self._evictor = _Evictor(self, self._evictor_wait_ms_locked())

    def _evictor_wait_ms_locked(self) -> int:
        """The evictor's next sleep: its interval, or the shortest idle timeout of a cached entry
        if that is shorter (never under ``MIN_EVICTOR_WAIT_MS``, nor over the interval)."""
        timeouts = [entry.idle_timeout_ms for entry in self._entries.values()]
        if not timeouts:
            return self._evictor_interval_ms
        return min(self._evictor_interval_ms, max(min(timeouts), MIN_EVICTOR_WAIT_MS))

    def _next_evictor_wait_ms(self, evictor: _Evictor) -> int | None:
        """Called by the evictor thread before it sleeps: how long, or ``None`` if it is no
        longer this pool's evictor (stopped, or the pool forked)."""
        with self._lock:
            if self._evictor is not evictor:
                return None
            evictor.wait_ms = self._evictor_wait_ms_locked()
            return evictor.wait_ms

    def __repr__(self) -> str:
        return f"ProducerPool({self.stats()})"


class _Evictor:
    """A daemon thread calling ``pool.evict_idle()`` until stopped, sleeping as long as the pool
    says before each call (``wait_ms``, set under the pool's lock); ``wake()`` cuts a sleep short.
    It holds the pool only weakly, so a pool that nobody references is not kept alive by its
    evictor."""

    def __init__(self, pool: ProducerPool, wait_ms: int):
        self.wait_ms = wait_ms  # guarded by the pool's lock
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=_evict_periodically, args=(weakref.ref(pool), self),
                                        name="kafka-producer-pool-evictor", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def sleep(self, wait_ms: int) -> bool:
        """Sleep up to ``wait_ms`` or until woken; whether the evictor should go on."""
        self._wake.wait(wait_ms / 1000)
        self._wake.clear()
        return not self._stopped

    def stop(self, timeout_s: float) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


def _evict_periodically(pool_ref: weakref.ref[ProducerPool], evictor: _Evictor) -> None:
    while True:
        pool = pool_ref()
        wait_ms = None if pool is None else pool._next_evictor_wait_ms(evictor)
        del pool
        if wait_ms is None or not evictor.sleep(wait_ms):
            return
        pool = pool_ref()
        if pool is None:
            return
        try:
            pool.evict_idle()
        except Exception:  # noqa: BLE001 - the evictor must survive to try again
            log.warning("producer pool: eviction failed", exc_info=True)
        del pool


def _renew_lock(pool_ref: weakref.ref[ProducerPool]) -> None:
    pool = pool_ref()
    if pool is not None:
        pool._lock = threading.Lock()


def _check_non_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


# --- the per-process pool ---------------------------------------------------------------------

_shared_pool: ProducerPool | None = None
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def get_pool() -> ProducerPool:
    """This process's pool, created on first use and created again in a forked child.

    A Python worker runs many tasks in turn (worker reuse), and they all share this pool. Nothing
    flushes at exit, because idle workers are SIGKILLed: tasks flush before returning.
    """
    global _shared_pool, _shared_pid
    pid = os.getpid()
    with _shared_lock:
        if _shared_pool is None or _shared_pid != pid:
            _shared_pool, _shared_pid = ProducerPool(), pid
        return _shared_pool


def shutdown_pool() -> None:
    """Close this process's pool, if any; the next :func:`get_pool` starts a new one. A pool
    inherited across a fork has its producers dropped, not closed."""
    global _shared_pool, _shared_pid
    with _shared_lock:
        pool, _shared_pool, _shared_pid = _shared_pool, None, None
    if pool is not None:
        pool.close()


def _renew_shared_lock() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_shared_lock)
