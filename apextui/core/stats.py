"""Step-time statistics: warm-up exclusion, percentiles, throughput."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Iterable, Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linear interpolation
    between closest ranks (NumPy's default method)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True)
class Stats:
    """Summary of the measured (post-warm-up) steps."""

    count: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float

    def throughput(self, units_per_step: int) -> float:
        """Units (samples or tokens) per second at the median step time."""
        return units_per_step * 1000.0 / self.median_ms if self.median_ms > 0 else 0.0


class StepStats:
    """Accumulates step times, ignores the first `warmup` steps, keeps them sorted
    so that percentiles cost O(1) however long the run."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self._seen = 0
        self._sorted: list[float] = []
        self._total = 0.0

    def add(self, ms: float) -> None:
        """Record the next step's time in milliseconds."""
        self._seen += 1
        if self._seen > self.warmup:
            bisect.insort(self._sorted, ms)
            self._total += ms

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(v)

    def summary(self) -> Stats | None:
        """Statistics of the measured steps, or None while still warming up."""
        s = self._sorted
        if not s:
            return None
        return Stats(
            count=len(s),
            median_ms=percentile(s, 50),
            p10_ms=percentile(s, 10),
            p90_ms=percentile(s, 90),
            mean_ms=self._total / len(s),
            min_ms=s[0],
            max_ms=s[-1],
        )


def summarize(step_ms: Sequence[float], warmup: int) -> Stats | None:
    """Statistics of `step_ms` without its first `warmup` entries."""
    acc = StepStats(warmup)
    acc.extend(step_ms)
    return acc.summary()
