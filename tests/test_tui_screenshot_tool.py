"""tools/tui_screenshot.py waits for the run it started (rough edge 14): on the H200 it took its screenshot
of torch_compile_graph while that compiled and reported the previous fp32 run's figures as its own."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import re
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "ui"))

from ui_fakes import FakeEngine, FakeRunner, gpu_app

from apextui.core.presets import resolve
from apextui.ui.bridge import RunView
from apextui.core.run.request import RunRequest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "tui_screenshot.py"
spec = importlib.util.spec_from_file_location("tui_screenshot", TOOL)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)  # type: ignore[union-attr]


def view(run_id: int, preset: str, status: str, steps: int, gpu_points: int = 3) -> RunView:
    runner = FakeRunner(RunRequest(resolve(preset), "cuda"), lambda s: None, hold_at=0)
    snap = runner._snap(status, tuple(runner._record(i) for i in range(1, steps + 1)))
    if status in ("starting", "compiling"):
        snap = dataclasses.replace(snap, info=None)
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
    failed = RunView(**{**failed.__dict__, "snapshot": dataclasses.replace(failed.snapshot, info=None)})
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


def test_sizes_and_the_files_they_name():
    assert tool.parse_sizes("80x24,160x48") == [(80, 24), (160, 48)]
    assert tool.parse_sizes("80X24, 80x24") == [(80, 24)]  # case and repeats do not matter
    for bad in ("80", "80x", "axb", "80x24,big", "30x10"):
        with pytest.raises(tool.UsageError, match="--size"):
            tool.parse_sizes(bad)
    args = tool.parse_args(["--preset", "torch_compile", "--preset", "fused_amp", "--size", "80x24,160x48",
                            "--out-dir", "shots", "--tag", "h200"])
    assert args.preset == ["torch_compile", "fused_amp"]
    paths = tool.output_paths(args, args.preset, tool.parse_sizes(args.size))
    assert sorted(str(p) for p in paths.values()) == [
        "shots/tui-fused_amp-h200-160x48.svg", "shots/tui-fused_amp-h200-80x24.svg",
        "shots/tui-torch_compile-h200-160x48.svg", "shots/tui-torch_compile-h200-80x24.svg"]
    one = tool.parse_args(["--out", "x.svg", "--size", "80x24,160x48"])
    with pytest.raises(tool.UsageError, match="--out names one file"):
        tool.output_paths(one, ["fused_amp"], tool.parse_sizes(one.size))


def test_bad_size_is_a_usage_error(capsys):
    assert tool.main(["--size", "80by24"]) == 2
    assert "--size '80by24' is not COLSxROWS" in capsys.readouterr().err


class CompileThenHold(FakeRunner):
    """torch_compile as on the H200: 'compiling' (no RunInfo) for a while, then steps; it holds at step 60."""

    def start(self):
        self.callback(self._snap("starting", ()))
        self.callback(dataclasses.replace(self._snap("starting", ()), status="compiling"))

        def compiled() -> None:
            if not self.finished:
                self.callback(self._snap("running", ()))
                self._advance(60)

        threading.Timer(1.0, compiled).start()
        return self


class Engine(FakeEngine):
    """fp32 runs to its end (the baseline); torch_compile compiles, then holds; fused_amp holds at step 60."""

    def __call__(self, request, callback):
        name = request.preset.name
        cls = CompileThenHold if name == "torch_compile" else FakeRunner
        runner = cls(request, callback, hold_at=None if name == "fp32" else 60)
        self.runners.append(runner)
        return runner


def svg_width(path: Path) -> float:
    return float(re.search(r'viewBox="0 0 ([0-9.]+) ', path.read_text(encoding="utf-8")).group(1))


def test_two_presets_at_two_sizes_in_one_process(tmp_path, capfd):
    """Each preset's screenshots wait for its own run past compiling, at both sizes; the figures printed are
    that run's (step 60/400), not the baseline's final 400/400."""
    engine = Engine()
    args = tool.parse_args(["--preset", "torch_compile", "--preset", "fused_amp", "--size", "80x24,120x40",
                            "--out-dir", str(tmp_path), "--tag", "test", "--at-step", "50", "--timeout", "60"])
    code = asyncio.run(tool.drive(args, app_factory=lambda **kw: gpu_app(engine, **kw)))
    out = capfd.readouterr().out  # while the app runs, Textual sends print() to the process's stdout
    assert code == 0, out
    assert [r.preset.name for r in engine.runners] == ["fp32", "torch_compile", "fused_amp"]  # one baseline
    for name in ("torch_compile", "fused_amp"):
        small, big = tmp_path / f"tui-{name}-test-80x24.svg", tmp_path / f"tui-{name}-test-120x40.svg"
        assert svg_width(big) > 1.4 * svg_width(small)
        for path in (small, big):
            text = path.read_text(encoding="utf-8")
            assert f"Run&#160;·&#160;{name}" in text and "60/400" in text, path.name
            assert "compiling" not in text
        assert out.count(f"{name} at the screenshot: running, step 60/400") == 2
    assert "400/400" not in out.split("running torch_compile")[1].split("comparison table")[0]
    done = json.loads(out.strip().splitlines()[-1])
    assert [(r["preset"], r["steps"], len(r["screenshots"])) for r in done["runs"]] == [
        ("torch_compile", 60, 2), ("fused_amp", 60, 2)]
