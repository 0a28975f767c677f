"""The comparison table as CSV (for spreadsheets) and as Markdown (the seed article's tables are Markdown).

No Textual here: `to_csv` / `to_markdown` give the text, `save_exports` writes both beside each other.
The numbers are those of the saved JSON (`results.results_document`), so the three formats agree.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apextui.core.atomic import write_atomic
from apextui.core.measure.compare import format_speedup

from ..core.results import ResultRow, RunIndex, results_document
from . import widget_format as fmt

CSV_COLUMNS = (
    "run", "preset", "workload", "label", "baseline", "device", "size", "amp", "status", "steps", "measured_steps",
    "median_ms", "p10_ms", "p90_ms", "mean_ms", "opt_median_ms", "compile_s", "throughput", "wall_throughput",
    "throughput_unit",
    "speedup", "speedup_low", "speedup_high", "speedup_verdict", "speedup_basis", "baseline_run", "final_loss",
    "loss_floor", "max_abs_err", "check_passed", "bottleneck", "source", "error", "speedup_competed", "mfu",
    "mfu_tflops",
)
MD_HEADER = ("run", "preset", "device", "status", "median ms", "p10–p90 ms", "speed-up", "throughput",
             "last loss (floor)", "max err")


def _entries(rows: Sequence[ResultRow]) -> list[dict[str, Any]]:
    """The runs as the saved JSON has them (speed-ups against the same baselines as the table)."""
    return list(results_document(rows)["runs"])


def _csv_value(value: Any) -> Any:
    return "" if value is None else value


def _flat(entry: Mapping[str, Any]) -> dict[str, Any]:
    summary = entry.get("summary") or {}
    check = summary.get("check") if isinstance(summary.get("check"), Mapping) else {}
    bottleneck = summary.get("bottleneck") if isinstance(summary.get("bottleneck"), Mapping) else {}
    flat = {**{k: summary.get(k) for k in CSV_COLUMNS}, **{k: entry.get(k) for k in CSV_COLUMNS if k in entry}}
    flat["max_abs_err"] = check.get("max_abs_err") if check else None
    flat["check_passed"] = check.get("passed") if check else None
    flat["bottleneck"] = bottleneck.get("label") if bottleneck else None
    mfu = summary["mfu"] if isinstance(summary.get("mfu"), Mapping) else {}
    flat["mfu"], flat["mfu_tflops"] = mfu.get("value"), mfu.get("tflops")  # a fraction, and the achieved TFLOP/s
    if entry.get("baseline_run") is not None and entry.get("baseline_run") == entry.get("run"):
        flat["speedup_verdict"] = "base"  # the run the others are against: no speed-up against itself
    return flat


def to_csv(rows: Sequence[ResultRow]) -> str:
    """One line per run, `CSV_COLUMNS` in that order; empty cells for unknown values; numbers unrounded."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for entry in _entries(rows):
        flat = _flat(entry)
        writer.writerow([_csv_value(flat.get(k)) for k in CSV_COLUMNS])
    return out.getvalue()


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _competed(row: ResultRow, index: RunIndex) -> bool:
    """The table's ⚠: other work competed with the run or its baseline (never on a failed run: no speed-up)."""
    return row.status != "failed" and index.competed(row)


def _md_row(row: ResultRow, index: RunIndex) -> tuple[str, ...]:
    s = row.summary
    spread = f"{fmt.ms(s.p10_ms)}–{fmt.ms(s.p90_ms)}" if s.p10_ms is not None and s.p90_ms is not None else fmt.DASH
    if index.is_base(row):
        speedup = "base"
    else:
        comparison = index.comparison(row)
        speedup = format_speedup(comparison) if comparison else fmt.DASH
    if _competed(row, index):
        speedup += fmt.COMPETED
    loss = fmt.DASH
    if s.final_loss is not None:
        loss = f"{s.final_loss:.3f}" + (f" ({s.loss_floor:.3f})" if s.loss_floor is not None else "")
    err = fmt.error(row.max_error) if row.check else fmt.DASH
    return (str(index.number(row)), row.preset, row.device, row.status, fmt.ms(s.median_ms), spread, speedup,
            fmt.si(s.wall_throughput if s.wall_throughput is not None else s.throughput, s.throughput_unit or ""),
            loss, err)


def to_markdown(rows: Sequence[ResultRow]) -> str:
    """A GitHub Markdown table of the runs, formatted as the comparison table shows them (the run column: the
    run's name, 'fp32 run 2', as every screen names it; the speed-up the table's, `RunIndex.comparison`), then the
    drift notes the table's subtitle has."""
    lines = ["| " + " | ".join(MD_HEADER) + " |", "| " + " | ".join("---" for _ in MD_HEADER) + " |"]
    index = RunIndex(rows)
    for row in rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in _md_row(row, index)) + " |")
    notes = index.drift_notes() + ([fmt.COMPETED_NOTE] if any(_competed(r, index) for r in rows) else [])
    if notes:
        lines += ["", *(f"- {_md_cell(n)}" for n in notes)]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Exported:
    csv: Path
    markdown: Path


def save_exports(rows: Sequence[ResultRow], directory: str | Path, stem: str | None = None) -> Exported:
    """Write `STEM.csv` and `STEM.md` atomically in `directory` (STEM: apextui-results-YYYYmmdd-HHMMSS)."""
    stem = stem or f"apextui-results-{time.strftime('%Y%m%d-%H%M%S')}"
    directory = Path(directory)
    return Exported(write_atomic(directory / f"{stem}.csv", to_csv(rows)),
                    write_atomic(directory / f"{stem}.md", to_markdown(rows)))
