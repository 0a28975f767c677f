"""The decision for one workload and for Apex on the machine, from measurements (pure: numbers in,
verdict out)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..compare import NOISE_FLOOR, Comparison, format_speedup
from ..fmt import ms as _ms
from ..presets import BASELINES
from .model import LOSS_CHECKED, LOSS_TOLERANCE, ApexVerdict, MachineApexStatus, Measurement, WorkloadStatus, \
    WorkloadVerdict, _round, versus


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %"


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
    status: WorkloadStatus
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

    def gain(a: Mapping[str, Any]) -> str:  # only "faster" entries: beyond noise, so no "≈"
        c = Comparison(a["speedup"], None, None, "faster")
        return f"{a['best_apex']} {format_speedup(c, compact=True)} vs {a['best_torch']}"

    def label(a: Mapping[str, Any]) -> str:
        return {"faster_flagged": "faster but flagged"}.get(a["status"], a["status"].replace("_", " "))

    status: MachineApexStatus
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
