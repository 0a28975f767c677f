"""What each value of the configuration axes builds: the one table every workload builds its point from.

The optimizer and norm micro-benchmarks, the shipped Transformer and the user's model all run a point
(`config.point.Config`); what its precision, optimizer, norms and compile values make of a model is here, one entry
a value (`PRECISIONS`, `OPTIMIZERS`, `NORMS`, `COMPILE_MODES`; `tests/test_apply.py` checks that every value of
every axis has its entry). What a value needs to run is declared with the value (`config/axes.py`); the code the
advice hands back for it is `config/snippet.py`'s. Apex and torchao are imported only where one of their values
is built.

Why one table: the workloads used to build their variants from names, each its own way (two `make_optimizer`s, an
`if variant ==` chain for the norms, a counterpart table, the model's own recipes), so a new value meant finding
every one of them.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ContextManager, Literal, Mapping

import torch
from torch import nn

from ..config.axes import Value
from ..config.point import Config

NormKind = Literal["layer_norm", "rms_norm"]
OptimizerFactory = Callable[[list[nn.Parameter], float], torch.optim.Optimizer]
APEX_WEIGHT_DECAY = 0.01  # torch AdamW's default decay, given to Apex's optimizers (whose default is 0)


# ---- precision ----------------------------------------------------------------------------------------------
def _to_float8(model: nn.Module) -> None:
    """fp8: torchao swaps the nn.Linear layers float8 matmuls can take (`fp8_layer_fits`) for Float8Linear (dynamic
    scaling); the rest stays under bf16 autocast. torchao is imported only for an fp8 run."""
    from torchao.float8 import convert_to_float8_training  # type: ignore[import-not-found]

    convert_to_float8_training(model, module_filter_fn=fp8_layer_fits)


def fp8_layer_fits(module: nn.Module, fqn: str) -> bool:
    """torchao's `module_filter_fn` for fp8: the nn.Linear layers float8 matmuls take (both dimensions divisible by
    16). The answer's snippet writes the same test out for the user's script (tests/test_config_workload.py)."""
    return isinstance(module, nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0


@dataclass(frozen=True)
class Precision:
    """What a precision value builds besides its autocast dtype (`axes.Value.autocast`)."""

    grad_scaler: bool = False  # fp16's loss scaling (torch.amp.GradScaler)
    tf32: bool = False  # TF32 matmuls and cuDNN convolutions
    convert: Callable[[nn.Module], None] | None = None  # what it does to the model's layers, once, before training


PRECISIONS: Mapping[str, Precision] = MappingProxyType({
    "fp32": Precision(),
    "tf32": Precision(tf32=True),
    "bf16": Precision(),
    "fp16": Precision(grad_scaler=True),
    "fp8": Precision(convert=_to_float8),
})
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: str, precision: Value) -> ContextManager[Any]:
    """The precision's autocast context (torch.autocast at its dtype); a no-op where it has none (fp32, tf32)."""
    if precision.autocast == "none":
        return nullcontext()
    return torch.autocast(device_type=device, dtype=_DTYPES[precision.autocast])


def grad_scaler(device: str, precision: Value) -> torch.amp.GradScaler | None:
    """A GradScaler where the precision scales its loss (fp16), else None."""
    return torch.amp.GradScaler(device) if PRECISIONS[precision].grad_scaler else None


def set_tf32(device: str, precision: Value) -> None:
    """TF32 on or off as the precision says, set explicitly for every precision (fp32 too): a run in the same
    process as a tf32 one must not inherit it, and cuDNN convolutions default to TF32. CUDA only."""
    if device == "cuda":
        on = PRECISIONS[precision].tf32
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def convert(model: nn.Module, precision: Value) -> bool:
    """What the precision does to the model's layers (fp8's float8 Linears); whether it changed anything."""
    change = PRECISIONS[precision].convert
    if change is None:
        return False
    change(model)
    return True


# ---- optimizer ----------------------------------------------------------------------------------------------
def _fused_adam(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    from apex.optimizers import FusedAdam

    return FusedAdam(params, lr=lr, adam_w_mode=True, weight_decay=APEX_WEIGHT_DECAY)


def _fused_lamb(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    from apex.optimizers import FusedLAMB

    return FusedLAMB(params, lr=lr, weight_decay=APEX_WEIGHT_DECAY)  # decoupled decay (adam_w_mode) is its default


def _distributed_fused_adam(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Needs a process group (workloads/parallel.py makes a world of one outside torchrun)."""
    from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam

    return DistributedFusedAdam(params, lr=lr, adam_w_mode=True, weight_decay=APEX_WEIGHT_DECAY,
                                overlap_grad_sync=True)


OPTIMIZERS: Mapping[str, OptimizerFactory] = MappingProxyType({
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr),
    "foreach": lambda params, lr: torch.optim.AdamW(params, lr=lr, foreach=True),
    "fused": lambda params, lr: torch.optim.AdamW(params, lr=lr, fused=True),
    "apex": _fused_adam,
    "lamb": _fused_lamb,
    "capturable": lambda params, lr: torch.optim.AdamW(params, lr=lr, fused=True, capturable=True),
    "apex_distributed": _distributed_fused_adam,
})


def optimizer_value(config: Config) -> str:
    """The optimizer the point builds: its own, except that the whole-step CUDA graph captures the optimizer step
    too, so its fused AdamW is the capturable one."""
    if not config.whole_step_graph:
        return config.optimizer.name
    if config.optimizer != "fused":
        raise ValueError(f"compile=graph captures the optimizer step: it needs the capturable fused AdamW "
                         f"(optimizer=fused), not optimizer={config.optimizer}")
    return "capturable"


def optimizer(config: Config, params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """The point's optimizer over `params` at `lr`."""
    return OPTIMIZERS[optimizer_value(config)](params, lr)


# ---- norms --------------------------------------------------------------------------------------------------
def _torch_norm(kind: NormKind) -> type[nn.Module]:
    return nn.LayerNorm if kind == "layer_norm" else nn.RMSNorm


def _apex_norm(kind: NormKind) -> type[nn.Module]:
    from apex.normalization import FusedLayerNorm, FusedRMSNorm

    return FusedLayerNorm if kind == "layer_norm" else FusedRMSNorm


def _apex_swap(model: nn.Module, report: Any = None) -> list[str]:
    from .norm_swap import swap_norms

    return swap_norms(model, report)


@dataclass(frozen=True)
class Norms:
    """What a norms value builds: the module of each norm kind (a model the workload writes: the Transformer's
    LayerNorms, the norm micro-benchmark's one module) and its swap in a model it did not write (the user's)."""

    module: Callable[[NormKind], type[nn.Module]]
    swap: Callable[[nn.Module, Any], list[str]] | None  # None: the model's own norms stay


NORMS: Mapping[str, Norms] = MappingProxyType({
    "torch": Norms(_torch_norm, None),
    "apex": Norms(_apex_norm, _apex_swap),
})


def norm_class(config: Config, kind: NormKind) -> type[nn.Module]:
    """The module the point's norms value builds for a norm of `kind`."""
    return NORMS[config.norms].module(kind)


# ---- compile ------------------------------------------------------------------------------------------------
# compile value -> torch.compile's mode (None: eager); the whole-step graph compiles in mode "default", and its
# workload then captures the step (transformer.py)
COMPILE_MODES: Mapping[str, str | None] = MappingProxyType({
    "none": None,
    "default": "default",
    "max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs",
    "reduce-overhead": "reduce-overhead",
    "graph": "default",
})


def compile_mode(config: Config) -> str | None:
    return COMPILE_MODES[config.compile]


def compiled(module: nn.Module, config: Config, **options: Any) -> Callable[..., Any] | None:
    """`module` through torch.compile in the point's mode (`options`: torch.compile's others), None for eager."""
    mode = compile_mode(config)
    return None if mode is None else torch.compile(module, mode=mode, **options)


__all__ = ["COMPILE_MODES", "NORMS", "OPTIMIZERS", "PRECISIONS", "NormKind", "Norms", "Precision", "autocast",
           "compile_mode", "compiled", "convert", "fp8_layer_fits", "grad_scaler", "norm_class", "optimizer",
           "optimizer_value", "set_tf32"]
