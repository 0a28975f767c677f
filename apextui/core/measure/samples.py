"""A run's step times kept, so that what is said of it (its median, the median's interval, its percentiles) is
computed from them, and several runs of one configuration pool their step times rather than their statistics.

Why: a run's summary used to keep only statistics, so two repeats could only be merged by their medians and the
hull of their intervals (the median of two medians is no median of the steps). torch.utils.benchmark's `Measurement`
keeps its raw times for the same reason. A run's times are kept whole up to `SKETCH_SIZE` of them; beyond, as that
many order statistics at equal steps of rank (a quantile sketch): the median and any percentile read from it lie
within half a step of rank of the exact ones, and its `count` keeps how many intervals it stands for. The sketch is
small on purpose: a results file keeps every saved run's, and a history of thousands of runs must still load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .compare import Timing

SKETCH_SIZE = 128  # step times kept whole; beyond, this many order statistics at equal steps of rank
MIN_SKETCH = 64  # a file's sketch standing for more times than it holds has at least this many (else it is no sketch)
EXACT_STEPS = 2**16  # measured steps a run's statistics keep exactly; beyond, a uniform reservoir of this many
Z_95 = 1.96


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


def median_interval(sorted_values: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval for the median of already sorted values: the order
    statistics whose ranks lie z * sqrt(n) / 2 either side of the middle (the binomial(n, 1/2) count of
    values below the median, in its normal approximation). It assumes independent values, which is why
    short steps are timed in blocks (`timing.py`): the means of blocks of several ms are close to
    independent where single 0.2 ms steps are not. With fewer than 6 values it is the whole range."""
    n = len(sorted_values)
    if not n:
        raise ValueError("median interval of no values")
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor((n - 1) / 2 - half))
    hi = min(n - 1, math.ceil((n - 1) / 2 + half))
    return sorted_values[lo], sorted_values[hi]


@dataclass(frozen=True)
class Samples:
    """A run's timed intervals in ms (a step, or a block's per-step mean), sorted: all of them (`exact`), or
    `SKETCH_SIZE` order statistics at equal steps of rank; `count`: how many intervals they stand for; `steps`: how
    many measured steps (0 when made: as many as intervals), which is what a run weighs when runs are pooled."""

    values: tuple[float, ...]
    count: int
    steps: int = 0

    def __post_init__(self) -> None:
        v = self.values
        if not v:
            raise ValueError("samples of no values")
        if self.count < len(v):
            raise ValueError(f"{len(v)} values cannot stand for {self.count} intervals")
        if not self.steps:  # as many steps as intervals: each step timed alone
            object.__setattr__(self, "steps", self.count)
        if self.steps < self.count:
            raise ValueError(f"{self.count} intervals cannot hold {self.steps} steps")
        if not all(math.isfinite(x) and x > 0 for x in v) or any(a > b for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("samples must be positive finite ms, sorted")

    @classmethod
    def of(cls, sorted_values: Sequence[float], count: int | None = None, steps: int = 0) -> Samples:
        """From already sorted step times; `count`: the intervals they stand for where they are themselves a uniform
        sample of more (`StepStats`' reservoir), else their number; `steps`: the measured steps they cover (blocks
        of short steps are one interval each)."""
        n = len(sorted_values)
        count = n if count is None else max(count, n)
        if n <= SKETCH_SIZE:
            return cls(tuple(float(x) for x in sorted_values), count, steps)
        k = SKETCH_SIZE
        return cls(tuple(float(sorted_values[round(i * (n - 1) / (k - 1))]) for i in range(k)), count, steps)

    @property
    def exact(self) -> bool:
        return len(self.values) == self.count

    def percentile(self, q: float) -> float:
        return percentile(self.values, q)

    @property
    def median(self) -> float:
        return self.percentile(50)

    def median_interval(self) -> tuple[float, float]:
        """The median's 95 % interval (`median_interval`): its ranks come from the times the sketch was made of
        (`count`, or the `EXACT_STEPS` a longer run's statistics keep as a uniform sample), read from the sketch at
        the same fraction of rank where the times are not all kept."""
        if self.exact:
            return median_interval(self.values)
        n = min(self.count, EXACT_STEPS)
        half = Z_95 * math.sqrt(n) / 2
        lo = max(0, math.floor((n - 1) / 2 - half))
        hi = min(n - 1, math.ceil((n - 1) / 2 + half))
        return self.percentile(100 * lo / (n - 1)), self.percentile(100 * hi / (n - 1))

    @property
    def timing(self) -> Timing:
        """What the noise rule reads of these times: their median and its interval, with the times themselves."""
        low, high = self.median_interval()
        return Timing(self.median, low, high, n=self.count, samples=self)

    @classmethod
    def pool(cls, parts: Sequence[Samples]) -> Samples:
        """Every part's times together, each part weighing the measured steps it stands for (two runs of 70 steps
        weigh alike, though one timed them in 10 blocks and the other in 18: an H100's optimizer preset did): whole
        where every part is, each interval covers as many steps in every part, and they fit in `SKETCH_SIZE`; else
        order statistics at equal steps of the pooled step rank."""
        if not parts:
            raise ValueError("pooling no samples")
        count, steps = sum(p.count for p in parts), sum(p.steps for p in parts)
        even = len({p.steps / p.count for p in parts}) == 1
        if even and all(p.exact for p in parts) and count <= SKETCH_SIZE:
            return cls(tuple(sorted(x for p in parts for x in p.values)), count, steps)
        weighted = sorted((x, p.steps / len(p.values)) for p in parts for x in p.values)
        k = min(SKETCH_SIZE, count)
        picked, i, seen = [], 0, 0.0
        for j in range(k):
            # the pooled rank of the j-th order statistic, in steps; the value whose steps hold it is the nearest one
            # (as `of` picks), each value holding its weight's steps from `seen` on
            rank = (j * (steps - 1) / (k - 1) if k > 1 else 0.0) + 0.5 * steps / count
            while i < len(weighted) - 1 and seen + weighted[i][1] <= rank:
                seen += weighted[i][1]
                i += 1
            picked.append(weighted[i][0])
        return cls(tuple(picked), count, steps)

    def to_dict(self) -> dict[str, Any]:
        """The `end` line's `samples` (docs/json.md): the counts, and the times in ms to 4 decimals."""
        return {"count": self.count, "steps": self.steps, "ms": [round(x, 4) for x in self.values]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Samples | None:
        """The samples a file holds; None where they are missing or malformed (an older or foreign file)."""
        ms, count, steps = d.get("ms"), d.get("count"), d.get("steps", 0)
        if not isinstance(ms, list) or not isinstance(count, int) or isinstance(count, bool):
            return None
        if not isinstance(steps, int) or isinstance(steps, bool):
            return None
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ms):
            return None
        if count != len(ms) and len(ms) < MIN_SKETCH:  # a handful of values claiming many: no sketch of them
            return None
        try:
            return cls(tuple(float(x) for x in ms), count, steps)
        except ValueError:
            return None


__all__ = ["EXACT_STEPS", "SKETCH_SIZE", "Samples", "median_interval", "percentile"]
