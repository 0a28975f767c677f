"""A point applied to one run, stage by stage: the one loop every workload builds its point through.

Why: what each value builds is `apply.py`'s table, and when it acts is declared beside it (`apply.ACTS`, by
`axes.Stage`); this is the loop that calls them. A workload makes its own parts between the stages (the user's
model after the process set-up, its fp32 reference before the kernels are swapped, its eager FLOPs before the
parallel stage wraps it) and hands each stage what it acts on; `Build` refuses a stage out of its order, so no
workload can write the order again, differently. The answer's code follows the same order (`config/snippet.py`).
"""

from __future__ import annotations

from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import torch
from torch import nn
from torch import GradScaler

from ..config.axes import Stage, all_axes
from ..config.point import Config
from . import apply

ORDER: tuple[Stage, ...] = tuple(Stage)


@dataclass
class StepPlan:
    """What each step runs under, as plain torch values: a forward torch.compile traces reads them (`apply.autocast_at`
    says why a configuration `Value` cannot be read there). `contexts`: a registered axis's own step contexts."""

    autocast_dtype: torch.dtype | None = None
    sdpa_backend: str | None = None
    channels_last: bool = False
    contexts: list[Callable[[], ContextManager[Any]]] = field(default_factory=list)

    def entered(self) -> ContextManager[Any]:
        """A registered axis's step contexts, entered together (a no-op without any: the shipped axes' are the
        fields above, which a traced forward enters itself)."""
        if not self.contexts:
            return nullcontext()
        stack = ExitStack()
        for make in self.contexts:
            stack.enter_context(make())
        return stack


class Build:
    """One run's point applied stage by stage (`ORDER`, each stage once; the optimizer stage again on `rebuild`).
    What a stage acts on is handed to `apply` (`model`, `params`, `loss_module`, `compile_options`, `shards`); what it
    builds is read off the Build afterwards (`model` as the parallel stage wrapped it, `optimizer`, `scaler`, `step`,
    `compiled`, and the kernel swap's record)."""

    def __init__(self, config: Config, device: str, lr: float = 1e-3, data_parallel: bool = False) -> None:
        self.config, self.device, self.lr = config, device, lr
        # the workload trains data-parallel (`WorkloadSpec.trains_data_parallel`): the parallel stage wraps its model; a
        # kernel micro-benchmark's or the user's model never is
        self.data_parallel = data_parallel
        self.done: list[Stage] = []
        # handed in by the workload
        self.model: nn.Module | None = None
        self.shards: tuple[nn.Module, ...] = ()  # the submodules FSDP2 shards one by one (the Transformer's blocks)
        self.params: list[nn.Parameter] = []
        self.loss_module: nn.Module | None = None
        self.compile_options: dict[str, Any] = {}
        # built by the stages
        self.norm_report: Any = None  # the norm finder's record, where the norms were swapped
        self.swapped: list[str] = []  # the modules the norm swap replaced
        self.loss_patched = False
        self.converted = False  # a precision changed the model's layers (fp8)
        self.optimizer: torch.optim.Optimizer | None = None
        self.scaler: GradScaler | None = None
        self.step = StepPlan()
        self.compiled: Callable[..., Any] | None = None

    GIVEN = ("model", "params", "loss_module", "compile_options", "shards")

    def target(self) -> nn.Module:
        """The model the kernels and layers stages change (RuntimeError where the workload handed none)."""
        if self.model is None:
            raise RuntimeError("this stage changes the model, and it was handed none (apply(stage, model=...))")
        return self.model

    def apply(self, stage: Stage, **given: Any) -> Build:
        """Apply `stage`, the next in `ORDER`, with what the workload hands it; RuntimeError out of order."""
        if len(self.done) == len(ORDER) or ORDER[len(self.done)] is not stage:
            due = ORDER[len(self.done)].value if len(self.done) < len(ORDER) else "nothing (every stage is applied)"
            raise RuntimeError(f"stage {stage.value} applied out of order: {due} is next")
        for key, value in given.items():
            if key not in self.GIVEN:
                raise TypeError(f"a stage is handed {', '.join(self.GIVEN)}; got {key}")
            setattr(self, key, value)
        if stage is Stage.PROCESS:
            apply.undo_patches()  # what an earlier run in this process changed outside its model (Liger's patch)
        _act(stage, self)
        self.done.append(stage)
        return self

    def through(self, last: Stage, **given: Any) -> Build:
        """Every stage not applied yet up to `last`, with the same hand-over (a workload with nothing of its own to do
        between them)."""
        while self.done[-1:] != [last]:
            self.apply(ORDER[len(self.done)], **given)
        return self

    def rebuild(self, params: list[nn.Parameter] | None = None) -> None:
        """The optimizer stage once more (a fresh optimizer and GradScaler), after a workload rewound its weights."""
        if Stage.OPTIMIZER not in self.done:
            raise RuntimeError("rebuild: the optimizer stage has not been applied yet")
        if params is not None:
            self.params = params
        _act(Stage.OPTIMIZER, self)


def _act(stage: Stage, build: Build) -> None:
    for ax in all_axes():
        action = apply.ACTS[ax.name].get(stage)
        if action is not None:
            action(build.config.value_of(ax.name), build)


def changes_at(config: Config, stage: Stage) -> bool:
    """Whether a value of `config` off its axis's default acts at `stage` (a workload checks what it changed)."""
    return any(v.label and stage in apply.ACTS[v.axis] for v in config.values())


def step_plan(config: Config, device: str) -> StepPlan:
    """The step stage's plan for `config` alone: a forward built before the stages reach it (the FLOP count of the model
    as built) runs under what the point's steps will."""
    build = Build(config, device)
    _act(Stage.STEP, build)
    return build.step


def process(config: Config, device: str) -> None:
    """The process stage's settings of `config` (TF32, cuDNN's benchmark mode), set again: fp32's reference steps
    run under fp32's, then the run's own are put back."""
    _act(Stage.PROCESS, Build(config, device))


__all__ = ["Build", "ORDER", "StepPlan", "changes_at", "process", "step_plan"]
