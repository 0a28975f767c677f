"""`s` while a preset compiles, with a real worker process and a real torch.compile on CPU: the pane says
the run stops once compilation ends; `s` again ends the worker at once, and the run is kept as stopped."""

from __future__ import annotations

import multiprocessing

import psutil
import pytest
from ui_fakes import no_gpu_report, provider, static_text, wait_for

from apextui.core.config import needs as variant_needs
from apextui.core.presets import resolve
from apextui.core.run import worker
from apextui.ui.app import STOPPED_WHILE_COMPILING, make_app

pytestmark = [pytest.mark.slow,  # each test over ~1.5 s
              pytest.mark.skipif(not variant_needs.compile_availability("cpu").ok,
                                 reason="torch.compile on CPU needs a C++ compiler and Python's headers")]


@pytest.mark.asyncio
async def test_s_twice_while_compiling_ends_the_worker_and_keeps_a_stopped_run(tmp_path, monkeypatch):
    # a spawned worker sees this environment: inductor's caches cold, so the compile takes its full time
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    monkeypatch.setattr(worker, "_context", multiprocessing.get_context("spawn"))
    app = make_app(preset=resolve("torch_compile"), device="cpu", steps=50, autostart=True,
                   report_provider=provider(no_gpu_report()), save_dir=tmp_path)
    try:
        async with app.run_test(size=(110, 32)) as pilot:
            def compiling() -> bool:
                view = app.latest_view
                return view is not None and view.snapshot.status == "compiling"

            await wait_for(pilot, compiling, 120, "the compile to start")
            pid = app.active.runner.pid
            await pilot.press("s")
            assert "stops once compiled · s again: end it now" in static_text(app, "#run-title")
            assert app.active is not None and psutil.pid_exists(pid)  # the first s only asks
            await pilot.press("s")
            await wait_for(pilot, lambda: app.active is None, 60, "the run to end")
            row = app.table.rows_data[-1]
            assert (row.preset, row.status, row.error) == ("torch_compile", "stopped", STOPPED_WHILE_COMPILING)
            proc = psutil.Process(pid) if psutil.pid_exists(pid) else None
            assert proc is None or proc.status() == psutil.STATUS_ZOMBIE, "the worker is still running"
    finally:
        assert app.shutdown_runs(30)
