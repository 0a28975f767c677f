"""Pilot tests that train for real: torch presets on CPU at their small size, a few steps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ui_fakes import highlight, no_gpu_report, provider, static_text, wait_for

from apextui.core.measure.compare import format_speedup
from apextui.ui.widget_format import COMPETED
from apextui.ui.widget_format import verdict_mark
from apextui.core.results import comparison
from apextui.ui.app import make_app
from apextui.ui.widgets.comparison_table import ComparisonTable
from apextui.ui.widgets.preset_picker import PresetPicker

pytestmark = pytest.mark.slow  # each test over ~1.5 s

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def apps():
    """Apps made by a test; whatever happens, no training thread outlives the test."""
    made: list = []

    def make(**kw):
        app = make_app(**kw)
        made.append(app)
        return app

    yield make
    for app in made:
        app.shutdown_runs(30)


@pytest.mark.asyncio
async def test_real_fp32_on_cpu_live_then_stop(apps):
    """Pick fp32 with the keys, see ms/step and the loss sparkline move, stop it, see its row."""
    app = apps(device="cpu", steps=100_000, report_provider=provider(no_gpu_report()))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, 60, "device probe")
        await highlight(pilot, app, "fp32")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.stats is not None
                       and len(app.query_one("#loss-spark").data or ()) >= 5, 60, "measured steps on screen")
        timing_1 = static_text(app, "#run-timing")
        loss_1 = list(app.query_one("#loss-spark").data)
        steps_1 = app._drawn_view.snapshot.steps_done
        assert "med" in timing_1 and "—" not in timing_1.split("med")[1].split("·")[0]
        await wait_for(pilot, lambda: app._drawn_view.snapshot.steps_done >= steps_1 + 20
                       and len(app.query_one("#loss-spark").data) > len(loss_1), 60, "more steps on screen")
        timing_2 = static_text(app, "#run-timing")
        loss_2 = list(app.query_one("#loss-spark").data)
        assert timing_2 != timing_1
        assert loss_2[:len(loss_1)] == loss_1 and loss_2[-1] < loss_1[0]  # the curve grew, the loss fell
        assert app.query_one("#run-progress").progress == app._drawn_view.snapshot.steps_done >= steps_1 + 20
        await pilot.press("s")
        await wait_for(pilot, lambda: app.active is None, 60, "the run to stop")
        table = app.query_one(ComparisonTable)
        (row,) = table.rows_data
        assert (row.preset, row.status, row.device, row.size) == ("fp32", "stopped", "cpu", "cpu")
        assert row.median_ms is not None and row.final_loss is not None and row.loss_floor is not None
        cells = [str(c) for c in table.get_row_at(0)]
        median, loss = table.get_column_index("median"), table.get_column_index("loss")
        assert cells[0].startswith("fp32") and cells[median] != "—" and "(" in cells[loss]


@pytest.mark.asyncio
async def test_real_optimizer_runs_and_speedup(apps):
    """adamw then adamw_fused to the end (30 steps each): both rows, a speed-up against adamw."""
    app = apps(device="cpu", steps=30, report_provider=provider(no_gpu_report()))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, 60, "device probe")
        table = app.query_one(ComparisonTable)
        for i, name in enumerate(("adamw", "adamw_fused"), 1):
            await highlight(pilot, app, name)
            await pilot.press("enter")
            await wait_for(pilot, lambda i=i: len(table.rows_data) == i, 60, f"{name} to finish")
        base, fused = table.rows_data
        assert base.status == "ok" and fused.status == "ok", (base.error, fused.error)
        assert base.summary.steps == 30 and base.summary.measured_steps == 30 - base.summary.warmup
        sp = table.get_column_index("speedup")
        assert str(table.get_row_at(0)[sp]).removesuffix(COMPETED) == "base"
        # the speed-up with its interval and verdict (core.measure.compare): on a busy 2-core box it may be ≈ noise, and
        # marked ⚠ when the contention check saw other work competing
        shown = str(table.get_row_at(1)[sp]).removesuffix(COMPETED)
        c = comparison(fused, table.rows_data)
        assert shown == verdict_mark(c.verdict) + format_speedup(c)  # ▲/▼ beside the colour, beyond noise
        if c.low is not None and c.high is not None and c.high > 10 * c.low:  # a busy machine: no figures
            assert "unmeasurable" in shown
        else:
            assert shown.lstrip("≈▲▼").startswith(f"{base.median_ms / fused.median_ms:.2f}× (")


@pytest.mark.asyncio
async def test_real_quit_during_run_stops_the_runner(apps):
    app = apps(device="cpu", steps=100_000, report_provider=provider(no_gpu_report()))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, 60, "device probe")
        app.start_preset("layernorm")
        await wait_for(pilot, lambda: app.latest_view is not None and app.latest_view.snapshot.steps_done > 10,
                       60, "steps")
        runner = app.active.runner
        await pilot.press("q")
        await wait_for(pilot, lambda: not runner.is_alive(), what="runner to end")
    assert not runner.is_alive()
    assert runner.result is not None and runner.result.status == "stopped"


FIRST_PAINT = textwrap.dedent("""
    import asyncio, sys, threading
    sys.path.insert(0, {tests!r})
    import ui_fakes
    from apextui.ui.app import make_app
    from apextui.ui.probe import probe_environment

    gate = threading.Event()
    def probe(requested, presets):
        gate.wait(30)
        return probe_environment(requested, presets)

    async def main():
        app = make_app(device="auto", report_provider=ui_fakes.provider(ui_fakes.no_gpu_report(), gate), probe=probe)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "torch" not in sys.modules, "torch imported before the first paint"
            assert "probing…" in ui_fakes.static_text(app, "#status-body")
            gate.set()
            await ui_fakes.wait_for(pilot, lambda: app.probe is not None, 60, "probe")
            assert "torch" in sys.modules
            print("OK", app.probe.device)
    asyncio.run(main())
""")


def test_first_paint_without_torch():
    """Run in a fresh interpreter: this test process has torch imported already."""
    code = FIRST_PAINT.format(tests=str(Path(__file__).resolve().parent))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("OK")


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _has_gpu_or_apex() -> bool:
    import importlib.util

    return _has_gpu() or importlib.util.find_spec("apex") is not None


@pytest.mark.skipif(_has_gpu_or_apex(), reason="this machine has a GPU or Apex")
@pytest.mark.asyncio
async def test_real_machine_without_gpu_or_apex(apps):
    """The real probe and the real doctor on a machine with neither GPU nor Apex."""
    app = apps(device="auto", steps=20)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None and (app.report is not None or app.report_error), 120,
                       "probe and doctor")
        assert app.probe.device == "cpu"
        body = static_text(app, "#status-body")
        assert "No GPU" in body and "NOT INSTALLED" in body, body
        assert not app.query_one(PresetPicker).is_available("fused_amp")
        app.start_preset("rmsnorm")
        await wait_for(pilot, lambda: app.query_one(ComparisonTable).rows_data, 60, "a CPU run")
        assert app.query_one(ComparisonTable).rows_data[0].status == "ok"


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_run_app_device_cuda_without_gpu_returns_3():
    code = ("import sys; from apextui.ui.app import run_app; from apextui.core.run.request import RunSettings; "
            "sys.exit(run_app(RunSettings(device='cuda')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "--device cuda was asked for" in proc.stderr
