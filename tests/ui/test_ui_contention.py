"""Other work competing with a run (issue 27 §1): the run pane says so while it runs and once it ends, and the
comparison table marks the speed-ups of such a run (and of runs compared with it) with ⚠."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
from ui_fakes import FakeEngine, gpu_app, reading, running, static_text, wait_for

from apextui.core.monitor.contention import Contention, ContentionTally
from apextui.ui.widgets.comparison_table import COMPETED, ComparisonTable

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def busy_reading(i: int, gpu: bool):
    c = Contention("busy", 1.9, 1.0, 2, reasons=("other processes used 1.9 of 2 CPU cores",))
    tally = ContentionTally()
    for _ in range(i + 1):
        tally.add(c)
    return dataclasses.replace(reading(i, gpu), contention=c, run_contention=MappingProxyType(tally.to_dict()))


async def test_a_busy_run_is_marked_on_the_run_pane_and_beside_its_speedup(tmp_path):
    engine = FakeEngine(hold={"fused_amp": 30})
    app = gpu_app(engine, save_dir=tmp_path)
    async with running(app, (120, 40)) as pilot:
        app.start_preset("fp32")  # quiet
        await wait_for(pilot, lambda: app.active is None, 5, "fp32")
        engine.monitor = busy_reading
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: "⚠ busy: other work 1.9/2 CPU cores" in static_text(app, "#run-title"), 5,
                       "the busy warning while running")
        engine.runners[-1].release()
        await wait_for(pilot, lambda: app.active is None, 5, "fused_amp")
        await pilot.pause(0.6)
        assert "⚠ busy in" in static_text(app, "#run-title")
        table = app.query_one(ComparisonTable)
        fp32_cell, amp_cell = (str(table.get_row_at(i)[5]) for i in range(2))
        assert fp32_cell == "base" and amp_cell.endswith(COMPETED)
        assert "measured while other work competed" in str(table.border_subtitle)
        assert table.rows_data[1].summary.contention["level"] == "busy"
        assert table.rows_data[0].summary.contention is None  # the fake's quiet readings carry none
