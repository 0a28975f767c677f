"""Run a preset and hand immutable snapshots to a callback.

Threads: the *training* thread (the caller's with `Runner.run()`, which the headless front end and the
TUI's worker process use; a background one with `Runner.start()`) only trains, records step events and hands
finished step records over in batches (at most 4 times a second); a
*delivery* thread (`delivery.Delivery`) turns them into `Snapshot`s (statistics, latest monitor
reading) and calls the consumer's callback, so a slow consumer never holds up
training; a `Sampler` thread reads NVML/psutil at a fixed interval.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
import traceback
from typing import Any, Callable, Mapping

from ..analysis import PROFILE_STEPS, probe_after_run
from ..analysis.peaks import peak
from ..env import pci_bus_id
from ..monitor.sampler import Sampler
from ..presets import Preset
from ..monitor.sampler import GpuScope
from .delivery import Delivery
from .divergence import LossGuard
from ..workloads.failure import describe_failure
from ..workloads import setup_stop
from ..workloads.setup_stop import StoppedInSetUp
from .frozen_heap import FrozenHeap
from .handle import RunControl
from .request import RunRequest
from ..workloads import builders
from ..workloads.parallel import release_single_group
from .snapshot import Callback, FinalStatus, RunInfo, Snapshot
from .timing import CpuClock, CudaClock

# How often the training thread hands finished steps over. Each hand-over wakes the delivery thread, which
# then holds the GIL (statistics, a snapshot, the consumer's JSON lines or pickle) while the training
# thread's next CUDA call waits for it: on a host-bound step every wake-up is time the user's loop does not
# spend. The TUI redraws at most twice a second (ui/app.py REFRESH_S): four hand-overs a second keep it fresh.
HARVEST_INTERVAL_S = 0.25


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


def warmup_steps(preset: Preset, steps: int) -> int:
    """The untimed warm-up steps of a run of `steps` steps: the preset's, but a short run (e.g. --steps 5) keeps
    some measured steps: then at most a fifth of it."""
    return preset.warmup if preset.warmup < steps else steps // 5


class Runner(RunControl):
    """Trains one preset, in the calling thread (`run`) or a background one (`start`). `stop()` is
    thread-safe and prompt."""

    def __init__(self, request: RunRequest, callback: Callback, *, sampler: Sampler | None = None,
                 analyse: bool = True, profile_steps: int = PROFILE_STEPS, gpu_scope: GpuScope = "run",
                 coordinator: Any = None) -> None:
        self.request = request
        # a data-parallel run's ranks agree on when to stop and on the blocks (distributed.Coordinator)
        self.coordinator = coordinator
        self.analyse = analyse  # after an ok run: GPU-busy profile window + ceilings (core/analysis/)
        self.profile_steps = profile_steps
        self.callback = callback
        self.steps = run_steps(request.preset, request.steps)
        self.warmup = warmup_steps(request.preset, self.steps)
        self.sampler = sampler
        self.gpu_scope = gpu_scope  # the GPUs the sampler reads: the run's, or every one (the TUI's pane)
        # the sample its front end read as it started (the `start` line's): the run's first, so that the `end` line's
        # verdict on the host is the run's one verdict, never `unknown` after a `start` that said `busy`
        self.start_contention: Any = None
        self._stop = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._delivery = Delivery(self._inbox, callback, self.warmup, request.device, lambda: self.sampler)
        self._finished = self._delivery.finished
        # not daemons: the interpreter must not exit while torch is still tearing a workload down in
        # them (that aborts the process with "terminate called without an active exception")
        self._train = threading.Thread(target=self._train_loop, name="apextui-train")
        self._deliver = threading.Thread(target=self._delivery.loop, name="apextui-deliver")
        self._step = 0  # the step being trained: a failure names it

    @property
    def result(self) -> Snapshot | None:
        """The final snapshot, once delivered."""
        return self._delivery.result

    # ---- control -------------------------------------------------------------------------
    def start(self) -> "Runner":
        """Train in a background thread (for front ends that own the main thread, like the TUI)."""
        self._delivery.t0 = time.perf_counter()
        self._deliver.start()
        self._train.start()
        return self

    def run(self) -> Snapshot | None:
        """Train in the calling thread, delivery still in its own; returns the final snapshot.

        On the H200 a host-bound step (fused_amp) ran 5-8 % slower in a background thread than the same
        loop on the main thread (docs/results-h200.md), so the headless front end trains here.
        """
        self._delivery.t0 = time.perf_counter()
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
        status: FinalStatus = "failed"
        error: str | None = "internal error"
        try:
            status, error = self._train_steps()
        finally:
            # the workload (model, optimizer, CUDA tensors) is unreachable by now: _train_steps returned
            if status == "failed":
                release_memory(self.device)
            release_single_group()  # a distributed preset's world of one ends with its run
            self._inbox.put(("end", (status, error)))

    def _train_steps(self) -> tuple[FinalStatus, str | None]:
        """Build the workload and train; every finished step goes to the inbox. Returns (status, error)."""
        status: FinalStatus = "ok"
        error: str | None = None
        clock = None
        self._step = 0
        try:
            try:
                info, workload, clock = self._setup()
            except StoppedInSetUp:  # asked during the set-up's own steps (the loss-parity check): no step measured
                return "stopped", None
            guard = LossGuard(info.uses_grad_scaler)
            self._inbox.put(("info", info))
            with FrozenHeap():
                status, error = self._measured_steps(workload, clock, guard)
            if self.device == "cuda":  # compile and the measured steps: what the configuration needs
                import torch

                self._inbox.put(("peak_memory", int(torch.cuda.max_memory_allocated())))
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
        status: FinalStatus = "ok"
        error: str | None = None
        # the stop check costs every step: one bound call here, the ranks' agreement only in a data-parallel run
        asked, coordinator = self._stop.is_set, self.coordinator
        clock.start()
        next_harvest = time.perf_counter() + HARVEST_INTERVAL_S
        for step in range(1, self.steps + 1):
            if asked() if coordinator is None else coordinator.should_stop(step, asked()):
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
                    problem = guard.divergence(records)
                    if problem:
                        status, error = "failed", problem
                        break
        clock.close()  # a run stopped inside a block: its steps so far are one interval
        records = clock.harvest(wait=True)
        if records:
            self._inbox.put(("steps", records))
            problem = guard.divergence(records)
            if problem and status != "failed":
                status, error = "failed", problem
        return status, error

    def _build_workload(self, size: Mapping[str, int]) -> Any:
        """The workload this run trains (benchmarks/overhead_blocks.py hands in one built earlier)."""
        return builders.build(self.preset, self.device, size, self.steps)

    def _setup(self) -> tuple[RunInfo, Any, Any]:
        import torch

        size_name = "cpu" if self.device == "cpu" else "default"
        size = self.preset.cpu_size if size_name == "cpu" else self.preset.size
        with setup_stop.asking(self._stop.is_set):
            workload = self._build_workload(size)
        if self.device == "cuda":
            # the peak is this configuration's (its compile and measured steps), not an earlier run's in this
            # process, nor the correctness check's fp32 reference steps, which ran while the workload was built
            torch.cuda.reset_peak_memory_stats()
        if self.sampler is None:
            gpu = self.device == "cuda"
            self.sampler = Sampler(self.request.sample_interval, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None,
                                   scope=self.gpu_scope)
        if self.start_contention is not None:
            self.sampler.tally.add(self.start_contention)
        self.sampler.start()
        compile_s = None
        if getattr(workload, "compiles", False):  # before the clock starts: never part of a step
            self._inbox.put(("status", "compiling"))
            with setup_stop.asking(self._stop.is_set):  # a compiled configuration's check is its warm-up's first steps
                compile_s = workload.warm_up()
        if self.device == "cuda":
            torch.cuda.synchronize()
            clock: Any = CudaClock(torch, warmup=self.warmup, steps=self.steps)
        else:
            clock = CpuClock(warmup=self.warmup, steps=self.steps)
        if self.coordinator is not None:
            clock.schedule.agree = self.coordinator.agree_ms
        info = RunInfo(
            preset=self.preset.name, workload=self.preset.workload, config=self.preset.config,
            device=self.device, size_name=size_name, size=dict(size), steps=self.steps, warmup=self.warmup,
            autocast=self.preset.config.autocast, units=workload.units, units_per_step=workload.units_per_step,
            baseline=self.preset.baseline, loss_floor=workload.loss_floor, check=workload.check,
            uses_grad_scaler=workload.uses_grad_scaler, params=workload.params,
            work=getattr(workload, "work", None), compile_s=compile_s,
            model_flops=getattr(workload, "step_flops", None),
            peak=peak(self.device, torch.cuda.get_device_name() if self.device == "cuda" else None,
                      str(getattr(workload, "config", self.preset.config).precision)),
        )
        return info, workload, clock


def thread_runner_factory(request: RunRequest, callback: Callable[[Any], None]) -> Runner:
    """A `Runner` that trains in a thread of this process (headless advice, tests, `APEXTUI_WORKER=thread`);
    the TUI's default trains in a worker process instead (`worker.process_runner_factory`)."""
    return Runner(request, callback)
