"""The one renderer of the advice document: `view()` reads the JSON document (fresh or stored, hence a dict)
once into a typed view, and both front ends lay that view out: `format_text` here for the CLI, the TUI's
advise screen with styles. Neither front end reads the document's dict itself, so a figure is worded in
one place."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from ..measure.compare import NOISE_RULE, format_speedup, from_fields
from ..number_format import DASH
from ..number_format import ms as _ms
from .records import AdviceStatus, ApexStatus, MachineApexStatus, PresetStatus, WorkloadStatus
from .answer import answer_lines, configuration_line
from .wording import not_measured_text, provenance, roofline_text, trust_note

RowKind = Literal["measured", "unavailable", "not_measured"]
COMPETED_LEGEND = ("⚠ other work competed with a run of that row or of the baseline, or the GPU was throttled: "
                   "that speed-up may be off (each run's `contention` in --json says what was seen)")


@dataclass(frozen=True)
class PresetRow:
    """One preset's line of a workload's table, every figure already worded."""

    preset: str
    kind: RowKind
    status: PresetStatus
    is_baseline: bool
    flagged: bool
    recommended: bool
    why: str = ""  # unavailable / not measured: why there is no median
    median: str = DASH  # ms/step
    p10_p90: str = DASH
    repeats: int = 0
    spread: str = DASH
    vs_base: str = DASH  # "base" for the baseline, else its speed-up over the baseline
    loss: str = DASH
    roofline: str = DASH  # bottleneck · roofline figures (`wording.roofline_text`)
    compile: str | None = None  # "compile 1.2 s (not in ms/step)"
    competed: bool = False  # other work competed with one of its runs or the baseline's: ⚠ beside `vs_base`


@dataclass(frozen=True)
class WorkloadView:
    """One workload: its verdict, flags, Apex line, notes and table."""

    workload: str
    baseline: str | None
    status: WorkloadStatus
    status_label: str | None  # None when complete, else "partial", "not measured", ...
    recommended: str | None
    recommended_vs_base: str | None  # the recommended preset's speed-up over the baseline (not the baseline)
    within_noise: tuple[str, ...]  # the other presets within noise of the recommended one (its verdict's)
    why_recommended: str | None  # "nothing is measurably faster" where the baseline is recommended over the fastest
    verdict: str
    flags: tuple[str, ...]
    apex_status: ApexStatus
    apex: str | None  # None when the workload has no Apex preset
    notes: tuple[str, ...]
    rows: tuple[PresetRow, ...]  # fastest first, those without a median last
    configuration: str | None = None  # a shipped workload's answer in one line (`answer.configuration_line`)


@dataclass(frozen=True)
class AdviceView:
    """The whole advice: where and how it was measured, whether it is reused or partial, and the workloads."""

    device: str
    machine: str
    torch: str
    apex_installed: str
    steps: Any
    repeats: Any
    status: AdviceStatus
    reused: bool
    reuse_note: str  # reused advice: when, with how many steps and repeats, on which device
    measured_at: str
    elapsed_s: float
    runs_ok: int
    runs_total: int
    trust_note: str | None
    apex_status: MachineApexStatus
    apex: str  # Apex on this machine, in one line
    noise_rule: str
    workloads: tuple[WorkloadView, ...]
    answer: tuple[str, ...] = ()  # the model's search and its answer (`answer.answer_lines`), the same on both
    searched: bool = False  # the model's configurations were searched (a search makes its own repeats)

    @property
    def competed_legend(self) -> str | None:
        """The legend's words for ⚠, where a row has it (both front ends): a mark no line explains says nothing."""
        if not any(r.competed for w in self.workloads for r in w.rows):
            return None
        return COMPETED_LEGEND


def _row(p: Mapping[str, Any], recommended: str | None) -> PresetRow:
    common = dict(preset=p["preset"], status=p["status"], is_baseline=bool(p["is_baseline"]),
                  flagged=bool(p["flagged"]), recommended=p["preset"] == recommended)
    if p["status"] == "unavailable":  # one it can run but leaves out is "not compared", as `list` calls it available
        word = "not compared here" if p.get("not_compared") else "unavailable"
        return PresetRow(kind="unavailable", why=f"{word}: {p['reason']}", **common)
    if p["median_ms"] is None:
        return PresetRow(kind="not_measured", why=not_measured_text(p), **common)
    competed = bool(p.get("competed") or p.get("speedup_competed"))
    return PresetRow(
        kind="measured", median=_ms(p["median_ms"]), p10_p90=f"{_ms(p['p10_ms'])}–{_ms(p['p90_ms'])}",
        repeats=int(p.get("runs_used", p["repeats"])),
        spread=f"{100 * p['spread']:.1f}%" if p["spread"] is not None else DASH,
        vs_base=("base" if p["is_baseline"] else format_speedup(from_fields(p, "speedup_vs_baseline")))
        + (" ⚠" if competed else ""), competed=competed,
        loss=f"{p['final_loss']:.4g}" if p["final_loss"] is not None else DASH, roofline=roofline_text(p),
        compile=f"compile {p['compile_s']:.1f} s (not in ms/step)" if p["compile_s"] is not None else None, **common)


def _workload(w: Mapping[str, Any]) -> WorkloadView:
    rec = next((p for p in w["presets"] if p["preset"] == w.get("recommended")), None)
    rec_vs = (format_speedup(from_fields(rec, "speedup_vs_baseline"))
              if rec is not None and not rec["is_baseline"] and rec["speedup_vs_baseline"] is not None else None)
    order = sorted(w["presets"], key=lambda p: (p["median_ms"] is None, p["median_ms"] or 0))
    apex = w["apex"]
    return WorkloadView(
        workload=w["workload"], baseline=w["baseline"], status=w["status"],
        status_label=None if w["status"] == "complete" else w["status"].replace("_", " "),
        recommended=w.get("recommended"), recommended_vs_base=rec_vs,
        within_noise=tuple(w.get("within_noise_of_recommended") or ()),
        why_recommended=("nothing is measurably faster" if w.get("recommended") is not None
                         and w.get("recommended") == w["baseline"] and w.get("fastest") != w["baseline"] else None),
        verdict=w["verdict"],
        flags=tuple(f["text"] for f in w.get("flags", [])), apex_status=apex["status"],
        apex=None if apex["status"] == "none" else apex["text"], notes=tuple(w.get("notes", [])),
        rows=tuple(_row(p, w.get("recommended")) for p in order),
        configuration=(configuration_line(w["answer"]) if w.get("answer") and w["workload"] != "model" else None),
    )


def view(doc: Mapping[str, Any]) -> AdviceView:
    """The typed view of an advice document (`document()`'s, or a stored one's)."""
    env = doc.get("environment") or {}
    s = doc.get("settings") or {}
    runs = doc.get("runs") or {}
    return AdviceView(
        device=str(doc.get("device")), machine=str(env.get("name", "?")), torch=str(env.get("torch", "?")),
        apex_installed=str(env.get("apex", "?")), steps=s.get("steps"), repeats=s.get("repeats"),
        status=doc.get("status", "complete"), reused=bool(doc.get("reused")),
        reuse_note=str(doc.get("reuse_note") or f"reused advice, {provenance(doc)}"),
        measured_at=str(doc.get("measured_at")), elapsed_s=float(doc.get("elapsed_s", 0)),
        runs_ok=int(runs.get("ok", 0)), runs_total=int(runs.get("total", 0)), trust_note=trust_note(doc),
        apex_status=doc["apex"]["status"], apex=doc["apex"]["text"],
        noise_rule=str((doc.get("rules") or {}).get("noise", NOISE_RULE)),
        workloads=tuple(_workload(w) for w in doc.get("workloads", [])),
        answer=tuple(answer_lines(doc)), searched=doc.get("search") is not None,
    )


# the table's columns after the preset's name, most needed first: a narrow terminal drops them from the end
COLUMNS: tuple[tuple[str, str], ...] = (("median", "median ms"), ("vs_base", "vs base (95 %)"), ("repeats", "n"),
                                       ("loss", "loss"), ("spread", "spread"), ("p10_p90", "p10–p90 ms"),
                                       ("extra", "bottleneck · roofline"))


def _cells(r: PresetRow) -> dict[str, str]:
    return {"median": r.median, "vs_base": r.vs_base, "repeats": str(r.repeats), "loss": r.loss, "spread": r.spread,
            "p10_p90": r.p10_p90, "extra": r.roofline + (f" · {r.compile}" if r.compile else "")}


def _short_names(w: WorkloadView) -> dict[str, str]:
    """Row names without the prefix every one of them shares (a model's `name:build/`, said in the header)."""
    names = [r.preset for r in w.rows]
    prefix = names[0].rpartition("/")[0] + "/" if names and "/" in names[0] else ""
    if not prefix or not all(n.startswith(prefix) for n in names):
        prefix = ""
    return {n: n[len(prefix):] for n in names}


def _table(w: WorkloadView, width: int | None) -> list[str]:
    """The workload's rows, each on one line within `width` (None: every column): columns are dropped from the end of
    `COLUMNS` until a row fits; the reason an unmeasured preset has no figures wraps under its name."""
    short = _short_names(w)
    names = {r.preset: short[r.preset] + (" *" if r.is_baseline else "") + (" !" if r.flagged else "") for r in w.rows}
    name_w = max([len("preset"), *(len(n) for n in names.values())])
    cells = {r.preset: _cells(r) for r in w.rows if r.kind == "measured"}
    widths = {k: max([len(head), *(len(c[k]) for c in cells.values())]) for k, head in COLUMNS}
    shown = [k for k, _ in COLUMNS]
    while width is not None and len(shown) > 2 and 2 + name_w + sum(widths[k] + 2 for k in shown) > width:
        shown.pop()

    def row(name: str, values: dict[str, str]) -> str:
        parts = [f"  {name:<{name_w}}"]
        for k in shown:
            parts.append(f"{values[k]:<{widths[k]}}" if k == "extra" else f"{values[k]:>{widths[k]}}")
        return "  ".join(parts).rstrip()

    heads = dict(COLUMNS)
    lines = [row("preset", {k: heads[k] for k in shown})]
    for r in w.rows:
        if r.kind == "measured":
            lines.append(row(names[r.preset], cells[r.preset]))
        elif width is None:
            lines.append(f"  {names[r.preset]:<{name_w}}  {r.why}")
        else:
            lines += textwrap.wrap(f"{names[r.preset]}: {r.why}", width=max(40, width), initial_indent="  ",
                                   subsequent_indent="      ")
    if len(shown) < len(COLUMNS):
        left = ", ".join(heads[k] for k, _ in COLUMNS if k not in shown)
        lines += textwrap.wrap(f"(left out at {width} columns: {left}; --json has every figure)",
                               width=max(40, width or 0), initial_indent="  ", subsequent_indent="   ")
    return lines


def text_lines(v: AdviceView, width: int | None = None) -> list[str]:
    """The CLI's layout of the view: a short table per workload, a verdict line each, and the Apex line. `width` (a
    terminal's columns): table rows fit in it and the prose wraps at it; None: nothing is cut or wrapped (a file,
    a pipe)."""
    def say(text: str, indent: str = "") -> list[str]:
        if width is None:
            return [indent + text]
        return textwrap.wrap(text, width=max(40, width), initial_indent=indent, subsequent_indent=indent + "  ",
                             break_on_hyphens=False) or [indent]

    how = f"{v.repeats} repeat(s) × {v.steps} steps a preset"
    if v.searched:
        others = [w for w in v.workloads if w.workload != "model"]
        how = f"a configuration search, {v.steps} steps a run" + (f"; the other workloads {how}" if others else "")
    lines = say(f"apextui advise on {v.device} ({v.machine}, torch {v.torch}, Apex {v.apex_installed}): {how}")
    lines += say(v.reuse_note if v.reused else f"measured {v.measured_at} in {v.elapsed_s:.0f} s")
    if v.trust_note:
        lines += say(f"WARNING: {v.trust_note}")
    if v.status == "partial":
        lines += say("PARTIAL: interrupted; the verdicts below use only what was measured")
    for w in v.workloads:
        label = f" [{w.status_label}]" if w.status_label else ""
        lines += ["", *say(f"{w.workload} (baseline {w.baseline}){label}")]
        lines += _table(w, width)
        if not (w.workload == "model" and v.answer):  # the model's answer below says it, once
            lines += say(f"verdict: {w.verdict}", "  ")
        if w.configuration:
            lines += say(w.configuration, "  ")
        for f in w.flags:
            lines += say(f"flag: {f}", "  ")
        if w.apex is not None:
            lines += say(f"apex: {w.apex}", "  ")
        for n in w.notes:
            lines += say(f"note: {n}", "  ")
    only_model = [w.workload for w in v.workloads] == ["model"] and bool(v.answer)  # its apex line said it
    lines += ["", *([] if only_model else say(f"Apex on this machine: {v.apex}")),
              *say(f"(* baseline, ! flagged; n = repeats counted; ≈ within noise: {NOISE_RULE})")]
    if v.competed_legend:
        lines += say(f"({v.competed_legend})")
    if v.answer:
        lines.append("")
    for line in v.answer:  # code (the snippet, the TOML: indented 4) is never wrapped
        indent = line[:len(line) - len(line.lstrip())]
        lines += [line] if not line.strip() or indent.startswith("    ") else say(line.lstrip(), indent)
    return lines


def format_text(doc: Mapping[str, Any], width: int | None = None) -> str:
    """The advice for a terminal (`apextui advise`), fitted to `width` columns where given."""
    return "\n".join(text_lines(view(doc), width))
