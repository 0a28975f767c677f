"""The axes a training loop can change, each value declared once: its name, summary, what it needs and its
availability check.

Why one registry: the model workload used to know eleven named single changes (`Recipe`s), so no combination
of them could be measured (bf16 autocast + fused AdamW + torch.compile, the answer on real models). Now a
configuration is a point with one value per axis (`point.Config`); the named variants are points. Adding a
value is one `Value` below (and, where it is a new kind of change, its construction in
`workloads/model_workload.py`, its snippet line in `snippet.py`).

This module is data only (no torch, nothing of apextui's above it), so that the workload registry
(`workloads/spec.py`) can declare its variants as points; whether a value can run here is `checks.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Mapping

AxisName = Literal["precision", "optimizer", "norms", "compile"]
Need = Literal["compile", "cuda_graphs", "cuda", "torchao", "sm89"]


@dataclass(frozen=True)
class Value:
    """One value of one axis."""

    name: str  # what `--config axis=name` says
    summary: str
    label: str  # its token in a point's readable name ("" for the axis's default)
    apex: tuple[str, ...] = ()  # Apex features it needs (names from apex.features.FEATURES)
    needs: tuple[Need, ...] = ()  # beyond torch: compile, CUDA graphs, CUDA, torchao, an sm_89+ GPU
    # set-up time relative to torch.compile's default mode (the search tries costly values last and estimates
    # whether they fit its budget from the cheapest one's measured cost); 0: no set-up of its own
    setup_cost: float = 0.0
    # the workloads that build it (empty: every workload that runs points); the whole-step CUDA graph is the
    # shipped Transformer's (a user's step may not be capturable as it stands)
    workloads: tuple[str, ...] = ()
    # devices on which it is what the axis's default already does (torch AdamW is foreach on CUDA): the search
    # does not measure it there; `--config` still runs it
    default_on: tuple[str, ...] = ()
    # an Apex value's torch counterpart on its axis (the value it is weighed against, like with like: FusedAdam against
    # torch's fused AdamW); "" for the axis's default
    torch_twin: str = ""

    def builds_on(self, workload: str) -> bool:
        return not self.workloads or workload in self.workloads


@dataclass(frozen=True)
class Axis:
    name: AxisName
    summary: str
    values: tuple[Value, ...]  # the first is the default (fp32's)

    @property
    def default(self) -> Value:
        return self.values[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.values)

    def values_for(self, workload: str) -> tuple[Value, ...]:
        return tuple(v for v in self.values if v.builds_on(workload))

    def value(self, name: str) -> Value:
        for v in self.values:
            if v.name == name:
                return v
        raise ConfigError(f"unknown {self.name} {name[:40]!r}; allowed: {', '.join(self.names)}")


class ConfigError(ValueError):
    """An unknown axis or value, or a malformed `--config`; the message lists what is allowed."""


_NORMS = ("FusedLayerNorm", "FusedRMSNorm")
AXES: tuple[Axis, ...] = (
    Axis("precision", "the arithmetic of forward and backward", (
        Value("fp32", "fp32 as written (no TF32)", ""),
        Value("tf32", "fp32 with TF32 matmuls and convolutions", "tf32", needs=("cuda",)),
        Value("bf16", "bf16 autocast", "bf16"),
        Value("fp16", "fp16 autocast + `GradScaler`", "fp16"),
        Value("fp8", "torchao `convert_to_float8_training` (float8 Linear layers) under bf16 autocast", "fp8",
              needs=("sm89", "torchao")),
    )),
    Axis("optimizer", "the optimizer's implementation (AdamW arithmetic in every case)", (
        Value("adamw", "torch AdamW defaults (foreach on CUDA)", ""),
        Value("foreach", "torch AdamW `foreach=True`", "foreach", default_on=("cuda",)),
        Value("fused", "torch AdamW `fused=True`", "fused"),
        Value("apex", "apex FusedAdam (AdamW mode)", "fused_adam", apex=("FusedAdam",), torch_twin="fused"),
    )),
    Axis("norms", "the model's LayerNorm / RMSNorm modules", (
        Value("torch", "the model's own norms", ""),
        Value("apex", "swapped for apex FusedLayerNorm / FusedRMSNorm", "fused_norms", apex=_NORMS),
    )),
    Axis("compile", "torch.compile of the model and its loss", (
        Value("none", "eager", ""),
        Value("default", "`torch.compile(mode=\"default\")`", "compile", needs=("compile",), setup_cost=1.0),
        Value("max-autotune-no-cudagraphs", "`torch.compile(mode=\"max-autotune-no-cudagraphs\")`",
              "max_autotune", needs=("compile",), setup_cost=4.0),
        Value("reduce-overhead", "`torch.compile(mode=\"reduce-overhead\")`: CUDA graphs", "compile_cg",
              needs=("compile", "cuda_graphs"), setup_cost=1.2),
        Value("graph", "`torch.compile` and the whole step (forward, backward, capturable fused AdamW) in one CUDA "
              "graph", "compile_graph", needs=("compile", "cuda_graphs"), setup_cost=1.5, workloads=("transformer",)),
    )),
)
AXIS_MAP: Mapping[str, Axis] = MappingProxyType({a.name: a for a in AXES})
AXIS_NAMES: tuple[AxisName, ...] = tuple(a.name for a in AXES)


def axis(name: str) -> Axis:
    if name not in AXIS_MAP:
        raise ConfigError(f"unknown axis {name[:40]!r}; allowed: {', '.join(AXIS_NAMES)}")
    return AXIS_MAP[name]


def allowed() -> str:
    """Every axis and its values, for an error line: 'precision=fp32|tf32|..., optimizer=...'."""
    return ", ".join(f"{a.name}={'|'.join(a.names)}" for a in AXES)
