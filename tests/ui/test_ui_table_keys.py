"""Rough edge 4: in the comparison table the last row hid under the horizontal scrollbar, ↓ did not reach
it, End scrolled sideways (cutting every row's first letter), and the cursor row did not show."""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, gpu_app, until_ready, wait_for

from apextui.ui.widgets.comparison_table import ComparisonTable

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s

PRESETS = ("fp32", "fused_fp32", "fused_amp", "adamw", "adamw_fused", "adamw_capturable_graph", "fused_adam",
           "layernorm", "fused_layernorm")


def last_visible_row(table: ComparisonTable) -> int:
    return int(table.scroll_y) + table.scrollable_content_region.height - table.header_height - 1


@pytest.mark.parametrize("size", [(80, 24), (64, 24)])
async def test_down_and_end_reach_the_last_row_above_the_scrollbar(size, tmp_path):
    app = gpu_app(FakeEngine(), save_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await until_ready(pilot, app)
        for name in PRESETS:
            app.start_preset(name)
            await wait_for(pilot, lambda: app.active is None, what=name)
        app.action_save()
        (saved,) = tmp_path.glob("apextui-results-*.json")
        app.load_results(saved)  # rows labelled f1: a wider preset column
        table = app.query_one(ComparisonTable)
        table.focus()
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        for _ in range(table.row_count - 1):
            await pilot.press("down")
        await pilot.pause(0.1)
        assert table.cursor_row == table.row_count - 1
        assert last_visible_row(table) >= table.cursor_row, "the last row is under the scrollbar"
        await pilot.press("home")
        await pilot.press("end")
        await pilot.pause(0.1)
        assert table.cursor_row == table.row_count - 1 and table.scroll_x == 0
        assert last_visible_row(table) >= table.cursor_row
