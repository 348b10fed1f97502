"""Unit tests fail fast: a short per-test timeout that really ends a hung test.

The unit tests run without a broker or Spark and each takes well under a second (the slowest
about 0.7 s on a 2-core machine), so a test that runs for :data:`UNIT_TIMEOUT_S` is hung (a
lost wakeup, a deadlock, a loop that never ends) and fails then, instead of holding the suite
for the 300 s that setup.cfg gives the broker and Spark tests. A test that needs longer says so
with its own ``@pytest.mark.timeout``.

pytest-timeout's ``signal`` method raises the failure in the main thread, which ends a busy loop
or a blocking wait (a lock, a join) there, and the run goes on with the next test; its
``thread`` method would end the whole run instead. Here the unit tests always use ``signal``
(where the platform has SIGALRM), and :func:`pytest_timeout_set_timer` adds what pytest-timeout
leaves out, since a loop that never ends defeats a single alarm:

- it raises :class:`UnitTestTimeout`, which neither ``except Exception`` nor Hypothesis catches
  (Hypothesis takes pytest's own failure for a failing example and runs it again to shrink it:
  the hung example again, and again);
- the alarm repeats every :data:`REPEAT_S` after the first, so a test that catches the timeout
  anyway and goes on (a ``finally`` that joins a thread stuck in the loop) is interrupted again;
- it acts only inside the test's setup, call and teardown, and is ignored in pytest's own code
  between them (an error raised there would end the run);
- threads the test started that are still running get :class:`UnitTestTimeout` raised in them,
  once each (at their next Python instruction; a thread blocked in a wait gets it when it
  wakes), so a thread looping forever does not slow every later test down.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from pathlib import Path

import pytest
from pytest_timeout import dump_stacks, is_debugging

UNIT_TIMEOUT_S = 30
REPEAT_S = 1.0
"""After the first alarm, how often it fires again while the test still runs."""
STOP_WAIT_S = 2.0
"""How long the threads a timed-out test left running get to end, all together."""
_HERE = Path(__file__).parent
_SIGNAL = hasattr(signal, "SIGALRM")


class UnitTestTimeout(BaseException):
    """Raised in a unit test past its time, and in the threads it left running: a
    ``BaseException``, so that a loop catching ``Exception`` ends too, and so that Hypothesis does
    not take it for a failing example to shrink (it would run the hung example again, and again)."""


def _is_unit(item) -> bool:
    return _HERE in Path(item.fspath).parents


def pytest_collection_modifyitems(config, items):
    method = {"method": "signal"} if _SIGNAL else {}
    for item in items:
        if _is_unit(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S, **method))


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """The ``signal`` method of pytest-timeout, with the additions of the module docstring."""
    if (settings.method != "signal" or not _SIGNAL or not _is_unit(item)
            or threading.current_thread() is not threading.main_thread()):
        return None                               # pytest-timeout's own
    spared = set(threading.enumerate())           # threads that were there before the test

    def handler(signum, frame):
        if not settings.disable_debugger_detection and is_debugging():
            return
        terminal = item.config.get_terminal_writer()
        terminal.sep("+", title="Timeout")
        dump_stacks(terminal)                     # before the threads below start unwinding
        stopped = _stop_threads(spared)
        spared.update(stopped)                    # once each: not again while it unwinds
        item._unit_stopped = getattr(item, "_unit_stopped", []) + stopped
        raise UnitTestTimeout(f"Timeout (>{settings.timeout}s): the test was interrupted "
                              "(tests/unit/conftest.py)")

    def cancel():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel
    item._unit_alarm = handler                    # installed by _in_phase, ignored outside
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout, REPEAT_S)
    return True


def _quiet_excepthook(args, _report=threading.excepthook):
    """A stopped thread's :class:`UnitTestTimeout` is not reported (its test failed with the
    timeout already), so the thread formats no traceback: on Python 3.11 two threads parsing
    source at once, as tracebacks do, can break the parser (pytest's own, reporting the test)."""
    if not issubclass(args.exc_type, UnitTestTimeout):
        _report(args)


def _stop_threads(spared: set[threading.Thread]) -> list[threading.Thread]:
    """Raise :class:`UnitTestTimeout` in every live thread not ``spared``; those threads."""
    stopped = [t for t in threading.enumerate() if t not in spared and t.ident is not None]
    if stopped and threading.excepthook is not _quiet_excepthook:
        _quiet_excepthook.__defaults__ = (threading.excepthook,)
        threading.excepthook = _quiet_excepthook
    for thread in stopped:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(UnitTestTimeout))
    return stopped


def _await_stopped(item) -> None:
    """Give the threads stopped in this phase up to :data:`STOP_WAIT_S` to end, then report
    thread errors as before. Outside the alarm's handler: the main thread holds none of the
    test's locks here, which those threads may need to end."""
    stopped, item._unit_stopped = getattr(item, "_unit_stopped", []), []
    deadline = time.monotonic() + STOP_WAIT_S
    for thread in stopped:
        thread.join(max(0.0, deadline - time.monotonic()))
    if threading.excepthook is _quiet_excepthook and not any(t.is_alive() for t in stopped):
        threading.excepthook = _quiet_excepthook.__defaults__[0]


def _in_phase(item):
    """The alarm's handler during a test phase; between phases the alarm is ignored (pytest's own
    code runs there: reporting a failure, say)."""
    handler = getattr(item, "_unit_alarm", None)
    if handler is not None:
        signal.signal(signal.SIGALRM, handler)
    try:
        return (yield)
    finally:
        if handler is not None:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            _await_stopped(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _in_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _in_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _in_phase(item))
