"""Rough edge 11: a one-column scrollbar's thumb beside the status lines looked like a sparkline bar (▅, ▂)."""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, fake_probe, gpu_report, provider, wait_for

from apextui.ui.app import make_app
from apextui.ui.widgets.preset_picker import PresetPicker
from apextui.ui.widgets.status_pane import StatusPane

pytestmark = pytest.mark.asyncio

PARTIAL = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


async def test_scrollbar_thumbs_are_whole_cells():
    app = make_app(device="cuda", report_provider=provider(gpu_report()), probe=fake_probe("cuda"),
                   runner_factory=FakeEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, 10, "probe and report")
        await pilot.pause()
        for pane in (app.query_one(StatusPane), app.query_one(PresetPicker)):
            assert pane.show_vertical_scrollbar, f"{type(pane).__name__} does not overflow at 80x24"
            bar = pane.vertical_scrollbar
            strips = [bar.render_line(y) for y in range(bar.size.height)] if hasattr(bar, "render_line") else []
            text = "".join(seg.text for strip in strips for seg in strip) if strips else \
                "".join(seg.text for seg in app.console.render(bar.render(), app.console.options.update(
                    width=1, height=bar.size.height)))
            assert not PARTIAL & set(text), f"{type(pane).__name__}'s thumb has partial blocks: {text!r}"
