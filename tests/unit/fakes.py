"""Test doubles shared by the unit tests (no sockets, no real time)."""

from __future__ import annotations

import threading


class FakeClock:
    """A :class:`spark_kafka_sink.clock.Clock` that moves only when told to.

    Wall and monotonic time advance together. ``advance(ms)`` and ``sleep(seconds)`` (the
    signature of :func:`time.sleep`, so it can stand in for it) may be called from any thread.
    """

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 1_000_000):
        self._lock = threading.Lock()
        self._wall_ns = wall_ms * 1_000_000
        self._monotonic_ns = monotonic_ms * 1_000_000

    def now_ms(self) -> int:
        return self._wall_ns // 1_000_000

    def now_ns(self) -> int:
        return self._wall_ns

    def monotonic_ms(self) -> int:
        return self._monotonic_ns // 1_000_000

    def monotonic_ns(self) -> int:
        return self._monotonic_ns

    def advance(self, ms: float) -> None:
        """Move both clocks forward by ``ms`` milliseconds (fractions allowed)."""
        self.advance_ns(round(ms * 1_000_000))

    def advance_ns(self, ns: int) -> None:
        if ns < 0:
            raise ValueError(f"a clock does not go backwards ({ns} ns)")
        with self._lock:
            self._wall_ns += ns
            self._monotonic_ns += ns

    def sleep(self, seconds: float) -> None:
        """Like :func:`time.sleep`, but only moves the fake time, at once."""
        self.advance(seconds * 1000)

    def __repr__(self) -> str:
        return f"FakeClock(monotonic_ms={self.monotonic_ms()})"
