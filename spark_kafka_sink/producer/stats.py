"""Generic metric stats, as in Java's ``org.apache.kafka.common.metrics.stats``, and the sensor
that records into several of them at once. Not thread safe on their own: the registry that owns
them (:class:`~.metrics.ProducerMetrics`) guards them with its lock.

Stats, as in Java's ``org.apache.kafka.common.metrics.stats``:

- ``Total``: a cumulative sum, from 0 (``*-total``).
- ``Avg`` / ``Max`` / ``Rate``: over a sampled window, Java's defaults ``metrics.num.samples``=2
  × ``metrics.sample.window.ms``=30 s. A sample opens at its first record and is complete
  ``window_ms`` later; the next record then starts the next sample (reusing the oldest slot).
  A sample whose start is ``samples × window_ms`` old is forgotten when measured.
  ``Avg`` and ``Max`` with no samples report NaN, as Java does. ``Rate`` is the windowed sum
  per second over the elapsed window, counted as at least ``(samples - 1)`` full windows
  (Java's ``Rate.windowSize``), so a producer that just started reports a low rate, not a spike.
- Gauges: callables of ``now_ms``, evaluated at snapshot time, outside the metrics lock.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

DEFAULT_SAMPLES = 2
DEFAULT_WINDOW_MS = 30_000
NAN = math.nan

Gauge = Callable[[int], float]
"""A gauge: ``now_ms`` (monotonic) to its current value."""


# --- stats ------------------------------------------------------------------------------------

class Total:
    """A cumulative sum (Java's ``CumulativeSum``), from 0."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        self.value += value

    def measure(self, now_ms: int) -> float:
        return self.value


class _Sample:
    __slots__ = ("start_ms", "total", "count", "max")

    def __init__(self, start_ms: int):
        self.reset(start_ms)

    def reset(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.total = 0.0
        self.count = 0
        self.max = -math.inf


class _Sampled:
    """Java's ``SampledStat``: a ring of ``samples`` windows of ``window_ms`` each."""

    __slots__ = ("_samples", "_n", "_window_ms", "_current")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        if samples < 1 or window_ms < 1:
            raise ValueError(f"need samples >= 1 and window_ms >= 1, got {samples}, {window_ms}")
        self._samples: list[_Sample] = []
        self._n = samples
        self._window_ms = window_ms
        self._current = 0

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        """Add ``value``, standing for ``count`` events (an Avg then weighs it ``count`` times)."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self._window_ms:
            self._current = (self._current + 1) % self._n
            if self._current == len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.total += value
        sample.count += count
        if value > sample.max:
            sample.max = value

    def _live(self, now_ms: int) -> list[_Sample]:
        """The samples after forgetting those ``samples × window_ms`` old (reset to ``now_ms``)."""
        expire_ms = self._n * self._window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_ms:
                sample.reset(now_ms)
        return self._samples

    def parts(self, now_ms: int) -> tuple[float, int]:
        """(sum, event count) over the live samples."""
        samples = self._live(now_ms)
        return sum(s.total for s in samples), sum(s.count for s in samples)


class Avg(_Sampled):
    """The windowed mean; NaN without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        total, count = self.parts(now_ms)
        return total / count if count else NAN


class Max(_Sampled):
    """The windowed maximum; NaN without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        samples = self._live(now_ms)
        if not any(s.count for s in samples):
            return NAN
        return float(max(s.max for s in samples))


class Rate(_Sampled):
    """The windowed sum per second (Java's ``Rate`` over a ``WindowedSum``); 0 without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        total, _ = self.parts(now_ms)
        return total * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Elapsed time since the oldest sample, at least ``samples - 1`` windows and 1 ms."""
        samples = self._live(now_ms)
        oldest = min((s.start_ms for s in samples), default=now_ms)
        elapsed = now_ms - oldest
        missing = (self._n - 1) - elapsed // self._window_ms
        if missing > 0:
            elapsed += missing * self._window_ms
        return max(elapsed, 1)


Stat = Total | Avg | Max | Rate


class Sensor:
    """Named stats recorded together (Java's ``Sensor``): one ``record`` feeds them all."""

    __slots__ = ("stats",)

    def __init__(self, stats: Mapping[str, Stat]):
        self.stats = dict(stats)

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        for stat in self.stats.values():
            stat.record(value, now_ms, count)

    def measure_into(self, now_ms: int, values: dict[str, float],
                     averages: dict[str, tuple[float, int]], prefix: str = "") -> None:
        """Write each stat's value (and each Avg's (sum, count), under ``prefix + name``)."""
        for name, stat in self.stats.items():
            if isinstance(stat, Avg):
                total, count = stat.parts(now_ms)
                averages[prefix + name] = (total, count)
                values[name] = total / count if count else NAN
            else:
                values[name] = stat.measure(now_ms)


# --- the producer's sensors ------------------------------------------------------------------
