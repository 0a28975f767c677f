"""tools/tui_screenshot.py waits for the run it started (rough edge 14): on the H200 it took its screenshot
of torch_compile_graph while that compiled and reported the previous fp32 run's figures as its own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent / "ui"))

from ui_fakes import FakeRunner  # noqa: E402

from apextui.core.presets import resolve  # noqa: E402
from apextui.ui.bridge import RunView  # noqa: E402

TOOL = Path(__file__).resolve().parents[1] / "tools" / "tui_screenshot.py"
spec = importlib.util.spec_from_file_location("tui_screenshot", TOOL)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)  # type: ignore[union-attr]


def view(run_id: int, preset: str, status: str, steps: int, gpu_points: int = 3) -> RunView:
    runner = FakeRunner(resolve(preset), "cuda", lambda s: None, hold_at=0)
    snap = runner._snap(status, tuple(runner._record(i) for i in range(1, steps + 1)))
    if status in ("starting", "compiling"):
        snap = __import__("dataclasses").replace(snap, info=None)
    return RunView(run_id=run_id, snapshot=snap, step_ms=(), losses=(), first_loss=None, last_ms=None,
                   last_loss=None, loss_scale=None, monitor={"gpu_util_pct": (50.0,) * gpu_points})


def test_the_previous_runs_final_view_is_not_ready():
    previous = view(1, "fp32", "ok", 400)
    assert not tool.screenshot_ready(previous, 2, "torch_compile_graph", 300, True, False)
    assert not tool.screenshot_ready(previous, None, "torch_compile_graph", 300, True, False)


def test_own_run_compiling_is_not_ready_and_running_far_enough_is():
    assert not tool.screenshot_ready(view(2, "torch_compile_graph", "compiling", 0), 2, "torch_compile_graph",
                                     300, True, False)
    assert not tool.screenshot_ready(view(2, "torch_compile_graph", "running", 100), 2, "torch_compile_graph",
                                     300, True, False)
    assert not tool.screenshot_ready(view(2, "torch_compile_graph", "running", 300, gpu_points=1), 2,
                                     "torch_compile_graph", 300, True, False)
    assert not tool.screenshot_ready(view(2, "torch_compile_graph", "running", 300), 2, "torch_compile_graph",
                                     300, True, True)  # sparklines not drawn yet
    assert tool.screenshot_ready(view(2, "torch_compile_graph", "running", 300), 2, "torch_compile_graph",
                                 300, True, False)
    failed = view(2, "torch_compile_graph", "failed", 0)
    failed = RunView(**{**failed.__dict__, "snapshot": __import__("dataclasses").replace(failed.snapshot,
                                                                                        info=None)})
    assert tool.screenshot_ready(failed, 2, "torch_compile_graph", 300, True, False)  # failed while compiling
    assert tool.screenshot_ready(view(2, "torch_compile_graph", "ok", 50), 2, "torch_compile_graph",
                                 300, True, False)


def test_started_run_id_is_the_new_runs_not_the_previous_one():
    row = SimpleNamespace(preset="fp32")
    app = SimpleNamespace(active=None, table=SimpleNamespace(rows_data=[row]), _run_id=1)
    assert tool.started_run_id(app, "torch_compile_graph", 1) is None  # only the baseline's row
    app.active = SimpleNamespace(preset=SimpleNamespace(name="torch_compile_graph"), run_id=2)
    assert tool.started_run_id(app, "torch_compile_graph", 1) == 2
    app.active, app._run_id = None, 2
    app.table.rows_data.append(SimpleNamespace(preset="torch_compile_graph"))
    assert tool.started_run_id(app, "torch_compile_graph", 1) == 2
