"""The TUI with a run whose step never returns (a user's forward doing `while True: pass`): quitting, a hang-up and
`s` twice end its worker after a short grace, keep the run (stopped, with the steps on screen) and leave no process.
They used to wait for the worker for good: q left a blank screen for 90 s and more, a hang-up saved nothing."""

from __future__ import annotations

import glob
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from ui_fakes import cpu_probe_no_apex, no_gpu_report, provider, wait_for

from apextui.core.model_presets import presets_for
from apextui.core.presets import load_builtin
from apextui.ui.app import default_runner_factory, make_app
from helpers import ROOT, gone_within, kill_all

pytestmark = pytest.mark.slow

# trains for 3 s of its own clock (its steps reach the app: the runner hands them over 4 times a second), then
# marks that it hangs (the file `hung` beside it) and never returns from forward
HANGS_LATER = '''
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from apextui import ModelSetup

_first = None
_calls = 0


class HangsLater(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        global _first, _calls
        _calls += 1
        _first = _first or time.perf_counter()
        if _calls > 30 and time.perf_counter() - _first > 3:
            Path(__file__).with_name("hung").touch()
            while True:
                pass
        return self.lin(x)


def forward_hang(small=False):
    return ModelSetup(model=HangsLater(), make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                                                   torch.randn(2, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


def hang_model(tmp_path: Path) -> str:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "hostile.py").write_text(HANGS_LATER)
    return f"{folder / 'hostile.py'}:forward_hang"


def _drain_until(fd: int, done: Any, seconds: float) -> bool:
    """Read the TUI's output (a full pty would block it) until `done()` or `seconds` pass."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if done():
            return True
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return done()
    return done()


def _tui(tmp_path: Path, spec: str) -> tuple[subprocess.Popen, int]:
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "OMP_NUM_THREADS": "1",
           "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--model", spec, "--config", "fp32", "--device", "cpu",
                             "--steps", "1000000"], stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, env=env,
                            start_new_session=True)
    os.close(slave)
    return proc, master


def _saved_run(pattern: str) -> dict:
    (saved,) = glob.glob(pattern, recursive=True)
    (run,) = json.loads(Path(saved).read_text())["runs"]
    return run


@pytest.mark.parametrize("key", [b"q", b"\x03"], ids=["q", "ctrl+c"])
def test_quitting_ends_a_hung_worker_keeps_the_run_and_leaves_no_process(tmp_path, key):
    spec = hang_model(tmp_path)
    hung = tmp_path / "model" / "hung"
    proc, master = _tui(tmp_path, spec)
    kids: list[psutil.Process] = []
    try:
        assert _drain_until(master, hung.exists, 120), "the model never reached its hang"
        kids = psutil.Process(proc.pid).children(recursive=True)
        os.write(master, key)
        _drain_until(master, lambda: proc.poll() is not None, 60)
        assert proc.poll() == 0, "the TUI did not exit within 60 s of the key"
        left = gone_within(kids, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        os.close(master)
        kill_all(kids)
    assert not left, left
    run = _saved_run(str(tmp_path / "data" / "**" / "apextui-results-*.json"))
    assert run["status"] == "stopped" and run["summary"]["steps"] > 0, json.dumps(run)[:2000]


def test_a_hang_up_ends_a_hung_worker_and_saves_the_run(tmp_path):
    spec = hang_model(tmp_path)
    hung = tmp_path / "model" / "hung"
    proc, master = _tui(tmp_path, spec)
    kids: list[psutil.Process] = []
    try:
        assert _drain_until(master, hung.exists, 120), "the model never reached its hang"
        kids = psutil.Process(proc.pid).children(recursive=True)
        os.close(master)  # the terminal goes away ...
        master = -1
        os.killpg(proc.pid, signal.SIGHUP)  # ... and the whole session gets SIGHUP
        assert proc.wait(90) == 128 + signal.SIGHUP
        left = gone_within(kids, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        if master >= 0:
            os.close(master)
        kill_all(kids)
    assert not left, left
    run = _saved_run(str(tmp_path / "apextui-results-*.json"))
    assert run["status"] == "stopped" and run["summary"]["steps"] > 0, json.dumps(run)[:2000]


@pytest.mark.asyncio
async def test_s_twice_ends_a_hung_worker_and_keeps_the_run(tmp_path):
    spec = hang_model(tmp_path)
    hung = tmp_path / "model" / "hung"
    presets = [*load_builtin(), *presets_for(spec, names=("fp32",))]
    app = make_app(presets=presets, report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex(),
                   runner_factory=default_runner_factory, device="cpu", steps=1_000_000, autostart=False,
                   save_dir=tmp_path)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.probe is not None, what="probe")
            assert app.start_preset("hostile:forward_hang/fp32")
            await wait_for(pilot, hung.exists, 120, "the model's hang")
            worker = psutil.Process(app.active.runner.pid)
            await pilot.press("s")
            await pilot.press("s")
            await wait_for(pilot, lambda: app.active is None, what="the run to end")
            (row,) = app.table.rows_data
            assert row.status == "stopped" and row.summary.steps > 0, row
            assert not gone_within([worker], 30)
    finally:
        if app.active is not None:
            app.active.runner.kill()
        app.shutdown_runs(30)
