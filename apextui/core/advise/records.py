"""The advice's result model: one run, one preset's runs, and the verdicts, with their JSON form.

Statuses are `Literal`s so a misspelt one is a type error, not a silent miss.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping

from ..config.point import Config
from ..workloads.spec import WORKLOADS
from ..errors import UsageProblem
from ..measure.compare import Comparison, Disturbance, Drift, Timing, compare, disturbances, fields, kept_runs, \
    timing_from_runs, unsure
from ..measure.details import json_ready
from ..measure.summary import Summary
from ..measure.mfu import Mfu

KIND = "apextui-advice"
SCHEMA = 2  # 2 (2026-12-06): a preset's `config` and `label` for its `variant`; a workload a norm
CACHE_FILE = "advice.json"
CACHE_VERSION = 1

LOSS_TOLERANCE = 0.02  # final loss more than 2 % above the baseline's: flagged
LOSS_CHECKED = tuple(w for w, s in WORKLOADS.items() if s.loss_checked)  # workloads whose final losses are compared
DEFAULT_REPEATS = 2
MAX_REPEATS = 100
DEFAULT_STEPS = {"cuda": 100, "cpu": 30}
RUN_JOIN_S = 30.0  # after a run's final snapshot: how long to wait for its worker to exit

RunStatus = Literal["ok", "stopped", "failed"]
PresetStatus = Literal["unavailable", "not_run", "failed", "stopped", "ok"]  # `Measurement.status`
WorkloadStatus = Literal["complete", "partial", "not_measured", "failed"]
ApexStatus = Literal["faster", "faster_flagged", "slower", "within_noise", "not_measurable", "failed", "not_measured",
                     "no_torch", "none"]  # Apex against torch for one workload
MachineApexStatus = Literal["worth_it", "mixed", "not_worth_it", "not_measurable", "unknown"]  # `overall_apex`
AdviceStatus = Literal["complete", "partial"]  # the document's

LOSS_RULE = (f"{', '.join(LOSS_CHECKED)}: a final loss more than {LOSS_TOLERANCE:.0%} above the baseline's "
             "(same steps, same seed) is flagged and never recommended")


class AdviceError(UsageProblem, ValueError):
    """Bad advice settings (unknown workload, repeats out of range...); the message says which."""


# ---- measured results -----------------------------------------------------------------------------
def _median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class RunResult:
    """One run of one preset: its status and what it measured (`summary`, `events.summary`: empty for a run that
    never started); the advice's JSON writes a few of the summary's figures (`to_dict`)."""

    repeat: int
    status: RunStatus
    summary: Summary = field(default_factory=Summary)
    error: str | None = None
    # the round of interleaved repeats (ABBA) it ran in: runs of one round ran side by side and are compared round by
    # round (`compare.compare_paired`); None: not part of a round (a search's first run of a point)
    round: int | None = None

    @property
    def median_ms(self) -> float | None:
        return self.summary.median_ms

    @property
    def contention(self) -> str | None:
        """The run's contention level (monitor/contention.py: "busy"/"throttled" runs are marked), None unread."""
        return self.summary.contention.level if self.summary.contention else None

    @property
    def competed(self) -> bool:
        """Other work competed with this run, or its GPU was throttled (`monitor.contention`)."""
        return self.contention in ("busy", "throttled")

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_ms is not None and self.median_ms > 0

    @property
    def check_failed(self) -> bool:
        return self.summary.check is not None and self.summary.check.failed

    @property
    def timing(self) -> Timing | None:
        return self.summary.timing if self.ok else None

    @classmethod
    def from_snapshot(cls, repeat: int, snap: Any) -> "RunResult":
        from ..run import events

        return cls(repeat, snap.status, events.summary(snap), snap.error)

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        return {
            "repeat": self.repeat, "status": self.status, "error": self.error, "median_ms": _round(s.median_ms),
            "median_low_ms": _round(s.median_low_ms), "median_high_ms": _round(s.median_high_ms),
            "timed_intervals": s.timed_intervals or 0, "p10_ms": _round(s.p10_ms), "p90_ms": _round(s.p90_ms),
            "steps": s.steps or 0, "measured_steps": s.measured_steps or 0, "final_loss": _round(s.final_loss, 6),
            "compile_s": _round(s.compile_s, 3), "elapsed_s": _round(s.elapsed_s, 3), "gpu_busy": _round(s.gpu_busy),
            "bottleneck": s.bottleneck.label if s.bottleneck else None, "peak_memory_bytes": s.peak_memory_bytes,
            "contention": {"level": self.contention} if self.contention else None, "round": self.round,
        }


PARITY_KEYS = ("kind", "against", "steps", "max_abs_err", "tolerance", "relative_tolerance", "dropout", "passed",
               "message", "note")


def parity_fields(m: Measurement) -> dict[str, Any] | None:
    """The correctness check's numbers of a measurement (the first failed run's, else the first run's), for
    `advise --json`; None where no run had a check (the baseline)."""
    checks = [r.summary.check for r in m.runs if r.summary.check]
    if not checks:
        return None
    check = next((c for c in checks if c.failed), checks[0]).to_dict()
    return {k: check.get(k) for k in PARITY_KEYS if k in check}


@dataclass(frozen=True)
class Measurement:
    """Every run of one preset in this advice (or why it was not run)."""

    preset: str
    workload: str
    needs_apex: tuple[str, ...] = ()
    autocast: str = "none"  # its point's autocast dtype (the record's "amp")
    runs: tuple[RunResult, ...] = ()
    planned: int = 0  # runs planned (repeats); 0 when not run
    available: bool = True
    reason: str = ""  # why it is not run (unavailable, not comparable)
    # it can run here (`apextui list` says available) but this advice leaves it out: a data-parallel preset on one
    # device, a size the baseline's is not; worded "not compared", never "unavailable"
    not_compared: bool = False
    fix: str = ""
    # the drift between runs of one configuration seen in this advice (`compare.Drift`): a comparison that involves a
    # single run is widened by it (`versus`); None: the caller's comparisons ignore it (tests of other rules)
    drift: Drift | None = None
    # where one record decides every comparison of these measurements (a model search: `SearchResult.shown`, side by
    # side along its races), that judge: `versus` asks it first, so that the verdict, the table, the answer and the
    # text read one comparison of a pair (None: the pooled runs decide, as for the shipped workloads)
    judge: Callable[["Measurement", "Measurement"], "Comparison | None"] | None = field(default=None, compare=False,
                                                                                    repr=False)
    config: Config | None = None  # the preset's point (its identity: the baseline is its workload's baseline point)

    @property
    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs if r.ok]

    @property
    def _timed(self) -> list[tuple[RunResult, Timing]]:
        return [(r, t) for r in self.ok_runs if (t := r.timing) is not None]

    @property
    def kept_runs(self) -> list[RunResult]:
        """The ok runs its comparisons read: the disturbed ones left out (`compare.DISTURBED_RULE`). Every timing
        figure of the preset comes from these (its median and interval, p10/p90, spread, the representative run);
        what a disturbance does not change comes from every ok run (the final loss, the cold compile, the check)."""
        timed = self._timed
        kept, _ = kept_runs([(t, r.competed) for r, t in timed])
        return [timed[i][0] for i in kept]

    @property
    def rests_on_disturbed(self) -> bool:
        """Every ok run was disturbed: its comparisons are never beyond noise (`versus`)."""
        timed = self._timed
        return kept_runs([(t, r.competed) for r, t in timed])[1]

    @property
    def left_out(self) -> list[tuple[RunResult, Disturbance]]:
        """The runs left out of its comparisons, with why (empty where every run was disturbed: then all count)."""
        timed = self._timed
        if self.rests_on_disturbed:
            return []
        marks = disturbances([(t, r.competed) for r, t in timed])
        return [(r, m) for (r, _), m in zip(timed, marks, strict=True) if m is not None]

    @property
    def medians_ms(self) -> list[float]:
        return [r.median_ms for r in self.kept_runs]  # type: ignore[misc]

    @property
    def median_ms(self) -> float | None:
        """The median of the kept runs' step times pooled (of their medians where a run kept none: `timing`)."""
        t = self.timing
        return t.median_ms if t is not None else None

    @functools.cached_property
    def timing(self) -> Timing | None:
        """The kept repeats' step times pooled, with the hull of their intervals (`timing_from_runs`); found once
        (the figures, the representative run and every comparison read it, and pooling reads every kept time)."""
        return timing_from_runs(r.timing for r in self.kept_runs)  # type: ignore[misc]

    def _percentile(self, q: float, of_run: Callable[[RunResult], float | None]) -> float | None:
        """The pooled step times' q-th percentile over two or more runs; else (one run, or a run that kept no times)
        the median of the runs' own figures, which a single run's are exactly."""
        t = self.timing
        if t is not None and t.samples is not None and t.runs > 1:
            return t.samples.percentile(q)
        return _median(of_run(r) for r in self.kept_runs)

    @property
    def by_round(self) -> dict[int, Timing]:
        """Each kept run's timing by the interleaved round it ran in (runs outside a round are not in it)."""
        return {r.round: r.timing for r in self.kept_runs if r.round is not None and r.timing is not None}

    @property
    def p10_ms(self) -> float | None:
        return self._percentile(10, lambda r: r.summary.p10_ms)

    @property
    def p90_ms(self) -> float | None:
        return self._percentile(90, lambda r: r.summary.p90_ms)

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the repeat medians; None with fewer than two (reported; the noise rule
        has the run-to-run spread through `timing`'s interval)."""
        m = self.medians_ms
        if len(m) < 2:
            return None
        return (max(m) - min(m)) / statistics.median(m)

    @property
    def final_loss(self) -> float | None:
        """Of every ok run: other work slows a run down, it does not change what it computes."""
        return _median(r.summary.final_loss for r in self.ok_runs)

    @property
    def compile_s(self) -> float | None:
        """The longest (cold) compile: later repeats in one process reuse torch's compile cache and take
        a fraction of a second, which is not what a user's first run pays."""
        times = [t for r in self.ok_runs if (t := r.summary.compile_s) is not None]
        return max(times) if times else None

    @property
    def mfu(self) -> Mfu | None:
        """Its MFU at its median over the kept runs (its runs share the model's FLOPs a step and the GPU's peak);
        None where no run has one (an old results file)."""
        found = next((r.summary.mfu for r in self.ok_runs if r.summary.mfu is not None), None)
        return found.at(self.median_ms) if found is not None else None

    @property
    def measured(self) -> bool:
        return self.median_ms is not None

    @property
    def check_failed(self) -> bool:
        return any(r.check_failed for r in self.ok_runs)

    @property
    def representative(self) -> RunResult | None:
        """The kept run whose median is closest to the aggregate (its bottleneck, roofline and GPU busy fraction
        are reported): never a run left out of the figures it stands for."""
        med = self.median_ms
        if med is None:
            return None
        return min(self.kept_runs, key=lambda r: abs(r.median_ms - med))  # type: ignore[operator]

    @property
    def status(self) -> PresetStatus:
        """"stopped": interrupted before a run finished; "ok": at least one run counted."""
        if not self.available:
            return "unavailable"
        if not self.runs:
            return "not_run"
        if not self.ok_runs:
            return "failed" if any(r.status == "failed" for r in self.runs) else "stopped"
        return "ok"

    @property
    def complete(self) -> bool:
        return not self.available or len(self.runs) >= self.planned

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.runs if r.status == "failed" and r.error]


def versus(a: Measurement, b: Measurement) -> Comparison:
    """`a` against `b` by the one noise rule: round by round where they ran side by side in enough interleaved
    rounds (`compare.compare`'s `rounds`), else their pooled timings (widened by the drift
    between runs); both must be measured. Its `difference` (faster / slower - 1) and `noise` (the largest
    difference still noise) are the document's `difference` and `noise_threshold`."""
    ta, tb = a.timing, b.timing
    if ta is None or tb is None:
        raise ValueError("versus needs two measured presets")
    judged = a.judge(a, b) if a.judge is not None else None
    if judged is not None:
        return judged
    c = compare(ta, tb, drift=a.drift or b.drift, rounds=(a.by_round, b.by_round))
    return unsure(c) if a.rests_on_disturbed or b.rests_on_disturbed else c


def advice_drift(runs: Iterable[Iterable[RunResult]]) -> Drift:
    """The drift between runs seen in one advice: from every preset's ok runs (`compare.Drift.of`)."""
    return Drift.of([r.timing for r in rs if r.ok and r.timing is not None] for rs in runs)


@dataclass(frozen=True)
class ApexVerdict:
    """Apex against torch for one workload."""

    status: ApexStatus
    text: str
    best_apex: str | None = None
    best_apex_ms: float | None = None
    best_torch: str | None = None
    best_torch_ms: float | None = None
    speedup: float | None = None  # best torch-only median / best Apex median (> 1: Apex faster); measured only
    difference: float | None = None
    noise_threshold: float | None = None
    reason: str | None = None  # why Apex could not be measured
    # the torch-only option the verdict offers (`choice.choose`): `best_torch` unless that is within noise of
    # the baseline, then the baseline
    torch_choice: str | None = None
    failed_preset: str | None = None  # the Apex preset whose failure `reason` quotes (not in the JSON)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "text": self.text, "best_apex": self.best_apex,
                "best_apex_ms": _round(self.best_apex_ms), "best_torch": self.best_torch,
                "best_torch_ms": _round(self.best_torch_ms), "speedup": _round(self.speedup),
                "difference": _round(self.difference), "noise_threshold": _round(self.noise_threshold),
                "reason": self.reason, "torch_choice": self.torch_choice}


@dataclass(frozen=True)
class WorkloadVerdict:
    workload: str
    baseline: str | None  # the baseline preset's name
    status: WorkloadStatus
    measurements: tuple[Measurement, ...]
    fastest: str | None = None
    speedup_vs_baseline: float | None = None  # of the fastest
    baseline_within_noise: bool | None = None
    runner_up: str | None = None
    speedup_vs_runner_up: float | None = None
    within_noise: bool | None = None  # fastest vs runner-up
    difference: float | None = None  # fastest vs runner-up, relative
    noise_threshold: float | None = None  # fastest vs runner-up
    tied: tuple[str, ...] = ()  # presets within noise of the fastest
    recommended: str | None = None
    within_noise_of_recommended: tuple[str, ...] = ()  # unflagged presets within noise of the recommended one
    flags: tuple[Mapping[str, Any], ...] = ()  # {"preset", "kind": "loss"|"check", "text", ...}
    apex: ApexVerdict = field(default_factory=lambda: ApexVerdict("none", ""))
    text: str = ""
    notes: tuple[str, ...] = ()

    def measurement(self, name: str | None) -> Measurement | None:
        return next((m for m in self.measurements if m.preset == name), None)

    def to_dict(self) -> dict[str, Any]:
        base = self.measurement(self.baseline)
        flagged = {f["preset"] for f in self.flags}
        presets = []
        for m in self.measurements:
            rep = m.representative
            timing = m.timing
            vs_base = versus(m, base) if base is not None and base.measured and timing is not None else None
            presets.append({
                "preset": m.preset, "config": m.config.as_dict() if m.config is not None else None,
                "label": WORKLOADS[m.workload].label(m.config) if m.config is not None and m.workload in WORKLOADS
                else m.preset, "amp": m.autocast,
                "needs_apex": list(m.needs_apex),
                "is_baseline": m.preset == self.baseline, "status": m.status,
                "reason": m.reason or None, "fix": m.fix or None, "not_compared": m.not_compared,
                # rounded here, at the edge: the speed-ups follow from the unrounded figures
                "median_ms": _round(m.median_ms), "median_low_ms": _round(timing.low_ms) if timing else None,
                "median_high_ms": _round(timing.high_ms) if timing else None, "p10_ms": _round(m.p10_ms),
                "p90_ms": _round(m.p90_ms),
                "repeats": len(m.ok_runs), "planned_repeats": m.planned,
                "runs_used": len(m.kept_runs),  # what its figures rest on: `n` in the text (the left-out ones said)
                "repeat_medians_ms": [_round(v) for v in m.medians_ms], "spread": _round(m.spread),
                **fields(vs_base, "speedup_vs_baseline"),
                "final_loss": _round(m.final_loss, 6), "compile_s": _round(m.compile_s, 3),
                "flagged": m.preset in flagged,
                # other work competed with one of its runs (or the baseline's): said beside the speed-up
                "competed": any(r.competed for r in m.ok_runs),
                # runs left out of its comparisons (compare.DISTURBED_RULE), with why
                "left_out": [{"repeat": r.repeat, "round": r.round, "why": why} for r, why in m.left_out],
                "rests_on_disturbed": m.rests_on_disturbed,
                "speedup_competed": vs_base is not None and base is not None
                and any(r.competed for r in (*m.ok_runs, *base.ok_runs)),
                "parity": parity_fields(m),
                # the representative run's, as its `end` line has them
                "bottleneck": json_ready(rep.summary.bottleneck.to_dict())
                if rep is not None and rep.summary.bottleneck else None,
                "roofline": json_ready(rep.summary.roofline.to_dict())
                if rep is not None and rep.summary.roofline else None,
                "gpu_busy": _round(rep.summary.gpu_busy) if rep is not None else None,
                "mfu": mfu.to_dict() if (mfu := m.mfu) is not None else None,
                "evidence_run": rep.repeat if rep is not None else None,
                "errors": m.errors,
                "runs": [r.to_dict() for r in m.runs],
            })
        return {
            "workload": self.workload, "baseline": self.baseline, "status": self.status,
            "fastest": self.fastest, "speedup_vs_baseline": _round(self.speedup_vs_baseline),
            "baseline_within_noise": self.baseline_within_noise,
            "runner_up": self.runner_up, "speedup_vs_runner_up": _round(self.speedup_vs_runner_up),
            "within_noise": self.within_noise, "difference": _round(self.difference),
            "noise_threshold": _round(self.noise_threshold), "tied": list(self.tied),
            "recommended": self.recommended,
            "within_noise_of_recommended": list(self.within_noise_of_recommended),
            "flags": [dict(f) for f in self.flags],
            "apex": self.apex.to_dict(), "verdict": self.text, "notes": list(self.notes), "presets": presets,
        }
