"""SVG snapshots of the main screen with a deterministic fake report, probe and engine.

Regenerate after an intended UI change with
`pytest tests/ui/test_ui_snapshots.py --snapshot-update`, then look at the SVGs.
"""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, LoggingEngine, cpu_app, gpu_app, until_ready, settle_bars, wait_for

pytestmark = pytest.mark.slow  # each test over ~1.5 s


def gpu_session(log_dir=None):
    """An H200 with Apex: fp32 and fused_fp32 finished, fused_amp live at step 150 of 400; with `log_dir`, the
    runs' workers print to log files there (the log pane of wide terminals shows them)."""
    hold = {"fused_amp": 150}
    app = gpu_app(FakeEngine(hold=hold) if log_dir is None else LoggingEngine(log_dir, hold=hold))

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        for n, name in enumerate(("fp32", "fused_fp32"), 1):
            app.start_preset(name)
            await wait_for(pilot, lambda n=n: len(app.table.rows_data) == n, what=name)
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 150,
                       what="fused_amp at step 150")
        if log_dir is not None:  # the pane reads the logs twice a second: read them now, or a loaded box races it
            from apextui.ui.widgets.log_pane import LogPane

            pane = app.query_one("#log-pane", LogPane)

            def shown() -> bool:
                pane.refresh_log()
                return any(log.title.startswith("fused_amp") and "GradScaler" in log.text for log in app.run_logs)

            await wait_for(pilot, shown, what="fused_amp's worker output in the log pane")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def cpu_session():
    """A laptop without GPU or Apex: adamw finished, fp32 live at step 150."""
    app = cpu_app(FakeEngine(hold={"fp32": 150}))

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        app.start_preset("adamw")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="adamw")
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 150,
                       what="fp32 at step 150")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def test_main_screen_gpu_80x24(snap_compare):
    app, before = gpu_session()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_main_screen_gpu_120x40(snap_compare):
    app, before = gpu_session()
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


def test_main_screen_gpu_60x20(snap_compare):
    """Narrow: the table keeps preset, ms, speed-up, loss and err; the footer keeps the keys that matter and
    ? Help; the step-time and metric sparklines have room (rough edge 3)."""
    app, before = gpu_session()
    assert snap_compare(app, terminal_size=(60, 20), run_before=before)


def test_main_screen_gpu_160x48(snap_compare, tmp_path):
    """Wide: the worker output beside the comparison table, a step-time chart with its axis."""
    app, before = gpu_session(tmp_path)
    assert snap_compare(app, terminal_size=(160, 48), run_before=before)


def test_main_screen_gpu_200x60(snap_compare, tmp_path):
    """Wider: the table adds steps, throughput and compile time; the loss curve takes the run pane's height."""
    app, before = gpu_session(tmp_path)
    assert snap_compare(app, terminal_size=(200, 60), run_before=before)


def test_main_screen_no_gpu_80x24(snap_compare):
    app, before = cpu_session()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_doctor_report_screen_80x24(snap_compare):
    app, before = gpu_session()

    async def open_report(pilot) -> None:
        await before(pilot)
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_report)


def test_help_screen_80x24(snap_compare):
    app, before = gpu_session()

    async def open_help(pilot) -> None:
        await before(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_help)


def test_run_details_screen_80x24(snap_compare):
    """fused_fp32's record (the second comparison row), opened with enter on the table."""
    app, before = gpu_session()

    async def open_details(pilot) -> None:
        await before(pilot)
        table = app.table
        table.focus()
        table.move_cursor(row=1)
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_details)


def test_log_screen_80x24(snap_compare, tmp_path):
    """The worker output of two runs: one that ended (its log file deleted), one still running."""
    app = gpu_app(LoggingEngine(tmp_path, hold={"fused_amp": 150}))

    async def open_log(pilot) -> None:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: app.active is not None, what="fused_amp running")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.press("o")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_log)


def test_compiling_80x24(snap_compare):
    """torch_compile compiling after fp32 finished: its name, no stale 100 %, the clock at 12 s, no loss n/a."""
    import time

    from textual.clock import MockClock

    app = gpu_app(FakeEngine(compile_hold=["torch_compile"]))

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("torch_compile")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.status == "compiling",
                       what="compiling drawn")
        app.live._ticker.pause()  # the clock drawn once, at 12 s, after every pending redraw is done
        await pilot.pause(1.2)
        app.live._started = time.monotonic() - 12.2
        app.live._tick()
        app.query_one("#run-progress #bar")._clock = MockClock(1.0)  # the indeterminate bar's pulse, stopped
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_advice_measuring_80x24(snap_compare, monkeypatch):
    """`a` on an H200: the advice's progress at the top, the finished runs under it."""
    from textual.clock import MockClock
    from ui_fakes import FakeRunner

    from apextui.core.advise import run as advise_run
    from apextui.ui.screens.advise_screen import AdviseScreen

    monkeypatch.setattr(advise_run, "environment", lambda device: {
        "device": "cuda", "name": "NVIDIA H200", "driver": "570.133.20", "torch": "2.11.0+cu128",
        "apex": "version 0.1", "key": "cuda|NVIDIA H200|snapshot"})
    held: list[FakeRunner] = []

    class HoldSecond(FakeEngine):
        def __call__(self, request, callback):
            hold = 50 if request.preset.name == "adamw_fused" and not held else None
            runner = FakeRunner(request, callback, hold_at=hold)
            if hold is not None:
                held.append(runner)
            return runner

    app = gpu_app(HoldSecond())

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AdviseScreen) and app.screen.is_mounted and held
                       and "50/100" in str(app.screen.query_one("#advise-status").render()), what="advice progress")
        app.screen.query_one("#advise-progress #bar")._clock = MockClock(1.0)
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
    finally:
        for runner in held:
            runner.release()


def test_failed_run_80x24(snap_compare):
    """fused_amp failed at step 37 (out of memory): ✗ failed with the error in the run pane and the table, and
    "failed" where its speed-up would be."""
    app = gpu_app(FakeEngine(fail={"fused_amp": 37}))

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 2, what="fused_amp failed")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_stopping_while_compiling_80x24(snap_compare):
    """s while torch_compile compiles: the whole line, "s again: end it now" included (it was cut at "end …")."""
    from textual.clock import MockClock

    class CompileGoesOn(FakeEngine):  # as a worker does: the first s waits for the compile to end
        def __call__(self, *args, **kw):
            runner = super().__call__(*args, **kw)
            runner.stop = lambda: setattr(runner, "stopped", True)
            return runner

    app = gpu_app(CompileGoesOn(compile_hold=["torch_compile"]))

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        app.start_preset("torch_compile")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.status == "compiling",
                       what="compiling drawn")
        app.live._ticker.pause()
        await pilot.press("s")
        await pilot.pause(0.6)
        app.query_one("#run-progress #bar")._clock = MockClock(1.0)
        app.live._started = 0.0
        app.live._set("run-steps", " … · 12 s")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
    finally:
        for runner in app.runner_factory.runners:
            runner.release()


def test_no_gpu_after_the_run_80x24(snap_compare):
    """A laptop after adamw and adamw_fused: the doctor's reason said once and wrapped, no process readings of a
    run that has ended, no `s Stop` in the footer, ▲ beside the green speed-up."""
    app = cpu_app(FakeEngine())

    async def run_before(pilot) -> None:
        await until_ready(pilot, app)
        for n, name in enumerate(("adamw", "adamw_fused"), 1):
            app.start_preset(name)
            await wait_for(pilot, lambda n=n: len(app.table.rows_data) == n, what=name)
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
