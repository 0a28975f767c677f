"""Run a preset and hand immutable snapshots to a callback.

Threads: the *training* thread (the caller's with `Runner.run()`, which the headless front end and the
TUI's worker process use; a background one with `Runner.start()`) only trains, records step events and hands
finished step records over in batches (at most 4 times a second); a
*delivery* thread turns them into `Snapshot`s (statistics, latest monitor
reading) and calls the consumer's callback, so a slow consumer never holds up
training; a `Sampler` thread reads NVML/psutil at a fixed interval.
"""

from __future__ import annotations

import gc
import math
import queue
import re
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Protocol

from ..presets import Preset
from ..analysis import (PROFILE_STEPS, PerStepWork, Probe, RunAnalysis, UtilAverage, Work, analyse_run,
                       probe_after_run)
from ..monitor.sampler import GpuScope, MonitorReading, Sampler
from .stats import Stats, StepStats
from .timing import StepRecord

# How often the training thread hands finished steps over. Each hand-over wakes the delivery thread, which
# then holds the GIL (statistics, a snapshot, the consumer's JSON lines or pickle) while the training
# thread's next CUDA call waits for it: on a host-bound step every wake-up is time the user's loop does not
# spend. The TUI redraws at most twice a second (ui/app.py REFRESH_S): four hand-overs a second keep it fresh.
HARVEST_INTERVAL_S = 0.25
# A run's status, as its snapshots carry it: "compiling" is torch.compile / CUDA-graph capture (before info),
# "profiling" comes after the last step (GPU-busy window and ceilings); the last three are final.
Status = Literal["starting", "compiling", "running", "profiling", "ok", "stopped", "failed"]
FinalStatus = Literal["ok", "stopped", "failed"]
TERMINAL: tuple[FinalStatus, ...] = ("ok", "stopped", "failed")
# An fp16 run (GradScaler) fails once this many steps in a row were skipped: each skip halves the loss
# scale, so 20 in a row take the default 2**16 down to 2**-4 -- gradients that overflow fp16 even then
# are inf/NaN, not merely large (the training diverged). Occasional skips (normal) never fail a run.
MAX_CONSECUTIVE_SKIPS = 20


@dataclass(frozen=True)
class RunInfo(PerStepWork):
    """What is fixed for a run once its workload is built."""

    preset: str
    workload: str
    variant: str
    device: str
    size_name: str  # "default" or "cpu"
    size: Mapping[str, int]
    steps: int
    warmup: int
    amp: str
    units: str
    units_per_step: int
    baseline: str
    loss_floor: float | None = None
    check: Mapping[str, Any] | None = None
    uses_grad_scaler: bool = False
    params: int | None = None
    work: Work | None = None  # the workload's FLOPs and bytes a step (roofline model), where modelled
    compile_s: float | None = None  # compile / CUDA-graph capture in set-up, never in a step; None: none


@dataclass(frozen=True)
class Snapshot:
    """The run as it stands; `new_steps` are the steps finished since the previous snapshot."""

    status: Status  # see `Status`
    info: RunInfo | None
    steps_done: int
    new_steps: tuple[StepRecord, ...]
    stats: Stats | None
    throughput: float | None
    skipped_steps: int
    monitor: MonitorReading | None
    elapsed_s: float
    error: str | None = None
    final_loss: float | None = None
    opt_stats: Stats | None = None  # the optimizer step alone, where the workload marks it
    loss_scale: float | None = None  # GradScaler's latest scale (fp16 runs)
    analysis: RunAnalysis | None = None  # roofline + bottleneck: the final snapshot of an "ok" run
    distributed: Mapping[str, Any] | None = None  # a data-parallel run's final snapshot on rank 0 (merge.py)

    @property
    def last(self) -> StepRecord | None:
        return self.new_steps[-1] if self.new_steps else None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


Callback = Callable[[Snapshot], None]


class SkipCounter:
    """Steps GradScaler skipped, inferred from its scale: it lowers the scale only after skipping a step
    (inf/NaN gradients) and raises it only after a run of clean steps. The training thread (to fail a run
    that keeps skipping) and the delivery thread (to report the count) each feed it the same records."""

    def __init__(self) -> None:
        self.total = 0
        self.in_a_row = 0
        self.first_of_row = 0  # the first step of the current row of skips
        self.scale: float | None = None

    def add(self, rec: StepRecord) -> bool:
        """Feed the next interval; True when it had a skipped step. A block of several steps is read once:
        each skip halves the scale, so a scale 2**-n of the previous one counts n skips (a growth inside
        the same block, once in 2000 clean steps by default, would hide one)."""
        if rec.loss_scale is None:
            return False
        prev, self.scale = self.scale, rec.loss_scale
        skipped = prev is not None and rec.loss_scale < prev
        if skipped:
            n = max(1, round(math.log2(prev / rec.loss_scale))) if rec.loss_scale > 0 else 1  # type: ignore[operator]
            n = min(n, rec.steps)
            if self.in_a_row == 0:
                self.first_of_row = rec.step - n + 1
            self.total += n
            self.in_a_row += n
        else:
            self.in_a_row = 0
        return skipped


class LossGuard:
    """Checks harvested steps in the training thread (no extra synchronisation): a run without GradScaler
    fails at its first non-finite loss; a GradScaler run fails after MAX_CONSECUTIVE_SKIPS skips in a row."""

    def __init__(self, uses_grad_scaler: bool) -> None:
        self.uses_grad_scaler = uses_grad_scaler
        self.skips = SkipCounter()

    def check(self, records: list[StepRecord]) -> str | None:
        """The reason to fail the run, or None."""
        for rec in records:
            if self.uses_grad_scaler:
                self.skips.add(rec)
                if self.skips.in_a_row >= MAX_CONSECUTIVE_SKIPS:
                    return (f"GradScaler skipped {self.skips.in_a_row} steps in a row (steps "
                            f"{self.skips.first_of_row}-{rec.step}, loss scale now {self.skips.scale:.3g}): "
                            f"the gradients stay inf/NaN, the training diverged (try a lower lr)")
            elif rec.loss is not None and not math.isfinite(rec.loss):
                return f"loss became {rec.loss} at step {rec.step} (the training diverged; try a lower lr)"
        return None


_OOM_ALLOC = re.compile(r"[Tt]ried to allocate ([\d.]+ ?[KMGTPE]?i?B|\d+ bytes)")
_OOM_GPU = re.compile(r"GPU (\d+) has a total capacity of ([\d.]+ \w+) of which ([\d.]+ \w+) is free")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), MemoryError, or an allocator's OOM RuntimeError."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return "out of memory" in text or "can't allocate memory" in text


def _amount(text: str) -> str:
    """'70368744177664 bytes' -> '64.0 TiB'; torch's own '64.00 GiB' is kept."""
    if not text.endswith(" bytes"):
        return text
    n = float(text.split()[0])
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return text


def describe_failure(exc: BaseException, step: int, device: str, workload: str | None = None) -> str:
    """The `error` of a failed run: what went wrong and at which step (0: while setting up); `workload`
    "model" (the user's own) gets its own advice on out-of-memory."""
    where = f"at step {step}" if step else "while setting up the workload"
    if is_out_of_memory(exc):
        text = str(exc)
        alloc, gpu = _OOM_ALLOC.search(text), _OOM_GPU.search(text)
        detail = f"tried to allocate {_amount(alloc.group(1))}" if alloc else (text.splitlines() or [type(exc).__name__])[0]
        if gpu:
            detail += f"; GPU {gpu.group(1)} has {gpu.group(3)} free of {gpu.group(2)}"
        if workload == "model":
            smaller = ("build a smaller model or batch (your function's small=True size, which CPU runs use)"
                       if device == "cpu" else "build a smaller model or batch in your function")
            return f"out of memory {where} ({detail[:300]}): {smaller}, or free the memory other processes hold"
        table = "[cpu_size]" if device == "cpu" else "[size]"
        return (f"out of memory {where} ({detail[:300]}): use a smaller size (lower batch, seq, d_model/width "
                f"or layers in the preset's {table}), or free the memory other processes hold")
    lines = f"{type(exc).__name__}: {exc}".strip().split("\n", 1)
    lines[0] += f" ({where})"
    return "\n".join(lines)


def release_memory(device: str) -> None:
    """After a failed run, once its workload is unreachable: collect it (cycles included) and, on CUDA,
    give the caching allocator's blocks back, so the next run in this process starts clean. Never raises."""
    try:
        gc.collect()
        if device == "cuda":
            import torch

            torch.cuda.empty_cache()
    except BaseException:  # noqa: BLE001 - e.g. a CUDA context broken by the failure
        pass


def run_steps(preset: Preset, steps: int | None) -> int:
    """The steps a run trains: `steps`, else the preset's; at least 1 (both runners check it alike)."""
    n = steps if steps is not None else preset.steps
    if n < 1:
        raise ValueError(f"steps must be >= 1, got {n}")
    return n


class FrozenHeap:
    """`gc.freeze()` for the measured steps, undone after them (Python docs, `gc.freeze`).

    Why: the objects a workload's set-up just made (the model's modules, torch.compile's graphs) are young, and
    the first collections after set-up walk all of them. A user's bare loop allocates and frees in balance and
    triggers no collection; the monitor keeps a few records and snapshots alive for a moment and does, so that
    walk (milliseconds, holding the GIL in whichever thread triggers it) would be the monitor's cost, charged
    to the steps. Frozen, a collection walks only what was allocated since. A process that froze its heap
    itself (the TUI app) is left as it is."""

    def __init__(self) -> None:
        self.frozen = False

    def __enter__(self) -> "FrozenHeap":
        if gc.get_freeze_count() == 0 and gc.isenabled():
            gc.freeze()
            self.frozen = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.frozen:
            gc.unfreeze()  # the workload's objects are collectable again once the run lets go of them
            self.frozen = False


class RunControl:
    """Stop and wait, alike for a run in this process (`Runner`) and in a worker (`ProcessRunner`): each
    sets `_stop` (an Event the training loop polls) and `_finished` (set once the final snapshot is out)."""

    _stop: Any
    _finished: threading.Event

    def stop(self) -> None:
        """Ask the run to stop after the current step; safe from any thread."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the final snapshot has been delivered; True when it has.
        Safe to interrupt (an Event wait), unlike Thread.join."""
        return self._finished.wait(timeout)


class Runner(RunControl):
    """Trains one preset, in the calling thread (`run`) or a background one (`start`). `stop()` is
    thread-safe and prompt."""

    def __init__(self, preset: Preset, device: str, callback: Callback, steps: int | None = None,
                 sample_interval: float = 1.0, sampler: Sampler | None = None, analyse: bool = True,
                 profile_steps: int = PROFILE_STEPS, gpu_scope: GpuScope = "run", coordinator: Any = None) -> None:
        self.preset = preset
        # a data-parallel run's ranks agree on when to stop and on the blocks (distributed.Coordinator)
        self.coordinator = coordinator
        self.analyse = analyse  # after an ok run: GPU-busy profile window + ceilings (core/analysis/)
        self.profile_steps = profile_steps
        self.device = device
        self.callback = callback
        self.steps = run_steps(preset, steps)
        # a short run (e.g. --steps 5) keeps some measured steps: warm-up at most a fifth of it
        self.warmup = preset.warmup if preset.warmup < self.steps else self.steps // 5
        self.sampler = sampler
        self.sample_interval = sample_interval
        self.gpu_scope = gpu_scope  # the GPUs the sampler reads: the run's, or every one (the TUI's pane)
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        # not daemons: the interpreter must not exit while torch is still tearing a workload down in
        # them (that aborts the process with "terminate called without an active exception")
        self._train = threading.Thread(target=self._train_loop, name="apextui-train")
        self._deliver = threading.Thread(target=self._delivery_loop, name="apextui-deliver")
        self._t0 = 0.0
        self._step = 0  # the step being trained: a failure names it
        self.result: Snapshot | None = None

    # ---- control -------------------------------------------------------------------------
    def start(self) -> "Runner":
        """Train in a background thread (for front ends that own the main thread, like the TUI)."""
        self._t0 = time.perf_counter()
        self._deliver.start()
        self._train.start()
        return self

    def run(self) -> Snapshot | None:
        """Train in the calling thread, delivery still in its own; returns the final snapshot.

        On the H200 a host-bound step (fused_amp) ran 5-8 % slower in a background thread than the same
        loop on the main thread (docs/results-h200.md), so the headless front end trains here.
        """
        self._t0 = time.perf_counter()
        self._deliver.start()
        self._train_loop()
        self._deliver.join()
        return self.result

    def join(self, timeout: float | None = None) -> bool:
        """Wait for training and delivery to finish; True when both have."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in (self._train, self._deliver):
            if t.ident is not None:  # started (run() never starts the training thread)
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                t.join(remaining)
        return not self.is_alive()

    def is_alive(self) -> bool:
        return self._train.is_alive() or self._deliver.is_alive()

    def kill(self, reason: str | None = None) -> bool:
        """A thread cannot be ended from outside, so this only asks the run to stop after its current step (as
        `stop()`; `reason` is not used) and returns False: the caller learns that the run goes on until then,
        through a torch.compile too. `ProcessRunner.kill` ends its worker process at once and returns True."""
        self.stop()
        return False

    # ---- training thread -----------------------------------------------------------------
    def _train_loop(self) -> None:
        status, error = "failed", "internal error"
        try:
            status, error = self._train_steps()
        finally:
            # the workload (model, optimizer, CUDA tensors) is unreachable by now: _train_steps returned
            if status == "failed":
                release_memory(self.device)
            self._inbox.put(("end", (status, error)))

    def _train_steps(self) -> tuple[FinalStatus, str | None]:
        """Build the workload and train; every finished step goes to the inbox. Returns (status, error)."""
        status, error = "ok", None
        clock = None
        self._step = 0
        try:
            info, workload, clock = self._setup()
            guard = LossGuard(info.uses_grad_scaler)
            self._inbox.put(("info", info))
            with FrozenHeap():
                status, error = self._measured_steps(workload, clock, guard)
            if status == "ok" and self.analyse:  # extra steps, after the measured ones: never in the stats
                self._inbox.put(("status", "profiling"))
                self._inbox.put(("probe", probe_after_run(workload, self.device, self.profile_steps,
                                                          getattr(workload, "work", None) is not None)))
        except BaseException as exc:  # noqa: BLE001 - report, never lose what was measured
            status, error = "failed", describe_failure(exc, self._step, self.device, self.preset.workload)
            if not getattr(exc, "quiet_traceback", False):  # a user's model error carries its own traceback tail
                self._inbox.put(("traceback", traceback.format_exc()))
            if clock is not None:
                try:
                    records = clock.harvest()
                    if records:
                        self._inbox.put(("steps", records))
                except BaseException:  # noqa: BLE001
                    pass
        return status, error

    def _measured_steps(self, workload: Any, clock: Any, guard: LossGuard) -> tuple[FinalStatus, str | None]:
        """Warm-up and measured steps, then the final harvest; (status, error). `self._step` follows the
        loop, so that a failure names its step."""
        status, error = "ok", None
        clock.start()
        next_harvest = time.perf_counter() + HARVEST_INTERVAL_S
        for step in range(1, self.steps + 1):
            if self._stopping(step):
                status = "stopped"
                break
            self._step = step
            loss, scale = workload.step(clock)
            clock.end_step(step, loss, scale)
            now = time.perf_counter()
            if now >= next_harvest:
                next_harvest = now + HARVEST_INTERVAL_S
                records = clock.harvest()
                if records:
                    self._inbox.put(("steps", records))
                    problem = guard.check(records)
                    if problem:
                        status, error = "failed", problem
                        break
        clock.close()  # a run stopped inside a block: its steps so far are one interval
        records = clock.harvest(wait=True)
        if records:
            self._inbox.put(("steps", records))
            problem = guard.check(records)
            if problem and status != "failed":
                status, error = "failed", problem
        return status, error

    def _stopping(self, step: int) -> bool:
        """Whether to stop before `step`: asked here, or, in a data-parallel run, by any rank (decided at the
        ranks' common boundaries, so that every rank stops after the same step)."""
        if self.coordinator is None:
            return self._stop.is_set()
        return bool(self.coordinator.should_stop(step, self._stop.is_set()))

    def _build_workload(self, size: Mapping[str, int]) -> Any:
        """The workload this run trains (benchmarks/overhead_blocks.py hands in one built earlier)."""
        from .. import workloads

        return workloads.build(self.preset, self.device, size, self.steps)

    def _setup(self) -> tuple[RunInfo, Any, Any]:
        import torch

        from .timing import CpuClock, CudaClock

        size_name = "cpu" if self.device == "cpu" else "default"
        size = self.preset.cpu_size if size_name == "cpu" else self.preset.size
        workload = self._build_workload(size)
        if self.sampler is None:
            from ..env import pci_bus_id

            gpu = self.device == "cuda"
            self.sampler = Sampler(self.sample_interval, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None,
                                   scope=self.gpu_scope)
        self.sampler.start()
        compile_s = None
        if getattr(workload, "compiles", False):  # before the clock starts: never part of a step
            self._inbox.put(("status", "compiling"))
            compile_s = workload.warm_up()
        if self.device == "cuda":
            torch.cuda.synchronize()
            clock: Any = CudaClock(torch, warmup=self.warmup, steps=self.steps)
        else:
            clock = CpuClock(warmup=self.warmup, steps=self.steps)
        if self.coordinator is not None:
            clock.schedule.agree = self.coordinator.agree_ms
        info = RunInfo(
            preset=self.preset.name, workload=self.preset.workload, variant=self.preset.variant,
            device=self.device, size_name=size_name, size=dict(size), steps=self.steps, warmup=self.warmup,
            amp=self.preset.amp, units=workload.units, units_per_step=workload.units_per_step,
            baseline=self.preset.baseline, loss_floor=workload.loss_floor, check=workload.check,
            uses_grad_scaler=workload.uses_grad_scaler, params=workload.params,
            work=getattr(workload, "work", None), compile_s=compile_s,
        )
        return info, workload, clock

    # ---- delivery thread -----------------------------------------------------------------
    def _delivery_loop(self) -> None:
        stats, opt_stats = StepStats(self.warmup), StepStats(self.warmup)
        info: RunInfo | None = None
        done, final_loss = 0, None
        skips = SkipCounter()
        status: Status = "starting"
        error: str | None = None
        held: tuple[str, Any] | None = None
        probe: Probe | None = None
        gpu_util = UtilAverage()  # NVML, over the measured steps: the busy fraction if profiling fails
        while True:
            kind, payload = held if held is not None else self._inbox.get()
            held = None
            new: tuple[StepRecord, ...] = ()
            if kind == "info":
                info, status = payload, "running"
            elif kind == "status":
                status = payload
            elif kind == "probe":
                probe = payload
                continue
            elif kind == "steps":
                batch = list(payload)
                while True:  # a backlog (slow consumer) becomes one snapshot: the inbox stays short
                    try:
                        held = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if held[0] != "steps":
                        break
                    batch.extend(held[1])
                    held = None
                new = tuple(batch)
                for rec in new:
                    stats.add(rec.ms, rec.steps)
                    if rec.opt_ms is not None:
                        opt_stats.add(rec.opt_ms, rec.steps)
                    if rec.loss is not None:
                        final_loss = rec.loss
                    skips.add(rec)
                    done += rec.steps
                if done > self.warmup and self.sampler is not None:
                    gpu_util.start(time.time())
                    gpu_util.add(self.sampler.latest)
            elif kind == "traceback":
                import sys

                print(payload, file=sys.stderr, end="")
                continue
            elif kind == "end":
                status, error = payload
                if self.sampler is not None:
                    self.sampler.stop()
            summary = stats.summary()
            analysis = None
            if kind == "end" and status == "ok" and probe is not None:
                try:
                    analysis = analyse_run(info, summary, opt_stats.summary(), probe, gpu_util.mean,
                                               gpu_util.note if self.device == "cuda" else None)
                except Exception:  # noqa: BLE001 - the run's figures matter more than their analysis
                    import sys

                    traceback.print_exc(file=sys.stderr)
            snap = Snapshot(
                status=status, info=info, steps_done=done, new_steps=new, stats=summary,
                throughput=summary.throughput(info.units_per_step) if summary and info else None,
                skipped_steps=skips.total, monitor=self.sampler.latest if self.sampler else None,
                elapsed_s=time.perf_counter() - self._t0, error=error, final_loss=final_loss,
                opt_stats=opt_stats.summary(), loss_scale=skips.scale, analysis=analysis,
            )
            if snap.finished:
                self.result = snap
            try:
                self.callback(snap)
            except Exception:  # noqa: BLE001 - a broken consumer must not kill delivery
                import sys

                traceback.print_exc(file=sys.stderr)
            if kind == "end":
                self._finished.set()
                return


class RunHandle(Protocol):
    """What a front end holds of a run, whether it trains in a thread of this process (`Runner`) or in a worker
    process (`worker.ProcessRunner`); what a `RunnerFactory` returns."""

    def start(self) -> "RunHandle":
        """Begin training in the background; returns the handle itself."""
        ...

    def stop(self) -> None:
        """Ask the run to stop after its current step; safe from any thread."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether `stop()` (or `kill()`) was asked."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the final snapshot's delivery; True when it was delivered."""
        ...

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run's threads (and process) to end; True when they have."""
        ...

    def is_alive(self) -> bool:
        """Whether anything of the run is still running."""
        ...

    def kill(self, reason: str | None = None) -> bool:
        """End the run at once where that is possible (True: a worker process); otherwise ask it to stop as
        `stop()` does and return False (a thread cannot be killed)."""
        ...


class RunnerFactory(Protocol):
    """Makes a run's handle: `thread_runner_factory` here, the TUI's worker-process factory, tests' fakes."""

    def __call__(self, preset: Preset, device: str, callback: Callable[[Snapshot], None], *,
                 steps: int | None = None, sample_interval: float = 1.0) -> RunHandle:
        ...


def thread_runner_factory(preset: Preset, device: str, callback: Callable[[Any], None], *,
                          steps: int | None = None, sample_interval: float = 1.0) -> Runner:
    """A `Runner` that trains in a thread of this process (headless advice, tests, `APEXTUI_WORKER=thread`);
    the TUI's default trains in a worker process instead (`ui.app.default_runner_factory`)."""
    return Runner(preset, device, callback, steps=steps, sample_interval=sample_interval)
