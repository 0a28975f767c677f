"""The advice's answer for the user, derived from a workload's one verdict (`decide.verdict`, whose choice is
`choice.choose`): the recommended configuration as a point on the axes, its speed-ups against the baseline
(fp32) and against the best single change (the one noise rule), its peak memory, the code to paste into a
training script and, for the user's model, a preset TOML that reproduces it. Any workload whose presets are
points gets one: the user's model (its search) and the shipped Transformer (its presets). JSON-ready (each
workload's `answer`; `advise --json`'s top-level `answer` is the model's) and as lines (`answer_lines`, the advice
screen's and the text report's)."""

from __future__ import annotations

from typing import Any, Mapping

from ..measure.compare import DISTURBED_WORDS, Comparison, fields, format_speedup, ms, unsure
from ..measure.mfu import Mfu
from ..config.calling import Calling
from ..config.point import Config
from ..config.snippet import preset_toml, snippet
from .ablation import PART_WORDS, memory_savers
from .records import Measurement, WorkloadVerdict, versus
from .search import STOP_WORDS


def _best_single(v: WorkloadVerdict, points: Mapping[str, Config]) -> Measurement | None:
    """The fastest unflagged measured preset whose point is one axis away from the baseline's."""
    flagged = {f["preset"] for f in v.flags}
    base = points.get(v.baseline or "")
    singles = [m for m in v.measurements if m.measured and m.preset not in flagged and m.preset in points
               and base is not None and len([a for a, x in points[m.preset].items() if getattr(base, a) != x]) == 1]
    return min(singles, key=lambda m: m.median_ms) if singles else None  # type: ignore[arg-type, return-value]


def answer(v: WorkloadVerdict, points: Mapping[str, Config], *, model: str | None = None, steps: int = 50,
           calling: Calling | None = None, device: str = "cuda", side_by_side: bool = False,
           model_type: str = "") -> dict[str, Any] | None:
    """The answer of one verdict (None without a recommendation, or where its preset is no point). `points`:
    preset name -> its point; `model`: the user's FILE.py:FUNC (then the answer has a TOML preset); `calling` and
    `device`: how the runs called the model and where they ran, for the snippet (`snippet.snippet`);
    `side_by_side`: the answer's figures must come from interleaved rounds (a search's): a speed-up not measured
    round by round is shown, never called faster or slower (a single run against another, minutes apart);
    `model_type`: the model's Hugging Face type, for Liger's family patch in the code (`liger.apply_call`)."""
    rec, base = v.measurement(v.recommended), v.measurement(v.baseline)
    if rec is None or rec.preset not in points:
        return None
    point = points[rec.preset]
    single = _best_single(v, points)
    vs_base = versus(rec, base) if base is not None and base.measured and base is not rec else None
    vs_single = versus(rec, single) if single is not None and single is not rec else None
    texts = [format_speedup(c) if c is not None else None for c in (vs_base, vs_single)]
    if side_by_side:  # a comparison not measured side by side: never called faster or slower, and said so
        texts = [shown_words(c) if c is not None else None for c in (vs_base, vs_single)]
        vs_base, vs_single = (unsure(c) if c is not None and c.basis != "paired" else c for c in (vs_base, vs_single))
    peaks = [p for r in rec.ok_runs if (p := r.summary.peak_memory_bytes) is not None]
    fastest = v.fastest if v.fastest != rec.preset else None
    return {
        "preset": rec.preset, "config": point.as_dict(), "label": point.label, "summary": point.description(),
        "is_baseline": rec is base, "fastest": fastest,
        "median_ms": ms(rec.median_ms), "peak_memory_bytes": max(peaks) if peaks else None,
        "mfu": mfu.to_dict() if (mfu := rec.mfu) is not None else None,
        "best_single": single.preset if single is not None else None,
        "best_single_label": points[single.preset].label if single is not None else None,
        **fields(vs_base, "speedup_vs_fp32"), **fields(vs_single, "speedup_vs_best_single"),
        "speedup_vs_fp32_text": texts[0], "speedup_vs_best_single_text": texts[1],
        "snippet": snippet(point, calling=calling, device=device, liger_apply=_liger_apply(point, model_type)),
        "toml": preset_toml(point, model, steps=steps) if model else None,
    }


def shown_words(c: Comparison) -> str:
    """A search's speed-up in words: as the noise rule shows it where it was measured side by side, else 'about
    6.40× (single runs, not side by side)' (never '≈': the interval of two single runs minutes apart holds nothing of
    the drift between them)."""
    return format_speedup(c) if c.basis == "paired" else f"about {c.speedup:.2f}× (single runs, not side by side)"


def _liger_apply(point: Config, model_type: str) -> tuple[str, tuple[str, ...]]:
    """Liger's family patch (its name, the flags it takes) where the answer uses Liger on a model of a family it
    patches, else ("", ())."""
    if point.norms != "liger" and point.loss != "liger_flce":
        return "", ()
    from ..workloads.liger import apply_call

    return apply_call(model_type)


def confirmation(r: Any) -> dict[str, Any]:
    """The search's confirmation of its answer (`search.SearchResult`), for the answer's JSON: what each part buys
    (`ablation`: one row per value, the point without it, its median, the part's speed-up and verdict), the values
    taken out on the way (`dropped`), whether it was confirmed side by side (and why not), and whether other work
    competed with the runs its comparisons read."""
    d = r.to_dict()
    ran = list(dict.fromkeys(t.config for t in r.trials if t.outcome.ok))

    def median(c: Any) -> float | None:
        t = r.timing(c)
        return t.median_ms if t is not None else None

    savers = memory_savers(r.winner, ran, r.versus, median, r.peak_memory) if r.winner is not None else []
    return {**{k: d[k] for k in ("ablation", "dropped", "confirmed", "unconfirmed_why", "competed")},
            "rounds": len(r._by_round(r.winner)) if r.winner is not None else 0,
            "memory_savers": [p.to_dict() for p in savers]}


BUSY = "the machine was busy while measuring: run again when it is quiet"


def _part_line(p: Mapping[str, Any]) -> str:
    ms = f"{p['without_median_ms']:.4g} ms" if p.get("without_median_ms") else "not measured"
    return (f"  {p['axis']}={p['value']:<12} without it: {p['without']} {ms}, the part buys "
            f"{p['speedup_text'] or '-'}{memory_words(p)}: {PART_WORDS[p['verdict']]}")


def memory_words(p: Mapping[str, Any]) -> str:
    """', 31 % less peak memory' (or more) where a part's peak memory was measured with and without it, else ''."""
    saved = p.get("memory_saved")
    if saved is None or abs(saved) < 0.005:
        return ""
    return f", {abs(saved):.0%} {'less' if saved > 0 else 'more'} peak memory"


def configuration_line(a: Mapping[str, Any]) -> str:
    """One line for a shipped workload's answer: its point (the axes off their default, as `--config` takes them; fp32
    where none is) and how to run it."""
    from ..config.axes import axis

    spec = ", ".join(f"{k}={x}" for k, x in a["config"].items() if x != axis(k).default) or "precision=fp32"
    return f"configuration: {spec} ({a['summary']}); apextui --preset {a['preset']}"


def answer_lines(doc: Mapping[str, Any]) -> list[str]:
    """The model's search and its answer, for `apextui advise --model` and the TUI's Advice screen ([] without
    a search)."""
    s, a = doc.get("search"), doc.get("answer")
    if not s:
        return []
    stop = STOP_WORDS.get(s["stopped_by"], s["stopped_by"])
    ran = sum(1 for t in s["trials"] if t["status"] not in ("unavailable", "not_run"))  # what was looked up is no run
    lines = [f"search: {ran} run{'s' * (ran != 1)} in {s['spent_s']:.0f} s of a {s['budget_s']:.0f} s budget, "
             f"{stop}. How: {s['method']}"]
    for e in s.get("excluded", []):
        lines.append(f"  excluded {e['label']} ({e['status']}): {e['reason']}")
    if s.get("not_tried"):
        lines.append("  not tried, its set-up would not fit the budget: " + ", ".join(
            f"{x['label']} (about {x['setup_estimate_s']:.0f} s)" for x in s["not_tried"]))
    if s.get("not_run"):
        lines.append(f"  not run, the budget ended first: {', '.join(x['label'] for x in s['not_run'])}")
    for x in s.get("left_out", []):
        again = " (run again in its round)" if x.get("round") else ""
        lines.append(f"  left out of the comparisons: run {x['index']} ({x['label']}): "
                     f"{DISTURBED_WORDS.get(x['why'], x['why'])}{again}")
    ok = sum(1 for t in s.get("trials", []) if t.get("status") == "ok")
    if not a or ok < 2:
        if ok == 1 and not s.get("not_run") and not s.get("not_tried"):  # the rest could not run here
            lines.append("no answer: nothing but fp32 could run here (the reasons are listed above)")
        else:
            lines.append("no answer: " + ("the budget ended before anything but fp32 ran" if ok == 1 else
                                          "nothing ran ok") + f"; give the search more time: {_confirm_command(doc)}")
        if s.get("competed"):  # a loaded machine is the likeliest reason the budget ran out: said where it applies
            lines.append(f"  ⚠ {BUSY}")
        return lines
    if a.get("reliable") is False:  # other work left no comparison beyond noise: no code handed over as fastest
        lines += ["", a["unreliable_why"]]
        if a.get("usual_gain"):
            lines.append(f"  the usual gain: the practitioner's recipe for this device, {a['usual_gain']}")
        return lines
    mem = f", peak GPU memory {a['peak_memory_bytes'] / 2**20:.0f} MiB" if a.get("peak_memory_bytes") else ""
    busy = " ⚠" if a.get("competed") else ""
    mfu = Mfu.from_dict(a.get("mfu"))
    at = f" at {mfu.words()}" if mfu is not None and mfu.value is not None else ""
    if a["is_baseline"]:
        why = f" (the fastest, {a['fastest']}, is within noise of it)" if a.get("fastest") else ""
        lines += ["", f"use {a['summary']}{at}{mem}{busy}",
                  f"  nothing is measurably faster{why}"]
    else:
        head = "fastest configuration" if a.get("confirmed") is not False else "fastest so far, unconfirmed"
        lines += ["", f"{head}: {a['label']} ({a['summary']}){at}{mem}{busy}",
                  f"  against fp32: {a['speedup_vs_fp32_text'] or 'not measured'}",
                  (f"  against the best single change ({a['best_single_label']}): "
                   f"{a['speedup_vs_best_single_text'] or '-'}" if a["best_single"] not in (None, a["preset"])
                   else "  it is the best single change: no combination beat it" if a["best_single"]
                   else "  no single change was measured to compare it with")]
    if a.get("competed"):
        lines.append(f"  ⚠ {BUSY}")
    if a.get("confirmed") is False:
        lines.append(f"  unconfirmed: {a.get('unconfirmed_why')}; to confirm: {_confirm_command(doc)}")
    if a.get("ablation"):
        rounds = a.get("rounds") or 0
        how = (f"side by side in {rounds} interleaved round{'' if rounds == 1 else 's'}" if rounds
               else "single runs only: not measured side by side")
        lines += ["", f"what each part buys (the answer against itself without it, {how}):",
                  *(_part_line(p) for p in a["ablation"])]
    for p in a.get("dropped") or []:
        lines.append(f"  taken out: {p['axis']}={p['value']} (in {p['in']}, the part bought "
                     f"{p['speedup_text'] or '-'}{memory_words(p)}): {PART_WORDS[p['verdict']]}")
    for p in a.get("memory_savers") or []:
        lines.append(f"  saves memory, not time: {p['axis']}={p['value']} ({p['in']} against {p['without']}: "
                     f"{p['speedup_text'] or 'speed within noise'}{memory_words(p)}); add it where memory is tight")
    lines += ["", "in your training script:", "",
              *("    " + line if line else "" for line in a["snippet"].splitlines())]
    if a.get("toml"):
        lines += ["", "as a preset (apextui --preset FILE.toml):", "",
                  *("    " + line for line in a["toml"].splitlines())]
    return lines


def _confirm_command(doc: Mapping[str, Any]) -> str:
    """The command that runs the search again with twice its budget."""
    s = doc.get("search") or {}
    model = (doc.get("model") or {}).get("spec") if isinstance(doc.get("model"), Mapping) else None
    budget = 2 * float(s.get("budget_s") or 0) or 600
    device = " --device cpu" if doc.get("device") == "cpu" else ""
    return f"apextui advise --model {model or 'FILE.py:FUNC'}{device} --budget {budget:.0f}"
