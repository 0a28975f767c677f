"""Run a preset in a background thread and hand immutable snapshots to a callback.

Threads: the *training* thread only trains, records step events and hands
finished step records over in batches (at most ~10 times a second); a
*delivery* thread turns them into `Snapshot`s (statistics, latest monitor
reading) and calls the consumer's callback, so a slow consumer never holds up
training; a `Sampler` thread reads NVML/psutil at a fixed interval.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .presets import Preset
from .sampler import MonitorReading, Sampler
from .stats import Stats, StepStats
from .timing import StepRecord

HARVEST_INTERVAL_S = 0.1
TERMINAL = ("ok", "stopped", "failed")


@dataclass(frozen=True)
class RunInfo:
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


@dataclass(frozen=True)
class Snapshot:
    """The run as it stands; `new_steps` are the steps finished since the previous snapshot."""

    status: str  # "starting" | "running" | "ok" | "stopped" | "failed"
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

    @property
    def last(self) -> StepRecord | None:
        return self.new_steps[-1] if self.new_steps else None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


Callback = Callable[[Snapshot], None]


class Runner:
    """Trains one preset in a background thread. `stop()` is thread-safe and prompt."""

    def __init__(self, preset: Preset, device: str, callback: Callback, steps: int | None = None,
                 sample_interval: float = 1.0, sampler: Sampler | None = None) -> None:
        self.preset = preset
        self.device = device
        self.callback = callback
        self.steps = steps if steps is not None else preset.steps
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        # a short run (e.g. --steps 5) keeps some measured steps: warm-up at most a fifth of it
        self.warmup = preset.warmup if preset.warmup < self.steps else self.steps // 5
        self.sampler = sampler
        self.sample_interval = sample_interval
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        # not daemons: the interpreter must not exit while torch is still tearing a workload down in
        # them (that aborts the process with "terminate called without an active exception")
        self._train = threading.Thread(target=self._train_loop, name="apextui-train")
        self._deliver = threading.Thread(target=self._delivery_loop, name="apextui-deliver")
        self._t0 = 0.0
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

    # ---- training thread -----------------------------------------------------------------
    def _train_loop(self) -> None:
        status, error = "failed", "internal error"
        try:
            status, error = self._train_steps()
        finally:
            # the workload (model, optimizer, CUDA tensors) is freed by now: _train_steps returned
            self._inbox.put(("end", (status, error)))

    def _train_steps(self) -> tuple[str, str | None]:
        """Build the workload and train; every finished step goes to the inbox. Returns (status, error)."""
        status, error = "ok", None
        clock = None
        try:
            info, workload, clock = self._setup()
            self._inbox.put(("info", info))
            clock.start()
            next_harvest = time.perf_counter() + HARVEST_INTERVAL_S
            for step in range(1, self.steps + 1):
                if self._stop.is_set():
                    status = "stopped"
                    break
                loss, scale = workload.step(clock)
                clock.end_step(step, loss, scale)
                now = time.perf_counter()
                if now >= next_harvest:
                    next_harvest = now + HARVEST_INTERVAL_S
                    records = clock.harvest()
                    if records:
                        self._inbox.put(("steps", records))
            records = clock.harvest(wait=True)
            if records:
                self._inbox.put(("steps", records))
        except BaseException as exc:  # noqa: BLE001 - report, never lose what was measured
            status, error = "failed", f"{type(exc).__name__}: {exc}".strip()
            self._inbox.put(("traceback", traceback.format_exc()))
            if clock is not None:
                try:
                    records = clock.harvest()
                    if records:
                        self._inbox.put(("steps", records))
                except BaseException:  # noqa: BLE001
                    pass
        return status, error

    def _setup(self) -> tuple[RunInfo, Any, Any]:
        import torch

        from . import workloads
        from .timing import CpuClock, CudaClock

        size_name = "cpu" if self.device == "cpu" else "default"
        size = self.preset.cpu_size if size_name == "cpu" else self.preset.size
        workload = workloads.build(self.preset, self.device, size, self.steps)
        if self.sampler is None:
            from .env import pci_bus_id

            gpu = self.device == "cuda"
            self.sampler = Sampler(self.sample_interval, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None)
        self.sampler.start()
        if self.device == "cuda":
            torch.cuda.synchronize()
            clock: Any = CudaClock(torch)
        else:
            clock = CpuClock()
        info = RunInfo(
            preset=self.preset.name, workload=self.preset.workload, variant=self.preset.variant,
            device=self.device, size_name=size_name, size=dict(size), steps=self.steps, warmup=self.warmup,
            amp=self.preset.amp, units=workload.units, units_per_step=workload.units_per_step,
            baseline=self.preset.baseline, loss_floor=workload.loss_floor, check=workload.check,
            uses_grad_scaler=workload.uses_grad_scaler, params=workload.params,
        )
        return info, workload, clock

    # ---- delivery thread -----------------------------------------------------------------
    def _delivery_loop(self) -> None:
        stats, opt_stats = StepStats(self.warmup), StepStats(self.warmup)
        info: RunInfo | None = None
        done, skipped, final_loss, last_scale = 0, 0, None, None
        status, error = "starting", None
        while True:
            kind, payload = self._inbox.get()
            new: tuple[StepRecord, ...] = ()
            if kind == "info":
                info, status = payload, "running"
            elif kind == "steps":
                new = tuple(payload)
                for rec in new:
                    stats.add(rec.ms)
                    if rec.opt_ms is not None:
                        opt_stats.add(rec.opt_ms)
                    if rec.loss is not None:
                        final_loss = rec.loss
                    if rec.loss_scale is not None:
                        if last_scale is not None and rec.loss_scale < last_scale:
                            skipped += 1  # GradScaler lowers the scale only after skipping a step
                        last_scale = rec.loss_scale
                done += len(new)
            elif kind == "traceback":
                import sys

                print(payload, file=sys.stderr, end="")
                continue
            elif kind == "end":
                status, error = payload
                if self.sampler is not None:
                    self.sampler.stop()
            summary = stats.summary()
            snap = Snapshot(
                status=status, info=info, steps_done=done, new_steps=new, stats=summary,
                throughput=summary.throughput(info.units_per_step) if summary and info else None,
                skipped_steps=skipped, monitor=self.sampler.latest if self.sampler else None,
                elapsed_s=time.perf_counter() - self._t0, error=error, final_loss=final_loss,
                opt_stats=opt_stats.summary(),
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
