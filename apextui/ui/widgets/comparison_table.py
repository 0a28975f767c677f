"""Every run of this session (and loaded ones) against the baseline of its workload.

Speed-ups are `core.measure.compare`'s: ≈ when within noise, coloured only beyond noise; a failed run has none
(`results.comparison`) and shows "failed" there. The columns follow the table's width (`tier`): narrow
(a 60-column terminal) keeps preset, median, speed-up, loss and max error under short headers; from `NORMAL`
the device and p10–p90 join and the loss shows its floor; from `WIDE` the speed-up shows its 95 % interval and
the MFU column joins (`summary.mfu`: the model's FLOPs a step against the GPU's dense peak; — where none is known);
from `EXTRA` (big terminals) steps, throughput and compile time join. The subtitle names the
baseline run when another one was passed over (stopped, failed, too short), and the drift between runs every
interval holds (`RunIndex.drift_notes`: "single runs, one after another: drift unknown" until a preset has run
twice). A speed-up whose run or baseline was measured while other work competed (`monitor.contention`) is marked
⚠.

Rows: `t` sorts (run order, median, speed-up, preset), `x` hides the cursor row and `u` shows the hidden ones
again (hidden rows stay in the results: saved, exported, compared). A long history is paged: `PAGE_ROWS` rows at
a time (the newest first shown), `[` / `]` the older / newer page, "showing 9,801–10,000 of 10,000" in the
subtitle. Why: Textual measures every cell it is given; 10,000 rows took 2-3 s to open, one page a few ms."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, get_args

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from apextui.core.measure.compare import format_speedup

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
    Column("preset", "preset", "preset", NARROW), Column("run", "run", "#", NARROW),
    Column("device", "dev", "dev", NORMAL),
    Column("median", "median ms", "ms", NARROW), Column("spread", "p10–p90", "p10–p90", NORMAL),
    Column("speedup", "speed-up", "speed-up", NARROW), Column("vs", "vs", "vs", WIDE),
    Column("loss", "last loss (floor)", "loss", NARROW),
    Column("err", "max err", "err", NARROW), Column("mfu", "MFU", "MFU", WIDE),
    Column("steps", "steps", "steps", EXTRA),
    Column("throughput", "throughput", "throughput", EXTRA), Column("compile", "compile", "compile", EXTRA),
)
STATUS_MARK = {"ok": "", "stopped": " ■", "failed": " ✗"}
VERDICT_STYLE = {"faster": "bold green", "slower": "bold red"}  # within noise: no colour
PAGE_ROWS = 100  # rows on one page of the table (Textual measures each: 100 cost a few ms)

SortKey = Literal["run order", "median", "speed-up", "preset"]
SORTS: tuple[SortKey, ...] = get_args(SortKey)


def tier(width: int) -> int:
    """The tier of a table `width` columns wide."""
    return NARROW if width < NORMAL_WIDTH else NORMAL if width < WIDE_WIDTH else WIDE if width < EXTRA_WIDTH else EXTRA


def columns(level: int, left_out: frozenset[str] = frozenset()) -> tuple[Column, ...]:
    return tuple(c for c in COLUMNS if c.tier <= level and c.key not in left_out)


def cells(row: ResultRow, index: RunIndex, source_label: str = "", level: int = WIDE,
          left_out: frozenset[str] = frozenset()) -> tuple[object, ...]:
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
    elif index.is_base(row):
        up_text = Text("base", style="dim")
    else:
        c = index.comparison(row)
        up_text = Text(fmt.verdict_mark(c.verdict if c else None) + format_speedup(c, level < WIDE),
                       style=VERDICT_STYLE.get(c.verdict, "") if c else "dim")
    if row.status != "failed" and index.competed(row):
        up_text.append(fmt.COMPETED, style="bold yellow")
    base = index.baseline(row)
    vs = Text(base.preset, style="dim") if base is not None and base is not row else Text(fmt.DASH, style="dim")
    if row.final_loss is not None:
        loss = Text(f"{row.final_loss:.3f}")
        if row.loss_floor is not None and level > NARROW:  # in brackets: a slash read as a ratio
            loss.append(f" ({row.loss_floor:.3f})", style="dim")
    else:
        loss = Text(fmt.DASH, style="dim")
    check = row.check
    if check and row.max_error is not None:
        err = Text(fmt.error(row.max_error), style="green" if check.passed else "bold red")
    else:
        err = Text(fmt.DASH, style="dim")
    summary = row.summary
    steps = summary.steps
    unit = str(summary.throughput_unit or "/s").replace("tokens", "tok")
    compile_s = summary.compile_s
    mfu = summary.mfu.percent if summary.mfu is not None else None
    by_key: dict[str, object] = {
        "preset": name, "run": str(index.number(row)), "device": row.device,
        "median": Text(fmt.ms(row.median_ms), style="bold"),
        "spread": spread, "speedup": up_text, "vs": vs, "loss": loss, "err": err,
        "mfu": mfu or Text(fmt.DASH, style="dim"),
        "steps": str(steps) if isinstance(steps, int) else fmt.DASH,
        "throughput": fmt.si(summary.wall_throughput if summary.wall_throughput is not None else summary.throughput,
                             unit),
        "compile": fmt.seconds(compile_s) if compile_s else Text(fmt.DASH, style="dim"),
    }
    return tuple(by_key[c.key] for c in columns(level, left_out))


def _sort_value(key: SortKey, index: RunIndex) -> Callable[[tuple[int, ResultRow]], tuple[object, ...]]:
    """How `key` orders (position, row) pairs: a row without the value goes last; ties keep run order."""
    def value(item: tuple[int, ResultRow]) -> tuple[object, ...]:
        i, row = item
        if key == "median":
            return (row.median_ms is None, row.median_ms or 0.0, i)
        if key == "speed-up":  # fastest first; the base and rows without one after
            c = index.comparison(row)
            return (c is None, -(c.speedup if c else 0.0), i)
        if key == "preset":
            return (row.preset, i)
        return (i,)

    return value


class ComparisonTable(DataTable):
    """Rows are rebuilt when a run finishes or results are loaded (rare), never per step; only one page of them
    (`PAGE_ROWS`) is given to Textual.

    A list of rows: Home/End go to the first/last row (DataTable's scrolled sideways and cut the first
    letter of every row), and the cursor row stays in view above the horizontal scrollbar."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
        Binding("t", "sort", "Sort", show=False),
        Binding("x", "hide_row", "Hide row", show=False),
        Binding("u", "unhide", "Show hidden", show=False),
        Binding("left_square_bracket", "page(-1)", "Older page", show=False, key_display="["),
        Binding("right_square_bracket", "page(1)", "Newer page", show=False, key_display="]"),
    ]
    # columns a table of other rows has no values for; "vs" (the baseline run each row is compared with) is the
    # watched runs' (`attach_app.WatchedTable`): a preset's baseline is its workload's, named in the subtitle
    LEFT_OUT: ClassVar[frozenset[str]] = frozenset({"vs"})
    LABELS: ClassVar[dict[str, str]] = {}  # headers of its own, by column key

    def __init__(self, *, id: str | None = None, page_rows: int = PAGE_ROWS) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = "Comparison"
        self.rows_data: list[ResultRow] = []
        self.page_rows = page_rows
        self.sort_key: SortKey = "run order"
        self.hidden: set[int] = set()  # id() of the rows hidden (`x`); they stay in rows_data
        self.page = -1  # the page shown, from 0; -1: the last one (the newest rows in run order)
        self.rows_built = 0  # rows given to Textual since the table was made (the paging test counts them)
        self.shown: list[int] = []  # rows_data positions of the rows on screen, top to bottom
        self._order: list[int] = []  # every shown-or-paged position, in the table's order (hidden ones out)
        self._tier: int | None = None  # the tier of the columns shown

    def on_mount(self) -> None:
        self._set_columns(tier(self.size.width))
        self._update_subtitle()

    def _set_columns(self, level: int) -> None:
        self._tier = level
        self.clear(columns=True)
        for c in columns(level, self.LEFT_OUT):
            self.add_column(self.LABELS.get(c.key) or (c.short if level == NARROW else c.label), key=c.key)

    def add_result(self, row: ResultRow) -> None:
        self.rows_data.append(row)
        self.page = -1 if self.sort_key == "run order" else self.page  # the new run in view
        self._rebuild(cursor=len(self.rows_data) - 1)

    def add_results(self, rows: Sequence[ResultRow]) -> None:
        self.rows_data.extend(rows)
        self.page = -1 if self.sort_key == "run order" else self.page
        self._rebuild(cursor=len(self.rows_data) - 1)

    def row_at(self, display_row: int) -> ResultRow | None:
        """The run on screen row `display_row` (the cursor's), or None when there is none."""
        if not self.shown:
            return None
        return self.rows_data[self.shown[min(max(display_row, 0), len(self.shown) - 1)]]

    @property
    def pages(self) -> int:
        return max(1, -(-len(self._order) // self.page_rows))

    def _page_index(self) -> int:
        return self.pages - 1 if self.page < 0 else min(self.page, self.pages - 1)

    def action_sort(self) -> None:
        """`t`: the next order (run order, median, speed-up, preset)."""
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + 1) % len(SORTS)]
        self.page = -1 if self.sort_key == "run order" else 0
        self._rebuild()

    def action_hide_row(self) -> None:
        """`x`: hide the cursor row (it stays in the results; `u` shows it again)."""
        row = self.row_at(self.cursor_row)
        if row is None:
            return
        at = self.cursor_row
        self.hidden.add(id(row))
        self._rebuild(keep_row=at)

    def action_unhide(self) -> None:
        """`u`: show every hidden row again."""
        if self.hidden:
            self.hidden.clear()
            self._rebuild()

    def action_page(self, step: int) -> None:
        """`[` / `]`: the older / newer page (earlier / later in the table's order)."""
        now = self._page_index()
        target = min(max(now + step, 0), self.pages - 1)
        if target != now:
            self.page = target
            self._rebuild(keep_row=0 if step > 0 else self.page_rows - 1)

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

    def _rebuild(self, cursor: int | None = None, keep_row: int | None = None) -> None:
        """Redraw the page shown. `cursor`: a rows_data position to put the cursor on (its page is shown when it is
        on none other); `keep_row`: a screen row to keep the cursor at; else the last row."""
        level = tier(self.size.width)
        if level != self._tier:
            self._set_columns(level)
        else:
            self.clear()
        index = RunIndex(self.rows_data)
        items = [(i, r) for i, r in enumerate(self.rows_data) if id(r) not in self.hidden]
        if self.sort_key != "run order":
            items.sort(key=_sort_value(self.sort_key, index))
        self._order = [i for i, _ in items]
        if cursor is not None and cursor in self._order:
            self.page = self._order.index(cursor) // self.page_rows
        first = self._page_index() * self.page_rows
        self.shown = self._order[first:first + self.page_rows]
        files: dict[str, int] = {}
        for r in self.rows_data:  # numbered over every row, so f1 stays f1 on every page
            if r.source != SESSION:
                files.setdefault(r.source, len(files) + 1)
        for i in self.shown:
            row = self.rows_data[i]
            label = f"f{files[row.source]}" if row.source != SESSION else ""
            self.add_row(*cells(row, index, label, level, self.LEFT_OUT), key=str(i))
            self.rows_built += 1
        if self.shown:
            if cursor is not None and cursor in self.shown:
                self.move_cursor(row=self.shown.index(cursor))
            elif keep_row is not None:
                self.move_cursor(row=min(max(keep_row, 0), len(self.shown) - 1))
            else:
                self.move_cursor(row=len(self.shown) - 1)
        self._update_subtitle(index, files)

    def _cursor_note(self, index: RunIndex) -> str | None:
        """What the subtitle says first of the cursor row (a table of watched runs: what it is compared with)."""
        return None

    def _update_subtitle(self, index: RunIndex | None = None, files: dict[str, int] | None = None) -> None:
        if not self.rows_data:
            self.border_subtitle = "finished runs appear here"
            return
        index = index or RunIndex(self.rows_data)
        cursor = self._cursor_note(index)
        parts: list[str] = [cursor] if cursor else []
        if len(self._order) > len(self.shown):
            first = self._page_index() * self.page_rows
            parts.append(f"showing {first + 1:,}–{first + len(self.shown):,} of {len(self._order):,} · [ ] page")
        if self.hidden:
            parts.append(f"{len(self.hidden):,} hidden · u shows")
        if self.sort_key != "run order":
            parts.append(f"by {self.sort_key} · t sorts")
        notes = index.notes()
        drift = index.drift_notes()
        if any(index.competed(self.rows_data[i]) for i in self.shown):
            parts.append(fmt.COMPETED_NOTE)
        named = sorted((files or {}).items(), key=lambda kv: kv[1])
        if notes or named or drift:  # the legend stays, short, after the notes (loading a file used to replace it)
            parts.extend([*notes, *drift, fmt.LEGEND, *(f"f{n} {Path(f).name}" for f, n in named)])
        else:
            interval = " (95 % interval)" if (self._tier or NARROW) >= WIDE else ""
            parts.append(f"speed-up = baseline median / median{interval} · {fmt.LEGEND}")
        self.border_subtitle = " · ".join(parts)
