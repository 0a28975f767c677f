"""One rule for "faster", "slower" and "within noise", and for which run may be a baseline.

Why one module: the TUI's comparison table, `apextui advise`, `benchmarks/bench.py` and the saved results
each used to decide noise their own way, and on a busy machine they disagreed about the same pair of runs
(the table showed 18.96× where the advice said "within noise"). Here a speed-up carries the 95 % interval
that follows from the two medians' intervals (`stats.median_interval`), one rule reads it, and one
formatter shows it. No Textual and no torch: the CLI, the TUI and the benchmark scripts all import it.

What the rule reads of a run is its `Timing` (a median, its interval, how many values): a run's `Summary.timing`
(a finished run, a saved row, an advice's run) or `Stats.timing` (a run's live statistics), both `Timing.read`.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence, get_args

if TYPE_CHECKING:  # a summary derives its timing from `Timing.read`, and samples theirs: never needed at run time
    from .samples import Samples
    from .summary import Summary

NOISE_FLOOR = 0.02  # two medians closer than 2 % are never called different, however narrow their intervals
# an interval whose ends are further apart than this factor is no measurement: within noise, and shown without figures
# (a busy 2-core box gave "0.03-101x" and "0.51-36.9x")
UNMEASURABLE = 10.0
MIN_BASELINE_STEPS = 20  # a baseline's median needs this many measured steps: fewer are mostly noise
# The drift assumed between two single runs made one after another when no configuration has been run twice
# (nothing seen): a factor of 2 either way. The same preset run twice on a 2-core box at load 4-5 measured 65.3 and
# 36.6 ms (1.78x); only a difference far larger than that is called a difference on such evidence.
UNKNOWN_DRIFT = 1.0

Verdict = Literal["faster", "slower", "within_noise"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# What the interval holds besides each run's own noise: "runs" the timings' own intervals (repeats pooled by
# `timing_from_runs`, interleaved or not, or runs measured at one time); "drift_seen" the largest between-run drift
# seen here (`Drift`); "drift_unknown" single runs, one after another, no drift seen: `UNKNOWN_DRIFT` assumed;
# "paired" runs made side by side in interleaved rounds, compared round by round (`compare_paired`).
Basis = Literal["runs", "drift_seen", "drift_unknown", "paired"]
MIN_PAIRED_ROUNDS = 2  # one round's pair shows nothing of how the ratio moves with the host: no paired comparison
BASES: tuple[Basis, ...] = get_args(Basis)
SINGLE_RUNS_NOTE = "single runs, one after another: drift unknown"

NOISE_RULE = (f"a speed-up is within noise when its 95 % interval (baseline low / candidate high .. baseline "
              f"high / candidate low, from each median's interval) contains 1 or spans over {UNMEASURABLE:g}x, or "
              f"when the faster one is less than {NOISE_FLOOR:.0%} faster; with an interval unknown only the "
              f"{NOISE_FLOOR:.0%} floor applies; "
              f"a single run against another made before or after it has its interval widened by the largest "
              f"drift seen between two runs of one configuration here, or by a factor of {1 + UNKNOWN_DRIFT:g} "
              f"when none was run twice; two configurations run side by side in {MIN_PAIRED_ROUNDS} or more "
              f"interleaved rounds have as interval the hull of the rounds' own speed-ups and intervals instead")
BASELINE_RULE = (f"a baseline is a run that finished ok with at least {MIN_BASELINE_STEPS} measured steps; "
                 "a stopped, failed or short run is never one")


@dataclass(frozen=True)
class Timing:
    """A median ms/step and its 95 % interval (None when unknown, e.g. older result files: unknown is
    never taken as zero width); `n` values behind it (timed intervals), from `runs` runs; `samples`: the step times
    they were computed from (`samples.Samples`; None for a file written before runs kept them), which repeats pool."""

    median_ms: float
    low_ms: float | None = None
    high_ms: float | None = None
    n: int = 0
    runs: int = 1
    samples: Samples | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median_ms) and self.median_ms > 0):
            raise ValueError(f"a median must be a positive number of ms, got {self.median_ms!r}")
        if (self.low_ms is None) != (self.high_ms is None):
            raise ValueError("an interval needs both ends, or neither")
        if self.low_ms is not None and not 0 < self.low_ms <= self.median_ms <= self.high_ms:  # type: ignore[operator]
            raise ValueError(f"interval {self.low_ms}..{self.high_ms} does not hold the median {self.median_ms}")

    @property
    def known(self) -> bool:
        return self.low_ms is not None

    @classmethod
    def read(cls, median_ms: float | None, low_ms: float | None = None, high_ms: float | None = None,
             n: int = 0, samples: Samples | None = None) -> "Timing | None":
        """A run's timing from figures it reported (`Summary.timing`, `Stats.timing`); None without a usable median.
        A missing or inconsistent interval is unknown, never zero width."""
        median = positive(median_ms)
        if median is None:
            return None
        low, high = positive(low_ms), positive(high_ms)
        if low is None or high is None or not low <= median <= high:
            low = high = None
        return cls(median, low, high, n=n, samples=samples)


def positive(value: Any) -> float | None:
    """`value` as a float where it is a finite positive number (a usable median), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def timing_from_runs(timings: Iterable[Timing]) -> Timing | None:
    """Several repeats of one configuration: the median of their step times pooled (`Samples.pool`, each run
    weighing as many measured steps as it had), or of their medians where a run kept no times (an older file), and
    as interval the hull of the pooled median's interval and of the runs' intervals and medians, so the run-to-run
    spread is in it as well as each run's own noise (pooled times alone would hide a drift between the runs). One run
    without an interval makes the hull unknown (its median alone would pretend a zero-width interval)."""
    ts = list(timings)
    if not ts:
        return None
    if len(ts) == 1:
        return ts[0]
    parts = [t.samples for t in ts if t.samples is not None]
    # through the instance's class: samples.py imports this module, so this one never imports it
    pooled = type(parts[0]).pool(parts) if len(parts) == len(ts) else None
    medians = [t.median_ms for t in ts]
    median = pooled.median if pooled is not None else statistics.median(medians)
    low = high = None
    if all(t.known for t in ts):
        ends = [median, *medians, *pooled.median_interval()] if pooled is not None else [median, *medians]
        low = min(ends + [t.low_ms for t in ts if t.low_ms is not None])
        high = max(ends + [t.high_ms for t in ts if t.high_ms is not None])
    return Timing(median, low, high, n=sum(t.n for t in ts), runs=sum(t.runs for t in ts), samples=pooled)


@dataclass(frozen=True)
class Drift:
    """How far a configuration's median moved between its runs made one after another on this machine: the
    largest `max / min - 1` of the medians of any configuration run more than once (`ratio`; None when none was:
    drift unknown), over `configurations` such configurations. A single run's interval holds only the noise inside
    that run; the host's drift between runs (other work, clocks, a warming GPU) is this."""

    ratio: float | None = None
    configurations: int = 0

    @classmethod
    def of(cls, repeats: Iterable[Sequence[Timing]]) -> "Drift":
        """From each configuration's timings (one a run, in any order); configurations run once say nothing."""
        ratios = [max(t.median_ms for t in ts) / min(t.median_ms for t in ts) - 1 for ts in map(list, repeats)
                  if len(ts) >= 2]
        return cls(max(ratios), len(ratios)) if ratios else cls()

    @property
    def known(self) -> bool:
        return self.ratio is not None

    @property
    def factor(self) -> float:
        """What a single run's interval is widened by, both ways: 1 + the drift seen, or 1 + UNKNOWN_DRIFT."""
        return 1 + (self.ratio if self.ratio is not None else UNKNOWN_DRIFT)


@dataclass(frozen=True)
class Comparison:
    """A candidate against a baseline: `speedup` = baseline median / candidate median (> 1: the candidate
    is faster), its interval `low`..`high` (None when either timing's interval is unknown), the verdict, and what
    the interval holds (`basis`)."""

    speedup: float
    low: float | None
    high: float | None
    verdict: Verdict
    floor: float = NOISE_FLOOR
    basis: Basis = "runs"

    @classmethod
    def of(cls, speedup: float, low: float | None = None, high: float | None = None,
           floor: float = NOISE_FLOOR, basis: Basis = "runs") -> "Comparison":
        """The rule (NOISE_RULE) applied to a speed-up and its interval."""
        if low is None or high is None:
            low = high = None
        near = max(speedup, 1 / speedup) - 1 < floor  # symmetric: swapping the two never changes the verdict
        straddles = low is not None and low <= 1 <= high  # type: ignore[operator]
        unmeasurable = low is not None and high > UNMEASURABLE * low  # type: ignore[operator]
        verdict: Verdict = "within_noise" if near or straddles or unmeasurable else \
            ("faster" if speedup > 1 else "slower")
        return cls(speedup, low, high, verdict, floor, basis)

    @property
    def difference(self) -> float:
        """How much faster the faster of the two is: max(speedup, 1 / speedup) - 1."""
        return max(self.speedup, 1 / self.speedup) - 1

    @property
    def noise(self) -> float:
        """The largest `difference` that is still noise: the floor, or how far the interval reaches from
        the speed-up towards 1 (on the faster one's side), whichever is larger."""
        if self.low is None or self.high is None:
            return self.floor
        reach = self.speedup - self.low if self.speedup >= 1 else 1 / self.speedup - 1 / self.high
        return max(self.floor, reach)

    @property
    def within_noise(self) -> bool:
        return self.verdict == "within_noise"


RoundTimings = Mapping[int, Timing]  # one side's runs by the round of interleaved repeats each ran in


def compare(candidate: Timing, baseline: Timing, floor: float = NOISE_FLOOR, *, drift: Drift | None = None,
            rounds: tuple[RoundTimings, RoundTimings] | None = None) -> Comparison:
    """The candidate against the baseline: THE noise rule (NOISE_RULE), which every screen calls. The interval
    divides the ends of the two medians' intervals (conservative: both at their 95 % ends at once is less likely
    than either).

    `drift`: the timings come from runs made one after another on this machine, and this is the between-run drift
    seen here (`Drift.of`). Where either side is a single run (`Timing.runs == 1`), its interval holds nothing of
    that drift, so the speed-up's interval is widened by `drift.factor` both ways (`basis` "drift_seen", or
    "drift_unknown" when nothing was run twice: UNKNOWN_DRIFT). Two pooled repeats (`timing_from_runs`: the
    hull of every run) already hold their spread. None: the caller's timings already hold whatever drift there
    is (repeats pooled, or measured at one time, as a data-parallel run's ranks).

    `rounds`: (the candidate's, the baseline's) runs by interleaved round; where they share enough rounds the
    interval is the rounds' (`compare_paired`) instead, and `drift` plays no part."""
    paired = compare_paired(candidate, baseline, *rounds, floor=floor) if rounds is not None else None
    if paired is not None:
        return paired
    low = high = None
    if candidate.known and baseline.known:
        low = baseline.low_ms / candidate.high_ms  # type: ignore[operator]
        high = baseline.high_ms / candidate.low_ms  # type: ignore[operator]
    speedup = baseline.median_ms / candidate.median_ms
    basis: Basis = "runs"
    if drift is not None and min(candidate.runs, baseline.runs) < 2:
        basis = "drift_seen" if drift.known else "drift_unknown"
        if low is not None and high is not None:
            low, high = low / drift.factor, high * drift.factor
        else:  # no interval known (an old file): the drift alone
            low, high = speedup / drift.factor, speedup * drift.factor
    return Comparison.of(speedup, low, high, floor, basis)


def compare_paired(candidate: Timing, baseline: Timing, candidate_rounds: RoundTimings,
                   baseline_rounds: RoundTimings, floor: float = NOISE_FLOOR) -> Comparison | None:
    """The candidate against the baseline (their pooled timings: the speed-up is their medians' ratio, as `compare`'s)
    with its interval from runs made side by side: each side's runs by the round of interleaved repeats (ABBA) they
    ran in; the rounds both ran in, `MIN_PAIRED_ROUNDS` at least, else None (the caller's unpaired rule applies). Each
    round's speed-up has its interval from the two medians' (as `compare`); the interval is the hull of every round's
    interval and speed-up, and of the speed-up itself (basis "paired"). None where an interval is unknown.

    Why: on a host whose speed drifts (a host-bound ViT step moved by 1.8x between runs minutes apart on the H200,
    every process quiet), the unpaired rule pools each configuration's runs over the whole drift and calls a point
    that was faster in every round "within noise". The host's drift moves both runs of a round, and their ratio keeps
    what the configurations change; an A/A pair under a steady drift gives ratios on both sides of 1 in ABBA order, so
    the hull still holds 1. (The medians' ratio lies inside the rounds' hull where the pooled runs are the rounds'.)"""
    both = sorted(candidate_rounds.keys() & baseline_rounds.keys())
    rounds = [(candidate_rounds[k], baseline_rounds[k]) for k in both]
    if len(rounds) < MIN_PAIRED_ROUNDS or not (candidate.known and baseline.known
                                                and all(c.known and b.known for c, b in rounds)):
        return None  # an unknown interval is never taken as zero width: the unpaired rule (and its drift) decides
    speedup = baseline.median_ms / candidate.median_ms
    each = [compare(c, b, floor) for c, b in rounds]
    ends = [speedup] + [c.speedup for c in each]
    low = min(ends + [c.low for c in each if c.low is not None])
    high = max(ends + [c.high for c in each if c.high is not None])
    return Comparison.of(speedup, low, high, floor, basis="paired")


# A run is left out of comparisons ("disturbed") where other work competed with it (`monitor.contention`: busy or
# throttled) or where its median's interval is far wider than its configuration's other runs': on an H200 a cold
# search left a point on one run of 30.5 ms (p10 26.1, p90 32.8) that runs 22.6 ms (22.5-22.9) alone.
WIDE_FACTOR = 3.0  # a run's relative interval width this many times its configuration's other runs' median width
WIDE_FLOOR = 0.05  # ... and at least this wide (5 % of its median): tight runs differing in tightness are not noisy
Disturbance = Literal["busy", "wide"]
DISTURBED_WORDS: Mapping[str, str] = {
    "busy": "other work competed with it (or the GPU was throttled)",
    "wide": f"its spread was over {WIDE_FACTOR:g}x its configuration's other runs'",
}
DISTURBED_RULE = (f"a run is left out of the comparison where {DISTURBED_WORDS['busy']}, or where its median's "
                  f"interval is over {WIDE_FACTOR:g}x as wide (relative to its median) as its configuration's other "
                  f"runs' and over {WIDE_FLOOR:.0%} of its median; where every run of a configuration was disturbed "
                  f"they are kept, and no comparison that rests on them is called faster or slower")


def _width(t: Timing) -> float | None:
    return (t.high_ms - t.low_ms) / t.median_ms if t.known else None  # type: ignore[operator]


def disturbances(runs: Sequence[tuple[Timing, bool]]) -> list[Disturbance | None]:
    """Each run of one configuration (its timing, whether other work competed with it) -> why it is disturbed
    (DISTURBED_RULE), or None. A run is wide only against two or more other runs whose widths are known, so that
    one noisy run of a pair does not make the quiet one look wide. The other runs' median width is read from the
    known widths sorted once (`_median_without`): a run's history holds thousands of runs of one preset, and
    taking each run's others anew made the comparison table's every page take minutes (quadratic)."""
    widths = [_width(t) for t, _ in runs]
    ordered = sorted(w for w in widths if w is not None)
    out: list[Disturbance | None] = []
    for (_, competed), mine in zip(runs, widths, strict=True):
        if competed:
            out.append("busy")
            continue
        # the others' known widths: all of them, less this run's own where it is known
        wide = mine is not None and len(ordered) - 1 >= 2 and mine > WIDE_FLOOR and \
            mine > WIDE_FACTOR * _median_without(ordered, mine)
        out.append("wide" if wide else None)
    return out


def _median_without(ordered: Sequence[float], value: float) -> float:
    """`statistics.median` of the sorted `ordered` less one occurrence of `value` (which it holds), without copying
    it: the middle one or two of what is left, found by index."""
    gone = bisect.bisect_left(ordered, value)
    n = len(ordered) - 1

    def at(i: int) -> float:  # the i-th of what is left
        return ordered[i] if i < gone else ordered[i + 1]

    mid = n // 2
    return at(mid) if n % 2 else (at(mid - 1) + at(mid)) / 2


def kept_runs(runs: Sequence[tuple[Timing, bool]]) -> tuple[list[int], bool]:
    """The indices of the runs a comparison reads (DISTURBED_RULE), and whether they rest on disturbed runs (every
    run of the configuration was disturbed: then they are all kept)."""
    marks = disturbances(runs)
    quiet = [i for i, m in enumerate(marks) if m is None]
    if quiet or not runs:
        return quiet, False
    return list(range(len(runs))), True


def unsure(c: Comparison) -> Comparison:
    """`c` where it rests on disturbed runs: its speed-up and interval as measured, never a verdict beyond noise."""
    return c if c.within_noise else Comparison(c.speedup, c.low, c.high, "within_noise", c.floor, c.basis)


def _short(v: float) -> str:
    return f"{v:.2f}" if v < 10 else (f"{v:.1f}" if v < 100 else f"{v:.0f}")


def format_speedup(c: Comparison | None, compact: bool = False) -> str:
    """'1.25× (1.20–1.31)' beyond noise, '≈1.01× (0.97–1.05)' within noise, '—' without a comparison, and no
    figures where the interval spans over `UNMEASURABLE` (on a busy 2-core box: "0.03–101×");
    `compact` (or an unknown interval) drops the interval. The interval is the one the verdict read (widened by
    the drift between runs where `compare` was told of it)."""
    if c is None:
        return "—"
    if c.low is not None and c.high is not None and c.high > UNMEASURABLE * c.low:
        return "unmeasurable" if compact else \
            f"unmeasurable (spread >{UNMEASURABLE:g}×)"
    text = ("≈" if c.within_noise else "") + f"{c.speedup:.2f}×"
    if compact or c.low is None or c.high is None:
        return text
    return f"{text} ({_short(c.low)}–{_short(c.high)})"


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def ms(value: float | None) -> float | None:
    """A time in ms as the JSON documents write it (to 0.1 µs): rounding happens at the edges only."""
    return _round(value)


def fields(c: Comparison | None, prefix: str = "speedup", basis: bool = False) -> dict[str, Any]:
    """A comparison as JSON fields: PREFIX, PREFIX_low, PREFIX_high, PREFIX_verdict (all null without one), and
    with `basis` PREFIX_basis (what the interval holds: `Basis`; the results file's runs carry it)."""
    out: dict[str, Any] = {prefix: _round(c.speedup) if c else None, f"{prefix}_low": _round(c.low) if c else None,
                           f"{prefix}_high": _round(c.high) if c else None,
                           f"{prefix}_verdict": c.verdict if c else None}
    if basis:
        out[f"{prefix}_basis"] = c.basis if c else None
    return out


def from_fields(d: Mapping[str, Any], prefix: str = "speedup") -> Comparison | None:
    """The comparison stored by `fields`; a document written before verdicts were stored gets the rule
    applied to what it has (an unknown interval: the floor only)."""
    s = positive(d.get(prefix))
    if s is None:
        return None
    low, high = positive(d.get(f"{prefix}_low")), positive(d.get(f"{prefix}_high"))
    basis = d.get(f"{prefix}_basis")
    c = Comparison.of(s, low, high, basis=basis if basis in BASES else "runs")
    stored = d.get(f"{prefix}_verdict")
    return Comparison(c.speedup, c.low, c.high, stored, c.floor, c.basis) if stored in VERDICTS else c


def baseline_problem(status: str, s: Summary) -> str | None:
    """Why a run cannot be a baseline (BASELINE_RULE), or None when it can: 'stopped after 43 steps'."""
    if status != "ok":
        return f"{status} after {s.steps} steps" if s.steps is not None else status
    if positive(s.median_ms) is None:
        return "has no measured steps"
    measured = s.measured_steps
    if measured is not None and measured < MIN_BASELINE_STEPS:
        return f"has only {measured} measured steps (a baseline needs {MIN_BASELINE_STEPS})"
    return None
