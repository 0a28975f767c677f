"""The axes a training loop can change, each value declared once: its name, summary, what it needs and its
availability check.

Why one registry: the model workload used to know eleven named single changes (`Recipe`s), so no combination
of them could be measured (bf16 autocast + fused AdamW + torch.compile, the answer on real models). Now a
configuration is a point with one value per axis (`point.Config`); the named variants are points. Adding a
value is one `Value` below (and, where it is a new kind of change, its construction in
`workloads/model_workload.py`, its snippet line in `snippet.py`).

Availability reuses the checks apextui already has: `needs.CHECKS` (torch.compile, CUDA graphs,
CUDA) and `apex.check.check_features` (Apex kernels), plus two of this module's own for fp8 (an importable
`torchao`, a GPU of compute capability >= 8.9). Importing this module is cheap (no torch).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Mapping

from ..needs import CHECKS as NEED_CHECKS
from ..needs import Check

AxisName = Literal["precision", "optimizer", "norms", "compile"]
Need = Literal["compile", "cuda_graphs", "cuda", "torchao", "sm89"]
FP8_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9) and Hopper (9.0) onwards


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
        Value("foreach", "torch AdamW `foreach=True`", "foreach"),
        Value("fused", "torch AdamW `fused=True`", "fused"),
        Value("apex", "apex FusedAdam (AdamW mode)", "fused_adam", apex=("FusedAdam",)),
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


# ---- availability ---------------------------------------------------------------------------------
def check_torchao(device: str) -> Check:
    if importlib.util.find_spec("torchao") is None:
        return Check(False, "fp8 training needs the torchao package; it is not installed",
                     "pip install torchao (the version that matches your torch)")
    return Check(True)


def check_sm89(device: str) -> Check:
    """float8 matmuls need compute capability 8.9 or newer (torch imported only here)."""
    if device != "cuda":
        return Check(False, "fp8 needs an NVIDIA GPU; this run is on CPU", "run on an Ada or Hopper GPU (or newer)")
    import torch

    cap = torch.cuda.get_device_capability()
    if tuple(cap) < FP8_CAPABILITY:
        return Check(False, f"fp8 needs a GPU of compute capability >= {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]}; "
                            f"this one is {cap[0]}.{cap[1]}", "run on an Ada (sm_89) or Hopper (sm_90) GPU or newer")
    return Check(True)


CHECKS: Mapping[str, object] = MappingProxyType({**NEED_CHECKS, "torchao": check_torchao, "sm89": check_sm89})


def value_availability(value: Value, device: str) -> Check:
    """The first unmet need of one value on `device` (Apex kernels last: their check runs a child process)."""
    for need in value.needs:
        result = CHECKS[need](device)  # type: ignore[operator]
        if not result.ok:
            return result
    return apex_check(value.apex, device)


def apex_check(features: tuple[str, ...], device: str) -> Check:
    """Working Apex kernels for `features` on `device` (CUDA only; checked in a child process, cached)."""
    if not features:
        return Check(True)
    if device != "cuda":
        return Check(False, f"needs NVIDIA Apex ({', '.join(features)}), whose fused kernels run on CUDA only; "
                            "this run is on CPU",
                     "run on a machine with an NVIDIA GPU and Apex built with APEX_CPP_EXT=1 APEX_CUDA_EXT=1, "
                     "or pick a torch preset")
    from ..apex.check import check_features

    checks = check_features(features, cuda_available=True)
    for feature in features:
        if not checks[feature].ok:
            return Check(False, f"needs Apex {feature}: {checks[feature].reason}", checks[feature].fix)
    return Check(True)
