"""The overhead measurements' shared parts: the geometric mean of ratios with its bootstrap interval, and a
clock wrapper that accounts what a run's per-step clock calls cost the training thread."""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any


class TimedClock:
    """Wraps a run's clock: adds up the time its per-step calls take on the training thread, and reads that
    thread's CPU time from the clock's start to the final harvest (the steps alone: no Runner setup)."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self.seconds = 0.0
        self.steps_cpu_s = math.nan

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clock, name)

    def start(self) -> None:
        self._cpu0 = time.thread_time()
        self._clock.start()

    def end_step(self, *args: Any) -> None:
        t0 = time.perf_counter()
        self._clock.end_step(*args)
        self.seconds += time.perf_counter() - t0

    def harvest(self, wait: bool = False) -> Any:
        t0 = time.perf_counter()
        out = self._clock.harvest(wait)
        if not wait:  # the final harvest waits for the GPU: not a per-step cost
            self.seconds += time.perf_counter() - t0
        else:
            self.steps_cpu_s = time.thread_time() - self._cpu0
        return out


def geomean_ci(ratios: list[float], n: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean of the ratios and its 95 % bootstrap interval. (An arithmetic mean of ratios is
    biased upwards by about their variance: with rounds 10 % apart, +1 % from noise alone.)"""
    logs = [math.log(r) for r in ratios]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(n))
    return math.exp(statistics.fmean(logs)), math.exp(means[int(0.025 * n)]), math.exp(means[int(0.975 * n) - 1])
