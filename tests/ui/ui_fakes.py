"""Deterministic fakes for the UI tests: a doctor report, a device probe, a scripted engine."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from types import MappingProxyType
from typing import Any

from apextui.core.apex.doctor_report import (
    ApexInfo,
    DoctorReport,
    Environment,
    ExtensionStatus,
    FeatureStatus,
    GPUInfo,
    Problem,
    SmokeResult,
)
from apextui.core.apex.features import FEATURES
from apextui.core.availability import Availability
from apextui.core.measure.details import CorrectnessCheck
from apextui.core.monitor.sampler import MonitorReading
from apextui.core.monitor.topology import Topology
from apextui.core.presets import Preset
from apextui.core.run.request import RunRequest
from apextui.core.run.snapshot import RunInfo, Snapshot
from apextui.core.measure.stats import StepStats
from apextui.core.run.timing import StepRecord
from apextui.ui.probe import Probe

# ---- doctor reports --------------------------------------------------------------------------


def _make(cls: type, **values: Any) -> Any:
    """Build a doctor dataclass by field name; fields the fake does not name get neutral values and
    names the dataclass no longer has are dropped (the doctor is still evolving)."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
            continue
        ann = str(f.type)
        if "None" in ann:
            kwargs[f.name] = None
        elif ann.startswith("tuple"):
            kwargs[f.name] = ()
        elif ann == "bool":
            kwargs[f.name] = False
        elif ann in ("int", "float"):
            kwargs[f.name] = 0
        else:
            kwargs[f.name] = ""
    return cls(**kwargs)


def _env(gpu: bool) -> Environment:
    return _make(
        Environment,
        python="3.12.3", python_executable="/opt/venv/bin/python", platform="linux",
        torch="2.11.0+cu128" if gpu else "2.13.0+cpu", torch_error="", torch_cuda="12.8" if gpu else None,
        cudnn="9.10" if gpu else None, cuda_available=gpu, cuda_error="" if gpu else "torch is a CPU-only build",
        gpus=(_make(GPUInfo, index=0, name="NVIDIA H200", capability="9.0", memory_gib=139.8),) if gpu else (),
        driver="570.133.20" if gpu else None,
        nvml="ok" if gpu else "n/a: NVML Shared Library Not Found", cuda_home="/usr/local/cuda" if gpu else None,
        nvcc_path="/usr/local/cuda/bin/nvcc" if gpu else None, nvcc_version="12.8" if gpu else None,
        nvcc_error="" if gpu else "nvcc not found", nvcc_matches_torch=True if gpu else None,
        tf32_supported=True if gpu else None, bf16_supported=True if gpu else None,
        nccl="2.27.5" if gpu else None, nccl_error="" if gpu else "torch is a CPU-only build",
        topology=(Topology("single", 1, (), "one GPU: nothing to link") if gpu else
                  Topology("n/a", 0, (), "n/a: NVML unavailable (no NVIDIA driver?): NVML Shared Library Not Found")),
    )


def gpu_report() -> DoctorReport:
    """Apex built completely on an H200; apex.amp removed as in current Apex."""
    features = []
    for f in FEATURES.values():
        if f.removed:
            features.append(_make(FeatureStatus, name=f.name, module=f.module, attr=f.attr, needs=f.extensions,
                                  removed=True, ok=False, reason="apex.amp was removed from NVIDIA Apex",
                                  fix="use torch.amp"))
        else:
            features.append(_make(FeatureStatus, name=f.name, module=f.module, attr=f.attr, needs=f.extensions,
                                  removed=False, ok=True))
    exts = tuple(_make(ExtensionStatus, name=n, required=True, status="ok", path=f"/opt/apex/{n}.so")
                 for n in ("apex_C", "amp_C", "fused_layer_norm_cuda", "mlp_cuda", "fused_dense_cuda", "syncbn"))
    return _make(
        DoctorReport,
        environment=_env(True),
        apex=_make(ApexInfo, status="complete", location="/opt/apex/apex", distribution="apex", version="0.1",
                   import_ok=True, detail="all 6 required extensions import"),
        extensions=exts, features=tuple(features),
        smoke=(_make(SmokeResult, name="FusedAdam", skipped=False, passed=True, max_abs_err=1.2e-7, tolerance=1e-5,
                     seconds=0.41),
               _make(SmokeResult, name="FusedLayerNorm", skipped=False, passed=True, max_abs_err=4.8e-7,
                     tolerance=1e-4, seconds=0.12)),
        problems=(), isolation="subprocess", seconds=3.2,
    )


def no_gpu_report() -> DoctorReport:
    """A laptop: CPU-only torch, no Apex."""
    features = tuple(
        _make(FeatureStatus, name=f.name, module=f.module, attr=f.attr, needs=f.extensions, removed=f.removed,
              ok=False, reason="apex.amp was removed from NVIDIA Apex" if f.removed else "NVIDIA Apex is not installed",
              fix="install NVIDIA Apex")
        for f in FEATURES.values())
    return _make(
        DoctorReport,
        environment=_env(False),
        apex=_make(ApexInfo, status="not_installed", detail="NVIDIA Apex is not installed", fix="install it"),
        extensions=(), features=features, smoke=(),
        problems=(_make(Problem, what="torch 2.13.0+cpu is a CPU-only build; Apex's fused kernels need CUDA",
                        fix="install CUDA torch"),
                  _make(Problem, what="NVIDIA Apex is not installed", fix="install NVIDIA Apex")),
        isolation="subprocess", seconds=1.1,
    )


def provider(report: Any, event: threading.Event | None = None) -> Callable[[], Any]:
    """A report provider; with `event`, it blocks until the event is set (to see "probing…")."""

    def get() -> Any:
        if event is not None:
            event.wait(30)
        return report

    return get


# ---- device probes ---------------------------------------------------------------------------


def fake_probe(device: str = "cuda", unavailable: dict[str, str] | None = None,
               event: threading.Event | None = None) -> Callable[[str, Sequence[Preset]], Probe]:
    """All presets available on `device` except those named in `unavailable` (name -> reason)."""
    unavailable = unavailable or {}

    def probe(requested: str, presets: Sequence[Preset]) -> Probe:
        if event is not None:
            event.wait(30)
        avail = {p.name: Availability(False, unavailable[p.name], "fix it") if p.name in unavailable
                 else Availability(True) for p in presets}
        if device == "cuda":
            env = {"torch": "2.11.0+cu128", "torch_cuda": "12.8", "gpu": "NVIDIA H200", "cuda_available": True}
        else:
            env = {"torch": "2.13.0+cpu", "torch_cuda": None, "gpu": None, "cuda_available": False}
        return Probe(device=device, requested=requested, availability=avail, env=env)

    return probe


def cpu_probe_no_apex() -> Callable[[str, Sequence[Preset]], Probe]:
    """What this CPU machine without Apex looks like, without importing torch."""
    reason = "needs NVIDIA Apex ({}), whose fused kernels run on CUDA only; this run is on CPU"

    def probe(requested: str, presets: Sequence[Preset]) -> Probe:
        avail = {p.name: Availability(False, reason.format(", ".join(p.needs_apex)), "use a GPU") if p.needs_apex
                 else Availability(True) for p in presets}
        return Probe(device="cpu", requested=requested, availability=avail,
                     env={"torch": "2.13.0+cpu", "torch_cuda": None, "gpu": None})

    return probe


# ---- a scripted engine -----------------------------------------------------------------------

BASE_MS = {
    "fp32": 12.0, "fused_fp32": 10.4, "fused_amp": 5.1, "torch_amp": 5.6,
    "adamw": 3.0, "adamw_fused": 1.3, "fused_adam": 1.1,
    "layernorm": 0.9, "fused_layernorm": 0.45, "rmsnorm": 0.8, "fused_rmsnorm": 0.4,
}
LOSS_FLOOR = 1.0475


def reading(i: int, gpu: bool) -> MonitorReading:
    """The i-th deterministic monitor reading."""
    if not gpu:
        na = {n: "running on CPU: no GPU in use" for n in
              ("gpu_util_pct", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_power_w", "gpu_temp_c", "gpu_sm_clock_mhz")}
        return MonitorReading(time=1000.0 + i, cpu_pct=180 + 10 * math.sin(i), rss_mb=820 + i,
                              ram_used_pct=12.0, na=MappingProxyType(na))
    return MonitorReading(
        time=1000.0 + i, gpu_util_pct=min(99.0, 40 + 8 * i), gpu_mem_used_mb=9800 + 40 * i,
        gpu_mem_total_mb=143771, gpu_power_w=180 + 25 * i + 10 * math.sin(i), gpu_temp_c=38 + i,
        gpu_sm_clock_mhz=1980 - 5 * (i % 3), cpu_pct=99.5, rss_mb=2310 + i, ram_used_pct=8.0,
    )


class FakeRunner:
    """Feeds deterministic snapshots synchronously: `start()` runs to `hold_at` steps (or the end);
    `stop()` (or `release()`) delivers the rest and the final snapshot."""

    def __init__(self, request: RunRequest, callback: Callable[[Snapshot], None], *, hold_at: int | None = None,
                 batch: int = 10, compile_hold: bool = False, fail_at: int | None = None,
                 monitor: Callable[[int, bool], MonitorReading] = reading) -> None:
        preset, device, steps = request.preset, request.device, request.steps
        self.request = request
        self.preset, self.device, self.callback = preset, request.device, callback
        self.fail_at = fail_at  # fails after this many steps: "CUDA out of memory at step fail_at + 1"
        self.monitor = monitor  # the i-th monitor reading of a run on a GPU (True) or not
        self.compiling = compile_hold  # stays "compiling" (no RunInfo yet) until release()
        self.steps = steps or preset.steps
        self.warmup = preset.warmup if preset.warmup < self.steps else self.steps // 5
        self.hold_at = hold_at
        self.batch = batch
        self.stats = StepStats(self.warmup)
        self.done = 0
        self.final_loss: float | None = None
        self.scale: float | None = None
        self.skipped = 0
        self.finished = False
        self.result: Snapshot | None = None
        self.stopped = False
        self.joined = False
        gpu = device == "cuda"
        size_name = "default" if gpu else "cpu"
        transformer = preset.workload == "transformer"
        self.info = RunInfo(
            preset=preset.name, workload=preset.workload, config=preset.config, device=device,
            size_name=size_name, size=dict(preset.size if gpu else preset.cpu_size), steps=self.steps,
            warmup=self.warmup, autocast=preset.config.autocast, units="tokens" if transformer else "samples",
            units_per_step=8192 if transformer else 256, baseline=preset.baseline,
            loss_floor=LOSS_FLOOR if transformer else None,
            check=(CorrectnessCheck(against="layernorm", max_abs_err=2.4e-7, tolerance=1e-5, passed=True)
                   if preset.name.startswith("fused_") and preset.workload in ("layer_norm", "rms_norm") else None),
            uses_grad_scaler=preset.config.autocast == "fp16", params=26_800_000 if transformer else 4_200_000,
        )
        self.has_loss = preset.workload in ("optimizer", "transformer", "model")  # a norm benchmark has none

    def _record(self, step: int) -> StepRecord:
        base = BASE_MS.get(self.preset.name.rsplit("/", 1)[-1], 5.0)  # a model preset: its point's label
        ms = base * (1.0 + 0.04 * math.sin(step * 0.7)) + (base * 0.8 if step <= 3 else 0.0)
        loss = None
        if self.has_loss:
            loss = LOSS_FLOOR + 0.04 + (4.16 - LOSS_FLOOR) * math.exp(-step / 70.0) + 0.03 * math.sin(step * 1.3)
        scale = None
        if self.info.uses_grad_scaler:
            scale = 65536.0 if step < 40 else 32768.0
        return StepRecord(step=step, ms=ms, loss=loss, opt_ms=None, loss_scale=scale)

    def _snap(self, status: str, new: tuple[StepRecord, ...]) -> Snapshot:
        for rec in new:
            self.stats.add(rec.ms)
            if rec.loss is not None:
                self.final_loss = rec.loss
            if rec.loss_scale is not None:
                if self.scale is not None and rec.loss_scale < self.scale:
                    self.skipped += 1
                self.scale = rec.loss_scale
        self.done += len(new)
        st = self.stats.read()
        i = self.done // self.batch
        return Snapshot(
            status=status, info=None if status == "starting" else self.info, steps_done=self.done,
            new_steps=new, stats=st,
            throughput=st.throughput(self.info.units_per_step) if st else None,
            skipped_steps=self.skipped, monitor=self.monitor(i, self.device == "cuda"), elapsed_s=0.05 * self.done,
            final_loss=self.final_loss,
        )

    def _advance(self, to: int) -> None:
        while self.done < to:
            end = min(to, self.done + self.batch)
            self.callback(self._snap("running", tuple(self._record(s) for s in range(self.done + 1, end + 1))))

    def start(self) -> FakeRunner:
        self.callback(self._snap("starting", ()))
        if self.compiling:
            self.callback(dataclasses.replace(self._snap("starting", ()), status="compiling"))
            return self
        self.callback(self._snap("running", ()))
        if self.fail_at is not None:
            self._advance(self.fail_at)
            self.finished = True
            self.result = dataclasses.replace(self._snap("failed", ()),
                                              error=f"CUDA out of memory at step {self.fail_at + 1}")
            self.callback(self.result)
            return self
        self._advance(self.hold_at if self.hold_at is not None else self.steps)
        if self.hold_at is None:
            self._end("ok")
        return self

    def _end(self, status: str) -> None:
        if not self.finished:
            self.finished = True
            self.result = self._snap(status, ())  # as ProcessRunner.result: the final snapshot
            self.callback(self.result)

    def release(self) -> None:
        """Finish the held run normally."""
        if self.compiling:
            self.compiling = False
            self.callback(self._snap("running", ()))
        self._advance(self.steps)
        self._end("ok")

    def stop(self) -> None:
        self.stopped = True
        self._end("stopped")

    def join(self, timeout: float | None = None) -> bool:
        self.joined = True
        return self.finished

    def is_alive(self) -> bool:
        return not self.finished


class FakeEngine:
    """A runner factory: `hold` maps preset names to the step their run pauses at; the runs of the presets
    in `compile_hold` stay "compiling" until released; `fail` maps preset names to the step after which their
    runs fail (each run of that preset, or only the `fail_runs`-th ones, counted from 1, when given)."""

    def __init__(self, hold: dict[str, int] | None = None, compile_hold: Sequence[str] = (),
                 fail: dict[str, int] | None = None, fail_runs: Sequence[int] = (),
                 monitor: Callable[[int, bool], MonitorReading] = reading) -> None:
        self.hold = hold or {}
        self.fail = fail or {}
        self.fail_runs = set(fail_runs)
        self.compile_hold = set(compile_hold)  # presets whose run stays compiling until released
        self.monitor = monitor
        self.runners: list[FakeRunner] = []

    def __call__(self, request: RunRequest, callback: Callable[[Snapshot], None]) -> FakeRunner:
        preset = request.preset
        fail_at = self.fail.get(preset.name)
        if self.fail_runs and len(self.runners) + 1 not in self.fail_runs:
            fail_at = None
        runner = FakeRunner(request, callback, hold_at=self.hold.get(preset.name),
                            compile_hold=preset.name in self.compile_hold, fail_at=fail_at, monitor=self.monitor)
        self.runners.append(runner)
        return runner


class LoggingRunner(FakeRunner):
    """A FakeRunner whose worker prints to a log file as ProcessRunner's does (a compile line; with fp16 the
    GradScaler FutureWarning), deleted when the run ends as the worker deletes it after a good run."""

    def __init__(self, *args: Any, log_dir: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.log_path = str(log_dir / f"{self.preset.name}.log")
        with open(self.log_path, "w") as fh:
            fh.write(f"[worker] {self.preset.name}: torch.compile of the model…\n")
            if self.preset.config.autocast == "fp16":
                fh.write("FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. "
                         "Please use `torch.amp.GradScaler('cuda', args...)` instead.\n")

    def _end(self, status: str) -> None:
        super()._end(status)
        import os

        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


class LoggingEngine(FakeEngine):
    """A FakeEngine of LoggingRunners writing their logs in `log_dir`."""

    def __init__(self, log_dir: Any, hold: dict[str, int] | None = None) -> None:
        super().__init__(hold)
        self.log_dir = log_dir

    def __call__(self, request: RunRequest, callback: Callable[[Snapshot], None]) -> FakeRunner:
        runner = LoggingRunner(request, callback, hold_at=self.hold.get(request.preset.name), log_dir=self.log_dir,
                               monitor=self.monitor)
        self.runners.append(runner)
        return runner


# ---- pilot helpers ---------------------------------------------------------------------------


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Let the app run until `condition()` holds (polling every 20 ms), or fail after `timeout` s. The timeout only
    bounds a hang: leave the default (a loaded 2-core box with another test process beside it is slow, never
    wrong); pass a longer one for real runs."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.02)


async def wait_for_screen(pilot: Any, app: Any, screen_type: type, what: str, timeout: float = 60.0) -> Any:
    """Wait until the app shows a `screen_type` screen that has composed its widgets, and return it. A screen pushed
    from a worker is on the stack (`app.screen`) a moment before Textual composes and mounts it: querying its widgets
    in that moment finds none."""
    await wait_for(pilot, lambda: isinstance(app.screen, screen_type) and app.screen.is_mounted, timeout, what)
    return app.screen


async def settle_bars(pilot: Any, app: Any) -> None:
    """Round every progress bar's fill to its laid-out width, as the next progress update would. Textual rounds a
    bar's fill to the half cells of its width when the progress is set; one set before the bar's first layout (width
    0, which a loaded box makes likely) stays unrounded, half a cell off, until the next update, and a snapshot
    whose fake run holds its step never gets one."""
    from textual.widgets._progress_bar import Bar

    bars = list(app.screen.query(Bar))
    await wait_for(pilot, lambda: all(bar.size.width > 0 for bar in bars), what="the progress bars laid out")
    for bar in bars:
        if bar.percentage is not None:
            bar.percentage = bar.percentage  # validated again, at the width it has now
    await pilot.pause()


def read_pty_until(fd: int, pattern: bytes, seconds: float) -> bool:
    """Drain a TUI's pseudo-terminal output until the regular expression `pattern` matches its latest 8 KiB, or
    `seconds` pass (a bound on a hang); False also once the terminal is gone."""
    import os
    import re
    import select
    import time

    shown, tail, end = re.compile(pattern), b"", time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                tail = (tail + os.read(fd, 65536))[-8192:]
            except OSError:
                return False
            if shown.search(tail):
                return True
    return False


def alive(pid: int) -> bool:
    """A process that runs and is not a zombie; one that ends between the two questions is not alive either."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def static_text(app: Any, selector: str) -> str:
    """The plain text a Static currently shows."""
    widget = app.query_one(selector)
    content = widget.content if hasattr(widget, "content") else widget.renderable
    return str(getattr(content, "plain", content))


async def highlight(pilot: Any, app: Any, name: str) -> None:
    """Move the preset picker's highlight to `name` with the keyboard (home, then down)."""
    from apextui.ui.keys import highlight_preset

    if not await highlight_preset(pilot, app, name):
        raise AssertionError(f"could not highlight {name}")


# ---- the app, set up as most UI tests need it ---------------------------------------------------


def gpu_app(engine: Any = None, **kw: Any) -> Any:
    """The app on a fake H200 with Apex built (fake report and probe; `kw` may replace them, or add any other
    `make_app` argument) and `engine` (a FakeEngine by default)."""
    from apextui.ui.app import make_app

    kw.setdefault("device", "cuda")
    kw.setdefault("report_provider", provider(gpu_report()))
    kw.setdefault("probe", fake_probe("cuda"))
    return make_app(runner_factory=FakeEngine() if engine is None else engine, **kw)


def cpu_app(engine: Any = None, **kw: Any) -> Any:
    """The app on a fake laptop without GPU or Apex (`kw` as for `gpu_app`), with `engine`."""
    from apextui.ui.app import make_app

    kw.setdefault("device", "auto")
    kw.setdefault("report_provider", provider(no_gpu_report()))
    kw.setdefault("probe", cpu_probe_no_apex())
    return make_app(runner_factory=FakeEngine() if engine is None else engine, **kw)


async def until_ready(pilot: Any, app: Any, timeout: float = 60.0) -> None:
    """Wait for the device probe and the doctor report (runs start only after both)."""
    await wait_for(pilot, lambda: app.probe is not None and app.report is not None, timeout, "probe and report")


@contextlib.asynccontextmanager
async def running(app: Any, size: tuple[int, int] = (80, 24)) -> AsyncIterator[Any]:
    """`app.run_test(size=size)`, its pilot yielded once the probe and the report are in."""
    async with app.run_test(size=size) as pilot:
        await until_ready(pilot, app)
        yield pilot
