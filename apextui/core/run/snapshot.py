"""What a run hands its consumer: `RunInfo` (fixed once the workload is built) and immutable `Snapshot`s, with
the statuses they carry. The runner in this process, the worker process, the JSON printer and the TUI share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Mapping

from ..analysis import PerStepWork, RunAnalysis, Work
from ..config.point import Config
from ..measure.mfu import Mfu, Peak, StepFlops, mfu
from ..monitor.sampler import MonitorReading
from ..measure.details import CorrectnessCheck, Distributed, FinalStatus
from ..measure.stats import Stats
from .timing import StepRecord

# A run's status, as its snapshots carry it: "compiling" is torch.compile / CUDA-graph capture (before info),
# "profiling" comes after the last step (GPU-busy window and ceilings); the last three are final.
Status = Literal["starting", "compiling", "running", "profiling", "ok", "stopped", "failed"]
TERMINAL: tuple[FinalStatus, ...] = ("ok", "stopped", "failed")


@dataclass(frozen=True)
class RunInfo(PerStepWork):
    """What is fixed for a run once its workload is built."""

    preset: str
    workload: str
    config: Config | None  # the point it runs (None: a watched run, or a stream whose point does not read back)
    device: str
    size_name: str  # "default" or "cpu"
    size: Mapping[str, int]
    steps: int
    warmup: int
    autocast: str  # the point's autocast dtype ("none", "bf16", "fp16"); the JSON lines' "amp"
    units: str
    units_per_step: int
    baseline: str
    loss_floor: float | None = None
    check: CorrectnessCheck | None = None  # the point's correctness check, done at set-up
    uses_grad_scaler: bool = False
    params: int | None = None
    work: Work | None = None  # the workload's FLOPs and bytes a step (roofline model), where modelled
    compile_s: float | None = None  # compile / CUDA-graph capture in set-up, never in a step; None: none
    model_flops: StepFlops | None = None  # the model's FLOPs a training step, counted once (workloads/flop_count.py)
    peak: Peak | None = None  # the GPU's dense peak for the run's precision (analysis/peaks.py), or why none

    def mfu(self, step_ms: float | None) -> Mfu:
        """The run's MFU at `step_ms` (its median so far, or over the measured steps): the one computation's
        (`measure.mfu.mfu`), for the `end` line and the TUI alike."""
        return mfu(self.model_flops, step_ms, self.peak)


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
    distributed: Distributed | None = None  # a data-parallel run's final snapshot on rank 0 (merge.py)
    peak_memory_bytes: int | None = None  # torch.cuda.max_memory_allocated over the run (CUDA; None on CPU)

    @property
    def wall_throughput(self) -> float | None:
        """Units per second over the measured steps' whole time (`Stats.wall_throughput`); None before any."""
        return self.stats.wall_throughput(self.info.units_per_step) if self.stats and self.info else None

    @property
    def last(self) -> StepRecord | None:
        return self.new_steps[-1] if self.new_steps else None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


Callback = Callable[[Snapshot], None]
