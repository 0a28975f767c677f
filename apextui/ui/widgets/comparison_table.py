"""Every run of this session (and loaded ones) against the baseline of its workload.

Speed-ups are `core.compare`'s: ≈ when within noise, coloured only beyond noise; a failed run has none
(`results.comparison`) and shows "failed" there. The columns follow the table's width (`tier`): narrow
(a 60-column terminal) keeps preset, median, speed-up, loss and max error under short headers; from `NORMAL`
the device and p10–p90 join and the loss shows its floor; from `WIDE` the speed-up shows its 95 % interval;
from `EXTRA` (big terminals) steps, throughput and compile time join. The subtitle names the
baseline run when another one was passed over (stopped, failed, too short)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from apextui.core.compare import format_speedup

from ...core.results import SESSION, ResultRow, RunIndex
from .. import widget_format as fmt

NARROW, NORMAL, WIDE, EXTRA = range(4)
NORMAL_WIDTH = 76  # table widths (columns) from which each tier applies: 80 columns of terminal are NORMAL
WIDE_WIDTH = 96
EXTRA_WIDTH = 124


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    short: str  # the header in a narrow table
    tier: int  # the narrowest tier that shows it


COLUMNS = (
    Column("preset", "preset", "preset", NARROW), Column("device", "dev", "dev", NORMAL),
    Column("median", "median ms", "ms", NARROW), Column("spread", "p10–p90", "p10–p90", NORMAL),
    Column("speedup", "speed-up", "speed-up", NARROW), Column("loss", "loss/floor", "loss", NARROW),
    Column("err", "max err", "err", NARROW), Column("steps", "steps", "steps", EXTRA),
    Column("throughput", "throughput", "throughput", EXTRA), Column("compile", "compile", "compile", EXTRA),
)
STATUS_MARK = {"ok": "", "stopped": " ■", "failed": " ✗"}
VERDICT_STYLE = {"faster": "bold green", "slower": "bold red"}  # within noise: no colour


def tier(width: int) -> int:
    """The tier of a table `width` columns wide."""
    return NARROW if width < NORMAL_WIDTH else NORMAL if width < WIDE_WIDTH else WIDE if width < EXTRA_WIDTH else EXTRA


def columns(level: int) -> tuple[Column, ...]:
    return tuple(c for c in COLUMNS if c.tier <= level)


def cells(row: ResultRow, index: RunIndex, source_label: str = "", level: int = WIDE) -> tuple[object, ...]:
    """The table cells of one row (Rich text) for the columns of tier `level`; `index`: the table's rows
    (`RunIndex`, made once per rebuild); `source_label` marks rows loaded from a file. Below WIDE the speed-up
    drops its interval; narrow, the loss drops its floor."""
    name = Text(row.preset, style="bold" if row.status == "ok" else "dim")
    if row.status != "ok":
        name.append(STATUS_MARK.get(row.status, f" {row.status}"), style="yellow" if row.status == "stopped" else "red")
    if source_label:
        name.append(f" {source_label}", style="dim cyan")
    spread = f"{fmt.ms(row.p10_ms)}–{fmt.ms(row.p90_ms)}" if row.p10_ms is not None else fmt.DASH
    if row.status == "failed":  # no speed-up (`results.comparison`), and never a baseline
        up_text = Text("failed", style="red")
    elif index.baseline(row) is row:
        up_text = Text("base", style="dim")
    else:
        c = index.comparison(row)
        up_text = Text(fmt.verdict_mark(c.verdict if c else None) + format_speedup(c, level < WIDE),
                       style=VERDICT_STYLE.get(c.verdict, "") if c else "dim")
    if row.final_loss is not None:
        loss = Text(f"{row.final_loss:.3f}")
        if row.loss_floor is not None and level > NARROW:
            loss.append(f"/{row.loss_floor:.3f}", style="dim")
    else:
        loss = Text(fmt.DASH, style="dim")
    check = row.check
    if check and row.max_error is not None:
        err = Text(fmt.error(row.max_error), style="green" if check.get("passed") else "bold red")
    else:
        err = Text(fmt.DASH, style="dim")
    summary = row.summary
    steps = summary.steps
    unit = str(summary.throughput_unit or "/s").replace("tokens", "tok")
    compile_s = summary.compile_s
    by_key: dict[str, object] = {
        "preset": name, "device": row.device, "median": Text(fmt.ms(row.median_ms), style="bold"),
        "spread": spread, "speedup": up_text, "loss": loss, "err": err,
        "steps": str(steps) if isinstance(steps, int) else fmt.DASH,
        "throughput": fmt.si(summary.throughput, unit),
        "compile": fmt.seconds(compile_s) if compile_s else Text(fmt.DASH, style="dim"),
    }
    return tuple(by_key[c.key] for c in columns(level))


class ComparisonTable(DataTable):
    """Rows are rebuilt when a run finishes or results are loaded (rare), never per step.

    A list of rows: Home/End go to the first/last row (DataTable's scrolled sideways and cut the first
    letter of every row), and the cursor row stays in view above the horizontal scrollbar."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = "Comparison"
        self.rows_data: list[ResultRow] = []
        self._tier: int | None = None  # the tier of the columns shown

    def on_mount(self) -> None:
        self._set_columns(tier(self.size.width))
        self._update_subtitle()

    def _set_columns(self, level: int) -> None:
        self._tier = level
        self.clear(columns=True)
        for c in columns(level):
            self.add_column(c.short if level == NARROW else c.label, key=c.key)

    def add_result(self, row: ResultRow) -> None:
        self.rows_data.append(row)
        self._rebuild()

    def add_results(self, rows: Sequence[ResultRow]) -> None:
        self.rows_data.extend(rows)
        self._rebuild()

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)
            self.scroll_x = 0

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)
            self.scroll_x = 0

    def watch_cursor_coordinate(self, old: object, new: object) -> None:
        """Also scroll the cursor row clear of the horizontal scrollbar (DataTable's own scrolling left the
        last row under it)."""
        super().watch_cursor_coordinate(old, new)  # type: ignore[arg-type]
        self.call_after_refresh(self._row_in_view)

    def _row_in_view(self) -> None:
        row = self.cursor_row
        if row < 0 or not self.row_count:
            return
        visible = self.scrollable_content_region.height - self.header_height
        top = int(self.scroll_y)
        if row >= top + visible:
            self.scroll_y = row - visible + 1
        elif row < top:
            self.scroll_y = row

    def on_resize(self) -> None:
        if self._tier != tier(self.size.width):
            self._rebuild()

    def _rebuild(self) -> None:
        level = tier(self.size.width)
        if level != self._tier:
            self._set_columns(level)
        else:
            self.clear()
        files: dict[str, int] = {}
        index = RunIndex(self.rows_data)
        for i, row in enumerate(self.rows_data):
            label = ""
            if row.source != SESSION:
                files.setdefault(row.source, len(files) + 1)
                label = f"f{files[row.source]}"
            self.add_row(*cells(row, index, label, level), key=str(i))
        if self.rows_data:
            self.move_cursor(row=len(self.rows_data) - 1)
        self._update_subtitle(index)

    def _update_subtitle(self, index: RunIndex | None = None) -> None:
        files = sorted({r.source for r in self.rows_data if r.source != SESSION})
        notes = (index or RunIndex(self.rows_data)).notes()
        if not self.rows_data:
            self.border_subtitle = "finished runs appear here"
        elif files or notes:  # the legend stays, short, after the notes (loading a file used to replace it)
            self.border_subtitle = " · ".join([*notes, fmt.LEGEND,
                                               *(f"f{i} {Path(f).name}" for i, f in enumerate(files, 1))])
        else:
            interval = " (95 % interval)" if (self._tier or NARROW) >= WIDE else ""
            self.border_subtitle = f"speed-up = baseline median / median{interval} · {fmt.LEGEND}"
