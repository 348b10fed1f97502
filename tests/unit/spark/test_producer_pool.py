"""ProducerPool: ref counts, idle eviction, replacement on retry and on a pid change, close, threads.

Every test uses a fake producer factory and a FakeClock: no broker, no Spark, no real waiting
(except the evictor-thread tests, which wait at most WAIT_S).
"""

from __future__ import annotations

import ast
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.spark import producer_pool
from spark_kafka_sink.spark.producer_pool import PoolStats, ProducerPool, get_pool, shutdown_pool

from ..fakes import FakeClock

WAIT_S = 5.0
IDLE_MS = 10_000
CONFIG_A = ProducerConfig({"bootstrap.servers": "localhost:9092"})
CONFIG_B = ProducerConfig({"bootstrap.servers": "localhost:9092", "linger.ms": 50})


class FakeProducer:
    """Records its close() calls; ``on_close`` runs inside close()."""

    def __init__(self, config: ProducerConfig, on_close=None):
        self.config = config
        self.close_timeouts: list[float | None] = []
        self.on_close = on_close

    @property
    def closed(self) -> bool:
        return bool(self.close_timeouts)

    def close(self, timeout: float | None = None) -> None:
        self.close_timeouts.append(timeout)
        if self.on_close is not None:
            self.on_close()

    def __repr__(self) -> str:
        return f"FakeProducer(#{id(self):x})"


class Factory:
    """A producer factory that keeps every producer it made, in order."""

    def __init__(self):
        self.created: list[FakeProducer] = []
        self.on_close = None

    def __call__(self, config: ProducerConfig) -> FakeProducer:
        producer = FakeProducer(config, self.on_close)
        self.created.append(producer)
        return producer


class Pid:
    """A settable stand-in for os.getpid."""

    def __init__(self, pid: int = 1000):
        self.pid = pid

    def __call__(self) -> int:
        return self.pid


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def factory():
    return Factory()


@pytest.fixture
def pid():
    return Pid()


@pytest.fixture
def pool(factory, clock, pid):
    pool = ProducerPool(factory=factory, clock=clock, idle_timeout_ms=IDLE_MS, getpid=pid, evictor_interval_ms=0)
    yield pool
    pool.close()


def stats(pool: ProducerPool, **expected) -> PoolStats:
    """The pool's stats, after checking the fields named in ``expected``."""
    current = pool.stats()
    assert {name: getattr(current, name) for name in expected} == expected
    return current


# --- keys and ref counts ----------------------------------------------------------------------


def test_same_config_shares_one_producer(pool, factory):
    first = pool.acquire(CONFIG_A)
    second = pool.acquire(ProducerConfig({"bootstrap.servers": "localhost:9092"}))  # equal, not identical
    assert first.producer is second.producer
    assert first.config == CONFIG_A
    assert (first.created, second.created) == (True, False)
    assert len(factory.created) == 1
    stats(pool, entries=1, in_use=1, leases=2, created_total=1)


def test_different_configs_get_different_producers(pool, factory):
    a, b = pool.acquire(CONFIG_A), pool.acquire(CONFIG_B)
    assert a.producer is not b.producer
    assert [p.config for p in factory.created] == [CONFIG_A, CONFIG_B]
    stats(pool, entries=2, in_use=2, leases=2, created_total=2)


def test_acquire_takes_a_mapping_of_properties(pool):
    lease = pool.acquire({"bootstrap.servers": "localhost:9092"})
    assert lease.producer is pool.acquire(CONFIG_A).producer


def test_ref_counts_track_leases(pool, factory):
    first, second = pool.acquire(CONFIG_A), pool.acquire(CONFIG_A)
    first.release()
    stats(pool, entries=1, in_use=1, leases=1)
    second.release()
    stats(pool, entries=1, in_use=0, leases=0)
    assert not factory.created[0].closed  # idle, still cached
    assert pool.acquire(CONFIG_A).producer is factory.created[0]


def test_release_twice_is_harmless(pool, factory):
    first, second = pool.acquire(CONFIG_A), pool.acquire(CONFIG_A)
    first.release()
    first.release()  # must not take second's count
    stats(pool, in_use=1, leases=1)
    second.release()
    second.release()
    stats(pool, in_use=0, leases=0)
    assert not factory.created[0].closed


def test_lease_is_a_context_manager(pool):
    with pool.acquire(CONFIG_A) as lease:
        assert lease.producer is not None
        stats(pool, leases=1)
    stats(pool, leases=0, entries=1)


def test_negative_attempt_is_refused(pool):
    with pytest.raises(ValueError, match="attempt"):
        pool.acquire(CONFIG_A, attempt=-1)


# --- idle eviction ----------------------------------------------------------------------------


def test_idle_producer_is_evicted_only_after_the_timeout(pool, factory, clock):
    pool.acquire(CONFIG_A).release()
    clock.advance(IDLE_MS)
    assert pool.evict_idle() == 0  # idle for exactly the timeout: kept
    clock.advance(1)
    assert pool.evict_idle() == 1
    assert factory.created[0].close_timeouts == [producer_pool.DEFAULT_CLOSE_TIMEOUT_S]  # bounded close
    stats(pool, entries=0, evicted_total=1)


def test_producer_in_use_is_never_evicted(pool, factory, clock):
    lease = pool.acquire(CONFIG_A)
    clock.advance(100 * IDLE_MS)
    assert pool.evict_idle() == 0
    lease.release()
    clock.advance(IDLE_MS)
    assert pool.evict_idle() == 0  # the idle time counts from the release
    clock.advance(1)
    assert pool.evict_idle() == 1
    assert factory.created[0].closed


def test_reuse_restarts_the_idle_time(pool, factory, clock):
    pool.acquire(CONFIG_A).release()
    clock.advance(IDLE_MS - 1)
    pool.acquire(CONFIG_A).release()
    clock.advance(IDLE_MS - 1)
    assert pool.evict_idle() == 0
    assert not factory.created[0].closed


def test_evict_idle_takes_an_explicit_time(pool, clock):
    pool.acquire(CONFIG_A).release()
    assert pool.evict_idle(now_ms=clock.monotonic_ms() + IDLE_MS) == 0
    assert pool.evict_idle(now_ms=clock.monotonic_ms() + IDLE_MS + 1) == 1


def test_eviction_closes_only_the_idle_entries(pool, factory, clock):
    pool.acquire(CONFIG_A).release()
    held = pool.acquire(CONFIG_B)
    clock.advance(IDLE_MS + 1)
    assert pool.evict_idle() == 1
    assert [p.closed for p in factory.created] == [True, False]
    assert pool.acquire(CONFIG_B).producer is held.producer


def test_after_eviction_a_new_producer_is_created(pool, factory, clock):
    pool.acquire(CONFIG_A).release()
    clock.advance(IDLE_MS + 1)
    pool.evict_idle()
    assert pool.acquire(CONFIG_A).producer is factory.created[1]
    stats(pool, created_total=2, evicted_total=1)


def test_idle_timeout_can_be_set_per_acquire(pool, clock):
    pool.acquire(CONFIG_A, idle_timeout_ms=100).release()
    pool.acquire(CONFIG_B).release()
    clock.advance(101)
    assert pool.evict_idle() == 1
    stats(pool, entries=1)


def test_a_failing_close_is_logged_and_eviction_goes_on(pool, factory, clock, caplog):
    def fail():
        raise OSError("boom")

    factory.on_close = fail
    pool.acquire(CONFIG_A).release()
    pool.acquire(CONFIG_B).release()
    clock.advance(IDLE_MS + 1)
    with caplog.at_level(logging.WARNING, logger=producer_pool.__name__):
        assert pool.evict_idle() == 2
    assert all(p.closed for p in factory.created)
    assert "closing" in caplog.text and "boom" in caplog.text


def test_close_runs_outside_the_pool_lock(pool, factory, clock):
    """A producer's close may take seconds: other threads must get through the pool meanwhile."""
    finished = []

    def use_pool_from_another_thread():
        thread = threading.Thread(target=lambda: finished.append(pool.stats()), daemon=True)
        thread.start()
        thread.join(WAIT_S)

    factory.on_close = use_pool_from_another_thread
    pool.acquire(CONFIG_A).release()
    clock.advance(IDLE_MS + 1)
    pool.evict_idle()
    assert len(finished) == 1, "the pool stayed locked while a producer was being closed"


# --- replacement on a task retry --------------------------------------------------------------


def test_retry_replaces_the_producer_and_closes_the_old_after_its_last_lease(pool, factory):
    old_1, old_2 = pool.acquire(CONFIG_A), pool.acquire(CONFIG_A)
    retry = pool.acquire(CONFIG_A, attempt=1)
    old, new = factory.created
    assert retry.producer is new and retry.created
    assert not old.closed  # a concurrent task still uses it
    stats(pool, entries=1, leases=3, retired_total=1)
    old_1.release()
    assert not old.closed
    old_2.release()
    assert old.close_timeouts == [producer_pool.DEFAULT_CLOSE_TIMEOUT_S]
    assert not new.closed
    assert pool.acquire(CONFIG_A).producer is new  # later first attempts share the new one
    stats(pool, entries=1, leases=2, created_total=2)


def test_retry_closes_an_idle_producer_at_once(pool, factory):
    pool.acquire(CONFIG_A).release()
    pool.acquire(CONFIG_A, attempt=2)
    old, new = factory.created
    assert old.closed and not new.closed
    stats(pool, entries=1, leases=1, retired_total=1)


def test_retry_of_an_unknown_config_just_creates(pool, factory):
    pool.acquire(CONFIG_A, attempt=1)
    stats(pool, created_total=1, retired_total=0)


def test_retry_leaves_other_configs_alone(pool, factory):
    b = pool.acquire(CONFIG_B)
    pool.acquire(CONFIG_A)
    pool.acquire(CONFIG_A, attempt=1)
    assert pool.acquire(CONFIG_B).producer is b.producer
    stats(pool, created_total=3, retired_total=1)


def test_a_retired_producer_is_not_evicted_twice(pool, factory, clock):
    lease = pool.acquire(CONFIG_A)
    pool.acquire(CONFIG_A, attempt=1).release()
    lease.release()
    clock.advance(IDLE_MS + 1)
    assert pool.evict_idle() == 1  # only the new one
    assert [p.close_timeouts for p in factory.created] == [[30.0], [30.0]]


def test_a_failing_factory_leaves_the_pool_consistent(pool, factory):
    pool.acquire(CONFIG_A).release()

    def broken(config):
        raise RuntimeError("no producer")

    pool._factory = broken
    with pytest.raises(RuntimeError, match="no producer"):
        pool.acquire(CONFIG_A, attempt=1)
    assert factory.created[0].closed  # retired and closed even though its replacement failed
    stats(pool, entries=0, leases=0, retired_total=1)
    pool._factory = factory
    assert pool.acquire(CONFIG_A).producer is factory.created[1]


# --- replacement after a fork -----------------------------------------------------------------


def test_pid_change_drops_inherited_producers_without_closing(pool, factory, pid):
    inherited = pool.acquire(CONFIG_A)
    pool.acquire(CONFIG_B).release()
    pid.pid += 1
    fresh = pool.acquire(CONFIG_A)
    assert fresh.producer is factory.created[2]
    stats(pool, entries=1, leases=1, created_total=3, dropped_total=2)
    inherited.release()  # a lease from before the fork: nothing to close
    assert not any(p.closed for p in factory.created)
    pool.close()
    assert [p.closed for p in factory.created] == [False, False, True]


def test_pid_change_drops_retired_producers_too(pool, factory, pid):
    inherited = pool.acquire(CONFIG_A)
    pool.acquire(CONFIG_A, attempt=1)
    pid.pid += 1
    inherited.release()
    assert not factory.created[0].closed
    stats(pool, entries=0, leases=0, dropped_total=2)


def test_pid_change_is_seen_by_eviction_and_close(pool, factory, clock, pid):
    pool.acquire(CONFIG_A).release()
    pid.pid += 1
    clock.advance(IDLE_MS + 1)
    assert pool.evict_idle() == 0
    pool.acquire(CONFIG_B)
    pid.pid += 1
    pool.close()
    assert not any(p.closed for p in factory.created)
    stats(pool, dropped_total=2, evicted_total=0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads running
def test_a_real_fork_replaces_producers_in_the_child(factory):
    pool = ProducerPool(factory=factory, evictor_interval_ms=0)
    parent_lease = pool.acquire(CONFIG_A)
    child = os.fork()
    if child == 0:  # the child: report through the exit code, never return into pytest
        code = 1
        try:
            lease = pool.acquire(CONFIG_A)
            parent_lease.release()
            pool.close()
            ok = (lease.producer is factory.created[1] and not factory.created[0].closed
                  and factory.created[1].closed and pool.stats().dropped_total == 1)
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool.acquire(CONFIG_A).producer is parent_lease.producer  # the parent is untouched
    pool.close()


# --- close ------------------------------------------------------------------------------------


def test_close_closes_every_producer_and_warns_about_those_in_use(pool, factory, caplog):
    pool.acquire(CONFIG_A).release()
    held = pool.acquire(CONFIG_B)
    retired = pool.acquire(CONFIG_B, attempt=1)
    with caplog.at_level(logging.WARNING, logger=producer_pool.__name__):
        pool.close()
    assert [len(p.close_timeouts) for p in factory.created] == [1, 1, 1]
    assert "still in use" in caplog.text
    held.release()
    retired.release()  # closed already: not closed again
    assert [len(p.close_timeouts) for p in factory.created] == [1, 1, 1]
    stats(pool, entries=0, leases=0)
    pool.close()  # twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(CONFIG_A)


def test_close_of_an_idle_pool_does_not_warn(pool, caplog):
    pool.acquire(CONFIG_A).release()
    with caplog.at_level(logging.WARNING, logger=producer_pool.__name__):
        pool.close()
    assert not caplog.records


# --- the evictor thread -----------------------------------------------------------------------


def _evictor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kafka-producer-pool-evictor"]


def test_evictor_thread_starts_on_first_acquire_and_stops_on_close(factory, clock):
    before = threading.active_count()
    pool = ProducerPool(factory=factory, clock=clock, evictor_interval_ms=60_000)
    assert threading.active_count() == before and not _evictor_threads()
    pool.acquire(CONFIG_A)
    pool.acquire(CONFIG_B)
    (evictor,) = _evictor_threads()
    assert evictor.daemon
    pool.close()
    assert not evictor.is_alive()
    assert threading.active_count() == before


def test_evictor_thread_evicts_idle_producers(factory, clock):
    pool = ProducerPool(factory=factory, clock=clock, idle_timeout_ms=IDLE_MS, evictor_interval_ms=5)
    try:
        pool.acquire(CONFIG_A).release()
        clock.advance(IDLE_MS + 1)
        deadline = time.monotonic() + WAIT_S
        while not factory.created[0].closed and time.monotonic() < deadline:
            time.sleep(0.005)
        assert factory.created[0].closed
        assert pool.stats().evicted_total == 1
    finally:
        pool.close()


def _wait_closed(producer: FakeProducer) -> None:
    deadline = time.monotonic() + WAIT_S
    while not producer.closed and time.monotonic() < deadline:
        time.sleep(0.005)


def test_a_short_idle_timeout_shortens_the_evictors_sleep(factory, clock):
    # The interval is a minute, but a lease brings a 200 ms timeout (producer.cache.timeout):
    # the evictor, asleep for the minute, is woken and looks every 200 ms from then on.
    pool = ProducerPool(factory=factory, clock=clock, idle_timeout_ms=IDLE_MS, evictor_interval_ms=60_000)
    try:
        pool.acquire(CONFIG_B).release()  # starts the evictor on the minute interval
        time.sleep(0.05)
        pool.acquire(CONFIG_A, idle_timeout_ms=200).release()
        clock.advance(201)
        _wait_closed(factory.created[1])
        assert factory.created[1].closed, "the idle producer was not evicted within its 200 ms timeout"
        assert not factory.created[0].closed  # its own 10 s timeout has not passed
        assert pool.stats().evicted_total == 1
    finally:
        pool.close()


def test_a_zero_idle_timeout_is_evicted_without_spinning(factory, clock):
    pool = ProducerPool(factory=factory, clock=clock, evictor_interval_ms=60_000)
    try:
        pool.acquire(CONFIG_A, idle_timeout_ms=0).release()
        clock.advance(1)
        _wait_closed(factory.created[0])
        assert factory.created[0].closed
        calls = []
        original = pool.evict_idle
        pool.evict_idle = lambda now_ms=None: calls.append(now_ms) or original(now_ms)
        time.sleep(0.3)
        assert len(calls) <= 1, f"the evictor ran {len(calls)} times in 0.3 s with nothing to evict"
    finally:
        pool.close()


def test_no_evictor_thread_when_the_interval_is_zero(pool):
    pool.acquire(CONFIG_A)
    assert not _evictor_threads()


# --- threads ----------------------------------------------------------------------------------


def test_concurrent_acquire_and_release_keep_counts_exact(pool, factory):
    threads, rounds = 8, 300
    start = threading.Barrier(threads)
    errors: list[BaseException] = []
    leases_seen: list[int] = []

    def task(config):
        try:
            start.wait(WAIT_S)
            for _ in range(rounds):
                lease = pool.acquire(config)
                leases_seen.append(pool.stats().leases)
                assert lease.producer.config == config
                lease.release()
                lease.release()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    workers = [threading.Thread(target=task, args=((CONFIG_A, CONFIG_B)[i % 2],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT_S)
    assert not errors and not any(w.is_alive() for w in workers)
    assert 1 <= min(leases_seen) and max(leases_seen) <= threads
    stats(pool, entries=2, in_use=0, leases=0, created_total=2)


# --- the per-process pool ---------------------------------------------------------------------


@pytest.fixture
def no_shared_pool():
    shutdown_pool()
    yield
    shutdown_pool()


def test_get_pool_is_one_pool_per_process(no_shared_pool, monkeypatch):
    pool = get_pool()
    assert get_pool() is pool
    shutdown_pool()
    after_shutdown = get_pool()
    assert after_shutdown is not pool
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(CONFIG_A)
    real_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real_pid + 1)
    assert get_pool() is not after_shutdown  # forked: a new pool


def test_module_imports_no_pyspark():
    tree = ast.parse(Path(producer_pool.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "pyspark" for name in imported)
