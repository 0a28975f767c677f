"""A comparison row's full record: everything the saved JSON holds for that run, and its environment.

The record is `results.results_document(rows)["runs"][i]` (what `w` writes, speed-up against the same
baseline as the table) plus the row's environment; known fields are grouped, and any other field is
shown under "Other", so nothing in the JSON is hidden.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ...core import results
from ...core.results import ResultRow
from .text_screen import TextScreen

RUN = ("preset", "workload", "label", "baseline", "device", "size", "amp", "status", "error", "source")
SPEEDUP = ("speedup", "speedup_low", "speedup_high", "speedup_verdict", "baseline_run", "baseline_note")
TIMING = ("steps", "warmup", "measured_steps", "timed_intervals", "block_steps", "median_ms", "median_low_ms",
          "median_high_ms", "p10_ms", "p90_ms", "mean_ms", "min_ms", "max_ms", "opt_median_ms", "throughput",
          "wall_throughput", "throughput_unit", "elapsed_s", "compile_s")
LOSS = ("final_loss", "loss_floor", "skipped_steps", "loss_scale")
ANALYSIS = ("gpu_busy", "gpu_busy_source", "gpu_busy_note", "gpu_kernel_ms", "bottleneck", "roofline")


def show_value(value: Any) -> str:
    """A JSON value for reading: null as —, floats to 6 significant digits, lists joined."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(show_value(v) for v in value) or "[]"
    return str(value)


def show_time(value: float) -> str:
    """A Unix time for reading: '2026-11-30 14:32:11 (1796151131)', local time, the raw number kept to search
    the JSON by."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(value))} ({value:.0f})"


def is_time(key: str, value: Any) -> bool:
    """A field that holds a Unix time: named *_at (`measured_at`, `saved_at`) with a number of seconds."""
    return (key.rsplit(".", 1)[-1].endswith("_at") and isinstance(value, (int, float))
            and not isinstance(value, bool) and math.isfinite(value) and value > 0)


def flatten(key: str, value: Any) -> Iterator[tuple[str, str]]:
    """('roofline.ai', '12.5'), ...: nested objects as dotted keys; a Unix time as a date (`show_time`)."""
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            yield from flatten(f"{key}.{k}", v)
    elif is_time(key, value):
        yield key, show_time(value)
    else:
        yield key, show_value(value)


def samples_pair(samples: Any) -> list[tuple[str, str]]:
    """The step times a run kept, in words (the times themselves are in the saved JSON, not for reading here)."""
    if not isinstance(samples, Mapping) or not isinstance(samples.get("ms"), list):
        return []
    kept, count = len(samples["ms"]), samples.get("count")
    return [("samples", f"{count} step times kept" if kept == count else
             f"{kept} order statistics of {count} step times kept")]


def record(row: ResultRow, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """The row's entry in the saved JSON, with its environment."""
    entry = results.run_entry(row, results.RunIndex(rows))  # this row's alone: a history's every row costs seconds
    entry["env"] = dict(row.env) if row.env else None
    return entry


def sections(entry: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(title, [(field, value)]) groups covering every field of `entry`."""
    summary = dict(entry.get("summary") or {})
    top = {k: v for k, v in entry.items() if k not in ("summary", "env")}
    out: list[tuple[str, list[tuple[str, str]]]] = []

    def take(source: dict[str, Any], keys: Sequence[str]) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        for k in keys:
            if k in source:
                pairs.extend(flatten(k, source.pop(k)))
        return pairs

    out.append(("Run", take(top, RUN)))
    out.append(("Speed-up", take(top, SPEEDUP)))
    out.append(("Timing", take(summary, TIMING) + samples_pair(summary.pop("samples", None))))
    out.append(("Loss", take(summary, LOSS)))
    check = summary.pop("check", None)
    out.append(("Norm check", list(flatten("check", check)) if check else [("check", "— (no reference check)")]))
    out.append(("Bottleneck and roofline", take(summary, ANALYSIS)))
    out.append(("MFU", take(summary, ("mfu",))))
    other = [pair for k, v in {**top, **summary}.items() for pair in flatten(k, v)]
    if other:
        out.append(("Other", other))
    env = entry.get("env")
    out.append(("Environment", [pair for k, v in env.items() for pair in flatten(k, v)] if env
                else [("env", "— (not recorded)")]))
    return [(title, pairs) for title, pairs in out if pairs]


def details_body(entry: Mapping[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="cyan", no_wrap=True)
    grid.add_column(ratio=1)
    for n, (title, pairs) in enumerate(sections(entry)):
        if n:
            grid.add_row("", "")
        grid.add_row(Text(title, style="bold underline"), "")
        for key, value in pairs:
            grid.add_row(key, Text(value))
    return grid


class RunDetailsScreen(TextScreen):
    """Opened with enter (or i) on a comparison row; esc, q or i close it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("i", "dismiss", "Close", show=False)]
    SCROLL_ID = "details-scroll"
    BODY_ID = "details-body"

    def __init__(self, row: ResultRow, rows: Sequence[ResultRow]) -> None:
        super().__init__()
        self.row = row
        self.entry = record(row, rows)
        self.label = results.run_label(row, rows)

    def box_title(self) -> str:
        return f"Run details · {self.label}"

    def body(self) -> Static:
        return Static(details_body(self.entry), id=self.BODY_ID)
