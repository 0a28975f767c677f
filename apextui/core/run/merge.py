"""Rank 0's view of a data-parallel run: every rank's timed intervals merged into one stream.

A data-parallel step is as slow as its slowest rank (the gradient all-reduce waits for it), so a merged
interval's `ms` is the slowest rank's, with every rank's time, the slowest rank and the spread alongside.
An interval is merged once every rank has timed it (the ranks agree on the blocks, distributed.Coordinator);
the statistics, the verdicts and the scaling efficiency read the merged `ms`. No torch, no Textual.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from ..measure.compare import Timing, compare
from ..measure.details import Distributed, RankOutcome, ScalingBaseline
from ..measure.stats import StepStats
from ..measure.summary import Summary
from .snapshot import FinalStatus, Snapshot
from .timing import StepRecord

# markers of an error that a rank got *because* another one failed (a collective that broke or timed out):
# such an error is listed after the errors of the ranks that failed by themselves
_KNOCK_ON = ("gloo", "nccl", "connection", "timed out", "timeout", "collective", "peer", "socket")


@dataclass(frozen=True)
class MergedRecord(StepRecord):
    """One interval of every rank: `ms` is the slowest rank's (the step's real time)."""

    rank_ms: tuple[float, ...] = ()
    slowest_rank: int = 0
    throughput: float | None = None  # every rank's units a second: units_per_step x ranks / the slowest ms

    @property
    def spread_ms(self) -> float:
        return max(self.rank_ms) - min(self.rank_ms) if self.rank_ms else 0.0


def to_row(rec: StepRecord) -> list[Any]:
    """A record as a JSON row for the store (distributed.Channel)."""
    return [rec.step, rec.steps, rec.ms, rec.loss, rec.opt_ms, rec.loss_scale]


def from_row(row: Sequence[Any]) -> StepRecord:
    step, steps, ms, loss, opt_ms, scale = row
    return StepRecord(step=int(step), ms=float(ms), loss=loss, opt_ms=opt_ms, loss_scale=scale, steps=int(steps))


@dataclass(frozen=True)
class Baseline:
    """The single-process run a data-parallel run's scaling efficiency is measured against (`--baseline-json`): its
    summary, and the file it was read from."""

    summary: Summary
    source: str


@dataclass(frozen=True)
class RankEnd:
    """How one rank's run ended, as it told rank 0 (or as rank 0 found it, when it never did)."""

    rank: int
    status: FinalStatus
    error: str | None = None
    steps_done: int = 0


def overall(ends: Sequence[RankEnd]) -> tuple[FinalStatus, str | None]:
    """The run's status and error from every rank's: failed if any rank failed (each failed rank's error,
    prefixed with its rank, the ranks that failed by themselves first), else stopped if any stopped."""
    failed = [e for e in ends if e.status == "failed"]
    if failed:
        def knock_on(e: RankEnd) -> bool:
            return any(m in (e.error or "").lower() for m in _KNOCK_ON)

        ordered = sorted(failed, key=lambda e: (knock_on(e), e.rank))
        return "failed", "; ".join(f"rank {e.rank}: {e.error or 'failed'}" for e in ordered)
    stopped = [e for e in ends if e.status == "stopped"]
    if stopped:
        return "stopped", stopped[0].error
    return "ok", None


class Merger:
    """Collects each rank's intervals and hands out the merged ones, in step order, once every rank has them."""

    def __init__(self, world_size: int, warmup: int) -> None:
        self.world_size, self.warmup = world_size, warmup
        self._pending: list[dict[tuple[int, int], StepRecord]] = [{} for _ in range(world_size)]
        self.stats = StepStats(warmup)
        self.rank_stats = [StepStats(warmup) for _ in range(world_size)]
        self._spreads: list[float] = []
        self.slowest_counts = [0] * world_size
        self._done = 0
        self.units_per_step = 0  # every rank's together, once the run's info is known (0: unknown)

    @property
    def done(self) -> int:
        """Steps merged so far (every rank has timed them)."""
        return self._done

    def add(self, rank: int, records: Sequence[StepRecord]) -> None:
        for rec in records:
            self._pending[rank][(rec.step, rec.steps)] = rec

    def merged(self) -> tuple[MergedRecord, ...]:
        """The intervals every rank has timed and that were not handed out yet, in step order."""
        common = set(self._pending[0])
        for other in self._pending[1:]:
            common &= set(other)
        out = []
        for key in sorted(common):
            recs = [p.pop(key) for p in self._pending]
            times = tuple(r.ms for r in recs)
            slowest = max(range(self.world_size), key=lambda r: times[r])
            base = recs[0]  # rank 0's loss, optimizer time and loss scale
            rec = MergedRecord(step=base.step, ms=times[slowest], loss=base.loss, opt_ms=base.opt_ms,
                               loss_scale=base.loss_scale, steps=base.steps, rank_ms=times, slowest_rank=slowest,
                               throughput=self.units_per_step * 1000.0 / times[slowest]
                               if self.units_per_step and times[slowest] > 0 else None)
            self.stats.add(rec.ms, rec.steps)
            for r, ms in enumerate(times):
                self.rank_stats[r].add(ms, rec.steps)
            self._done += rec.steps
            if self._done > self.warmup:
                self._spreads.append(rec.spread_ms)
                self.slowest_counts[slowest] += 1
            out.append(rec)
        return tuple(out)

    def distributed(self, backend: str, units_per_step: int, ends: Sequence[RankEnd],
                    baseline: Baseline | None) -> Distributed:
        """The `distributed` record of the `end` summary (docs/json.md)."""
        measured = sum(self.slowest_counts)
        st = self.stats.read()
        per_gpu = st.throughput(units_per_step) / self.world_size if st is not None else None
        ranks = []
        for r in range(self.world_size):
            end = next((e for e in ends if e.rank == r), None)
            rs = self.rank_stats[r].read()
            ranks.append(RankOutcome(r if end is None else end.rank, end.status if end else None,
                                     end.error if end else None, end.steps_done if end else None,
                                     round(rs.median_ms, 4) if rs else None))
        efficiency = None
        mine = st.timing if st is not None else None
        base = baseline.summary.timing if baseline is not None else None
        if mine is not None and base is not None:
            # weak scaling: the same per-GPU batch, so throughput(N) / (N x throughput(1)) = ms(1) / ms(N)
            efficiency = compare(mine, base)
        return Distributed(
            world_size=self.world_size, backend=backend, ranks=tuple(ranks),
            spread_median_ms=round(statistics.median(self._spreads), 4) if self._spreads else None,
            slowest_rank_share={str(r): round(c / measured, 4) for r, c in enumerate(self.slowest_counts)}
            if measured else None,
            throughput_per_gpu=round(per_gpu, 1) if per_gpu is not None else None,
            baseline=_baseline_fields(baseline, base), scaling_efficiency=efficiency)


def _baseline_fields(baseline: Baseline | None, timing: Timing | None) -> ScalingBaseline | None:
    if baseline is None:
        return None
    return ScalingBaseline(timing.median_ms if timing else None, timing.low_ms if timing else None,
                           timing.high_ms if timing else None, baseline.source)


def merged_snapshot(local: Snapshot, merger: Merger, new: tuple[MergedRecord, ...], world_size: int,
                    status: Any = None, error: str | None = None) -> Snapshot:
    """Rank 0's snapshot with the merged intervals, statistics and aggregate throughput (all ranks' units)."""
    info = local.info
    if info is not None:
        info = dataclasses.replace(info, units_per_step=info.units_per_step * world_size)
    st = merger.stats.read(samples=status is not None)  # the final merged view keeps its step times
    return dataclasses.replace(
        local, info=info, new_steps=new, stats=st,
        throughput=st.throughput(info.units_per_step) if st and info else None,
        status=status if status is not None else local.status, error=error if status is not None else local.error,
        steps_done=merger.done, analysis=None,
    )


__all__ = ["Baseline", "MergedRecord", "Merger", "RankEnd", "from_row", "merged_snapshot", "overall", "to_row"]
