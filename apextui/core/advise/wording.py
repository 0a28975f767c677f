"""The advice's words: what each decided verdict says (`decide` decides, then asks here), the flags and
notes, provenance, the trust note, why a preset has no median, its roofline figures."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from ..measure.compare import NOISE_FLOOR, SINGLE_RUNS_NOTE, Comparison, format_speedup
from ..number_format import clip
from ..number_format import ms as _ms
from ..number_format import pct as _pct
from .search import SEARCH_STEPS
from .records import DEFAULT_STEPS, LOSS_TOLERANCE, ApexVerdict, MachineApexStatus, Measurement, WorkloadStatus, \
    WorkloadVerdict, versus


def _ago(seconds: float) -> str:
    if seconds < 120:
        return "just now"
    if seconds < 2 * 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def provenance(doc: Mapping[str, Any], now: float | None = None) -> str:
    """Where, when, and with how many runs and steps the advice was measured, as it reads aloud:
    'measured on cpu (AMD EPYC, 2 threads) at 2026-11-30T10:00:00+0000 (3 h ago): each preset ran twice, 30 steps a
    run'."""
    s = doc.get("settings") or {}
    env = doc.get("environment") or {}
    when = str(doc.get("measured_at", "?"))
    at = doc.get("measured_at_unix")
    if isinstance(at, (int, float)):
        when += f" ({_ago(max(0.0, (now or time.time()) - at))})"
    repeats = s.get("repeats")
    where = str(env.get("name") or "?") + (f", {env['threads']} threads" if env.get("threads") else "")
    times = {1: "once", 2: "twice"}.get(repeats, f"{repeats} times") if isinstance(repeats, int) else "? times"
    return (f"measured on {doc.get('device', '?')} ({where}) at {when}: each preset ran {times}, "
            f"{s.get('steps', '?')} steps a run")


def trust_note(doc: Mapping[str, Any]) -> str | None:
    """'too few steps to trust: …' when the advice's runs were shorter than `DEFAULT_STEPS` for its device
    (after warm-up their medians rest on a handful of values), else None."""
    settings = doc.get("settings") or {}
    steps = settings.get("steps")
    # a search's runs are short by design (`search.SEARCH_STEPS`): its answer is confirmed in rounds instead
    need = (SEARCH_STEPS if settings.get("search") else DEFAULT_STEPS).get(str(doc.get("device")))
    if not isinstance(steps, int) or need is None or steps >= need:
        return None
    return (f"too few steps to trust: {steps} steps a run, fewer than the {need} advise runs by default on "
            f"{doc.get('device')}; measure again with more steps")


def not_measured_text(p: Mapping[str, Any]) -> str:
    """Why a preset entry of the document has no median."""
    if p["status"] == "failed":
        return "failed: " + ("; ".join(clip(e.splitlines()[0], 160) for e in p["errors"]) or "no result")
    if p["status"] == "stopped":
        return "stopped (interrupted) before a run finished: not counted"
    if p["status"] == "not_run":
        return p.get("reason") or "not run (interrupted before)"
    return p["status"].replace("_", " ")


def roofline_text(p: Mapping[str, Any]) -> str:
    """'memory-bound · 11.6 GB/s (49.3 % of copy)' for a preset entry of the document, on one line; 'bottleneck unknown'
    where it could not be told, with the figures alone: their fractions only where they can be trusted (the why is
    the document's `bottleneck.reason`: in a row it ran to three lines a preset)."""
    return _roofline_text(p)


def _roofline_text(p: Mapping[str, Any]) -> str:
    b = p.get("bottleneck") or {}
    label = b.get("label") or "—"
    untrusted = label == "unknown" and "cannot be trusted" in str(b.get("reason") or "")
    if label == "unknown":  # a bare "unknown · 9.67 GB/s" read as a bottleneck named "unknown"
        label = "bottleneck unknown"
    r = p.get("roofline") or {}
    figs = []
    if r.get("tflops") is not None:
        frac = None if untrusted else r.get("compute_fraction")
        figs.append(f"{r['tflops']:.3g} TFLOP/s" + (f" ({100 * frac:.1f} % of peak)" if frac is not None else ""))
    if r.get("gb_s") is not None:
        frac = None if untrusted else r.get("bandwidth_fraction")
        figs.append(f"{r['gb_s']:.3g} GB/s" + (f" ({100 * frac:.1f} % of copy)" if frac is not None else ""))
    if r.get("primary") == "bytes":
        figs.reverse()  # the headline figure first
    busy = p.get("gpu_busy")
    if busy is not None:
        figs.append(f"GPU busy {100 * busy:.0f} %")
    return " · ".join([label, *figs]) if figs or label != "—" else "—"


# ---- the verdicts' words ---------------------------------------------------------------------------
def check_flag(m: Measurement) -> str:
    failed = next((r.summary.check for r in m.ok_runs if r.check_failed), None)
    if failed is not None and failed.kind == "loss_parity":  # the user's model: its losses against fp32's
        swap = failed.norm_swap
        what = failed.message or (
            "its norm swap changed the first batch's loss" if swap and not swap.passed else
            f"its loss left fp32's by more than {100 * (failed.relative_tolerance or 0):.3g} % within "
            f"{failed.steps} steps (same weights, same batches)")
        return f"{m.preset} failed the loss-parity check: {what}: not recommended"
    return f"{m.preset} failed its accuracy check against torch: not recommended"


def loss_flag(m: Measurement, base: Measurement, worse: float) -> str:
    return (f"{m.preset}'s final loss {m.final_loss:.4g} is {_pct(worse)} worse than the baseline {base.preset}'s "
            f"{base.final_loss:.4g} after the same steps (over {LOSS_TOLERANCE:.0%}): not recommended")


# why a run was left out of its preset's figures (`compare.DISTURBED_RULE`), in words
LEFT_OUT_WHY = {"busy": "other work competed with it", "wide": "its spread was far wider than its other runs'"}


def notes(ms: Sequence[Measurement], status: WorkloadStatus, measured: Sequence[Measurement]) -> tuple[str, ...]:
    """What the reader of a workload's verdict should know: failed presets, runs that did not count, one
    repeat only, an interrupted advice."""
    out: list[str] = []
    for m in ms:
        if m.status == "failed":
            first = clip((m.errors[0].splitlines() or ['?'])[0], 200) if m.errors else 'no result'
            out.append(f"{m.preset} failed: {first}")
        elif m.measured and len(m.ok_runs) < m.planned and m.complete:
            out.append(f"{m.preset}: {m.planned - len(m.ok_runs)} of {m.planned} runs did not finish ok; "
                       f"its figures use {len(m.kept_runs)}")
        if m.measured and m.left_out:  # `n` counts the runs its figures use: the others are named, with why
            said = "; ".join(f"run {r.repeat} ({_ms(r.median_ms)} ms/step: {LEFT_OUT_WHY[why]})"
                             for r, why in m.left_out)
            out.append(f"{m.preset}: left out of its figures: {said}")
    if measured and all(len(m.ok_runs) < 2 for m in measured):
        drift = next((m.drift for m in measured if m.drift is not None), None)
        if drift is not None and drift.known:
            out.append(f"one repeat: single runs, one after another; their intervals are widened by the largest drift "
                       f"seen between two runs of one configuration here ({drift.ratio:.1%}); use --repeats 2 or more")
        elif drift is not None:
            out.append(f"one repeat: {SINGLE_RUNS_NOTE}, so every interval is widened by a factor of "
                       f"{drift.factor:g} (nothing here ran twice); use --repeats 2 or more")
        else:
            out.append("one repeat: the run-to-run spread is unknown, so the noise rule sees only each run's own "
                       f"interval (without one, only the {NOISE_FLOOR:.0%} floor); use --repeats 2 or more")
    if status == "partial":
        out.append("partial: interrupted before every run was made; the verdict uses what was measured")
    return tuple(out)


def apex_text(v: ApexVerdict, ms: Sequence[Measurement], base: Measurement | None) -> str:
    """Apex against torch for one workload, in words (from the decided `v` and the measurements it names)."""
    by = {m.preset: m for m in ms}
    best_torch = by.get(v.best_torch) if v.best_torch is not None else None
    choice = by.get(v.torch_choice) if v.torch_choice is not None else best_torch
    if choice is not None:
        up = (f", {format_speedup(versus(choice, base))} the baseline"
              if base is not None and base.measured and base is not choice else "")
        torch_text = f"the best torch-only option is {choice.preset} ({_ms(choice.median_ms)} ms/step{up})"
        if best_torch is not None and best_torch is not choice:
            torch_text += f"; {best_torch.preset} is within noise of it"
    else:
        torch_text = "no torch-only preset was measured either"
    if v.status == "none":
        return "no Apex preset for this workload"
    if v.status == "failed":
        return f"the Apex presets failed here ({v.failed_preset}: {v.reason}); no Apex number; {torch_text}"
    if v.status == "not_measurable":
        return f"Apex cannot be measured here ({v.reason}); no Apex number is claimed; {torch_text}"
    if v.status == "not_measured":
        return f"the Apex presets were not measured ({v.reason or 'interrupted'}); {torch_text}"
    best_apex = by[v.best_apex]  # type: ignore[index]
    if v.status == "no_torch" or best_torch is None:
        return (f"{best_apex.preset} ran ({_ms(best_apex.median_ms)} ms/step) but no torch-only preset was measured "
                "to compare it with")
    pair = (f"best Apex {best_apex.preset} {_ms(best_apex.median_ms)} vs fastest torch-only {best_torch.preset} "
            f"{_ms(best_torch.median_ms)} ms/step")
    # where the torch-only option offered is not the fastest torch-only preset (that one is within noise of the
    # baseline), say which is offered: the line never leaves a faster-looking preset as the implied choice
    offered = f"; {torch_text}" if choice is not best_torch else ""
    if v.status == "within_noise":
        diff, thr = v.difference or 0.0, v.noise_threshold or 0.0  # set whenever both were measured
        return (f"not worth installing for this: {pair}, within noise ({_pct(diff)} apart, noise ±{_pct(thr)})"
                f"{offered}")
    if v.status == "faster_flagged":
        return (f"{best_apex.preset} is {format_speedup(versus(best_apex, best_torch))} faster than the fastest "
                f"torch-only {best_torch.preset} ({pair}), but it is flagged (loss or accuracy): not a clear gain"
                f"{offered}")
    if v.status == "faster":
        return (f"worth it here: {best_apex.preset} is {format_speedup(versus(best_apex, best_torch))} faster than "
                f"the fastest torch-only {best_torch.preset} ({pair})")
    return (f"not worth it here: the torch-only {best_torch.preset} is "
            f"{format_speedup(versus(best_torch, best_apex))} faster than the best Apex {best_apex.preset} ({pair})"
            f"{offered}")


_NOT_MEASURED = {"not_measured": "not measured (interrupted before its first run)",
                 "partial": "no run finished before the interruption: no verdict",
                 "failed": "every run failed: no verdict"}


def workload_text(v: WorkloadVerdict) -> str:
    """One workload's verdict in words: the fastest and by how much, the runner-up, flags, what to use."""
    w = v.workload
    fastest = v.measurement(v.fastest)
    if fastest is None:
        return f"{w}: {_NOT_MEASURED.get(v.status, 'nothing measured: no verdict')}"
    base = v.measurement(v.baseline)
    base = base if base is not None and base.measured else None
    runner = v.measurement(v.runner_up)
    thr = v.noise_threshold or 0.0  # set whenever there is a runner-up
    flagged = {f["preset"] for f in v.flags}
    if base is fastest:
        text = f"{w}: the baseline {fastest.preset} is fastest here ({_ms(fastest.median_ms)} ms/step)"
    else:
        vs = (f", {format_speedup(versus(fastest, base))} the baseline {base.preset}'s {_ms(base.median_ms)} ms/step"
              if base is not None else " (the baseline was not measured: no speed-up)")
        text = f"{w}: {fastest.preset} is fastest here at {_ms(fastest.median_ms)} ms/step{vs}"
        if v.baseline_within_noise and runner is not base:
            text += ", but within noise of the baseline"
    if runner is not None:
        if v.within_noise:
            text += (f"; the runner-up {runner.preset} is within noise ({_pct(v.difference or 0.0)} slower, "
                     f"noise ±{_pct(thr)})")
        elif runner is base:
            text += f", beyond noise (±{_pct(thr)})"
        else:
            text += (f"; {format_speedup(versus(fastest, runner))} faster than the runner-up {runner.preset}, beyond "
                     f"noise (±{_pct(thr)})")
    if fastest.preset in flagged:
        text += f". FLAGGED: {next(f['text'] for f in v.flags if f['preset'] == fastest.preset)}"
    rec = v.recommended
    if rec is None:
        text += ". Nothing can be recommended (every measured preset is flagged)"
    elif base is not None and rec == base.preset and base is not fastest:
        text += f". Use: {rec} (nothing is measurably faster than the baseline)"
    else:
        others = list(v.within_noise_of_recommended)
        text += f". Use: {rec}" + (f" (or {', '.join(others)}: within noise)" if others else "")
    return text


def overall_apex_text(status: MachineApexStatus, faster: Sequence[tuple[str, Mapping[str, Any]]],
                      no_gain: Sequence[tuple[str, Mapping[str, Any]]],
                      unmeasurable: Sequence[tuple[str, Mapping[str, Any]]], best_torch: Mapping[str, Any]) -> str:
    """Apex on this machine in one line, from `decide.overall_apex`'s groups of workloads."""

    def gain(a: Mapping[str, Any]) -> str:  # only "faster" entries: beyond noise, so no "≈"
        c = Comparison(a["speedup"], None, None, "faster")
        return f"{a['best_apex']} {format_speedup(c, compact=True)} vs {a['best_torch']}"

    def label(a: Mapping[str, Any]) -> str:
        return {"faster_flagged": "faster but flagged"}.get(a["status"], a["status"].replace("_", " "))

    if status in ("worth_it", "mixed"):
        text = "Apex is worth installing here for " + "; ".join(f"{n} ({gain(a)})" for n, a in faster)
        if no_gain:
            text += "; no clear gain for " + ", ".join(f"{n} ({label(a)})" for n, a in no_gain)
    elif status == "not_worth_it":
        text = ("Apex brings no clear gain here: " +
                "; ".join(f"{n}: {a['best_apex']} vs {a['best_torch']} {label(a)}" for n, a in no_gain))
    elif status == "not_measurable":
        reason = unmeasurable[0][1].get("reason") or "unavailable"
        opts = ", ".join(f"{n}: {best_torch[n]}" for n in best_torch if best_torch[n])
        text = (f"Apex cannot be measured here ({reason}), so no Apex number is claimed; "
                f"best torch-only options: {opts or 'none measured'}")
    else:
        text = "no Apex verdict: nothing comparable was measured"
    if unmeasurable and (faster or no_gain):
        text += "; not measurable for " + ", ".join(n for n, _ in unmeasurable)
    return text
