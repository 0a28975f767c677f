"""Faults crash nothing and lose nothing: out of memory, non-finite losses, broken NVML, bounded memory.

CPU tests reproduce the fault for real where CPU can (a huge size that cannot be allocated, a huge lr
that makes the loss NaN, fp16 GradScaler skipping every step); where only a GPU can (CUDA out of memory
mid-run, a GPU falling off the bus) a workload or pynvml test double raises exactly what torch / pynvml
raise. The GPU tests at the end (skipped without CUDA) do the same for real on the GPU.
"""

from __future__ import annotations

import dataclasses
import math
import re
import random
import sys
import time
import types
import weakref

import pytest
import torch

from apextui.core import presets
from apextui.core.workloads import builders
from apextui.core.workloads.base import Workload
from apextui.core.run import runner as runner_mod
from apextui.core.monitor.nvml import Nvml
from apextui.core.run.runner import Runner
from apextui.core.run.divergence import MAX_CONSECUTIVE_SKIPS
from apextui.core.run.snapshot import Snapshot
from apextui.core.monitor.sampler import Sampler
from apextui.core.measure.stats import EXACT_STEPS, StepStats, percentile
from apextui.core.run.timing import StepRecord
from apextui.core.run.request import RunRequest

CUDA = torch.cuda.is_available()


def preset(name: str, amp: str | None = None, **changes) -> presets.Preset:
    """A shipped preset with fields changed; `amp` as a preset file gives it (its point's precision: a shipped
    preset's file is named after its named point)."""
    p = presets.resolve(name)
    if amp is not None:
        changes["config"] = presets.shipped_point(p.workload, name, amp)
    return dataclasses.replace(p, **changes)


def run(p: presets.Preset, steps: int, device: str = "cpu", **kw) -> tuple[Snapshot, list[Snapshot]]:
    snaps: list[Snapshot] = []
    r = Runner(RunRequest(p, device, steps), snaps.append, **kw).start()
    assert r.join(timeout=180), "the run did not finish"
    assert snaps[-1] is r.result
    return r.result, snaps


def records(snaps: list[Snapshot]) -> list[StepRecord]:
    return [rec for s in snaps for rec in s.new_steps]


def steps_of(snaps: list[Snapshot]) -> list[int]:
    """Every step the delivered intervals cover (a block of k steps ending at n covers n-k+1..n)."""
    return [i for s in snaps for r in s.new_steps for i in range(r.step - r.steps + 1, r.step + 1)]


class Wrapped(Workload):
    """A real workload with a fault injected at one step (`hook(step, inner)` runs before the step)."""

    def __init__(self, inner: Workload, hook) -> None:
        self.inner, self.hook, self.n = inner, hook, 0
        for attr in ("units", "units_per_step", "loss_floor", "check", "uses_grad_scaler", "params"):
            setattr(self, attr, getattr(inner, attr))

    def step(self, clock):
        self.n += 1
        self.hook(self.n, self.inner)
        return self.inner.step(clock)


def inject(monkeypatch, hook) -> list[weakref.ref]:
    """Make builders.build return the real workload wrapped with `hook`; weak references to what it built."""
    original = builders.build
    built: list[weakref.ref] = []

    def build(*args):
        w = Wrapped(original(*args), hook)
        built.append(weakref.ref(w))
        return w

    monkeypatch.setattr(builders, "build", build)
    return built


# ---- 1. out of memory ------------------------------------------------------------------------

CUDA_OOM = ("CUDA out of memory. Tried to allocate 64.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
            "1.50 GiB is free. Including non-PyTorch memory, this process has 138.29 GiB memory in use.")


@pytest.mark.slow
def test_cuda_oom_mid_run_fails_with_reason_keeps_earlier_steps_and_frees_the_workload(monkeypatch, capsys):
    def oom_at_5(step, inner):
        if step == 5:
            raise torch.OutOfMemoryError(CUDA_OOM)  # what the CUDA caching allocator raises

    built = inject(monkeypatch, oom_at_5)
    alive_at_end: list[bool] = []
    snaps: list[Snapshot] = []

    def collect(s: Snapshot) -> None:
        snaps.append(s)
        if s.finished:  # by the time the run says "failed", its model and optimizer must be gone
            alive_at_end.append(built[0]() is not None)

    r = Runner(RunRequest(preset("adamw"), "cpu", 50), collect).start()
    assert r.join(timeout=120)
    final = r.result
    assert final.status == "failed"
    assert final.error.startswith("out of memory at step 5"), final.error
    assert "tried to allocate 64.00 GiB" in final.error and "1.50 GiB free of 139.81 GiB" in final.error
    assert "smaller size" in final.error
    assert steps_of(snaps) == [1, 2, 3, 4] and final.steps_done == 4  # measured steps are kept
    assert final.final_loss is not None and math.isfinite(final.final_loss)
    assert alive_at_end == [False]
    assert "OutOfMemoryError" in capsys.readouterr().err  # the traceback still goes to stderr

    monkeypatch.undo()  # the same process runs the next preset normally
    again, snaps2 = run(preset("adamw"), steps=20)
    assert again.status == "ok" and again.error is None and steps_of(snaps2) == list(range(1, 21))


@pytest.mark.skipif(open("/proc/sys/vm/overcommit_memory").read().strip() not in ("0", "2")
                    if __import__("os").path.exists("/proc/sys/vm/overcommit_memory") else True,
                    reason="needs the kernel to refuse an impossible allocation instead of overcommitting")
@pytest.mark.slow
def test_a_size_too_big_for_host_memory_really_fails_at_set_up_and_the_next_run_works():
    # one Linear(2**22, 2**22) needs 64 TiB: the CPU allocator refuses it at once (a real OOM, no fake)
    huge = preset("adamw", cpu_size={"layers": 1, "width": 2**22, "batch": 1})
    final, snaps = run(huge, steps=10)
    assert final.status == "failed" and final.steps_done == 0 and final.info is None
    assert final.error.startswith("out of memory while setting up the workload"), final.error
    assert "64.0 TiB" in final.error and "[cpu_size]" in final.error
    again, _ = run(preset("adamw"), steps=10)
    assert again.status == "ok"


def test_release_memory_after_a_failure_collects_and_empties_the_cuda_cache(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(runner_mod.gc, "collect", lambda *a: calls.append("gc") or 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    runner_mod.release_memory("cuda")
    assert calls == ["gc", "empty_cache"]
    calls.clear()
    runner_mod.release_memory("cpu")
    assert calls == ["gc"]

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "empty_cache", broken)
    runner_mod.release_memory("cuda")  # never raises


def test_the_runner_releases_memory_only_after_a_failure_and_before_reporting_it(monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(runner_mod, "release_memory", lambda device: order.append(f"release {device}"))

    def boom(step, inner):
        if step == 3:
            raise torch.OutOfMemoryError(CUDA_OOM)

    inject(monkeypatch, boom)
    r = Runner(RunRequest(preset("adamw"), "cpu", 10), lambda s: order.append(s.status) if s.finished else None).start()
    assert r.join(60)
    assert order == ["release cpu", "failed"]
    monkeypatch.undo()
    monkeypatch.setattr(runner_mod, "release_memory", lambda device: order.append(f"release {device}"))
    order.clear()
    ok, _ = run(preset("adamw"), steps=5)
    assert ok.status == "ok" and order == []


# ---- 2. non-finite losses ----------------------------------------------------------------------

def test_fp32_divergence_really_happens_and_fails_naming_the_first_nan_step():
    # lr 1e6 makes AdamW blow the weights up after step 1; the loss of step 2 is NaN (measured on CPU)
    final, snaps = run(preset("fp32", lr=1e6), steps=2000)
    recs = records(snaps)
    first_bad = next(r.step for r in recs if not math.isfinite(r.loss))
    assert final.status == "failed"
    assert final.error.startswith(f"loss became nan at step {first_bad}"), final.error
    assert first_bad == 2
    assert steps_of(snaps) == list(range(1, final.steps_done + 1))  # nothing measured is lost
    assert final.steps_done < 2000  # it stopped soon after (losses are checked when harvested)


def test_a_nan_put_into_the_weights_at_step_7_fails_the_run_at_step_7(monkeypatch):
    def poison(step, inner):
        if step == 7:
            with torch.no_grad():
                next(inner.model.parameters())[0, 0] = float("nan")

    inject(monkeypatch, poison)
    final, snaps = run(preset("adamw"), steps=500)
    assert final.status == "failed" and final.error.startswith("loss became nan at step 7"), final.error
    assert all(math.isfinite(r.loss) for r in records(snaps) if r.step < 7)


class Scripted(Workload):
    """Returns scripted (loss, GradScaler scale) values, like a GradScaler workload's step."""

    units, units_per_step = "samples", 1

    def __init__(self, losses, scales) -> None:
        self.losses, self.scales, self.n = losses, scales, 0
        self.uses_grad_scaler = scales is not None

    def step(self, clock):
        self.n += 1
        loss = torch.tensor(self.losses(self.n))
        return loss, (torch.tensor(self.scales(self.n)) if self.scales else None)


def test_an_inf_loss_without_grad_scaler_fails(monkeypatch):
    monkeypatch.setattr(builders, "build", lambda *a: Scripted(lambda n: math.inf if n >= 12 else 1.0, None))
    final, _ = run(preset("adamw"), steps=100)
    assert final.status == "failed" and final.error.startswith("loss became inf at step 12"), final.error


def skipping(first: int, count: int):
    """GradScaler's scale when steps first..first+count-1 are skipped (each halves it), else unchanged."""
    def scale(n: int) -> float:
        return 65536.0 / 2 ** max(0, min(n, first + count - 1) - first + 1)
    return scale


def test_fp16_occasional_skips_are_reported_not_failed(monkeypatch):
    short = MAX_CONSECUTIVE_SKIPS - 1  # the longest row of skips that is still tolerated
    monkeypatch.setattr(builders, "build", lambda *a: Scripted(
        lambda n: math.inf if 10 <= n < 10 + short else 1.0, skipping(10, short)))
    final, snaps = run(preset("adamw"), steps=100)
    assert final.status == "ok", final.error
    assert final.skipped_steps == short and final.info.uses_grad_scaler
    assert final.loss_scale == 65536.0 / 2 ** short
    assert [r.loss_scale for r in records(snaps)][-1] == final.loss_scale


def test_fp16_persistent_skipping_fails_at_the_limit(monkeypatch):
    monkeypatch.setattr(builders, "build", lambda *a: Scripted(
        lambda n: math.nan if n >= 10 else 1.0, skipping(10, 10**6)))
    final, snaps = run(preset("adamw"), steps=500)
    last = 10 + MAX_CONSECUTIVE_SKIPS - 1
    assert final.status == "failed"
    assert f"skipped {MAX_CONSECUTIVE_SKIPS} steps in a row (steps 10-{last}" in final.error, final.error
    assert final.skipped_steps >= MAX_CONSECUTIVE_SKIPS  # the delivery thread counts the same way
    assert final.steps_done >= last and steps_of(snaps) == list(range(1, final.steps_done + 1))


@pytest.mark.slow
def test_fp16_grad_scaler_divergence_really_happens_and_fails():
    # torch's own GradScaler and fused AdamW on CPU with fp16 autocast: lr 1e30 makes every gradient from
    # step 2 on inf/NaN, GradScaler skips every step and halves its scale, the run fails after the limit
    final, snaps = run(preset("torch_amp", amp="fp16", lr=1e30), steps=2000)
    assert final.info.uses_grad_scaler
    assert final.status == "failed", final.error
    # the scale is read once a timing block (1 to a few steps on a loaded CPU): the run stops at the limit or
    # within a block after it, and the error counts the skips it saw
    found = re.search(r"GradScaler skipped (\d+) steps in a row \(steps 2-(\d+)", final.error)
    assert found is not None, final.error
    skipped, last = int(found.group(1)), int(found.group(2))
    assert MAX_CONSECUTIVE_SKIPS <= skipped <= MAX_CONSECUTIVE_SKIPS + 8 and last == skipped + 1, final.error
    assert final.skipped_steps >= MAX_CONSECUTIVE_SKIPS and final.loss_scale <= 65536.0 / 2**MAX_CONSECUTIVE_SKIPS
    assert final.steps_done < 2000


@pytest.mark.slow
def test_fp16_healthy_run_is_ok_with_its_loss_scale():
    final, snaps = run(preset("torch_amp", amp="fp16"), steps=40)
    assert final.status == "ok", final.error
    assert final.info.uses_grad_scaler and final.loss_scale is not None and final.skipped_steps < 40


# ---- 3. NVML failures -------------------------------------------------------------------------

def fake_pynvml(broken: tuple[str, ...] = ()) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's `pynvml`: healthy readings, `broken` calls raising, `lose()` to make
    the GPU fall off the bus (every device call then raises NVMLError_GpuIsLost, as the driver does)."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_GpuIsLost(NVMLError):  # noqa: N801 - pynvml's name
        def __str__(self) -> str:
            return "GPU is lost"

    class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
        def __str__(self) -> str:
            return "NVML Shared Library Not Found"

    m.NVMLError, m.NVMLError_GpuIsLost, m.NVMLError_LibraryNotFound = (
        NVMLError, NVMLError_GpuIsLost, NVMLError_LibraryNotFound)
    m.NVML_TEMPERATURE_GPU, m.NVML_CLOCK_SM = 0, 1
    m.lost = False
    m.device_calls = 0
    m.lost_calls = 0

    def device(name, value):
        def call(*args):
            m.device_calls += 1
            if m.lost:
                m.lost_calls += 1
                raise NVMLError_GpuIsLost()
            if name in broken:
                raise NVMLError(f"{name}: Unknown Error")
            return value
        return call

    m.nvmlInit = lambda: None
    m.nvmlDeviceGetHandleByIndex = m.nvmlDeviceGetHandleByPciBusId = lambda *a: "gpu0"
    m.nvmlDeviceGetUtilizationRates = device("util", types.SimpleNamespace(gpu=87, memory=40))
    m.nvmlDeviceGetMemoryInfo = device("memory", types.SimpleNamespace(used=2 * 2**30, total=140 * 2**30))
    m.nvmlDeviceGetPowerUsage = device("power", 350_000)
    m.nvmlDeviceGetTemperature = device("temperature", 51)
    m.nvmlDeviceGetClockInfo = device("clock", 1980)
    m.nvmlDeviceGetName = device("name", b"NVIDIA H200")
    m.nvmlSystemGetDriverVersion = lambda: "570.133.20"
    m.lose = lambda: setattr(m, "lost", True)
    return m


GPU_FIELDS = ("gpu_util_pct", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_power_w", "gpu_temp_c",
              "gpu_sm_clock_mhz")


def wait_until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_fake_pynvml_healthy_readings(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    r = Sampler(interval=1, nvml=Nvml()).sample()
    assert (r.gpu_util_pct, r.gpu_mem_used_mb, r.gpu_mem_total_mb, r.gpu_power_w, r.gpu_temp_c,
            r.gpu_sm_clock_mhz) == (87.0, 2048.0, 140 * 1024.0, 350.0, 51.0, 1980.0)
    assert not any(f in r.na for f in GPU_FIELDS)


def test_nvidia_ml_py_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    nvml = Nvml()
    assert not nvml.available and nvml.error.startswith("nvidia-ml-py not importable")
    r = Sampler(interval=1, nvml=nvml).sample()
    assert all(getattr(r, f) is None and r.na[f].startswith("nvidia-ml-py not importable") for f in GPU_FIELDS)
    assert r.rss_mb is not None  # host metrics are unaffected


def test_nvml_init_raising(monkeypatch):
    lib = fake_pynvml()

    def init():
        raise lib.NVMLError_LibraryNotFound()

    lib.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", lib)
    r = Sampler(interval=1, nvml=Nvml()).sample()
    for f in GPU_FIELDS:
        assert getattr(r, f) is None and "NVML unavailable" in r.na[f] and "Library Not Found" in r.na[f]
    assert lib.device_calls == 0


def test_one_metric_call_raising_leaves_the_others(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(broken=("power",)))
    r = Sampler(interval=1, nvml=Nvml()).sample()
    assert r.gpu_power_w is None and r.na["gpu_power_w"] == "power: Unknown Error"
    assert r.gpu_util_pct == 87.0 and r.gpu_temp_c == 51.0 and "gpu_util_pct" not in r.na


def test_gpu_lost_mid_run_gives_na_with_reason_and_the_sampler_keeps_going(monkeypatch):
    lib = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", lib)
    sampler = Sampler(interval=0.01, nvml=Nvml()).start()
    try:
        first = sampler.latest
        assert wait_until(lambda: sampler.latest.time > first.time)
        assert first.gpu_util_pct == sampler.latest.gpu_util_pct == 87.0  # good readings first
        lib.lose()
        assert wait_until(lambda: sampler.latest.gpu_util_pct is None)
        before = sampler.latest.time
        assert wait_until(lambda: sampler.latest.time > before)  # still sampling afterwards
        r = sampler.latest
        assert sampler._thread.is_alive()
        for f in GPU_FIELDS:
            assert getattr(r, f) is None and r.na[f] == "GPU lost: GPU is lost"
        assert r.rss_mb is not None
        assert lib.lost_calls == 1  # after the first GpuIsLost the shim stops asking the driver
    finally:
        sampler.stop()
    assert not sampler._thread.is_alive()


def test_a_sampler_whose_metric_source_raises_keeps_sampling():
    class Exploding:
        def __getattr__(self, name):
            raise RuntimeError("driver exploded")

    sampler = Sampler(interval=0.01, nvml=Exploding()).start()  # type: ignore[arg-type]
    try:
        assert "driver exploded" in sampler.latest.na["gpu_util_pct"]
        first = sampler.latest.time
        assert wait_until(lambda: sampler.latest.time > first)
        assert sampler._thread.is_alive()
    finally:
        sampler.stop()


@pytest.mark.parametrize("fault", ["not_importable", "gpu_lost_mid_run"])
@pytest.mark.slow
def test_a_run_with_broken_nvml_still_ends_ok(monkeypatch, fault):
    lib = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", None if fault == "not_importable" else lib)
    inject(monkeypatch, lambda step, inner: lib.lose() if step == 30 else None)
    sampler = Sampler(interval=0.01, nvml=Nvml())
    final, snaps = run(preset("adamw"), steps=150, sampler=sampler)
    assert final.status == "ok" and final.error is None
    assert steps_of(snaps) == list(range(1, 151))
    reason = "nvidia-ml-py not importable" if fault == "not_importable" else "GPU lost"
    assert final.monitor.gpu_util_pct is None and final.monitor.na["gpu_util_pct"].startswith(reason)
    assert final.monitor.rss_mb is not None
    assert not sampler._thread.is_alive()  # stopped with the run


# ---- 4. bounded memory ------------------------------------------------------------------------

def test_step_stats_are_exact_up_to_the_cap():
    rng = random.Random(3)
    values = [rng.expovariate(1.0) for _ in range(500)]
    acc = StepStats(warmup=0, cap=500)
    acc.extend(values)
    s, ref = acc.read(), sorted(values)
    assert acc.exact and len(acc) == 500
    assert (s.median_ms, s.p10_ms, s.p90_ms) == (percentile(ref, 50), percentile(ref, 10), percentile(ref, 90))
    acc.add(1.0)
    assert not acc.exact and len(acc) == 500


@pytest.mark.slow
def test_step_stats_stay_bounded_over_a_million_steps():
    rng = random.Random(7)
    acc = StepStats(warmup=10)
    n = 10**6
    total, lo, hi = 0.0, math.inf, -math.inf
    for i in range(n):
        v = 5.0 + rng.random()  # uniform on 5..6 ms
        acc.add(v)
        if i >= 10:
            total, lo, hi = total + v, min(lo, v), max(hi, v)
    s = acc.read()
    assert len(acc) == EXACT_STEPS  # not a million
    assert s.count == n - 10 and s.mean_ms == pytest.approx(total / (n - 10)) and (s.min_ms, s.max_ms) == (lo, hi)
    # a uniform sample of 65 536: quantiles within a few standard errors (sqrt(q(1-q)/n) ~ 0.002)
    assert s.median_ms == pytest.approx(5.5, abs=0.01)
    assert s.p10_ms == pytest.approx(5.1, abs=0.01) and s.p90_ms == pytest.approx(5.9, abs=0.01)


@pytest.mark.slow
def test_the_run_bridge_histories_stay_bounded_over_a_million_steps():
    from apextui.core.monitor.sampler import MonitorReading
    from apextui.ui import bridge as bridge_mod

    b = bridge_mod.RunBridge(1, post=lambda message: None, min_interval=3600)
    step = 0
    for k in range(1000):
        new = tuple(StepRecord(step=step + i + 1, ms=1.0 + i % 7, loss=3.0 - i * 1e-6, loss_scale=2.0**16)
                    for i in range(1000))
        step += 1000
        b(Snapshot(status="running", info=None, steps_done=step, new_steps=new, stats=None, throughput=None,
                   skipped_steps=0, monitor=MonitorReading(time=float(k), cpu_pct=1.0, rss_mb=100.0),
                   elapsed_s=float(k)))
    view = b.take()
    assert view.snapshot.steps_done == 10**6
    assert len(b._step_ms) <= bridge_mod.STEP_POINTS and len(view.step_ms) <= bridge_mod.STEP_POINTS
    assert len(b._losses.values) <= bridge_mod.LOSS_POINTS and len(view.losses) <= bridge_mod.LOSS_POINTS + 1
    assert all(len(v) <= bridge_mod.MONITOR_POINTS for v in b._monitor.values())
    assert len(view.monitor["rss_mb"]) == bridge_mod.MONITOR_POINTS


@pytest.mark.slow
def test_a_slow_consumer_gets_coalesced_snapshots_and_the_inbox_stays_short():
    """Without coalescing, the inbox would hold one batch per harvest (10 a second) for as long as the
    consumer lags, i.e. grow with the run; with it, one snapshot takes the whole backlog."""
    sizes: list[int] = []
    snaps: list[Snapshot] = []

    def slow(s: Snapshot) -> None:
        snaps.append(s)
        sizes.append(r._inbox.qsize())
        time.sleep(0.5)

    r = Runner(RunRequest(preset("layernorm"), "cpu", 10**6), slow)
    r.start()
    time.sleep(4)  # ~40 harvests while the consumer manages ~8 deliveries
    r.stop()
    assert r.join(timeout=60)
    assert r.result.status == "stopped"
    assert steps_of(snaps) == list(range(1, r.result.steps_done + 1))  # nothing lost or repeated
    assert max(sizes) <= 8, sizes  # a 0.5 s consumer lets ~5 batches queue, never dozens
    assert len(snaps) <= 15


def test_the_cpu_clock_holds_only_unharvested_steps():
    from apextui.core.run.timing import CpuClock

    clock = CpuClock()
    clock.start()
    loss = torch.tensor(1.0)
    peak = 0
    for step in range(1, 10**5 + 1):
        clock.end_step(step, loss)
        peak = max(peak, clock.pending())
        if step % 1000 == 0:
            assert len(clock.harvest()) == 1000
    assert peak == 1000 and clock.pending() == 0


# ---- GPU: the same faults for real (skipped without CUDA) -----------------------------------------

gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def run_here(p: presets.Preset, steps: int, device: str = "cuda") -> tuple[Snapshot, list[Snapshot]]:
    snaps: list[Snapshot] = []
    final = Runner(RunRequest(p, device, steps), snaps.append).run()
    return final, snaps


@gpu
def test_gpu_out_of_memory_fails_frees_the_memory_and_the_next_run_works():
    torch.cuda.synchronize()
    allocated0, reserved0 = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    # a batch of 8192 x 4096 tokens: one (8192, 4096, 512) fp32 activation is 64 GiB, and a layer needs
    # several of them: far more than a 141 GB H200 holds
    huge = preset("fp32", size={"vocab": 1024, "d_model": 512, "layers": 8, "heads": 8, "seq": 4096,
                                "batch": 8192, "branching": 4})
    final, snaps = run_here(huge, steps=5)
    assert final.status == "failed", final.error
    assert final.error.startswith("out of memory at step 1"), final.error
    assert "tried to allocate" in final.error and "smaller size" in final.error
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - allocated0 < 64 * 2**20, torch.cuda.memory_summary()
    assert torch.cuda.memory_reserved() - reserved0 < 256 * 2**20, torch.cuda.memory_summary()
    again, snaps = run_here(preset("fp32"), steps=30)
    assert again.status == "ok", again.error
    assert steps_of(snaps) == list(range(1, 31))


@gpu
def test_gpu_fp32_divergence_fails_naming_the_first_nan_step():
    final, snaps = run_here(preset("fp32", lr=1e30), steps=3000)  # weights ~1e30: overflow
    first_bad = next(r.step for r in records(snaps) if not math.isfinite(r.loss))
    assert final.status == "failed" and final.error.startswith(f"loss became nan at step {first_bad}"), final.error
    assert final.steps_done < 3000


@gpu
def test_gpu_fp16_persistent_skipping_fails():
    final, snaps = run_here(preset("torch_amp", amp="fp16", lr=1e30), steps=3000)
    assert final.status == "failed" and f"skipped {MAX_CONSECUTIVE_SKIPS} steps in a row" in final.error, final.error
    assert final.skipped_steps >= MAX_CONSECUTIVE_SKIPS and final.steps_done < 3000
