"""Rough edge 1: while a preset compiles (no RunInfo yet) the run pane keeps its name, an indeterminate bar
without a stale percentage, an elapsed time that goes on, and no "loss n/a" (that is the norm workloads')."""

from __future__ import annotations

import time

import pytest
from textual.widgets import ProgressBar
from ui_fakes import FakeEngine, gpu_app, static_text, until_ready, wait_for

from apextui.ui.widgets.live_run import LiveRun

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s


async def _ready(pilot, app) -> None:
    await until_ready(pilot, app)


async def test_compiling_keeps_the_name_a_fresh_bar_a_running_clock_and_no_norm_label():
    engine = FakeEngine(compile_hold=["torch_compile"])
    app = gpu_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot, app)
        app.start_preset("fp32")  # a finished run first: its bar stood at 100 %
        await wait_for(pilot, lambda: app.active is None and len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("torch_compile")
        await wait_for(pilot, lambda: app._drawn_view is not None
                       and app._drawn_view.snapshot.status == "compiling", what="compiling drawn")
        live = app.query_one(LiveRun)
        assert live.border_title == "Run · torch_compile"
        title = static_text(app, "#run-title")
        assert "compiling" in title and "torch_compile" in title
        bar = app.query_one("#run-progress", ProgressBar)
        assert bar.total is None and not bar.query_one("#percentage").display
        assert "loss n/a" not in static_text(app, "#loss-value")
        assert "fwd+bwd" not in static_text(app, "#loss-floor")
        live._started = time.monotonic() - 7  # as if the compile had gone on for 7 s
        # the clock's next tick (once a second, later on a loaded box) counts on from there
        await wait_for(pilot, lambda: static_text(app, "#run-steps").strip().startswith("… · ")
                       and int(static_text(app, "#run-steps").split("·")[1].split()[0]) >= 7, what="7 s counted")
        engine.runners[-1].release()
        await wait_for(pilot, lambda: app.active is None, what="torch_compile to finish")
        assert bar.total == engine.runners[-1].steps and bar.query_one("#percentage").display


async def test_a_run_without_steps_yet_says_loss_dash_not_n_a():
    app = gpu_app(FakeEngine(hold={"adamw": 0}))
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot, app)
        app.start_preset("adamw")
        await wait_for(pilot, lambda: app._drawn_view is not None, what="adamw drawn")
        assert static_text(app, "#loss-value") == "loss —"
        assert "fwd+bwd" not in static_text(app, "#loss-floor")


async def test_norm_workload_still_says_fwd_bwd_only():
    app = gpu_app(FakeEngine(hold={"layernorm": 20}))
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot, app)
        app.start_preset("layernorm")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 20,
                       what="layernorm drawn")
        assert static_text(app, "#loss-value") == "loss n/a"
        assert static_text(app, "#loss-floor") == "fwd+bwd only"
