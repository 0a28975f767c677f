"""CUDA paths, run on a GPU machine (skipped elsewhere): every preset, event timing, NVML."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from apextui.core.availability import availability  # noqa: E402
from apextui.core.presets import load_builtin  # noqa: E402
from apextui.core.run.request import RunRequest  # noqa: E402

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
    if preset.config.autocast == "fp16":
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
    records = []
    for step in range(1, 2021):
        clock.mark()
        clock.end_step(step, (x * 2).sum())
        if step % 200 == 0:
            records += clock.harvest()
    records += clock.harvest(wait=True)
    s = clock.schedule
    assert math.isfinite(s.interval_cost_ms) and 0 < s.interval_cost_ms < 5
    assert s.target_ms == pytest.approx(max(timing.BLOCK_TARGET_MS, s.interval_cost_ms / timing.CLOCK_SHARE))
    step_ms = sum(r.ms * r.steps for r in records[20:]) / 2000
    print(f"\nclock: {s.interval_cost_ms * 1000:.0f} µs an interval -> blocks of {s.target_ms:.1f} ms; "
          f"{step_ms * 1000:.0f} µs steps timed {s.block} at a time")
    assert s.block > 1 and sum(r.steps for r in records) == 2020
def test_every_gpu_is_sampled_and_the_run_gpu_is_the_flat_fields():
    """scope "all" (the TUI's pane) lists every GPU NVML sees with a reading each, the current device marked in
    use; --json's `gpus` is that one GPU, its index NVML's."""
    from apextui.core.env import pci_bus_id
    from apextui.core.monitor.nvml import Nvml, all_gpus
    from apextui.core.monitor.sampler import Sampler
    from apextui.core.run.events import monitor_fields

    listed, error = all_gpus()
    assert not error and len(listed) >= torch.cuda.device_count()
    r = Sampler(interval=1, pci_bus_id=pci_bus_id(), scope="all").sample()
    assert sorted(g.index for g in r.gpus) == [g.index for g in listed]
    assert all(g.error is None and g.mem_total_mb > 1000 for g in r.gpus), [g.na for g in r.gpus]
    (run,) = r.run_gpus
    own = Nvml(pci_bus_id=pci_bus_id())
    assert own.available and run.index == own.index  # NVML's index of torch's current device
    assert pci_bus_id(torch.cuda.current_device()) == pci_bus_id() and own.bus_id().value == pci_bus_id()
    assert (r.gpu_mem_total_mb, r.gpu_sm_clock_mhz) == (run.mem_total_mb, run.sm_clock_mhz)
    assert [g["index"] for g in monitor_fields(r)["gpus"]] == [run.index]


def test_doctor_reports_gpus_nccl_and_topology():
    from apextui.core.apex.doctor import run_doctor
    from apextui.core.monitor.nvml import all_gpus

    env = run_doctor(smoke=False).environment
    assert len(env.gpus) == torch.cuda.device_count()
    expected = ".".join(str(p) for p in torch.cuda.nccl.version()[:3])
    assert env.nccl is not None and env.nccl.startswith(expected), (env.nccl, env.nccl_error)
    nvml_gpus = len(all_gpus()[0])
    assert env.topology is not None and env.topology.gpus == nvml_gpus
    if nvml_gpus == 1:
        assert env.topology.kind == "single"
    else:  # every pair classified (NVLink, NVSwitch or a PCIe path): none n/a on a healthy machine
        assert env.topology.kind in ("nvlink", "nvswitch", "pcie", "mixed"), env.topology.summary
        assert all(link.kind != "n/a" for link in env.topology.links), env.topology.links


def test_json_step_lines_list_the_run_gpu():
    proc = run_cli("--preset", "fp32", "--json", "--device", "cuda", "--steps", "20", timeout=300)
    assert proc.returncode == 0, proc.stderr
    steps = [e for e in json_lines(proc.stdout) if e["event"] == "step"]
    for e in steps:
        (gpu,) = e["gpus"]
        assert gpu["error"] is None and gpu["mem_total_mb"] == e["gpu_mem_total_mb"]
        assert gpu["util_pct"] == e["gpu_util_pct"] and gpu["sm_clock_mhz"] == e["gpu_sm_clock_mhz"]


def test_the_tui_worker_samples_every_gpu():
    """The TUI's runs (ProcessRunner's worker) sample every GPU NVML sees for the monitor pane, the run's
    marked in use."""
    from apextui.core.monitor.nvml import all_gpus
    from apextui.core.presets import resolve
    from apextui.core.run.worker import ProcessRunner

    snaps = []
    r = ProcessRunner(RunRequest(resolve("adamw"), "cuda", 30), snaps.append).start()
    assert r.join(300) and r.result.status == "ok", r.result.error
    gpus = r.result.monitor.gpus
    assert [g.index for g in gpus] == [g.index for g in all_gpus()[0]]
    assert len(r.result.monitor.run_gpus) == 1 and all(g.error is None for g in gpus)
