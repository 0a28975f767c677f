"""The decision for one workload and for Apex on the machine, from measurements (pure: numbers in, typed
verdict out). What the decisions say in words is `wording`'s: each verdict here is decided first, then
worded there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping, Sequence

from ..measure.compare import ms, unsure
from ..presets import BASELINE_NAMES
from ..workloads.spec import WORKLOADS
from . import wording
from .choice import Choice, choose
from .records import LOSS_CHECKED, LOSS_TOLERANCE, ApexStatus, ApexVerdict, MachineApexStatus, Measurement, \
    WorkloadStatus, WorkloadVerdict, _round, versus


def _fastest(ms: Sequence[Measurement]) -> Measurement | None:
    measured = [m for m in ms if m.measured]
    return min(measured, key=lambda m: m.median_ms) if measured else None  # type: ignore[arg-type, return-value]


def _flags(workload: str, base: Measurement | None, ms: Sequence[Measurement]) -> list[dict[str, Any]]:
    """A failed accuracy check, and (workloads in LOSS_CHECKED) a final loss over LOSS_TOLERANCE worse than
    the baseline's: flagged presets are reported but never recommended."""
    flags: list[dict[str, Any]] = []
    base_loss = base.final_loss if base is not None else None
    for m in ms:
        if not m.measured:
            continue
        if m.check_failed:
            flags.append({"preset": m.preset, "kind": "check", "text": wording.check_flag(m)})
        if (workload in LOSS_CHECKED and base is not None and m is not base and base_loss
                and m.final_loss is not None):
            worse = (m.final_loss - base_loss) / abs(base_loss)
            if worse > LOSS_TOLERANCE:
                flags.append({"preset": m.preset, "kind": "loss", "final_loss": _round(m.final_loss, 6),
                              "baseline_loss": _round(base_loss, 6), "worse_by": _round(worse),
                              "text": wording.loss_flag(m, base, worse)})
    return flags


def _drift(ms: Sequence[Measurement]) -> Any:
    """The advice's drift between runs, which its measurements carry (None where they carry none)."""
    return next((m.drift for m in ms if m.drift is not None), None)


def _choice(measurements: Sequence[Measurement], flagged: set[str],
            base: Measurement | None) -> Choice[Measurement]:
    """The one decision (`choice.choose`) over the measured, unflagged options: the Apex line and the
    recommendation are both worded from it."""
    eligible = [m for m in measurements if m.measured and m.preset not in flagged]
    return choose(eligible, lambda m: m.timing, lambda m: bool(m.needs_apex),
                  base if base is not None and base.measured else None, drift=_drift(measurements), versus=versus)


def apex_verdict(measurements: Sequence[Measurement], picked: Choice[Measurement], flagged: Iterable[str] = (),
                 base: Measurement | None = None, like_with_like: bool = False) -> ApexVerdict:
    """The fastest measured Apex preset against the fastest measured torch-only one, and the torch-only choice
    the verdict offers, worded from `picked`, the workload's one decision (`_choice`; pure). `like_with_like`: `picked`
    names the only pair to weigh (the model search's answer with and without its Apex values); where it names none,
    no other pair stands in for it (that would weigh Apex across other axes: compile's gain credited to Apex)."""
    flagged = set(flagged)
    apex = [m for m in measurements if m.needs_apex]
    torch_ok = [m for m in measurements if not m.needs_apex and m.measured]
    best_torch = picked.fastest_torch or _fastest(torch_ok)
    torch_choice = picked.torch or best_torch
    kw: dict[str, Any] = {"best_torch": best_torch.preset if best_torch else None,
                          "best_torch_ms": ms(best_torch.median_ms) if best_torch else None,
                          "torch_choice": torch_choice.preset if torch_choice else None}

    def worded(status: ApexStatus, **more: Any) -> ApexVerdict:
        v = ApexVerdict(status, "", **kw, **more)
        return replace(v, text=wording.apex_text(v, measurements, base))

    if not apex:
        return worded("none")
    measured = [m for m in apex if m.measured]
    if not measured:
        unavailable = [m for m in apex if not m.available]
        failed = [m for m in apex if m.status == "failed"]
        if failed:
            why = failed[0].errors[0].splitlines()[0][:200] if failed[0].errors else "failed"
            return worded("failed", reason=why, failed_preset=failed[0].preset)
        if len(unavailable) == len(apex):
            return worded("not_measurable", reason=unavailable[0].reason or "unavailable")
        return worded("not_measured")
    if like_with_like and picked.apex is None:
        return worded("not_measured", reason="no point with an Apex value ran beside the answer, its other values the "
                                            "same, before the budget ended")
    best_apex = picked.apex or _fastest(measured)
    assert best_apex is not None
    kw.update(best_apex=best_apex.preset, best_apex_ms=best_apex.median_ms)
    if best_torch is None:
        return worded("no_torch")
    c = versus(best_apex, best_torch)
    if like_with_like and c.basis != "paired":  # the search's pair not measured round by round: never beyond noise
        c = unsure(c)
    kw.update(speedup=c.speedup, difference=c.difference, noise_threshold=c.noise)
    if c.within_noise:
        return worded("within_noise")
    if c.verdict == "faster":
        return worded("faster_flagged" if best_apex.preset in flagged else "faster")
    return worded("slower")


def _status(ms: Sequence[Measurement]) -> WorkloadStatus:
    planned = [m for m in ms if m.available]
    if planned and all(not m.runs for m in planned):
        return "not_measured"
    if not all(m.complete for m in ms):
        return "partial"
    if planned and not any(m.measured for m in planned):
        return "failed"
    return "complete"


def verdict(workload: str, measurements: Sequence[Measurement], baseline: str | None = None,
            decided: Choice[Measurement] | None = None) -> WorkloadVerdict:
    """The verdict for one workload from its measurements (pure: numbers in, verdict out).

    `baseline` is the baseline preset's name (default: the measurement that runs the workload's baseline point,
    the one named like that point first). `decided`: the decision where the caller made it (the model
    search's confirmed answer, `search.Search`), instead of `choice.choose` over every measurement."""
    ms = tuple(measurements)
    if baseline is None:
        spec = WORKLOADS.get(workload)
        cands = [m for m in ms if spec is not None and m.config == spec.baseline_point]
        cands.sort(key=lambda m: m.preset != BASELINE_NAMES.get(workload))
        baseline = cands[0].preset if cands else None
    base = next((m for m in ms if m.preset == baseline), None)
    status = _status(ms)
    flags = _flags(workload, base if base is not None and base.measured else None, ms)
    flagged = {f["preset"] for f in flags}
    picked = decided if decided is not None else _choice(ms, flagged, base)  # the one decision: both lines below
    apex = apex_verdict(ms, picked, flagged, base, like_with_like=decided is not None)
    measured = sorted((m for m in ms if m.measured), key=lambda m: m.median_ms)  # type: ignore[arg-type, return-value]
    notes = wording.notes(ms, status, measured)
    if not measured:
        v = WorkloadVerdict(workload, baseline, status, ms, flags=tuple(flags), apex=apex, notes=notes)
        return replace(v, text=wording.workload_text(v))
    fastest = measured[0]
    vs_base = versus(fastest, base) if base is not None and base.measured else None
    base_same = True if base is fastest else (vs_base.within_noise if vs_base is not None else None)
    runner = measured[1] if len(measured) > 1 else None
    vs_runner = versus(fastest, runner) if runner is not None else None
    tied = tuple(m.preset for m in measured[1:] if versus(fastest, m).within_noise)

    eligible = [m for m in measured if m.preset not in flagged]
    rec = picked.recommended
    recommended = rec.preset if rec is not None else None
    close = tuple(m.preset for m in eligible if rec is not None and m is not rec and versus(rec, m).within_noise)
    v = WorkloadVerdict(
        workload, baseline, status, ms, fastest=fastest.preset,
        speedup_vs_baseline=vs_base.speedup if vs_base is not None else None, baseline_within_noise=base_same,
        runner_up=runner.preset if runner else None,
        speedup_vs_runner_up=vs_runner.speedup if vs_runner is not None else None,
        within_noise=vs_runner.within_noise if vs_runner is not None else None,
        difference=vs_runner.difference if vs_runner is not None else None,
        noise_threshold=vs_runner.noise if vs_runner is not None else None, tied=tied,
        recommended=recommended, within_noise_of_recommended=close, flags=tuple(flags), apex=apex, notes=notes,
    )
    return replace(v, text=wording.workload_text(v))


def overall_apex(workloads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apex for the machine, from the workloads' `to_dict()` (their "apex" entries): worth it where it is
    faster beyond noise, no gain where it is not, or not measurable here."""
    per = [(w["workload"], w["apex"]) for w in workloads if w.get("apex") and w["apex"]["status"] != "none"]
    faster = [(n, a) for n, a in per if a["status"] == "faster"]
    no_gain = [(n, a) for n, a in per if a["status"] in ("within_noise", "slower", "faster_flagged")]
    unmeasurable = [(n, a) for n, a in per if a["status"] in ("not_measurable", "failed")]
    best_torch = {w["workload"]: w["apex"].get("torch_choice") for w in workloads if w.get("apex")}
    status: MachineApexStatus
    if faster:
        status = "worth_it" if not no_gain else "mixed"
    elif no_gain:
        status = "not_worth_it"
    elif unmeasurable:
        status = "not_measurable"
    else:
        status = "unknown"
    text = wording.overall_apex_text(status, faster, no_gain, unmeasurable, best_torch)
    return {"status": status, "text": text, "workloads": {n: a["status"] for n, a in per}}
