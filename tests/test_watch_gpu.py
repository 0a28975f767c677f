"""`apextui.watch` on a GPU (skipped without CUDA): the hook never synchronises (torch's sync debug mode set to
"error" around the loop), CUDA losses and tensor metrics are read after their block's event, and a first
`step()` before any CUDA work moves the clock to CUDA events once CUDA is in use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import apextui
from apextui.core.watch import reader

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def loop(mon, steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 256, device="cuda"), torch.randn(512, 1, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            norm = torch.linalg.vector_norm(model[0].weight.grad)
            mon.step(loss=loss.detach(), tokens=512, lr=0.01, grad_norm=norm)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_the_hook_never_synchronises_and_reads_cuda_values_after_their_block():
    mon = apextui.watch(name="gpu-nosync")
    loop(mon, 2000)
    assert mon.live and mon.failure is None  # a synchronising call in the hook would have stopped it
    mon.close()
    evs = reader.Follower(mon.path).poll()
    assert evs[0]["device"] == "cuda" and evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 1999
    steps = [e for e in evs if e["event"] == "step"]
    assert all(e["loss"] is not None for e in steps) and max(e["steps"] for e in steps) >= 1
    metrics = [e["values"] for e in evs if e["event"] == "metric"]
    assert metrics and all(m["grad_norm"] is not None and m["grad_norm"] > 0 for m in metrics)
    assert any(g["index"] >= 0 for g in steps[-1]["gpus"])  # NVML: the GPU this process uses


EARLY = """
import sys, torch, apextui
sys.path.insert(0, {tests!r})
from test_watch_gpu import loop
from apextui.core.watch import reader
assert not torch.cuda.is_initialized()
mon = apextui.watch(name="gpu-early")
mon.step()  # before any CUDA work: timed on the host
loop(mon, 300)
mon.close()
evs = reader.Follower(mon.path).poll()
setups = [e["device"] for e in evs if e["event"] == "setup"]
notes = [e["message"] for e in evs if e["event"] == "note"]
print(setups, notes, evs[-1]["status"])
assert setups[-1] == "cuda", setups
assert any("timed with CUDA events" in n for n in notes), notes
assert evs[-1]["status"] == "ok"
"""


def test_a_step_before_any_cuda_work_moves_the_clock_to_cuda_once_it_is_in_use(tmp_path):
    # a fresh interpreter: in this one the test above has initialised CUDA already, so a first step would see it
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", EARLY.format(tests=str(Path(__file__).parent))], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
