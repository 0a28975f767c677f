"""The monitor pane with 1, 2 and 8 GPUs (one of the eight failing), at 80x24 and 120x40.

The readings come from the real `Sampler` (scope "all", as the TUI's worker samples) over the fake NVML of
tests/nvml_fakes.py, taken before the app starts (host metrics fixed, so the SVGs are stable); the run trains
on GPU 0. Regenerate the SVGs with `pytest tests/ui/test_ui_gpus.py --snapshot-update` and read them.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

import pytest
from nvml_fakes import fake_nvml
from ui_fakes import FakeEngine, fake_probe, gpu_report, provider, settle_bars, static_text, wait_for

from apextui.core.monitor.sampler import MonitorReading, Sampler
from apextui.ui.app import make_app
from apextui.ui.widgets.gpu_row import GpuRow, row_text

READINGS = 20  # the held run's snapshots ask for readings 0..15


def gpu_readings(monkeypatch, count: int,
                 failing: frozenset[int] = frozenset()) -> Callable[[int, bool], MonitorReading]:
    """The i-th reading of a run on GPU 0 of a `count`-GPU machine whose `failing` GPUs answer no NVML call."""
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "pynvml", fake_nvml(count, failing=failing, links="switch"))
        sampler = Sampler(interval=1, pci_bus_id="00000000:18:00.0", scope="all")
        taken = [sampler.sample() for _ in range(READINGS)]
    readings = [dataclasses.replace(r, time=1000.0 + i, cpu_pct=99.5, rss_mb=2310.0 + i, ram_used_pct=8.0,
                                    contention=None, run_contention=None)  # this machine's load: not in an SVG
                for i, r in enumerate(taken)]
    return lambda i, gpu: readings[min(i, READINGS - 1)]


def session(monitor: Callable[[int, bool], MonitorReading]):
    """An H200 box with Apex; fused_amp live at step 150 of 400, its monitor readings from `monitor`."""
    app = make_app(device="cuda", report_provider=provider(gpu_report()), probe=fake_probe("cuda"),
                   runner_factory=FakeEngine(hold={"fused_amp": 150}, monitor=monitor))

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, what="probe and report")
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.snapshot.steps_done == 150,
                       what="fused_amp at step 150")
        await settle_bars(pilot, app)
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def test_eight_gpus_one_failing_80x24(snap_compare, monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 8, frozenset({3})))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_eight_gpus_one_failing_120x40(snap_compare, monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 8, frozenset({3})))
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


def test_two_gpus_80x24(snap_compare, monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 2))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_one_gpu_120x40(snap_compare, monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 1))
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


@pytest.mark.asyncio
async def test_eight_gpus_a_row_each_with_history_and_the_failing_one_na(monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 8, frozenset({3})))
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        rows = list(app.query(GpuRow))
        assert len(rows) == 8 and all(row.region.height == 1 for row in rows)  # every GPU on screen, a line each
        texts = [str(getattr(c, "plain", c)) for c in (row.query_one(".gpu-text").content for row in rows)]
        assert texts[0].startswith("●0 ") and not any(t.startswith("●") for t in texts[1:])
        assert texts[3] == " 3  n/a: Unknown Error" and rows[3].has_class("-na")
        assert "143771" not in texts[1] and "/140G" in texts[1] and "MHz" in texts[1]
        view = app._drawn_view
        assert 3 not in view.gpu_util and len(view.gpu_util[0]) > 1  # a history per GPU that reads
        assert list(rows[0].query_one(".gpu-spark").data) == list(view.gpu_util[0])
        panel = app.query_one("#monitor")
        assert panel.border_title == "8 GPUs · process"
        assert panel.border_subtitle.startswith("● this run · CPU 100% · RSS")
        assert not app.query_one("#gpu-grid").display and not app.query_one("#host-grid").display


@pytest.mark.asyncio
async def test_one_gpu_keeps_the_metric_grid(monkeypatch):
    app, before = session(gpu_readings(monkeypatch, 1))
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        assert not list(app.query(GpuRow)) and app.query_one("#gpu-grid").display
        reading = app._drawn_view.snapshot.monitor
        assert len(reading.gpus) == 1 and reading.gpu_util_pct == reading.gpus[0].util_pct
        assert static_text(app, "#m-gpu_temp_c .metric-value") == "temp 34°C"


def test_row_text_columns():
    from apextui.core.monitor.sampler import GpuReading

    ok = GpuReading(index=0, in_use=True, util_pct=99.0, mem_used_mb=10444.8, mem_total_mb=143771.0,
                    power_w=562.0, temp_c=53.0, sm_clock_mhz=1980.0)
    assert row_text(ok) == "●0   99%  10.2/140G  562W 53°C 1980MHz"
    no_power = dataclasses.replace(ok, index=12, in_use=False, power_w=None, na={"power_w": "not supported"})
    assert row_text(no_power) == " 12  99%  10.2/140G   n/a 53°C 1980MHz"
    assert len(row_text(ok)) == len(row_text(no_power)) == 38  # the fixed columns (app.tcss .gpu-text)
