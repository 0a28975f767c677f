"""The comparison table's rows (issue 27 §3 items 1 and 18, issue 28 item 3): a run column, sorting, hiding rows,
and a 10,000-run history paged so that only one page is ever given to Textual (timing-free: rows built counted)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from apextui.core.measure.summary import Summary
from apextui.core.results import ResultRow
from apextui.ui.widgets.comparison_table import PAGE_ROWS, ComparisonTable
from helpers import named

pytestmark = pytest.mark.asyncio


def run(preset: str, median: float) -> ResultRow:
    name = "adamw" if preset.startswith("adamw run") else preset
    return ResultRow(preset=preset, workload="optimizer", config=named("optimizer", name), device="cpu", size="cpu",
                     status="ok",
                     summary=Summary.from_dict({"steps": 60, "measured_steps": 50, "median_ms": median,
                                           "median_low_ms": median * 0.98, "median_high_ms": median * 1.02}))


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ComparisonTable(id="table")


def history(n: int) -> list[ResultRow]:
    return [run("adamw" if i % 2 == 0 else "adamw_fused", 10.0 + (i % 7)) for i in range(n)]


async def test_a_10000_run_history_builds_one_page_of_rows():
    app = TableApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(ComparisonTable)
        table.add_results(history(10_000))
        await pilot.pause()
        assert table.rows_built == PAGE_ROWS and table.row_count == PAGE_ROWS
        assert "showing 9,901–10,000 of 10,000 · [ ] page" in str(table.border_subtitle)
        assert table.row_at(table.cursor_row) is table.rows_data[-1]  # the newest run under the cursor
        table.focus()
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert "showing 9,801–9,900 of 10,000" in str(table.border_subtitle)
        assert table.rows_built == 2 * PAGE_ROWS  # one more page, never the whole history
        assert table.row_at(0) is table.rows_data[9_800]
        await pilot.press("right_square_bracket", "right_square_bracket")  # the last page, then nothing newer
        await pilot.pause()
        assert "showing 9,901–10,000" in str(table.border_subtitle) and table.rows_built == 3 * PAGE_ROWS


async def test_the_run_column_numbers_each_presets_runs_and_sort_and_hide_work():
    app = TableApp()
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(ComparisonTable)
        rows = [run("adamw", 30.0), run("adamw_fused", 10.0), run("adamw", 31.0), run("adamw_fused", 20.0)]
        table.add_results(rows)
        await pilot.pause()
        assert [str(table.get_row_at(i)[1]) for i in range(4)] == ["1", "1", "2", "2"]
        assert str(table.get_row_at(0)[5]) == "base"  # the fastest adamw run: what the others are against
        table.focus()
        await pilot.press("t")  # by median
        await pilot.pause()
        assert [table.row_at(i) for i in range(4)] == [rows[1], rows[3], rows[0], rows[2]]
        assert "by median · t sorts" in str(table.border_subtitle)
        await pilot.press("home", "x")  # hide the fastest
        await pilot.pause()
        assert table.row_count == 3 and rows[1] not in [table.row_at(i) for i in range(3)]
        assert len(table.rows_data) == 4 and "1 hidden · u shows" in str(table.border_subtitle)
        await pilot.press("u", "t", "t", "t")  # every row back; speed-up, preset, then run order again
        await pilot.pause()
        assert table.row_count == 4 and table.sort_key == "run order"
        assert [table.row_at(i) for i in range(4)] == rows
