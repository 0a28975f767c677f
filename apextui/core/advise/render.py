"""The one renderer of the advice document."""

from __future__ import annotations

from typing import Any, Mapping

from ..compare import NOISE_RULE, format_speedup, from_fields
from ..fmt import ms as _ms
from .wording import _roofline_text, not_measured_text, provenance, trust_note


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
