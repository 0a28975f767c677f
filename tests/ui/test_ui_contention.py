"""Other work competing with a run (issue 27 §1): the run pane says so while it runs and once it ends, and the
comparison table marks the speed-ups of such a run (and of runs compared with it) with ⚠."""

from __future__ import annotations

import dataclasses

import pytest
from ui_fakes import FakeEngine, gpu_app, reading, running, static_text, wait_for, wait_for_screen

from apextui.core.monitor.contention import Contention, ContentionTally
from apextui.ui.widget_format import COMPETED
from apextui.ui.widgets.comparison_table import ComparisonTable

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def busy_reading(i: int, gpu: bool):
    c = Contention("busy", 1.9, 1.0, 2, reasons=("other processes used 1.9 of 2 CPU cores",))
    tally = ContentionTally()
    for _ in range(i + 1):
        tally.add(c)
    return dataclasses.replace(reading(i, gpu), contention=c, run_contention=tally.record())


async def test_a_busy_run_is_marked_on_the_run_pane_and_beside_its_speedup(tmp_path):
    engine = FakeEngine(hold={"fused_amp": 30})
    app = gpu_app(engine, save_dir=tmp_path)
    async with running(app, (120, 40)) as pilot:
        app.start_preset("fp32")  # quiet
        await wait_for(pilot, lambda: app.active is None, what="fp32")
        engine.monitor = busy_reading
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: "⚠ busy: other work 1.9/2 CPU cores" in static_text(app, "#run-title"),
                       what="the busy warning while running")
        engine.runners[-1].release()
        await wait_for(pilot, lambda: app.active is None, what="fused_amp")
        await wait_for(pilot, lambda: "⚠ busy in" in static_text(app, "#run-title"), what="the busy mark after the run")
        table = app.query_one(ComparisonTable)
        fp32_cell, amp_cell = (str(table.get_row_at(i)[5]) for i in range(2))
        assert fp32_cell == "base" and amp_cell.endswith(COMPETED)
        assert "measured while other work competed" in str(table.border_subtitle)
        assert table.rows_data[1].summary.contention.level == "busy"
        assert table.rows_data[0].summary.contention is None  # the fake's quiet readings carry none


async def test_the_exports_keep_the_competed_mark_the_screen_shows(tmp_path):
    """`e`: the Markdown's speed-up cell has the screen's ⚠ and its notes the screen's caveat; the CSV its
    `speedup_competed` column (the baseline's quiet run False, the busy one True)."""
    import csv

    engine = FakeEngine()
    app = gpu_app(engine, save_dir=tmp_path)
    async with running(app, (120, 40)) as pilot:
        app.start_preset("fp32")  # quiet
        await wait_for(pilot, lambda: app.active is None and len(app.table.rows_data) == 1, 30, "fp32")
        engine.monitor = busy_reading
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: app.active is None and len(app.table.rows_data) == 2, 30, "fused_amp")
        await pilot.press("e")
        await wait_for(pilot, lambda: len(list(tmp_path.glob("apextui-results-*"))) == 2, 30, "the exports")
    md = next(tmp_path.glob("apextui-results-*.md")).read_text().splitlines()
    amp = next(line for line in md if "| fused_amp |" in line)
    assert amp.split(" | ")[6].endswith(COMPETED) and "| base |" in md[2]
    assert "- ⚠ measured while other work competed" in md
    rows = list(csv.DictReader(next(tmp_path.glob("apextui-results-*.csv")).open()))
    assert [(r["preset"], r["speedup_competed"]) for r in rows] == [("fp32", "False"), ("fused_amp", "True")]


async def test_the_marked_presets_run_interleaved_and_show_pooled_intervals(tmp_path):
    """m marks adamw_fused and fused_adam, c runs them with their baseline adamw A/B/B/A (as advise does)."""
    from ui_fakes import highlight

    from apextui.ui.screens.interleaved_screen import InterleavedScreen

    engine = FakeEngine()
    app = gpu_app(engine, save_dir=tmp_path, steps=40)
    async with running(app, (120, 40)) as pilot:
        for name in ("adamw_fused", "fused_adam"):
            await highlight(pilot, app, name)
            await pilot.press("m")
        assert app.picker.marked == ["adamw_fused", "fused_adam"]
        await pilot.press("c")
        await wait_for_screen(pilot, app, InterleavedScreen, "the comparison's result")
        order = [r.preset.name for r in engine.runners]
        assert order == ["adamw_fused", "fused_adam", "adamw", "adamw", "fused_adam", "adamw_fused"]  # A B C C B A
        body = static_text(app.screen, "#interleaved-body")
        assert "interleaved A/B/B/A: 2 repeat(s) × 40 steps" in body
        assert "adamw: " in body and "over 2 run(s) · base" in body
        fused = next(line for line in body.splitlines() if line.strip().startswith("adamw_fused:"))
        assert "×" in fused and "over 2 run(s)" in fused
        table = app.query_one(ComparisonTable)
        assert [r.preset for r in table.rows_data] == order  # every run joined the table, numbered
        assert [str(table.get_row_at(i)[1]) for i in range(6)] == ["1", "1", "1", "2", "2", "2"]
        await pilot.press("escape")
        assert app.active is None and not app.interleaved_job.running


async def test_c_with_one_marked_preset_runs_it_against_its_baseline(tmp_path):
    """The help says c runs the marked presets "and their baseline": one marked preset is enough. The baseline
    alone has nothing to be compared with: one line says so."""
    from ui_fakes import highlight

    from apextui.ui.screens.interleaved_screen import InterleavedScreen

    engine = FakeEngine()
    app = gpu_app(engine, save_dir=tmp_path, steps=40)
    async with running(app, (120, 40)) as pilot:
        await highlight(pilot, app, "adamw")
        await pilot.press("m", "c")
        await wait_for(pilot, lambda: any("is its workload's baseline" in n.message for n in app._notifications),
                       20, "the baseline alone refused")
        assert not engine.runners
        await pilot.press("m")  # unmarked
        await highlight(pilot, app, "adamw_fused")
        await pilot.press("m")
        assert app.picker.marked == ["adamw_fused"]
        await pilot.press("c")
        await wait_for_screen(pilot, app, InterleavedScreen, "the comparison's result", 30)
        assert [r.preset.name for r in engine.runners] == ["adamw_fused", "adamw", "adamw", "adamw_fused"]
        await pilot.press("escape")


async def test_one_thing_measures_at_a_time_and_the_app_says_which(tmp_path):
    """While the interleaved comparison holds a run, the app's one answer to "what measures now" is the comparison:
    a preset cannot start beside it, and its line says what to stop."""
    from ui_fakes import highlight

    engine = FakeEngine(hold={"adamw_fused": 5})
    app = gpu_app(engine, save_dir=tmp_path, steps=40)
    async with running(app, (120, 40)) as pilot:
        assert app.measuring() is None
        await highlight(pilot, app, "adamw_fused")
        await pilot.press("m", "c")
        await wait_for(pilot, lambda: engine.runners and engine.runners[0].done >= 5, 20, "the held run")
        assert app.measuring() == "interleaved" and app.background_jobs() == [app.interleaved_job]
        assert not app.start_preset("adamw")
        await pilot.pause()
        assert any("the interleaved comparison is measuring: s stops it" in n.message for n in app._notifications), \
            [n.message for n in app._notifications]
        assert len(engine.runners) == 1  # nothing started beside it
        app.interleaved_job.stop()
        engine.runners[0].release()
        await wait_for(pilot, lambda: app.measuring() is None, 30, "the comparison's end")
