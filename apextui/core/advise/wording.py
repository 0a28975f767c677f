"""The advice's words that more than one place shows: provenance, the trust note, why a preset has no
median, its roofline figures."""

from __future__ import annotations

import time
from typing import Any, Mapping

from .model import DEFAULT_STEPS


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
