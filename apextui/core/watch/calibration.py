"""How a watched run's blocks are sized: from its warm-up's steps once, then to the steps' time at each hand-over.

Why apart from the hook: it is the one decision about the clock's blocks (`run/timing.py`'s schedule), made from
the finished intervals only (no synchronisation), and it starts again whenever the hook starts a clock (the host's,
then CUDA events' once CUDA is in use).
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from ..run.timing import StepRecord, block_steps

SHRINK = 4.0  # blocks lasting this many block targets are made shorter again (the steps became slower)


class Calibration:
    """One clock's block sizing. Until `done`: the warm-up's second half is timed step by step (`costing`: the clock's
    own cost is measured on those steps) and its median sets the block size (`BlockSchedule.calibrate`); after it, each
    hand-over's intervals resize the blocks (`take`)."""

    def __init__(self, warmup: int, first_step: int) -> None:
        self.warmup, self.first_step = warmup, first_step  # the step the clock started at
        self.done = False
        self.costs: list[float] = []  # seconds the clock's end of a step took, on the costed steps
        self._ms: list[float] = []

    def until(self) -> int:
        """The last step of the calibration window: the warm-up's end, and at least the second timed step (the
        first holds the monitor's own start): with warmup 0 no step was in the window, the blocks were never
        sized, and every step was its own interval and harvested the clock."""
        return self.first_step + max(2, self.warmup)

    def costing(self, n: int) -> bool:
        return not self.done and self.first_step + self.warmup // 2 < n <= self.first_step + self.warmup

    def take(self, records: list[StepRecord], schedule: Any) -> None:
        """A hand-over's intervals: the warm-up's size the blocks once they are all in, later ones resize them."""
        if self.done:
            _resize(records, schedule)
            return
        lo, hi = self.first_step + max(2, self.warmup) // 2, self.until()
        self._ms += [r.ms for r in records if lo < r.step <= hi]
        if records[-1].step < hi or not self._ms:
            return
        schedule.costs_s = list(self.costs)
        schedule.calibrate(statistics.median(self._ms))
        self.done, self._ms = True, []


def _resize(records: list[StepRecord], schedule: Any) -> None:
    """After the warm-up the block size keeps following the steps' time, from each hand-over's intervals: the blocks
    grow when the steps became faster (a warm-up slower than the steps after it left blocks of one step: a record and
    a line a step, 18,700 lines a second) and shrink when the steps became much slower (a block of minutes shows
    nothing for minutes). Between the two a block stays as it is (no churn)."""
    per_step = statistics.median(r.ms for r in records)
    block = block_steps(per_step, sys.maxsize, schedule.target_ms)
    if block > schedule.block or (block < schedule.block and statistics.median(r.ms * r.steps for r in records)
                                  > SHRINK * schedule.target_ms):
        schedule.block = block


__all__ = ["Calibration", "SHRINK"]
