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


def test_the_cuda_clock_measures_its_own_cost_and_sizes_blocks_by_it():
    """A host-bound loop of small kernels: the clock times its own work on an interval in the warm-up and
    sets the block target so that this work stays CLOCK_SHARE of a block (printed: the figure on this host)."""
    import math

    from apextui.core.run import timing

    x = torch.randn(4096, device="cuda")
    clock = timing.CudaClock(torch, warmup=20, steps=20 + 2000)
    clock.start()
    for step in range(1, 2021):
        clock.mark()
        clock.end_step(step, (x * 2).sum())
        if step % 200 == 0:
            clock.harvest()
    records = clock.harvest(wait=True)
    s = clock.schedule
    assert math.isfinite(s.interval_cost_ms) and 0 < s.interval_cost_ms < 5
    assert s.target_ms == pytest.approx(max(timing.BLOCK_TARGET_MS, s.interval_cost_ms / timing.CLOCK_SHARE))
    step_ms = sum(r.ms * r.steps for r in records[20:]) / 2000
    print(f"\nclock: {s.interval_cost_ms * 1000:.0f} µs an interval -> blocks of {s.target_ms:.1f} ms; "
          f"{step_ms * 1000:.0f} µs steps timed {s.block} at a time")
    assert s.block > 1 and sum(r.steps for r in records) == 2020
