"""What every workload offers the runner."""

from __future__ import annotations

from typing import Any

import torch

from ..analysis import PerStepWork, Work
from ..measure.details import CorrectnessCheck
from ..measure.marker import Marker
from ..measure.mfu import StepFlops

MICRO_BENCHMARK = StepFlops(None, "none", reason="a kernel micro-benchmark: no model forward and backward to count "
                                                 "(MFU is a model's measure)")


class Workload(PerStepWork):
    """One training step at a time; `step` enqueues work and returns device tensors
    (loss, GradScaler scale) without synchronising."""

    units: str = "samples"
    units_per_step: int = 0
    loss_floor: float | None = None  # the data's entropy floor, where known
    check: CorrectnessCheck | None = None  # correctness check done at set-up
    uses_grad_scaler: bool = False
    params: int | None = None  # trainable parameters
    work: Work | None = None  # FLOPs and bytes of one step (roofline model), where modelled
    step_flops: StepFlops = MICRO_BENCHMARK  # the model's FLOPs a step, counted (`flop_count`): what MFU reads
    compiles: bool = False  # True: warm_up() compiles or captures before the first step
    uses_cuda_graphs: bool = False  # replays captured CUDA graphs (the GPU-busy profiler skips these)

    def warm_up(self) -> float | None:
        """Compile / capture (workloads with `compiles`), leaving model, optimizer and data as they were;
        returns the seconds it took, or None when there is nothing to compile."""
        return None

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        raise NotImplementedError


def scale_tensor(scaler: Any) -> torch.Tensor | None:
    """The scaler's current scale as a device tensor (no host sync), if it exposes one."""
    scale = getattr(scaler, "_scale", None) if scaler is not None else None
    return scale if isinstance(scale, torch.Tensor) else None


def backward_and_step(loss: torch.Tensor, opt: Any, scaler: Any, clock: Any = None) -> None:
    """The backward pass and the optimizer step, through GradScaler where the run has one; `clock.mark()`
    (where a clock is given) just before the optimizer step, so that its time is the step's `opt_ms`."""
    if scaler is not None:
        scaler.scale(loss).backward()
        if clock is not None:
            clock.mark()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        if clock is not None:
            clock.mark()
        opt.step()
