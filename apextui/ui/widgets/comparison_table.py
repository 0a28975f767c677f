"""Every run of this session (and loaded ones) against the baseline of its workload.

Speed-ups are `core.compare`'s: ≈ when within noise, coloured only beyond noise, with their 95 % interval
where the table is wide enough (`WIDE` columns; narrower, the interval is dropped so every column fits); the subtitle names the baseline run when another one was passed over (stopped, failed, too short)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from .. import fmt
from apextui.core.compare import format_speedup

from ...core.results import SESSION, ResultRow, baseline_notes, baseline_row, comparison

COLUMNS = (
    ("preset", "preset"), ("dev", "device"), ("median ms", "median"), ("p10–p90", "spread"),
    ("speed-up", "speedup"), ("loss/floor", "loss"), ("max err", "err"),
)
STATUS_MARK = {"ok": "", "stopped": " ■", "failed": " ✗"}
VERDICT_STYLE = {"faster": "bold green", "slower": "bold red"}  # within noise: no colour
WIDE = 96  # columns from which the speed-up cell shows its interval


def cells(row: ResultRow, rows: Sequence[ResultRow], source_label: str = "", compact: bool = False) -> tuple[object, ...]:
    """The table cells of one row (Rich text); `source_label` marks rows loaded from a file; `compact`
    drops the speed-up's interval."""
    name = Text(row.preset, style="bold" if row.status == "ok" else "dim")
    if row.status != "ok":
        name.append(STATUS_MARK.get(row.status, f" {row.status}"), style="yellow" if row.status == "stopped" else "red")
    if source_label:
        name.append(f" {source_label}", style="dim cyan")
    spread = f"{fmt.ms(row.p10_ms)}–{fmt.ms(row.p90_ms)}" if row.p10_ms is not None else fmt.DASH
    if baseline_row(row, rows) is row:
        up_text = Text("base", style="dim")
    else:
        c = comparison(row, rows)
        up_text = Text(format_speedup(c, compact), style=VERDICT_STYLE.get(c.verdict, "") if c else "dim")
    if row.final_loss is not None:
        loss = Text(f"{row.final_loss:.3f}")
        if row.loss_floor is not None:
            loss.append(f"/{row.loss_floor:.3f}", style="dim")
    else:
        loss = Text(fmt.DASH, style="dim")
    check = row.check
    if check and row.max_error is not None:
        err = Text(fmt.error(row.max_error), style="green" if check.get("passed") else "bold red")
    else:
        err = Text(fmt.DASH, style="dim")
    return (name, row.device, Text(fmt.ms(row.median_ms), style="bold"), spread, up_text, loss, err)


class ComparisonTable(DataTable):
    """Rows are rebuilt when a run finishes or results are loaded (rare), never per step.

    A list of rows: Home/End go to the first/last row (DataTable's scrolled sideways and cut the first
    letter of every row), and the cursor row stays in view above the horizontal scrollbar."""

    BINDINGS = [
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = "Comparison"
        self.rows_data: list[ResultRow] = []
        self._compact: bool | None = None  # as last drawn

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)
        self._update_subtitle()

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
        if self.rows_data and self._compact != (self.size.width < WIDE):
            self._rebuild()

    def _rebuild(self) -> None:
        self._compact = self.size.width < WIDE
        self.clear()
        files: dict[str, int] = {}
        for i, row in enumerate(self.rows_data):
            label = ""
            if row.source != SESSION:
                files.setdefault(row.source, len(files) + 1)
                label = f"f{files[row.source]}"
            self.add_row(*cells(row, self.rows_data, label, self._compact), key=str(i))
        if self.rows_data:
            self.move_cursor(row=len(self.rows_data) - 1)
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        files = sorted({r.source for r in self.rows_data if r.source != SESSION})
        notes = baseline_notes(self.rows_data)
        if not self.rows_data:
            self.border_subtitle = "finished runs appear here"
        elif files or notes:
            self.border_subtitle = " · ".join([*notes, *(f"f{i} {Path(f).name}" for i, f in enumerate(files, 1))])
        else:
            interval = "" if self._compact else " (95 % interval)"
            self.border_subtitle = f"speed-up = baseline median / median{interval}, ≈ within noise"
