"""The model search's answer for the user: the winning configuration, its speed-ups against fp32 and against
the best single change (the one noise rule), the code to paste into a training script and a preset TOML that
reproduces it; JSON-ready (`advise --json`'s `answer`) and as text (`answer_text`)."""

from __future__ import annotations

from typing import Any, Mapping

from ..compare import fields, format_speedup
from ..config.point import BASELINE
from ..config.snippet import preset_toml, snippet
from ..model_presets import preset_name
from .search import SearchResult


def answer(result: SearchResult, spec: str | None, steps: int) -> dict[str, Any] | None:
    """None while the search has no winner (its baseline failed, or it was stopped before one)."""
    w = result.winner
    if w is None or spec is None:
        return None
    vs_fp32 = result.versus(w, BASELINE)
    vs_single = result.versus(w, result.best_single)
    return {
        "config": w.as_dict(), "label": w.label, "preset": preset_name(spec, w.label), "summary": w.summary(),
        "median_ms": t.median_ms if (t := result.timing(w)) else None,
        "peak_memory_bytes": result.peak_memory(w),
        "best_single": result.best_single.label if result.best_single else None,
        **fields(vs_fp32, "speedup_vs_fp32"), **fields(vs_single, "speedup_vs_best_single"),
        "speedup_vs_fp32_text": format_speedup(vs_fp32) if vs_fp32 else None,
        "speedup_vs_best_single_text": format_speedup(vs_single) if vs_single else None,
        "snippet": snippet(w), "toml": preset_toml(w, spec, steps=steps),
    }


def answer_text(doc: Mapping[str, Any]) -> str:
    """The search's summary and the answer, for `apextui advise --model`'s text output ('' without a search)."""
    s, a = doc.get("search"), doc.get("answer")
    if not s:
        return ""
    lines = [f"search: {len(s['trials'])} runs in {s['spent_s']:.0f} s of a {s['budget_s']:.0f} s budget "
             f"({s['stopped_by']}): {s['method']}"]
    for e in s.get("excluded", []):
        lines.append(f"  excluded {e['label']} ({e['status']}): {e['reason']}")
    if not a:
        lines.append("no configuration won: see the search record")
        return "\n".join(lines) + "\n"
    mem = f", peak GPU memory {a['peak_memory_bytes'] / 2**20:.0f} MiB" if a.get("peak_memory_bytes") else ""
    lines += ["", f"fastest configuration: {a['label']} ({a['summary']}){mem}",
              f"  against fp32: {a['speedup_vs_fp32_text'] or 'not measured'}",
              (f"  against the best single change ({a['best_single']}): {a['speedup_vs_best_single_text'] or '-'}"
               if a["best_single"] != a["label"] else "  it is the best single change: no combination beat it"),
              "", "in your training script:", "",
              *("    " + line if line else "" for line in a["snippet"].splitlines()),
              "", "as a preset (apextui --preset FILE.toml):", "",
              *("    " + line for line in a["toml"].splitlines())]
    return "\n".join(lines) + "\n"
