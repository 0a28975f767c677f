"""MFU on screen: the run pane's title (the TUI's run and `apextui attach`'s), the comparison table's column and
the run details, from `summary.mfu` (measure/mfu.py)."""

from __future__ import annotations

import pytest
from helpers import watched_on_a_fake_gpu
from ui_fakes import static_text, wait_for

from apextui.core.watch import store
from apextui.ui.attach_app import AttachApp
from apextui.ui.widgets.comparison_table import ComparisonTable

pytestmark = pytest.mark.asyncio


async def test_attachs_run_pane_and_table_show_the_mfu_of_a_watched_run(monkeypatch):
    watched_on_a_fake_gpu(monkeypatch, "mfu-gpu")
    app = AttachApp(store.find("mfu-gpu")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2)
    async with app.run_test(size=(140, 32)) as pilot:
        await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the finished run")
        await wait_for(pilot, lambda: "MFU" in static_text(app, "#run-title"), what="its MFU")
        percent = static_text(app, "#run-title").split("MFU ", 1)[1].split(" %")[0]
        assert float(percent) > 0
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="the finished row")
        keys = [key.value for key in table.columns]
        cell = str(table.get_row_at(0)[keys.index("mfu")])
        mfu = table.rows_data[0].summary.mfu
        assert mfu is not None and mfu.gpu == "Fake GPU" and cell == mfu.percent


@pytest.mark.slow
async def test_a_runs_pane_and_comparison_row_show_its_mfu_against_the_gpus_peak(monkeypatch):
    """A real fp32 run of the shipped Transformer on CPU, in this process; its peak a GPU's (a FAKE: GPU-only)."""
    from apextui.core.measure.mfu import Peak
    from apextui.core.run import runner
    from apextui.ui.app import make_app
    from ui_fakes import highlight, no_gpu_report, provider

    monkeypatch.setattr(runner, "peak", lambda device, name, precision: Peak(1e-2, precision, gpu="Fake GPU"))
    app = make_app(device="cpu", steps=12, report_provider=provider(no_gpu_report()),
                   runner_factory=runner.thread_runner_factory)
    try:
        async with app.run_test(size=(140, 36)) as pilot:
            await wait_for(pilot, lambda: app.probe is not None, what="device probe")
            await highlight(pilot, app, "fp32")
            await pilot.press("enter")
            table = app.query_one(ComparisonTable)
            await wait_for(pilot, lambda: table.row_count == 1, 300, "the finished run's row")
            await wait_for(pilot, lambda: "MFU" in static_text(app, "#run-title"), what="its MFU on the run pane")
            mfu = table.rows_data[0].summary.mfu
            assert mfu is not None and mfu.gpu == "Fake GPU" and mfu.flops_source == "FlopCounterMode"
            keys = [key.value for key in table.columns]
            assert str(table.get_row_at(0)[keys.index("mfu")]) == mfu.percent
            assert f"MFU {mfu.percent}" in static_text(app, "#run-title")
    finally:
        app.shutdown_runs(30)
