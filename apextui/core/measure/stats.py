"""Step-time statistics: warm-up exclusion, percentiles, throughput; and `Downsampled`, a whole series in bounded
room (the loss curve, a watched run's metrics)."""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from typing import Iterable

from .compare import Timing
from .samples import EXACT_STEPS, Samples, median_interval, percentile


@dataclass(frozen=True)
class Stats:
    """Summary of the measured (post-warm-up) steps.

    Each value is one timed interval: a single step, or the per-step mean of a block of steps (short steps
    are timed in blocks, `timing.py`). `count` is the number of timed intervals, `steps` the steps they
    cover; `median_low_ms`..`median_high_ms` is the median's 95 % interval (`median_interval`)."""

    count: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    steps: int = 0
    median_low_ms: float = math.nan
    median_high_ms: float = math.nan
    block_steps: int = 1  # steps in the longest timed interval: > 1 when short steps were timed in blocks
    # the times these statistics were computed from (`StepStats.read(samples=True)`: a run's last statistics)
    samples: Samples | None = field(default=None, compare=False, repr=False)

    @property
    def timing(self) -> Timing | None:
        """What the noise rule reads of these statistics (`Timing.read`), unrounded."""
        return Timing.read(self.median_ms, self.median_low_ms, self.median_high_ms, self.count, self.samples)

    def throughput(self, units_per_step: int) -> float:
        """Units (samples or tokens) per second at the median step time: the typical step's rate."""
        return units_per_step * 1000.0 / self.median_ms if self.median_ms > 0 else 0.0

    def wall_throughput(self, units_per_step: int) -> float:
        """Units per second over the measured steps' whole time (their mean): the rate a trainer's own samples/s
        counts, slow steps (an evaluation, a checkpoint, a data stall) included, where the median leaves them out."""
        return units_per_step * 1000.0 / self.mean_ms if self.mean_ms > 0 else 0.0


class StepStats:
    """Accumulates step times, ignores the first `warmup` steps, keeps them sorted so that
    percentiles cost O(1) however long the run.

    Memory is bounded: at most `cap` (EXACT_STEPS, 65 536) values are kept, about 2 MiB. Up to `cap`
    measured steps every statistic is exact. Beyond, the kept values are a uniform random sample of all
    measured steps (reservoir sampling, Algorithm R, seeded so a run's statistics are reproducible):
    count, mean, min and max stay exact; median, p10 and p90 are those of the sample, whose rank error is
    about sqrt(q(1-q)/cap), i.e. within ±0.2 % of the distribution (one standard error) at the median.
    """

    def __init__(self, warmup: int, cap: int = EXACT_STEPS) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.warmup = warmup
        self.cap = cap
        self._seen = 0
        self._count = 0  # measured intervals (steps or blocks)
        self._steps = 0  # measured steps
        self._block = 1
        self._sorted: list[float] = []  # all measured values, or a uniform sample of `cap` of them
        self._total = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._rng = random.Random(0)

    @property
    def exact(self) -> bool:
        """True while every measured step is kept (percentiles are exact)."""
        return self._count <= self.cap

    def add(self, ms: float, steps: int = 1) -> None:
        """Record the next timed interval: `steps` steps (1, or a block) at `ms` milliseconds each.
        Warm-up is counted in steps; the clocks time warm-up steps one at a time."""
        self._seen += steps
        if self._seen <= self.warmup:
            return
        self._count += 1
        self._steps += steps
        self._block = max(self._block, steps)
        self._total += ms * steps
        self._min = min(self._min, ms)
        self._max = max(self._max, ms)
        s = self._sorted
        if len(s) < self.cap:
            bisect.insort(s, ms)
        elif self._rng.random() * self._count < self.cap:  # keep the n-th value with probability cap/n
            del s[self._rng.randrange(len(s))]  # ... in place of a uniformly chosen kept one
            bisect.insort(s, ms)

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(v)

    def __len__(self) -> int:
        """Values held in memory (at most `cap`)."""
        return len(self._sorted)

    def read(self, samples: bool = False) -> Stats | None:
        """Statistics of the measured steps so far, or None while still warming up; with `samples` (a run's last
        read) the times kept with them (`samples.Samples`: a copy, which every snapshot's read would not afford)."""
        s = self._sorted
        if not s:
            return None
        kept = Samples.of(s, self._count, self._steps) if samples else None
        low, high = median_interval(s)
        return Stats(
            count=self._count,
            median_ms=percentile(s, 50),
            p10_ms=percentile(s, 10),
            p90_ms=percentile(s, 90),
            mean_ms=self._total / self._steps,
            min_ms=self._min,
            max_ms=self._max,
            steps=self._steps,
            median_low_ms=low,
            median_high_ms=high,
            block_steps=self._block,
            samples=kept,
        )


class Downsampled:
    """A whole-series history of bounded size: when full, neighbours are averaged and the stride doubles. Why: a
    plot of a run's series shows it from its start (a window of the newest values cut a learning-rate schedule's
    start off), at a cost that never grows with the run."""

    def __init__(self, cap: int = 256) -> None:
        self.cap = max(2, cap - cap % 2)
        self.stride = 1
        self.values: list[float] = []
        self._acc = 0.0
        self._n = 0

    def add(self, value: float) -> None:
        self._acc += value
        self._n += 1
        if self._n < self.stride:
            return
        self.values.append(self._acc / self._n)
        self._acc, self._n = 0.0, 0
        if len(self.values) >= self.cap:
            v = self.values
            self.values = [(v[i] + v[i + 1]) / 2 for i in range(0, len(v) - 1, 2)]
            self.stride *= 2

    def snapshot(self) -> tuple[float, ...]:
        if self._n:
            return (*self.values, self._acc / self._n)
        return tuple(self.values)
