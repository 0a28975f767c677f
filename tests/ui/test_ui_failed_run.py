"""A failed run shows no speed-up (it says "failed" there) and is never a baseline: the steps it timed before
it failed measure nothing one should act on (`results.comparison`, `compare.baseline_problem`)."""

from __future__ import annotations

import json

import pytest
from ui_fakes import FakeEngine, gpu_app, running, wait_for

from apextui.core.results import comparison

pytestmark = pytest.mark.asyncio


def speedup_cells(app) -> dict[str, str]:
    """preset (with its status mark) -> the speed-up cell's text, as the table shows them."""
    table = app.table
    return {str(table.get_row_at(i)[0]): str(table.get_cell_at((i, table.get_column_index("speedup"))))
            for i in range(table.row_count)}


async def run_all(pilot, app, names) -> None:
    """Run each preset in turn to its end (a row each)."""
    for n, name in enumerate(names, len(app.table.rows_data) + 1):
        app.start_preset(name)
        await wait_for(pilot, lambda n=n: len(app.table.rows_data) == n, what=name)


async def test_a_failed_run_says_failed_where_its_speedup_would_be(tmp_path):
    app = gpu_app(FakeEngine(fail={"fused_amp": 37}), save_dir=tmp_path)
    async with running(app) as pilot:
        await run_all(pilot, app, ("fp32", "fused_amp", "fused_fp32"))
        rows = app.table.rows_data
        assert [r.status for r in rows] == ["ok", "failed", "ok"]
        assert speedup_cells(app) == {"fp32": "base", "fused_amp ✗": "failed", "fused_fp32": "≈1.15×"}
        assert comparison(rows[1], rows) is None and comparison(rows[2], rows) is not None
        await pilot.press("w")  # the saved JSON agrees: no speed-up for the failed run
        await wait_for(pilot, lambda: any(tmp_path.glob("apextui-results-*.json")), what="the saved file")
        saved = json.loads(next(tmp_path.glob("apextui-results-*.json")).read_text())
        assert [(r["preset"], r["speedup"]) for r in saved["runs"]][1] == ("fused_amp", None)


async def test_a_failed_baseline_is_never_the_baseline():
    """fp32 fails: fused_amp gets no speed-up, and the subtitle says why; once a good fp32 has run, it is the
    baseline of every fused_amp run and the failed one is passed over."""
    app = gpu_app(FakeEngine(fail={"fp32": 30}, fail_runs=[1]))
    async with running(app, size=(100, 30)) as pilot:
        await run_all(pilot, app, ("fp32", "fused_amp"))
        assert speedup_cells(app) == {"fp32 ✗": "failed", "fused_amp": "—"}
        assert "fp32 run 1 failed after 30 steps: not a baseline" in str(app.table.border_subtitle)
        await run_all(pilot, app, ("fp32", "fused_amp", "fused_amp"))
        cells = [str(app.table.get_cell_at((i, app.table.get_column_index("speedup"))))
                 for i in range(app.table.row_count)]
        assert cells[0] == "failed" and cells[2] == "base"
        for up in (cells[1], cells[3]):  # both fused_amp runs against fp32 run 2, the good one
            assert up.startswith("▲2.") and "×" in up
        assert "vs fp32 run 2; fp32 run 1 failed after 30 steps" in str(app.table.border_subtitle)
