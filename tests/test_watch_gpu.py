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
    assert evs[0]["device"] == "cuda" and evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 2000
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


GPT_LOOP = """
import os, sys, time, torch, apextui
sys.path.insert(0, {examples!r})
from gpt import build
torch.manual_seed(0)
s = build(small=False)
model = s.model.cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
mon = apextui.watch(name={name!r})
mon.step()  # the first step before any training: the clock switches to CUDA events once CUDA is in use
g = torch.Generator(device="cuda")
g.manual_seed(0)
batches = [s.make_batch(torch.device("cuda"), g) for _ in range(8)]
for i in range({steps}):
    inputs, targets = batches[i % 8]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(inputs)
        loss = s.loss_fn(logits, targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    grad = torch.linalg.vector_norm(model.head.weight.grad) if getattr(model, "head", None) is not None else loss
    # tensor losses and metrics (never read here); a per-token loss vector now and then: left out, with a warning
    mon.step(loss=loss.detach() if i % 50 else loss.detach().expand(4), tokens=inputs.numel(), grad_norm=grad,
             lr=torch.tensor(3e-4, device="cuda"))
    if i == 40:
        print("RUNNING", flush=True)
mon.close()
print("DONE", flush=True)
"""


def _attach(name: str, env: dict) -> dict:
    import json

    proc = subprocess.run([sys.executable, "-m", "apextui", "attach", name, "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    assert lines, proc.stderr[-2000:]
    return lines[-1]


def test_a_gpt_sized_loop_with_tensor_values_ends_ok_and_a_sigkilled_one_reads_as_killed(tmp_path):
    """The watch hook's CUDA paths on a GPT-2-small-sized model: tensor losses and metrics, the switch from the host
    clock to CUDA events, a close with the `end` line, and a SIGKILL mid-run; `attach --json` after each."""
    import signal
    import time

    examples = str(Path(__file__).resolve().parent.parent / "examples")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path), "APEXTUI_WATCH_DIR": str(tmp_path / "watch")}
    ok = subprocess.run([sys.executable, "-c", GPT_LOOP.format(examples=examples, name="gpt-ok", steps=300)],
                        env=env, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0 and "DONE" in ok.stdout, ok.stderr[-3000:]
    end = _attach("gpt-ok", env)
    assert end["event"] == "end" and end["status"] == "ok", end
    assert end["summary"]["steps"] >= 299 and end["summary"]["median_ms"] > 0

    killed = subprocess.Popen([sys.executable, "-c", GPT_LOOP.format(examples=examples, name="gpt-kill",
                                                                     steps=100_000)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = killed.stdout.readline()  # type: ignore[union-attr]
            if "RUNNING" in line or not line:
                break
        time.sleep(3)  # some blocks written
        killed.send_signal(signal.SIGKILL)
        killed.wait(60)
    finally:
        if killed.poll() is None:
            killed.kill()
    last = _attach("gpt-kill", env)
    assert last.get("status") != "ok", last  # a killed run is never read as a finished one
