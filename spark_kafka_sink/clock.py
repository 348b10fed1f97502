"""The one place that reads the real clock.

Everything else takes time as an argument (``now_ms``) or holds a :class:`Clock`, so tests drive a
fake one (``tests/unit/fakes.py``) and step through linger, backoff and expiry without sleeping.

Two kinds of time, never mixed:

- ``now_ms()``: wall-clock milliseconds since the Unix epoch. Only for record timestamps, which
  the broker stores and readers interpret.
- ``monotonic_ms()`` / ``monotonic_ns()``: a clock that never goes backwards, with an arbitrary
  origin. For every timeout, deadline, linger, backoff and latency. All ``now_ms`` arguments in
  ``producer/`` are monotonic milliseconds.

Blocking primitives (``threading.Condition.wait(timeout)``) still sleep in real time; code that
blocks uses the clock only to account for the time spent, and decides "timed out" from what the
primitive returned.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall and monotonic time."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps only)."""

    def now_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch (``now_ms`` without rounding: a caller on a
        hot path divides it itself)."""

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (timeouts, linger, backoff)."""

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (latencies and wait-time metrics)."""


class SystemClock:
    """The real clock: :func:`time.time_ns` and :func:`time.monotonic_ns`."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    # the C function itself, not a method around it: send() reads it per record
    now_ns = staticmethod(time.time_ns)

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def __repr__(self) -> str:
        return "SYSTEM_CLOCK"


SYSTEM_CLOCK = SystemClock()
"""The process-wide real clock; the default wherever a ``clock`` is optional."""
