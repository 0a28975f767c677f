"""Rough edge 11: a one-column scrollbar's thumb beside the status lines looked like a sparkline bar (▅, ▂)."""

from __future__ import annotations

import pytest
from ui_fakes import gpu_app, until_ready

from apextui.ui.widgets.preset_picker import PresetPicker
from apextui.ui.widgets.status_pane import StatusPane

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s

PARTIAL = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


async def test_scrollbar_thumbs_are_whole_cells():
    app = gpu_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.pause()
        # the status pane no longer overflows: what does not fit ends in "…" (test_ui_rough_edges); it must then
        # show no scrollbar at all
        assert not app.query_one(StatusPane).show_vertical_scrollbar
        for pane in (app.query_one(PresetPicker),):
            assert pane.show_vertical_scrollbar, f"{type(pane).__name__} does not overflow at 80x24"
            bar = pane.vertical_scrollbar
            strips = [bar.render_line(y) for y in range(bar.size.height)] if hasattr(bar, "render_line") else []
            text = "".join(seg.text for strip in strips for seg in strip) if strips else \
                "".join(seg.text for seg in app.console.render(bar.render(), app.console.options.update(
                    width=1, height=bar.size.height)))
            assert not PARTIAL & set(text), f"{type(pane).__name__}'s thumb has partial blocks: {text!r}"
