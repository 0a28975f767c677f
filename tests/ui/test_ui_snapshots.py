"""SVG snapshots of the main screen with a deterministic fake report, probe and engine.

Regenerate after an intended UI change with
`pytest tests/ui/test_ui_snapshots.py --snapshot-update`, then look at the SVGs.
"""

from __future__ import annotations

from ui_fakes import FakeEngine, cpu_probe_no_apex, fake_probe, gpu_report, no_gpu_report, provider, wait_for

from apextui.ui.app import make_app


def gpu_session():
    """An H200 with Apex: fp32 and fused_fp32 finished, fused_amp live at step 150 of 400."""
    app = make_app(device="cuda", report_provider=provider(gpu_report()), probe=fake_probe("cuda"),
                   runner_factory=FakeEngine(hold={"fused_amp": 150}))

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, 10, "probe and report")
        for n, name in enumerate(("fp32", "fused_fp32"), 1):
            app.start_preset(name)
            await wait_for(pilot, lambda: len(app.table.rows_data) == n, 10, name)
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 150,
                       10, "fused_amp at step 150")
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def cpu_session():
    """A laptop without GPU or Apex: adamw finished, fp32 live at step 150."""
    app = make_app(device="auto", report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex(),
                   runner_factory=FakeEngine(hold={"fp32": 150}))

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, 10, "probe and report")
        app.start_preset("adamw")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, 10, "adamw")
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 150,
                       10, "fp32 at step 150")
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def test_main_screen_gpu_80x24(snap_compare):
    app, before = gpu_session()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_main_screen_gpu_120x40(snap_compare):
    app, before = gpu_session()
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


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


def test_compiling_80x24(snap_compare):
    """torch_compile compiling after fp32 finished: its name, no stale 100 %, the clock at 12 s, no loss n/a."""
    import time

    from textual.clock import MockClock

    app = make_app(device="cuda", report_provider=provider(gpu_report()), probe=fake_probe("cuda"),
                   runner_factory=FakeEngine(compile_hold=["torch_compile"]))

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, 10, "probe and report")
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, 10, "fp32")
        app.start_preset("torch_compile")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.status == "compiling",
                       10, "compiling drawn")
        app.live._started = time.monotonic() - 12.2
        app.live._tick()
        app.query_one("#run-progress #bar")._clock = MockClock(1.0)  # the indeterminate bar's pulse, stopped
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
