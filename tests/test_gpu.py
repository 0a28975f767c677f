"""CUDA paths, run on a GPU machine (skipped elsewhere): every preset, event timing, NVML."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from apextui.core.availability import availability  # noqa: E402
from apextui.core.presets import load_builtin  # noqa: E402

from helpers import json_lines, run_cli  # noqa: E402

PRESETS = [p.name for p in load_builtin()]


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_runs_on_cuda(name):
    preset = next(p for p in load_builtin() if p.name == name)
    avail = availability(preset, "cuda")
    proc = run_cli("--preset", name, "--json", "--device", "cuda", "--steps", "40", timeout=300)
    if not avail.ok:
        assert proc.returncode == 3 and json_lines(proc.stdout)[0]["event"] == "unavailable"
        pytest.skip(f"unavailable here: {avail.reason}")
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    start, end = events[0], events[-1]
    assert start["device"] == "cuda" and start["size"] == "default" and start["env"]["gpu"]
    assert end["status"] == "ok" and end["summary"]["steps"] == 40
    steps = [e for e in events if e["event"] == "step"]
    # one line a timed interval: a step, or a block of short steps (its "steps"), every step covered once
    assert [i for e in steps for i in range(e["step"] - e["steps"] + 1, e["step"] + 1)] == list(range(1, 41))
    assert all(e["ms"] > 0 for e in steps)
    assert any(e["gpu_mem_used_mb"] for e in steps), "NVML should report GPU memory"
    s = end["summary"]
    if s["check"] is not None:
        assert s["check"]["passed"] and s["check"]["max_abs_err"] < 1e-3
    if preset.workload == "transformer":
        assert steps[-1]["loss"] < steps[0]["loss"]
    if preset.amp == "fp16":
        assert all(e["loss_scale"] for e in steps) and s["skipped_steps"] is not None


def test_cuda_clock_agrees_with_synchronised_wall_time():
    from apextui.core.run.timing import CudaClock

    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    clock = CudaClock(torch)
    clock.start()
    t0 = time.perf_counter()
    for step in range(1, 51):
        b = a @ a
        clock.end_step(step, b[0, 0])
    records = clock.harvest(wait=True)
    wall_ms = (time.perf_counter() - t0) * 1000
    assert [r.step for r in records] == list(range(1, 51))
    total = sum(r.ms for r in records)
    assert total == pytest.approx(wall_ms, rel=0.05)
    assert records[-1].loss == pytest.approx(float(b[0, 0]), rel=1e-5)


def test_nvml_reads_the_gpu():
    from apextui.core.monitor.nvml import Nvml
    from apextui.core.env import pci_bus_id

    nvml = Nvml(pci_bus_id=pci_bus_id())
    assert nvml.available, nvml.error
    used, total = nvml.memory()
    assert total.value > 1000 and nvml.utilization().ok and nvml.sm_clock().ok
    assert torch.cuda.get_device_name() in nvml.name().value or nvml.name().value
