"""`apextui advise`: what to use on *this* machine, computed from what was measured here.

For each workload, every available preset of it runs `repeats` times, interleaved (repeat 1 in preset
order, repeat 2 in reverse order, and so on: an ABBA order, so a slow drift such as a GPU warming up
does not favour whichever preset runs first), each run `steps` steps (default `DEFAULT_STEPS`: 100 on
CUDA, 30 on CPU at the presets' small size). Unavailable presets are listed with their reason and not
run; so are presets whose size differs from the baseline's (not comparable).

Numbers (all from the runs made; nothing is assumed):

- a preset's **median** is the median of its repeats' median ms/step (warm-up excluded, as in every
  run); its **p10 / p90** the median of its repeats' p10 / p90; its **spread** (max - min) / median of
  the repeat medians (unknown with one repeat). Failed or stopped runs are listed but never counted.
  Compile time (`compile_s`, torch.compile / CUDA-graph capture, before step 1) is reported on its own
  and never part of ms/step.
- a preset's **interval** is the hull of its repeats' 95 % median intervals and medians
  (`compare.timing_from_runs`): each run's own noise and the run-to-run spread.
- **speed-up** of A over B: median(B) / median(A) (> 1: A is faster), with its interval; **within noise**
  and faster / slower are `compare.compare`'s verdict (`NOISE_RULE`: the interval holds 1, or the faster
  is less than `NOISE_FLOOR`, 2 %, faster), the one rule every screen of apextui uses.
- **loss check** (workloads in `LOSS_CHECKED`: the transformer): a preset whose final loss (median over
  its repeats, same steps and seed) is more than `LOSS_TOLERANCE` (2 %) above the baseline's is
  flagged; a fused norm whose accuracy check failed is flagged too. Flagged presets are reported but
  never recommended.
- **recommended**: the fastest unflagged preset, unless it is within noise of the baseline (then the
  baseline: nothing is measurably faster).
- **Apex**: per workload, the fastest measured Apex preset against the fastest measured torch-only one
  ("faster", "slower", "within_noise"); when no Apex preset could run here, "not_measurable" with the
  reason and the best torch-only option, and no number for Apex.

`verdict()` and `overall_apex()` are pure (CPU-testable); `Advisor` runs the presets through any
factory with the Runner interface (`Runner.run()` is used when the runner has it, as headless does;
else `start()` and waiting, as with the TUI's worker-process runner). Every new advice is stored in
the user cache dir (`advice_file()`, next to the roofline's ceilings, written atomically) and can be
reused when it was measured in the same environment (`environment()`: device model, driver, torch,
Apex); reused advice says when, with how many steps and repeats and on which device it was measured
(`provenance`), and is flagged when its runs were shorter than the device's default (`trust_note`).
This module never imports Textual, nor torch at import time.
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import files
from .atomic import write_atomic
from .compare import NOISE_FLOOR, NOISE_RULE, Comparison, Timing, compare, fields, format_speedup, from_fields, \
    timing_from_runs, timing_from_summary
from .fmt import ms as _ms
from .presets import BASELINES, WORKLOADS, Preset

KIND = "apextui-advice"
SCHEMA = 1
CACHE_FILE = "advice.json"
CACHE_VERSION = 1

LOSS_TOLERANCE = 0.02  # final loss more than 2 % above the baseline's: flagged
LOSS_CHECKED = ("transformer",)  # workloads whose final losses are compared
DEFAULT_REPEATS = 2
MAX_REPEATS = 100
DEFAULT_STEPS = {"cuda": 100, "cpu": 30}
RUN_JOIN_S = 30.0  # after a run's final snapshot: how long to wait for its worker to exit

LOSS_RULE = (f"{', '.join(LOSS_CHECKED)}: a final loss more than {LOSS_TOLERANCE:.0%} above the baseline's "
             "(same steps, same seed) is flagged and never recommended")


class AdviceError(ValueError):
    """Bad advice settings (unknown workload, repeats out of range...); the message says which."""


# ---- measured results -----------------------------------------------------------------------------
def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class RunResult:
    """One run of one preset: its status and the summary numbers it reported (`events.summary`)."""

    repeat: int
    status: str  # "ok" | "stopped" | "failed"
    median_ms: float | None = None
    median_low_ms: float | None = None  # the median's 95 % interval (None in advice stored before it)
    median_high_ms: float | None = None
    timed_intervals: int = 0
    p10_ms: float | None = None
    p90_ms: float | None = None
    final_loss: float | None = None
    compile_s: float | None = None
    steps: int = 0
    measured_steps: int = 0
    elapsed_s: float | None = None
    error: str | None = None
    bottleneck: Mapping[str, Any] | None = None  # {"label", "reason", "figures"}
    roofline: Mapping[str, Any] | None = None
    gpu_busy: float | None = None
    check: Mapping[str, Any] | None = None  # fused norms: accuracy check against torch

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_ms is not None and self.median_ms > 0

    @property
    def check_failed(self) -> bool:
        return bool(self.check) and self.check.get("passed") is False  # type: ignore[union-attr]

    @property
    def timing(self) -> Timing | None:
        return timing_from_summary(self.to_dict()) if self.ok else None

    @classmethod
    def from_summary(cls, repeat: int, status: str, summary: Mapping[str, Any], error: str | None = None) -> "RunResult":
        s = summary
        return cls(
            repeat=repeat, status=status, median_ms=_float(s.get("median_ms")),
            median_low_ms=_float(s.get("median_low_ms")), median_high_ms=_float(s.get("median_high_ms")),
            timed_intervals=int(s.get("timed_intervals") or 0), p10_ms=_float(s.get("p10_ms")),
            p90_ms=_float(s.get("p90_ms")), final_loss=_float(s.get("final_loss")),
            compile_s=_float(s.get("compile_s")), steps=int(s.get("steps") or 0),
            measured_steps=int(s.get("measured_steps") or 0), elapsed_s=_float(s.get("elapsed_s")), error=error,
            bottleneck=s.get("bottleneck") if isinstance(s.get("bottleneck"), Mapping) else None,
            roofline=s.get("roofline") if isinstance(s.get("roofline"), Mapping) else None,
            gpu_busy=_float(s.get("gpu_busy")), check=s.get("check") if isinstance(s.get("check"), Mapping) else None,
        )

    @classmethod
    def from_snapshot(cls, repeat: int, snap: Any) -> "RunResult":
        from . import events

        return cls.from_summary(repeat, snap.status, events.summary(snap), snap.error)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repeat": self.repeat, "status": self.status, "error": self.error, "median_ms": self.median_ms,
            "median_low_ms": self.median_low_ms, "median_high_ms": self.median_high_ms,
            "timed_intervals": self.timed_intervals, "p10_ms": self.p10_ms, "p90_ms": self.p90_ms, "steps": self.steps,
            "measured_steps": self.measured_steps, "final_loss": self.final_loss, "compile_s": self.compile_s,
            "elapsed_s": self.elapsed_s, "gpu_busy": self.gpu_busy,
            "bottleneck": (self.bottleneck or {}).get("label"),
        }


@dataclass(frozen=True)
class Measurement:
    """Every run of one preset in this advice (or why it was not run)."""

    preset: str
    variant: str
    workload: str
    needs_apex: tuple[str, ...] = ()
    amp: str = "none"
    runs: tuple[RunResult, ...] = ()
    planned: int = 0  # runs planned (repeats); 0 when not run
    available: bool = True
    reason: str = ""  # why it is not run (unavailable, not comparable)
    fix: str = ""

    @property
    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs if r.ok]

    @property
    def medians_ms(self) -> list[float]:
        return [r.median_ms for r in self.ok_runs]  # type: ignore[misc]

    @property
    def median_ms(self) -> float | None:
        return _median(self.medians_ms)

    @property
    def timing(self) -> Timing | None:
        """The median of the repeat medians, with the hull of the repeats' intervals (`timing_from_runs`)."""
        return timing_from_runs(r.timing for r in self.ok_runs)  # type: ignore[misc]

    @property
    def p10_ms(self) -> float | None:
        return _median(r.p10_ms for r in self.ok_runs)

    @property
    def p90_ms(self) -> float | None:
        return _median(r.p90_ms for r in self.ok_runs)

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
        return _median(r.final_loss for r in self.ok_runs)

    @property
    def compile_s(self) -> float | None:
        """The longest (cold) compile: later repeats in one process reuse torch's compile cache and take
        a fraction of a second, which is not what a user's first run pays."""
        times = [r.compile_s for r in self.ok_runs if r.compile_s is not None]
        return max(times) if times else None

    @property
    def measured(self) -> bool:
        return self.median_ms is not None

    @property
    def check_failed(self) -> bool:
        return any(r.check_failed for r in self.ok_runs)

    @property
    def representative(self) -> RunResult | None:
        """The ok run whose median is closest to the aggregate (its bottleneck and roofline are reported)."""
        med = self.median_ms
        if med is None:
            return None
        return min(self.ok_runs, key=lambda r: abs(r.median_ms - med))  # type: ignore[operator]

    @property
    def status(self) -> str:
        """"unavailable" | "not_run" | "failed" | "stopped" (interrupted) | "ok" (at least one run counted)."""
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
    """`a` against `b` by the one noise rule (`compare.compare`); both must be measured. Its `difference`
    (faster / slower - 1) and `noise` (the largest difference still noise) are the document's `difference`
    and `noise_threshold`."""
    ta, tb = a.timing, b.timing
    if ta is None or tb is None:
        raise ValueError("versus needs two measured presets")
    return compare(ta, tb)


# ---- the verdict ---------------------------------------------------------------------------------
def _pct(v: float) -> str:
    return f"{100 * v:.1f} %"


@dataclass(frozen=True)
class ApexVerdict:
    """Apex against torch for one workload."""

    # "faster" | "faster_flagged" | "slower" | "within_noise" | "not_measurable" | "failed" | "not_measured" |
    # "no_torch" | "none"
    status: str
    text: str
    best_apex: str | None = None
    best_apex_ms: float | None = None
    best_torch: str | None = None
    best_torch_ms: float | None = None
    speedup: float | None = None  # best torch-only median / best Apex median (> 1: Apex faster); measured only
    difference: float | None = None
    noise_threshold: float | None = None
    reason: str | None = None  # why Apex could not be measured

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "text": self.text, "best_apex": self.best_apex,
                "best_apex_ms": _round(self.best_apex_ms), "best_torch": self.best_torch,
                "best_torch_ms": _round(self.best_torch_ms), "speedup": _round(self.speedup),
                "difference": _round(self.difference), "noise_threshold": _round(self.noise_threshold),
                "reason": self.reason}


@dataclass(frozen=True)
class WorkloadVerdict:
    workload: str
    baseline: str | None  # the baseline preset's name
    status: str  # "complete" | "partial" | "not_measured" | "failed"
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
                "preset": m.preset, "variant": m.variant, "amp": m.amp, "needs_apex": list(m.needs_apex),
                "is_baseline": m.preset == self.baseline, "status": m.status,
                "reason": m.reason or None, "fix": m.fix or None,
                # medians of the runs' own (rounded) figures, not rounded again: the speed-ups follow from them
                "median_ms": m.median_ms, "median_low_ms": timing.low_ms if timing else None,
                "median_high_ms": timing.high_ms if timing else None, "p10_ms": m.p10_ms, "p90_ms": m.p90_ms,
                "repeats": len(m.ok_runs), "planned_repeats": m.planned,
                "repeat_medians_ms": m.medians_ms, "spread": _round(m.spread),
                **fields(vs_base, "speedup_vs_baseline"),
                "final_loss": _round(m.final_loss, 6), "compile_s": _round(m.compile_s, 3),
                "flagged": m.preset in flagged,
                "bottleneck": dict(rep.bottleneck) if rep is not None and rep.bottleneck else None,
                "roofline": dict(rep.roofline) if rep is not None and rep.roofline else None,
                "gpu_busy": rep.gpu_busy if rep is not None else None,
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
            "recommended": self.recommended, "flags": [dict(f) for f in self.flags],
            "apex": self.apex.to_dict(), "verdict": self.text, "notes": list(self.notes), "presets": presets,
        }


def _fastest(ms: Sequence[Measurement]) -> Measurement | None:
    measured = [m for m in ms if m.measured]
    return min(measured, key=lambda m: m.median_ms) if measured else None  # type: ignore[arg-type, return-value]


def _flags(workload: str, base: Measurement | None, ms: Sequence[Measurement]) -> list[dict[str, Any]]:
    flags: list[dict[str, Any]] = []
    base_loss = base.final_loss if base is not None else None
    for m in ms:
        if not m.measured:
            continue
        if m.check_failed:
            flags.append({"preset": m.preset, "kind": "check",
                          "text": f"{m.preset} failed its accuracy check against torch: not recommended"})
        if (workload in LOSS_CHECKED and base is not None and m is not base and base_loss
                and m.final_loss is not None):
            worse = (m.final_loss - base_loss) / abs(base_loss)
            if worse > LOSS_TOLERANCE:
                flags.append({"preset": m.preset, "kind": "loss", "final_loss": _round(m.final_loss, 6),
                              "baseline_loss": _round(base_loss, 6), "worse_by": _round(worse),
                              "text": f"{m.preset}'s final loss {m.final_loss:.4g} is {_pct(worse)} worse than the "
                                      f"baseline {base.preset}'s {base_loss:.4g} after the same steps "
                                      f"(over {LOSS_TOLERANCE:.0%}): not recommended"})
    return flags


def apex_verdict(measurements: Sequence[Measurement], flagged: Iterable[str] = (), base: Measurement | None = None) -> ApexVerdict:
    """The fastest measured Apex preset against the fastest measured torch-only one (pure)."""
    flagged = set(flagged)
    apex = [m for m in measurements if m.needs_apex]
    torch_ok = [m for m in measurements if not m.needs_apex and m.measured]
    best_torch = _fastest([m for m in torch_ok if m.preset not in flagged]) or _fastest(torch_ok)
    if best_torch is not None:
        up = (f", {format_speedup(versus(best_torch, base))} the baseline"
              if base is not None and base.measured and base is not best_torch else "")
        torch_text = f"the best torch-only option is {best_torch.preset} ({_ms(best_torch.median_ms)} ms/step{up})"
    else:
        torch_text = "no torch-only preset was measured either"
    if not apex:
        return ApexVerdict("none", "no Apex preset for this workload", best_torch=best_torch.preset if best_torch else None,
                           best_torch_ms=best_torch.median_ms if best_torch else None)
    kw = {"best_torch": best_torch.preset if best_torch else None,
          "best_torch_ms": best_torch.median_ms if best_torch else None}
    measured = [m for m in apex if m.measured]
    if not measured:
        unavailable = [m for m in apex if not m.available]
        failed = [m for m in apex if m.status == "failed"]
        if failed:
            why = failed[0].errors[0].splitlines()[0][:200] if failed[0].errors else "failed"
            return ApexVerdict("failed", f"the Apex presets failed here ({failed[0].preset}: {why}); "
                               f"no Apex number; {torch_text}", reason=why, **kw)
        if len(unavailable) == len(apex):
            reason = unavailable[0].reason or "unavailable"
            return ApexVerdict("not_measurable", f"Apex cannot be measured here ({reason}); no Apex number is "
                               f"claimed; {torch_text}", reason=reason, **kw)
        return ApexVerdict("not_measured", f"the Apex presets were not measured (interrupted); {torch_text}", **kw)
    best_apex = _fastest([m for m in measured if m.preset not in flagged]) or _fastest(measured)
    assert best_apex is not None
    kw.update(best_apex=best_apex.preset, best_apex_ms=best_apex.median_ms)
    if best_torch is None:
        return ApexVerdict("no_torch", f"{best_apex.preset} ran ({_ms(best_apex.median_ms)} ms/step) but no "
                           "torch-only preset was measured to compare it with", **kw)
    c = versus(best_apex, best_torch)
    diff, thr = c.difference, c.noise
    kw.update(speedup=c.speedup, difference=diff, noise_threshold=thr)
    pair = (f"best Apex {best_apex.preset} {_ms(best_apex.median_ms)} vs best torch-only {best_torch.preset} "
            f"{_ms(best_torch.median_ms)} ms/step")
    if c.within_noise:
        return ApexVerdict("within_noise", f"not worth installing for this: {pair}, within noise "
                           f"({_pct(diff)} apart, noise ±{_pct(thr)})", **kw)
    if c.verdict == "faster" and best_apex.preset in flagged:
        return ApexVerdict("faster_flagged", f"{best_apex.preset} is {format_speedup(c)} faster than the best torch-only "
                           f"{best_torch.preset} ({pair}), but it is flagged (loss or accuracy): not a clear gain", **kw)
    if c.verdict == "faster":
        return ApexVerdict("faster", f"worth it here: {best_apex.preset} is {format_speedup(c)} faster than the best "
                           f"torch-only {best_torch.preset} ({pair})", **kw)
    return ApexVerdict("slower", f"not worth it here: the torch-only {best_torch.preset} is "
                       f"{format_speedup(versus(best_torch, best_apex))} faster "
                       f"than the best Apex {best_apex.preset} ({pair})", **kw)


def verdict(workload: str, measurements: Sequence[Measurement], baseline: str | None = None) -> WorkloadVerdict:
    """The verdict for one workload from its measurements (pure: numbers in, verdict out).

    `baseline` is the baseline preset's name (default: the measurement whose variant is the workload's
    baseline variant, the one named like it first)."""
    ms = tuple(measurements)
    if baseline is None:
        base_variant = BASELINES.get(workload)
        cands = [m for m in ms if m.variant == base_variant]
        cands.sort(key=lambda m: m.preset != base_variant)
        baseline = cands[0].preset if cands else None
    base = next((m for m in ms if m.preset == baseline), None)
    planned = [m for m in ms if m.available]
    if planned and all(not m.runs for m in planned):
        status = "not_measured"
    elif not all(m.complete for m in ms):
        status = "partial"
    elif planned and not any(m.measured for m in planned):
        status = "failed"
    else:
        status = "complete"
    flags = _flags(workload, base if base is not None and base.measured else None, ms)
    flagged = {f["preset"] for f in flags}
    apex = apex_verdict(ms, flagged, base)
    notes: list[str] = []
    measured = sorted((m for m in ms if m.measured), key=lambda m: m.median_ms)  # type: ignore[arg-type, return-value]
    for m in ms:
        if m.status == "failed":
            notes.append(f"{m.preset} failed: {(m.errors[0].splitlines() or ['?'])[0][:200] if m.errors else 'no result'}")
        elif m.measured and len(m.ok_runs) < m.planned and m.complete:
            notes.append(f"{m.preset}: {m.planned - len(m.ok_runs)} of {m.planned} runs did not finish ok; "
                         f"its figures use {len(m.ok_runs)}")
    if measured and all(len(m.ok_runs) < 2 for m in measured):
        notes.append("one repeat: the run-to-run spread is unknown, so the noise rule sees only each run's own "
                     f"interval (without one, only the {NOISE_FLOOR:.0%} floor); use --repeats 2 or more")
    if status == "partial":
        notes.append("partial: interrupted before every run was made; the verdict uses what was measured")
    if not measured:
        what = {"not_measured": "not measured (interrupted before its first run)",
                "partial": "no run finished before the interruption: no verdict",
                "failed": "every run failed: no verdict"}.get(status, "nothing measured: no verdict")
        return WorkloadVerdict(workload, baseline, status, ms, flags=tuple(flags), apex=apex,
                               text=f"{workload}: {what}", notes=tuple(notes))
    fastest = measured[0]
    vs_base = versus(fastest, base) if base is not None and base.measured else None
    up_base = vs_base.speedup if vs_base is not None else None
    base_same = True if base is fastest else (vs_base.within_noise if vs_base is not None else None)
    runner = measured[1] if len(measured) > 1 else None
    vs_runner = versus(fastest, runner) if runner is not None else None
    up_runner = same = diff = thr = None
    if vs_runner is not None:
        same, diff, thr, up_runner = vs_runner.within_noise, vs_runner.difference, vs_runner.noise, vs_runner.speedup
    tied = tuple(m.preset for m in measured[1:] if versus(fastest, m).within_noise)

    # the recommendation: the fastest unflagged preset, unless within noise of the baseline
    eligible = [m for m in measured if m.preset not in flagged]
    best = eligible[0] if eligible else None
    if best is None:
        recommended = None
    elif base is not None and base.measured and (best is base or versus(best, base).within_noise):
        recommended = base.preset
    else:
        recommended = best.preset

    if base is fastest:
        text = f"{workload}: the baseline {base.preset} is fastest here ({_ms(fastest.median_ms)} ms/step)"
    else:
        vs = (f", {format_speedup(vs_base)} the baseline {base.preset}'s {_ms(base.median_ms)} ms/step"  # type: ignore[union-attr]
              if vs_base is not None else " (the baseline was not measured: no speed-up)")
        text = f"{workload}: {fastest.preset} is fastest here at {_ms(fastest.median_ms)} ms/step{vs}"
        if base_same and runner is not base:
            text += ", but within noise of the baseline"
    if runner is not None:
        if same:
            text += f"; the runner-up {runner.preset} is within noise ({_pct(diff)} slower, noise ±{_pct(thr)})"  # type: ignore[arg-type]
        elif runner is base:
            text += f", beyond noise (±{_pct(thr)})"  # type: ignore[arg-type]
        else:
            text += (f"; {format_speedup(vs_runner)} faster than the runner-up {runner.preset}, beyond noise "
                     f"(±{_pct(thr)})")  # type: ignore[arg-type]
    if fastest.preset in flagged:
        text += f". FLAGGED: {next(f['text'] for f in flags if f['preset'] == fastest.preset)}"
    if recommended is None:
        text += ". Nothing can be recommended (every measured preset is flagged)"
    elif base is not None and recommended == base.preset and base is not fastest:
        text += f". Use: {recommended} (nothing is measurably faster than the baseline)"
    else:
        others = [t for t in tied if t != recommended and t not in flagged]
        text += f". Use: {recommended}" + (f" (or {', '.join(others)}: within noise)" if others else "")
    return WorkloadVerdict(
        workload, baseline, status, ms, fastest=fastest.preset, speedup_vs_baseline=up_base,
        baseline_within_noise=base_same, runner_up=runner.preset if runner else None,
        speedup_vs_runner_up=up_runner, within_noise=same, difference=diff, noise_threshold=thr, tied=tied,
        recommended=recommended, flags=tuple(flags), apex=apex, text=text, notes=tuple(notes),
    )


def overall_apex(workloads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One line on Apex for the machine, from the workloads' `to_dict()` (their "apex" entries)."""
    per = [(w["workload"], w["apex"]) for w in workloads if w.get("apex") and w["apex"]["status"] != "none"]
    faster = [(n, a) for n, a in per if a["status"] == "faster"]
    no_gain = [(n, a) for n, a in per if a["status"] in ("within_noise", "slower", "faster_flagged")]
    unmeasurable = [(n, a) for n, a in per if a["status"] in ("not_measurable", "failed")]
    best_torch = {w["workload"]: w["apex"].get("best_torch") for w in workloads if w.get("apex")}

    def gain(a: Mapping[str, Any]) -> str:
        return f"{a['best_apex']} {a['speedup']:.2f}× vs {a['best_torch']}"

    def label(a: Mapping[str, Any]) -> str:
        return {"faster_flagged": "faster but flagged"}.get(a["status"], a["status"].replace("_", " "))

    if faster:
        text = "Apex is worth installing here for " + "; ".join(f"{n} ({gain(a)})" for n, a in faster)
        if no_gain:
            text += "; no clear gain for " + ", ".join(f"{n} ({label(a)})" for n, a in no_gain)
        status = "worth_it" if not no_gain else "mixed"
    elif no_gain:
        text = ("Apex brings no clear gain here: " +
                "; ".join(f"{n}: {a['best_apex']} vs {a['best_torch']} {label(a)}" for n, a in no_gain))
        status = "not_worth_it"
    elif unmeasurable:
        reason = unmeasurable[0][1].get("reason") or "unavailable"
        opts = ", ".join(f"{n}: {best_torch[n]}" for n in best_torch if best_torch[n])
        text = (f"Apex cannot be measured here ({reason}), so no Apex number is claimed; "
                f"best torch-only options: {opts or 'none measured'}")
        status = "not_measurable"
    else:
        text = "no Apex verdict: nothing comparable was measured"
        status = "unknown"
    if unmeasurable and (faster or no_gain):
        text += "; not measurable for " + ", ".join(n for n, _ in unmeasurable)
    return {"status": status, "text": text, "workloads": {n: a["status"] for n, a in per}}


# ---- planning -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkloadPlan:
    workload: str
    baseline: str | None
    runnable: tuple[Preset, ...]
    skipped: tuple[Measurement, ...]  # unavailable or not comparable


AvailabilityFn = Callable[[Preset], Any]  # -> an object with ok, reason, fix (core.availability.Availability)


def parse_workloads(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """'optimizer,norm' (or a list) -> ('optimizer', 'norm'), in the order given, duplicates dropped;
    None -> every workload. Raises AdviceError naming the unknown one."""
    if value is None:
        return tuple(WORKLOADS)
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    items = [p for p in items if p]
    if not items:
        raise AdviceError(f"no workload given; choose from {', '.join(WORKLOADS)}")
    out: list[str] = []
    for p in items:
        if p not in WORKLOADS:
            raise AdviceError(f"unknown workload {p[:40]!r}; choose from {', '.join(WORKLOADS)}")
        if p not in out:
            out.append(p)
    return tuple(out)


def plan(presets: Sequence[Preset], device: str, workloads: Sequence[str],
         availability_fn: AvailabilityFn) -> list[WorkloadPlan]:
    """Which presets of each workload run, and why the others do not."""
    plans = []
    size_key = "cpu_size" if device == "cpu" else "size"
    for w in workloads:
        mine = [p for p in presets if p.workload == w]
        bases = sorted((p for p in mine if p.variant == BASELINES[w]), key=lambda p: p.name != BASELINES[w])
        base = bases[0] if bases else None
        runnable, skipped = [], []
        for p in mine:
            kw = dict(preset=p.name, variant=p.variant, workload=w, needs_apex=tuple(p.needs_apex), amp=p.amp)
            if base is not None and dict(getattr(p, size_key)) != dict(getattr(base, size_key)):
                skipped.append(Measurement(**kw, available=False, fix="give it the baseline's size to compare it",
                                           reason=f"not comparable: its [{size_key}] differs from the baseline "
                                                  f"{base.name}'s"))
                continue
            a = availability_fn(p)
            if a is None or not a.ok:
                skipped.append(Measurement(**kw, available=False, reason=a.reason if a else "not checked",
                                           fix=a.fix if a else ""))
                continue
            runnable.append(p)
        plans.append(WorkloadPlan(w, base.name if base else None, tuple(runnable), tuple(skipped)))
    return plans


# ---- environment, storage, reuse -----------------------------------------------------------------
def apex_fingerprint() -> str:
    """What Apex is installed, without importing it: 'not installed', or its version and git commit
    (from pip's direct_url.json, or the source checkout's .git) or its location."""
    try:
        spec = importlib.util.find_spec("apex")
    except Exception:  # noqa: BLE001
        spec = None
    if spec is None:
        return "not installed"
    from importlib import metadata

    parts = []
    commit = None
    try:
        dist = metadata.distribution("apex")
        parts.append(f"version {dist.version}")
        raw = dist.read_text("direct_url.json")
        if raw:
            commit = (json.loads(raw).get("vcs_info") or {}).get("commit_id")
    except Exception:  # noqa: BLE001
        pass
    locations = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
    location = Path(locations[0]) if locations else None
    if commit is None and location is not None:
        commit = _git_head(location.parent)
    if commit:
        parts.append(f"commit {commit[:12]}")
    elif location is not None:
        parts.append(f"at {location}")
    return " ".join(parts) or "installed"


def _git_head(repo: Path) -> str | None:
    """The commit checked out in Apex's source tree (an editable install), or None; never raises."""
    git = repo / ".git"

    def read(path: Path) -> str:
        return files.read_text(path, files.DATA_LIMIT, "git file")

    try:
        head = read(git / "HEAD").strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = git / ref
            if path.is_file():
                return read(path).strip()
            for line in read(git / "packed-refs").splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
            return None
        return head or None
    except (OSError, files.UnreadableFile):
        return None


def environment(device: str) -> dict[str, Any]:
    """What advice depends on: the device model (GPU name and driver, or CPU model and threads), torch
    and Apex; `key` joins them (stored advice is reused only under the same key)."""
    import torch

    from .roofline import _cpu_model

    env: dict[str, Any] = {"device": device, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                           "apex": apex_fingerprint()}
    if device == "cuda":
        from .env import pci_bus_id
        from .nvml import Nvml

        env["name"] = torch.cuda.get_device_name()
        try:
            env["driver"] = Nvml(pci_bus_id=pci_bus_id()).driver_version().value or "unknown"
        except Exception:  # noqa: BLE001
            env["driver"] = "unknown"
        env["key"] = f"cuda|{env['name']}|driver {env['driver']}|torch {env['torch']}|apex {env['apex']}"
    else:
        env["name"] = _cpu_model()
        env["threads"] = torch.get_num_threads()
        env["key"] = f"cpu|{env['name']}|{env['threads']} threads|torch {env['torch']}|apex {env['apex']}"
    return env


def advice_file() -> Path:
    from .roofline import cache_dir

    return cache_dir() / CACHE_FILE


def load_store(path: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The stored advice documents by environment key, and a note if the file was unreadable; never raises."""
    path = path or advice_file()
    try:
        data = json.loads(files.read_text(path, files.DATA_LIMIT, "stored advice file"))
        entries = data["advice"]
        if not isinstance(entries, dict):
            raise TypeError("'advice' is not an object")
    except files.UnreadableFile as exc:
        return {}, None if exc.missing else f"stored advice is unreadable ({exc})"
    except Exception as exc:  # noqa: BLE001 - never raises: a bad store is only a note
        return {}, f"stored advice {path} is unreadable ({type(exc).__name__}: {files.one_line(exc)})"
    return entries, None


def store(document: Mapping[str, Any], path: Path | None = None) -> Path:
    """Keep `document` as the latest advice for its environment (atomically: a temporary file renamed
    over the store). Raises OSError."""
    path = path or advice_file()
    entries, _ = load_store(path)
    doc = {k: v for k, v in document.items() if k not in ("reused", "reused_from", "reuse_note")}
    entries[str(document["environment"]["key"])] = doc
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"version": CACHE_VERSION, "advice": entries}, indent=1))
    return path


def find_reusable(env: Mapping[str, Any], workloads: Sequence[str], plans: Sequence[WorkloadPlan] | None = None,
                  steps: int | None = None, repeats: int | None = None,
                  path: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """The stored advice to reuse (restricted to `workloads`, marked reused) or None, and why (not)."""
    path = path or advice_file()
    entries, note = load_store(path)
    if note:
        return None, note
    doc = entries.get(str(env["key"]))
    if not isinstance(doc, dict):
        return None, f"no stored advice for this environment ({env['key']})"
    try:
        if doc.get("kind") != KIND or doc.get("schema") != SCHEMA:
            return None, "the stored advice is from another apextui version"
        if doc.get("status") != "complete":
            return None, "the stored advice is partial (interrupted)"
        settings = doc["settings"]
        if steps is not None and settings["steps"] != steps:
            return None, f"the stored advice ran {settings['steps']} steps, not {steps}"
        if repeats is not None and settings["repeats"] != repeats:
            return None, f"the stored advice made {settings['repeats']} repeats, not {repeats}"
        stored = {w["workload"]: w for w in doc["workloads"]}
        missing = [w for w in workloads if w not in stored]
        if missing:
            return None, f"the stored advice does not cover {', '.join(missing)}"
        for p in plans or ():
            now = {x.name for x in p.runnable} | {m.preset for m in p.skipped}
            then = {x["preset"] for x in stored[p.workload]["presets"]}
            if now != then:
                return None, f"the {p.workload} presets changed since (now {', '.join(sorted(now))})"
            runnable_then = {x["preset"] for x in stored[p.workload]["presets"] if x["status"] != "unavailable"}
            if runnable_then != {x.name for x in p.runnable}:
                return None, f"which {p.workload} presets can run here changed since"
        chosen = [stored[w] for w in workloads]
    except (KeyError, TypeError) as exc:
        return None, f"the stored advice is malformed ({type(exc).__name__}: {exc})"
    runs = [r for w in chosen for p in w["presets"] for r in p["runs"]]
    counts = {"total": len(runs), "ok": sum(r["status"] == "ok" and r["median_ms"] is not None for r in runs),
              "failed": sum(r["status"] == "failed" for r in runs), "stopped": sum(r["status"] == "stopped" for r in runs)}
    out = dict(doc, workloads=chosen, apex=overall_apex(chosen), runs=counts, reused=True, reused_from=str(path),
               settings=dict(doc["settings"], workloads=list(workloads)))
    out["reuse_note"] = f"reused advice {provenance(doc)}, in the same environment"
    out["trust_note"] = trust_note(out)
    return out, "reused"


# ---- the document ---------------------------------------------------------------------------------
def document(verdicts: Sequence[WorkloadVerdict], *, device: str, env: Mapping[str, Any], steps: int,
             repeats: int, workloads: Sequence[str], partial: bool, started: float,
             finished: float | None = None) -> dict[str, Any]:
    """The advice as one JSON-ready document (`apextui advise --json`; what the store keeps)."""
    ws = [v.to_dict() for v in verdicts]
    partial = partial or any(v.status != "complete" for v in verdicts)
    runs = [r for v in verdicts for m in v.measurements for r in m.runs]
    return {
        "kind": KIND, "schema": SCHEMA, "status": "partial" if partial else "complete",
        "reused": False, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "measured_at_unix": round(started, 3),
        "elapsed_s": round((finished or time.time()) - started, 3),
        "device": device, "environment": dict(env),
        "settings": {"steps": steps, "repeats": repeats, "workloads": list(workloads),
                     "order": "interleaved: repeat 1 in preset order, repeat 2 reversed, ... (ABBA)"},
        "rules": {"noise_floor": NOISE_FLOOR, "noise": NOISE_RULE, "loss_tolerance": LOSS_TOLERANCE,
                  "loss": LOSS_RULE, "median": "median of the repeats' median ms/step (warm-up excluded), its "
                  "interval the hull of the repeats' 95 % median intervals and medians; p10/p90: median of the "
                  "repeats' p10/p90; compile time is never in ms/step"},
        "runs": {"total": len(runs), "ok": sum(r.ok for r in runs),
                 "failed": sum(r.status == "failed" for r in runs),
                 "stopped": sum(r.status == "stopped" for r in runs)},
        "workloads": ws,
        "apex": overall_apex(ws),
        "trust_note": trust_note({"device": device, "settings": {"steps": steps}}),
    }


def format_text(doc: Mapping[str, Any]) -> str:
    """The advice for a terminal: a short table per workload, a verdict line each, and the Apex line."""
    lines: list[str] = []
    env = doc.get("environment") or {}
    s = doc.get("settings") or {}
    head = (f"apextui advise on {doc.get('device')} ({env.get('name', '?')}, torch {env.get('torch', '?')}, "
            f"Apex {env.get('apex', '?')}): {s.get('repeats')} repeat(s) × {s.get('steps')} steps a preset")
    lines.append(head)
    if doc.get("reused"):
        lines.append(str(doc.get("reuse_note") or f"reused advice {provenance(doc)}"))
    else:
        lines.append(f"measured {doc.get('measured_at')} in {doc.get('elapsed_s', 0):.0f} s")
    trust = trust_note(doc)
    if trust:
        lines.append(f"WARNING: {trust}")
    if doc.get("status") == "partial":
        lines.append("PARTIAL: interrupted; the verdicts below use only what was measured")
    for w in doc.get("workloads", []):
        lines.append("")
        lines.append(f"{w['workload']} (baseline {w['baseline']})" + ("" if w["status"] == "complete" else
                                                                      f" [{w['status'].replace('_', ' ')}]"))
        lines.append(f"  {'preset':<24} {'median ms':>10} {'p10–p90 ms':>16} {'n':>2} {'spread':>7} "
                     f"{'vs base (95 %)':>19} {'loss':>8}  bottleneck · roofline")
        order = sorted(w["presets"], key=lambda p: (p["median_ms"] is None, p["median_ms"] or 0))
        for p in order:
            name = p["preset"] + (" *" if p["is_baseline"] else "") + (" !" if p["flagged"] else "")
            if p["status"] == "unavailable":
                lines.append(f"  {name:<24} unavailable: {p['reason']}")
                continue
            if p["median_ms"] is None:
                lines.append(f"  {name:<24} {not_measured_text(p)}")
                continue
            rng = f"{_ms(p['p10_ms'])}–{_ms(p['p90_ms'])}"
            spread = f"{100 * p['spread']:.1f}%" if p["spread"] is not None else "—"
            up = "base" if p["is_baseline"] else format_speedup(from_fields(p, "speedup_vs_baseline"))
            loss = f"{p['final_loss']:.4g}" if p["final_loss"] is not None else "—"
            extra = _roofline_text(p)
            if p["compile_s"] is not None:
                extra += f" · compile {p['compile_s']:.1f} s (not in ms/step)"
            lines.append(f"  {name:<24} {_ms(p['median_ms']):>10} {rng:>16} {p['repeats']:>2} {spread:>7} "
                         f"{up:>19} {loss:>8}  {extra}")
        lines.append(f"  verdict: {w['verdict']}")
        for f in w.get("flags", []):
            lines.append(f"  flag: {f['text']}")
        if w["apex"]["status"] != "none":
            lines.append(f"  apex: {w['apex']['text']}")
        for n in w.get("notes", []):
            lines.append(f"  note: {n}")
    lines.append("")
    lines.append(f"Apex on this machine: {doc['apex']['text']}")
    lines.append(f"(* baseline, ! flagged; n = repeats counted; ≈ within noise: {NOISE_RULE})")
    return "\n".join(lines)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return "just now"
    if seconds < 2 * 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def provenance(doc: Mapping[str, Any], now: float | None = None) -> str:
    """When, with how many steps and repeats, and on which device the advice was measured:
    'measured 2026-11-30T10:00:00+0000 (3 h ago) with 30 steps × 2 repeats a preset on cpu (AMD EPYC, 2 threads)'."""
    s = doc.get("settings") or {}
    env = doc.get("environment") or {}
    when = str(doc.get("measured_at", "?"))
    at = doc.get("measured_at_unix")
    if isinstance(at, (int, float)):
        when += f" ({_ago(max(0.0, (now or time.time()) - at))})"
    repeats = s.get("repeats")
    where = str(env.get("name") or "?") + (f", {env['threads']} threads" if env.get("threads") else "")
    return (f"measured {when} with {s.get('steps', '?')} steps × {repeats} repeat{'' if repeats == 1 else 's'} "
            f"a preset on {doc.get('device', '?')} ({where})")


def trust_note(doc: Mapping[str, Any]) -> str | None:
    """'too few steps to trust: …' when the advice's runs were shorter than `DEFAULT_STEPS` for its device
    (after warm-up their medians rest on a handful of values), else None."""
    steps = (doc.get("settings") or {}).get("steps")
    need = DEFAULT_STEPS.get(str(doc.get("device")))
    if not isinstance(steps, int) or need is None or steps >= need:
        return None
    return (f"too few steps to trust: {steps} steps a run, fewer than the {need} advise runs by default on "
            f"{doc.get('device')}; measure again with more steps")


def not_measured_text(p: Mapping[str, Any]) -> str:
    """Why a preset entry of the document has no median."""
    if p["status"] == "failed":
        return "failed: " + ("; ".join(e.splitlines()[0][:160] for e in p["errors"]) or "no result")
    if p["status"] == "stopped":
        return "stopped (interrupted) before a run finished: not counted"
    if p["status"] == "not_run":
        return "not run (interrupted before)"
    return p["status"].replace("_", " ")


def roofline_text(p: Mapping[str, Any]) -> str:
    """'memory-bound · 11.6 GB/s (49.3 % of copy)' for a preset entry of the document."""
    return _roofline_text(p)


def _roofline_text(p: Mapping[str, Any]) -> str:
    b = p.get("bottleneck") or {}
    label = b.get("label") or "—"
    r = p.get("roofline") or {}
    figs = []
    if r.get("tflops") is not None:
        frac = r.get("compute_fraction")
        figs.append(f"{r['tflops']:.3g} TFLOP/s" + (f" ({100 * frac:.1f} % of peak)" if frac is not None else ""))
    if r.get("gb_s") is not None:
        frac = r.get("bandwidth_fraction")
        figs.append(f"{r['gb_s']:.3g} GB/s" + (f" ({100 * frac:.1f} % of copy)" if frac is not None else ""))
    if r.get("primary") == "bytes":
        figs.reverse()  # the headline figure first
    busy = p.get("gpu_busy")
    if busy is not None:
        figs.append(f"GPU busy {100 * busy:.0f} %")
    return " · ".join([label, *figs]) if figs or label != "—" else "—"


# ---- the engine -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Progress:
    """What the advice is doing: `event` "plan" | "skip" | "run" (a run's update) | "run_end" | "reused" | "done"."""

    event: str
    index: int = 0  # this run, 1-based, of `total`
    total: int = 0
    workload: str | None = None
    preset: str | None = None
    repeat: int = 0
    repeats: int = 0
    status: str = ""  # the run's: starting | compiling | running | profiling | ok | stopped | failed
    steps_done: int = 0
    steps: int = 0
    elapsed_s: float | None = None
    compile_s: float | None = None
    result: RunResult | None = None  # run_end
    message: str = ""

    def line(self) -> str:
        """One line for a log (the CLI prints it for each run's end, skip and plan)."""
        where = f"[{self.index}/{self.total}] {self.workload} {self.preset} repeat {self.repeat}/{self.repeats}"
        if self.event == "run_end" and self.result is not None:
            r = self.result
            comp = f", compiled in {r.compile_s:.1f} s (not in ms/step)" if r.compile_s is not None else ""
            if r.ok:
                return (f"{where}: ok, median {_ms(r.median_ms)} ms/step (p10 {_ms(r.p10_ms)}, "
                        f"p90 {_ms(r.p90_ms)}) over {r.measured_steps} steps{comp}")
            err = f": {(r.error or '').splitlines()[0][:200]}" if r.error else ""
            return f"{where}: {r.status} after {r.steps} steps{err}"
        if self.event == "run":
            what = "compiling…" if self.status == "compiling" else f"{self.status} {self.steps_done}/{self.steps}"
            return f"{where}: {what}"
        return self.message


ProgressFn = Callable[[Progress], None]
RunnerFactory = Callable[..., Any]  # (preset, device, callback, *, steps, sample_interval) -> runner


def default_runner_factory(preset: Preset, device: str, callback: Callable[[Any], None], *,
                           steps: int | None = None, sample_interval: float = 1.0) -> Any:
    from .runner import Runner

    return Runner(preset, device, callback, steps=steps, sample_interval=sample_interval)


class Advisor:
    """Runs the advice: `run()` blocks (call it from the thread that should drive the runs) and returns
    the document; `stop()` (any thread, or a signal handler) stops the current run and makes `run()`
    return the partial advice; `document()` is the advice as measured so far."""

    def __init__(self, device: str, *, steps: int | None = None, repeats: int = DEFAULT_REPEATS,
                 workloads: Sequence[str] | str | None = None, presets: Sequence[Preset] | None = None,
                 availability_fn: AvailabilityFn | None = None, runner_factory: RunnerFactory | None = None,
                 on_progress: ProgressFn | None = None, sample_interval: float = 1.0,
                 env: Mapping[str, Any] | None = None, use_run: bool = True) -> None:
        if device not in DEFAULT_STEPS:
            raise AdviceError(f"device must be cpu or cuda (resolved), got {device!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
            raise AdviceError(f"repeats must be a whole number from 1 to {MAX_REPEATS}, got {repeats!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise AdviceError(f"steps must be a whole number >= 1, got {steps!r}")
        self.device = device
        self.steps = steps if steps is not None else DEFAULT_STEPS[device]
        self.repeats = repeats
        self.workloads = parse_workloads(workloads)
        if presets is None:
            from .presets import load_all

            presets = load_all()[0]
        self.presets = list(presets)
        if availability_fn is None:
            from .availability import availability

            availability_fn = lambda p: availability(p, device)  # noqa: E731
        self.availability_fn = availability_fn
        self.runner_factory = runner_factory or default_runner_factory
        self.on_progress = on_progress
        self.sample_interval = sample_interval
        self._env = dict(env) if env is not None else None
        self.use_run = use_run
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._runner: Any = None
        self._plans: list[WorkloadPlan] | None = None
        self._runs: dict[tuple[str, str], list[RunResult]] = {}
        self.started = time.time()
        self.finished: float | None = None
        self.interrupted = False

    # ---- control --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop after the current step of the current run; safe from any thread and from signal handlers."""
        self._cancel.set()
        runner = self._runner
        if runner is not None:
            try:
                runner.stop()
            except Exception:  # noqa: BLE001
                pass

    @property
    def stopping(self) -> bool:
        return self._cancel.is_set()

    @property
    def env(self) -> dict[str, Any]:
        if self._env is None:
            try:
                self._env = environment(self.device)
            except Exception as exc:  # noqa: BLE001 - the advice stands without it (and is never reused)
                self._env = {"device": self.device, "error": f"{type(exc).__name__}: {exc}",
                             "key": f"{self.device}|unknown environment|{time.time()}"}
        return self._env

    def plans(self) -> list[WorkloadPlan]:
        if self._plans is None:
            self._plans = plan(self.presets, self.device, self.workloads, self.availability_fn)
        return self._plans

    @property
    def total_runs(self) -> int:
        return sum(len(p.runnable) for p in self.plans()) * self.repeats

    # ---- results --------------------------------------------------------------------------------
    def verdicts(self) -> list[WorkloadVerdict]:
        out = []
        for p in self.plans():
            ms = [Measurement(preset=x.name, variant=x.variant, workload=x.workload, needs_apex=tuple(x.needs_apex),
                              amp=x.amp, runs=tuple(self._runs.get((p.workload, x.name), ())), planned=self.repeats)
                  for x in p.runnable]
            out.append(verdict(p.workload, [*ms, *p.skipped], baseline=p.baseline))
        return out

    def document(self) -> dict[str, Any]:
        return document(self.verdicts(), device=self.device, env=self.env, steps=self.steps, repeats=self.repeats,
                        workloads=self.workloads, partial=self.interrupted, started=self.started,
                        finished=self.finished)

    def reusable(self, steps: int | None = None, repeats: int | None = None,
                 path: Path | None = None) -> tuple[dict[str, Any] | None, str]:
        """Stored advice measured in this environment that covers these workloads and presets, or None,
        and why (see find_reusable); `steps`/`repeats`: what the user asked for explicitly, if anything."""
        return find_reusable(self.env, self.workloads, self.plans(), steps=steps, repeats=repeats, path=path)

    # ---- running --------------------------------------------------------------------------------
    def _emit(self, progress: Progress) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(progress)
        except Exception:  # noqa: BLE001 - a broken consumer must not stop the advice
            import sys
            import traceback

            traceback.print_exc(file=sys.stderr)

    def run(self) -> dict[str, Any]:
        """Measure every runnable preset `repeats` times, interleaved; the document (partial if stopped)."""
        self.started = time.time()
        plans = self.plans()
        total = self.total_runs
        self._emit(Progress("plan", total=total, repeats=self.repeats, steps=self.steps,
                            message=f"advice on {self.device}: {total} runs ({self.repeats} repeat(s) × "
                                    f"{self.steps} steps) over {', '.join(self.workloads)}"))
        for p in plans:
            for m in p.skipped:
                self._emit(Progress("skip", workload=p.workload, preset=m.preset, total=total,
                                    message=f"{p.workload} {m.preset}: not run: {m.reason}"))
        index = 0
        for p in plans:
            for repeat in range(1, self.repeats + 1):
                order = p.runnable if repeat % 2 else tuple(reversed(p.runnable))
                for preset in order:
                    if self._cancel.is_set():
                        self.interrupted = True
                        break
                    index += 1
                    result = self._run_one(preset, repeat, index, total)
                    self._runs.setdefault((p.workload, preset.name), []).append(result)
                    self._emit(Progress("run_end", index=index, total=total, workload=p.workload,
                                        preset=preset.name, repeat=repeat, repeats=self.repeats,
                                        status=result.status, steps_done=result.steps, steps=self.steps,
                                        elapsed_s=result.elapsed_s, compile_s=result.compile_s, result=result))
        if self._cancel.is_set():
            self.interrupted = True
        self.finished = time.time()
        doc = self.document()
        self._emit(Progress("done", total=total, index=index, message=f"advice {doc['status']}"))
        return doc

    def _run_one(self, preset: Preset, repeat: int, index: int, total: int) -> RunResult:
        done = threading.Event()
        final: list[Any] = []

        def callback(snap: Any) -> None:  # the runner's delivery (or reader) thread, <= ~10 times a second
            if snap.finished:
                final.append(snap)
            info = snap.info
            self._emit(Progress("run", index=index, total=total, workload=preset.workload, preset=preset.name,
                                repeat=repeat, repeats=self.repeats, status=snap.status,
                                steps_done=snap.steps_done, steps=self.steps, elapsed_s=snap.elapsed_s,
                                compile_s=info.compile_s if info is not None else None))
            if snap.finished:
                done.set()

        self._emit(Progress("run", index=index, total=total, workload=preset.workload, preset=preset.name,
                            repeat=repeat, repeats=self.repeats, status="starting", steps=self.steps))
        try:
            runner = self.runner_factory(preset, self.device, callback, steps=self.steps,
                                         sample_interval=self.sample_interval)
        except Exception as exc:  # noqa: BLE001
            return RunResult(repeat, "failed", error=f"could not start: {type(exc).__name__}: {exc}")
        with self._lock:
            self._runner = runner
        if self._cancel.is_set():  # stop() came between the check in run() and now
            runner.stop()
        try:
            if self.use_run and callable(getattr(runner, "run", None)):
                runner.run()  # trains in this thread (headless: the main thread)
            else:
                runner.start()
                while not done.wait(0.1):
                    if not runner.is_alive():
                        done.wait(1.0)
                        break
                join = getattr(runner, "join", None)
                if callable(join):  # the worker process exits before the next run starts
                    join(RUN_JOIN_S)
        except Exception as exc:  # noqa: BLE001
            if not final:
                return RunResult(repeat, "failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._runner = None
        snap = final[-1] if final else getattr(runner, "result", None)
        if snap is None:
            return RunResult(repeat, "failed", error="the run ended without a final result")
        return RunResult.from_snapshot(repeat, snap)


def run_advice(device: str, steps: int | None = None, repeats: int = DEFAULT_REPEATS,
               workloads: Sequence[str] | str | None = None, runner_factory: RunnerFactory | None = None,
               on_progress: ProgressFn | None = None, **kw: Any) -> dict[str, Any]:
    """Measure and return the advice document (see `Advisor` for the other keyword arguments)."""
    return Advisor(device, steps=steps, repeats=repeats, workloads=workloads, runner_factory=runner_factory,
                   on_progress=on_progress, **kw).run()
