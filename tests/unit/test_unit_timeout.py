"""The unit suite's short per-test timeout (tests/unit/conftest.py) is really applied, and really
ends a hung test: the run goes on with the next one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import conftest
from .conftest import UNIT_TIMEOUT_S

pytest_plugins = ("pytester",)


def test_a_unit_test_gets_the_short_timeout(request):
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (UNIT_TIMEOUT_S,)
    assert marker.kwargs == {"method": "signal"}
    assert UNIT_TIMEOUT_S < 300                 # setup.cfg's, for the broker and Spark tests


@pytest.mark.timeout(45)
def test_a_unit_test_may_ask_for_its_own(request):
    assert request.node.get_closest_marker("timeout").args == (45,)


HUNG_TESTS = '''
import threading

import pytest
from hypothesis import given, settings, strategies as st


def spin(stop):
    while not stop:
        pass


def test_a_busy_loop():
    spin([])


def test_a_busy_loop_that_catches_the_first_timeout():
    try:
        spin([])
    except BaseException:               # and is stuck again cleaning up
        spin([])


@pytest.mark.timeout(2)                 # Hypothesis sets up first: not to be cut in the middle
@given(st.integers())
@settings(deadline=None, database=None)
def test_a_hypothesis_example_that_hangs(number):
    spin([])                            # a failing example: Hypothesis would run it again


def test_a_wait_for_a_thread_that_never_ends():
    thread = threading.Thread(target=spin, args=([],), name="spinner")
    thread.start()
    thread.join()


def test_a_busy_loop_holding_a_lock_a_thread_waits_for():
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                pass

    with lock:
        threading.Thread(target=worker, name="locker").start()
        spin([])


def test_the_next_test_runs_and_the_spinning_thread_was_stopped():
    assert [t.name for t in threading.enumerate()] == ["MainThread"]
'''


def test_a_hung_unit_test_fails_at_the_limit_and_the_run_goes_on(pytester):
    """Under the unit conftest with a 0.5 s limit (2 s for the Hypothesis test): each hung test
    fails within a few seconds (a thread started by a test and still spinning included), and the
    test after them passes."""
    source = Path(conftest.__file__).read_text()
    for setting in (f"UNIT_TIMEOUT_S = {UNIT_TIMEOUT_S}\n", f"REPEAT_S = {conftest.REPEAT_S}\n"):
        assert setting in source
        source = source.replace(setting, setting.split("=")[0] + "= 0.5\n")
    pytester.makeconftest(source)
    pytester.makepyfile(test_hung=HUNG_TESTS)
    # --tb=no -vv: the failures are read from the summary lines, whole. A traceback would have
    # pytest parse source (ast) while a stopped thread may still be unwinding, and CPython 3.11's
    # AST conversion keeps its recursion count per interpreter, not per thread: two at once break
    # it (an INTERNALERROR, seen under load).
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-o", "timeout=300", "--tb=no", "-vv", "-rf",
        "-W", "ignore::pytest.PytestUnhandledThreadExceptionWarning", timeout=20)
    result.assert_outcomes(failed=5, passed=1)
    assert len(re.findall(r"UnitTestTimeout: Timeout \(>(0\.5|2\.0)s\)", result.stdout.str())) >= 5
    seconds = float(re.search(r"in ([0-9.]+)s", result.stdout.lines[-1]).group(1))
    assert seconds < 15, result.stdout.lines[-1]
