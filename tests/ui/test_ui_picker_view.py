"""Rough edge 2: the highlighted preset stays in view (after a resize, with --preset) and the run pane says a
--preset waiting to start will start, rather than "enter: start"."""

from __future__ import annotations

import threading

import pytest
from ui_fakes import FakeEngine, fake_probe, gpu_app, gpu_report, provider, static_text, until_ready, wait_for

from apextui.core.presets import resolve
from apextui.ui.app import make_app
from apextui.ui.widgets.preset_picker import PresetPicker

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s


def in_view(picker: PresetPicker) -> bool:
    picker._update_lines()
    line = picker._index_to_line[picker.highlighted]
    top = picker.scroll_offset.y
    return top <= line < top + picker.scrollable_content_region.height


async def test_preset_option_is_scrolled_into_view_at_start():
    app = make_app(preset=resolve("fp32"), autostart=False, device="cuda", report_provider=provider(gpu_report()),
                   probe=fake_probe("cuda"), runner_factory=FakeEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.pause(0.1)
        picker = app.query_one(PresetPicker)
        assert picker.highlighted_preset.name == "fp32"
        assert in_view(picker)


async def test_highlight_stays_in_view_after_shrinking():
    app = gpu_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await until_ready(pilot, app)
        picker = app.query_one(PresetPicker)
        picker.highlight_preset("torch_compile_graph")
        await pilot.pause(0.1)
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert picker.highlighted_preset.name == "torch_compile_graph"
        assert in_view(picker)


async def test_waiting_preset_says_it_will_start_not_enter_start():
    gate = threading.Event()
    app = make_app(preset=resolve("adamw"), device="cuda", report_provider=provider(gpu_report(), gate),
                   probe=fake_probe("cuda"), runner_factory=FakeEngine())
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.probe is not None, what="probe")
            await pilot.pause(0.1)
            text = static_text(app, "#run-title")
            assert "starts as soon as the Apex doctor finishes" in text and "enter: start" not in text
            gate.set()
            await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="adamw to run by itself")
    finally:
        gate.set()
