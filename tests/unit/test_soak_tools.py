"""The soak's building blocks without Spark: its pass criteria (bench/soak_check.py) and its /proc
counts (bench/procstats.py), the latter on this process with real loopback sockets."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from bench.procstats import ProcSample, sample
from bench.soak import serving_before_eviction
from bench.soak_check import cap_check, flat_check, rss_check

# --- criteria -----------------------------------------------------------------------------------


def test_rss_baseline_is_the_median_of_the_first_samples_and_bounds_every_sample():
    values = [100, 104, 96, 100, 250, 110, 114]  # a spike inside the baseline window does not move the median
    check = rss_check("x RSS", values, baseline_samples=5, tolerance=0.15)
    assert check.baseline == 100
    assert not check.passed  # 250 is outside 85 .. 115, wherever it occurs
    assert rss_check("x RSS", [100, 104, 96, 100, 101, 114, 86], baseline_samples=5, tolerance=0.15).passed


@pytest.mark.parametrize("last, passed", [(115, True), (116, False), (85, True), (84, False)])
def test_rss_limits_are_inclusive(last, passed):
    assert rss_check("x RSS", [100] * 5 + [last], baseline_samples=5, tolerance=0.15).passed is passed


def test_the_lower_bound_can_stop_after_the_first_samples_the_upper_one_never_does():
    dip = [100] * 5 + [101, 70, 80, 99]          # a drop after sample 6, then back
    assert not rss_check("x RSS", dip, baseline_samples=5, tolerance=0.15).passed
    check = rss_check("x RSS", dip, baseline_samples=5, tolerance=0.15, floor_samples=6)
    assert check.passed and "first 6 sample(s) only" in check.detail
    assert not rss_check("x RSS", [100] * 5 + [84, 70], baseline_samples=5, tolerance=0.15,
                         floor_samples=6).passed          # 84 comes before the floor ends
    assert not rss_check("x RSS", [100] * 5 + [101, 70, 116], baseline_samples=5, tolerance=0.15,
                         floor_samples=6).passed          # growth fails wherever it occurs
    # the baseline window is always floored
    assert not rss_check("x RSS", [100, 60, 100, 100, 100, 100], baseline_samples=5,
                         tolerance=0.15, floor_samples=1).passed


def _worker(connections: int, rss_kb: int = 100) -> ProcSample:
    return ProcSample(pid=1, rss_kb=rss_kb, threads=4, fds=10, sockets=connections,
                      broker_connections=connections)


def test_a_workers_rss_floor_ends_at_its_first_eviction():
    assert serving_before_eviction([_worker(2)] * 4) is None
    assert serving_before_eviction([_worker(0), _worker(2), _worker(2)]) is None  # not yet connected
    assert serving_before_eviction([_worker(0), _worker(2), _worker(2), _worker(0), _worker(2)]) == 2
    assert serving_before_eviction([_worker(2)] * 3 + [_worker(0)] * 2 + [_worker(2), _worker(0)]) == 3


def test_too_few_samples_fail_rather_than_pass_vacuously():
    check = rss_check("x RSS", [100, 100, 100], baseline_samples=5, tolerance=0.15)
    assert not check.passed and "only 3" in check.detail
    assert not flat_check("x fds", [], baseline_samples=5, slack=2).passed
    assert not cap_check("x pool", [], cap=10).passed


def test_flat_counts_allow_the_slack_and_any_drop():
    assert flat_check("t", [10, 10, 10, 10, 10, 12, 3, 12], baseline_samples=5, slack=2).passed
    check = flat_check("t", [10, 10, 10, 10, 10, 11, 12, 13], baseline_samples=5, slack=2)
    assert not check.passed and check.high == 13 and "growth +3" in check.detail


def test_cap_check():
    assert cap_check("pool", [0, 50, 200], cap=200).passed
    assert not cap_check("pool", [0, 201], cap=200).passed


# --- /proc ----------------------------------------------------------------------------------------


def test_sample_counts_threads_fds_and_connections_to_the_broker_port():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    before = sample(os.getpid(), frozenset({port}))
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    accepted = [server.accept()[0] for _ in clients]
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="soak-test-extra-thread")
    thread.start()
    try:
        during = sample(os.getpid(), frozenset({port}))
        # our two client sockets point at the port; the accepted ends have it as their local port
        assert during.broker_connections == before.broker_connections + 2 == 2
        assert during.sockets == before.sockets + 4
        assert during.fds == before.fds + 4
        assert during.threads == before.threads + 1
        assert during.rss_kb > 0
        assert sample(os.getpid(), frozenset({port + 1 if port < 65535 else port - 1})).broker_connections == 0
    finally:
        stop.set()
        thread.join()
        for sock in clients + accepted:
            sock.close()
        server.close()
    after = sample(os.getpid(), frozenset({port}))
    assert after.broker_connections == 0  # closed sockets are not counted, TIME_WAIT or not
    assert after.fds == before.fds - 1  # the listening socket is gone too


def test_sample_counts_named_threads_apart():
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for index, thread in enumerate(threads):  # name them as a JVM pool names its threads
            Path(f"/proc/self/task/{thread.native_id}/comm").write_text(f"soakpool-{index}")
        assert sample(os.getpid(), frozenset(), pools=("soakpool-", "other")).pool_threads == 3
        assert sample(os.getpid(), frozenset()).pool_threads == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_a_process_that_is_gone_gives_none():
    assert sample(2 ** 22 + 12345, frozenset()) is None
