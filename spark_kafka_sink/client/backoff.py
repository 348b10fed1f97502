"""ExponentialBackoff: the delay after the n-th failure, as Java's ``ExponentialBackoff``.

    backoff(attempts) = min(initial * 2 ** min(attempts, exp_max) * uniform(1 - jitter, 1 + jitter),
                            max)

where ``exp_max`` is the exponent at which ``initial * 2 ** exp`` reaches ``max``: the growth stops
at the (pre-jitter) maximum and the jitter never takes the result above it. When ``max`` is not
above ``initial`` the delay is the constant ``max``. Used for reconnect backoff, the connection
setup timeout and the metadata refresh backoff. The random source is injectable so tests can pin
the jitter.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Protocol


class UniformSource(Protocol):
    """What the backoff needs from :class:`random.Random`."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True)
class ExponentialBackoff:
    """An immutable backoff policy; ``backoff(attempts)`` gives one jittered delay in ms."""

    initial_ms: int
    max_ms: int
    multiplier: int = 2
    jitter: float = 0.2
    rng: UniformSource = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")
        if self.multiplier < 2:
            raise ValueError(f"multiplier must be at least 2, got {self.multiplier}")

    @property
    def _base(self) -> int:
        return min(self.initial_ms, self.max_ms)

    @property
    def _exp_max(self) -> float:
        if self.max_ms <= self._base:
            return 0.0
        return math.log(self.max_ms / max(self._base, 1)) / math.log(self.multiplier)

    def backoff(self, attempts: int) -> int:
        """The delay after ``attempts`` earlier failures (0 for the first wait)."""
        exp_max = self._exp_max
        if exp_max == 0.0:
            return self._base
        term = self._base * self.multiplier ** min(attempts, exp_max)
        factor = self.rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(int(factor * term), self.max_ms)
