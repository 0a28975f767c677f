"""The optimizer experiment: a deep stack of Linear layers, timing the whole step and the optimizer alone."""

from __future__ import annotations

import time
from typing import Mapping

import torch
from torch import nn

from .warmup import WARMUP_STEPS, TrainingState
from . import apply
from .base import Workload, backward_and_step, scale_tensor
from ..measure.marker import Marker
from .spec import OPTIMIZER
from .stages import Build
from ..config.axes import Stage
from ..config.point import Config


class OptimizerWorkload(Workload):
    """`layers` x (Linear(width, width) + ReLU), MSE on random targets; the optimizer is the point's
    (`apply.optimizer`).

    `adamw_capturable_graph`: torch AdamW(fused=True, capturable=True) whose step is captured once in a
    torch.cuda.CUDAGraph during set-up and replayed every step (one launch instead of the optimizer's
    Python and launches); gradients are zeroed in place (never set to None) so that they keep the memory
    the graph reads. Forward and backward stay eager.
    """

    units = "samples"

    def __init__(self, config: Config, size: Mapping[str, int], device: str, lr: float, name: str = "") -> None:
        width, batch = size["width"], size["batch"]
        name = name or config.label  # what the messages call it (the preset's name)
        self.config = config
        build = Build(config, device, lr, data_parallel=OPTIMIZER.trains_data_parallel).apply(Stage.PROCESS)
        blocks: list[nn.Module] = []
        for _ in range(size["layers"]):
            blocks += [nn.Linear(width, width), nn.ReLU()]
        self.model = nn.Sequential(*blocks).to(device)
        build.through(Stage.LAYERS, model=self.model)
        self.graphed = self.config.cuda_graphs  # the capturable optimizer's step, replayed from a CUDA graph
        if self.graphed and device != "cuda":
            raise ValueError(f"{name} needs CUDA (a CUDA graph); this run is on {device}")
        build.apply(Stage.PARALLEL)  # DDP under torchrun
        self.model = build.target()  # type: ignore[assignment]  # DDP wraps it under torchrun
        build.through(Stage.COMPILE, params=list(self.model.parameters()))  # no compile: its step is eager
        assert build.optimizer is not None  # the optimizer stage made it
        self.opt, self.scaler = build.optimizer, build.scaler
        self.x = torch.randn(batch, width, device=device)
        self.y = torch.randn(batch, width, device=device)
        self.device = device
        if self.graphed and self.scaler is not None:
            raise ValueError(f"{name} cannot use GradScaler (amp = fp16): its step reads the scale on the "
                             "host; use amp = none or bf16")
        self.uses_grad_scaler = self.scaler is not None
        self.units_per_step = batch
        self.params = sum(p.numel() for p in self.model.parameters())
        self.work = OPTIMIZER.work(size, self.params, config)
        self.compiles = self.uses_cuda_graphs = self.graphed
        self.graph: torch.cuda.CUDAGraph | None = None

    def _forward_backward(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=False)  # in place: the captured step reads these gradients
        with apply.autocast(self.device, self.config.precision):
            loss = nn.functional.mse_loss(self.model(self.x).float(), self.y)
        loss.backward()
        return loss

    def warm_up(self) -> float | None:
        """Capture the optimizer step in a CUDA graph: eager steps on a side stream first (the optimizer's
        state is created lazily, and must exist before capture), then the capture; model and optimizer
        state are put back in place afterwards."""
        if not self.graphed:
            return None
        state = TrainingState(self.model.parameters(), self.opt)
        t0 = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self._forward_backward()
                self.opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.opt.step()
        torch.cuda.synchronize()
        self.graph = graph
        state.restore(zero_grads=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if self.graphed:
            if self.graph is None:
                raise RuntimeError("warm_up() must capture the optimizer step before the first step")
            loss = self._forward_backward()
            clock.mark()
            self.graph.replay()
            return loss, None
        self.opt.zero_grad()  # set_to_none is the default; apex FusedAdam takes no argument
        if self.config.autocast == "none":  # no autocast context at all: the user's fp32 loop has none
            loss = nn.functional.mse_loss(self.model(self.x).float(), self.y)
        else:
            with apply.autocast(self.device, self.config.precision):
                loss = nn.functional.mse_loss(self.model(self.x).float(), self.y)
        backward_and_step(loss, self.opt, self.scaler, clock)
        return loss, scale_tensor(self.scaler)
