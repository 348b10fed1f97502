"""The soak's pass criteria, as pure functions of the samples (no Spark, no /proc): see bench/soak.py.

- **RSS within ±tolerance.** The baseline is the median of the first ``baseline_samples``
  post-warm-up samples. Every post-warm-up sample, those of the baseline included, must lie
  within ``[baseline × (1 - tolerance), baseline × (1 + tolerance)]``.
- **Flat counts** (threads, fds, sockets). The baseline is the same median. No post-warm-up
  sample may exceed it by more than ``slack``. Going down is fine (a producer closed by eviction
  takes its thread and sockets with it).
- **Capped counts.** A count that its owner bounds by design (a thread pool's maximum size) never
  exceeds that cap.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Check:
    """One criterion over one series, ready for the summary table."""

    name: str
    passed: bool
    baseline: float | None
    low: float | None
    """Smallest post-warm-up sample."""
    high: float | None
    """Largest post-warm-up sample."""
    limit: str
    """The allowed range, in words."""
    samples: int = 0
    detail: str = ""


def _too_few(name: str, values: Sequence[float], baseline_samples: int, limit: str) -> Check | None:
    if len(values) > baseline_samples:
        return None
    return Check(name, False, None, min(values, default=None), max(values, default=None), limit, len(values),
                 f"only {len(values)} post-warm-up sample(s); needs more than {baseline_samples}")


def rss_check(name: str, values_kb: Sequence[float], *, baseline_samples: int, tolerance: float,
              floor_samples: int | None = None) -> Check:
    """RSS (KiB) stays within ±``tolerance`` of the baseline median. ``floor_samples``: the lower
    bound holds for the first that many values only (None: for all); the upper one for all."""
    limit = f"baseline ±{tolerance:.0%}"
    if (short := _too_few(name, values_kb, baseline_samples, limit)) is not None:
        return short
    baseline = statistics.median(values_kb[:baseline_samples])
    floored = values_kb if floor_samples is None else values_kb[:max(floor_samples, baseline_samples)]
    low, high = min(values_kb), max(values_kb)
    lo_limit, hi_limit = baseline * (1 - tolerance), baseline * (1 + tolerance)
    passed = (high <= hi_limit + 1e-9) and min(floored) >= lo_limit - 1e-9
    detail = (f"range {_pct(low, baseline)} .. {_pct(high, baseline)} of the baseline; "
              f"allowed {lo_limit / 1024:.1f} .. {hi_limit / 1024:.1f} MiB")
    if len(floored) < len(values_kb):
        detail += (f" (the lower bound for the first {len(floored)} sample(s) only, "
                   f"lowest {min(floored) / 1024:.1f} MiB)")
    return Check(name, passed, baseline, low, high, limit, len(values_kb), detail)


def flat_check(name: str, values: Sequence[float], *, baseline_samples: int, slack: int) -> Check:
    """A count never exceeds the baseline median by more than ``slack``."""
    limit = f"≤ baseline +{slack}"
    if (short := _too_few(name, values, baseline_samples, limit)) is not None:
        return short
    baseline = statistics.median(values[:baseline_samples])
    low, high = min(values), max(values)
    passed = high <= baseline + slack
    detail = f"growth {high - baseline:+g}, last {values[-1]:g}"
    return Check(name, passed, baseline, low, high, limit, len(values), detail)


def cap_check(name: str, values: Sequence[float], *, cap: float) -> Check:
    """A count that its owner bounds itself (e.g. a thread pool's maximum size) never exceeds it."""
    limit = f"≤ {cap:g} (fixed cap)"
    if not values:
        return Check(name, False, None, None, None, limit, 0, "no samples")
    low, high = min(values), max(values)
    return Check(name, high <= cap, None, low, high, limit, len(values), f"last {values[-1]:g}")


def _pct(value: float, baseline: float) -> str:
    return f"{value / baseline:.1%}" if baseline else "n/a"
