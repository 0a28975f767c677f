"""What each value of the configuration axes builds: the one table every workload builds its point from.

The optimizer and norm micro-benchmarks, the shipped Transformer and the user's model all run a point
(`config.point.Config`); what its precision, optimizer, norms, compile, memory format, attention and loss values make
of a model is here, one entry a value (`PRECISIONS`, `OPTIMIZERS`, `NORMS`, `COMPILE_MODES`, `MEMORY_FORMATS`,
`ATTENTION`, `LOSSES`; `tests/test_apply.py` checks that every value of every axis has its entry). What a value
needs to run is declared with the value (`config/axes.py`); the code the advice hands back for it is
`config/snippet.py`'s. Apex, torchao and Liger are imported only where one of their
values is built.

When each value acts is declared beside what it builds (`ACTS`: its stages, `axes.Stage`), and `stages.Build` applies
a point stage by stage, for every workload. What a value changes in the process rather than in the model (the process
stage) is set for every run, whatever its value, so that a run never inherits it from the run before it in a reused
worker (`run.reusable`): TF32 (`set_tf32`), cuDNN's benchmark mode (`set_cudnn_benchmark`), and Liger's rebinding of
names in transformers' modules, undone first (`undo_patches`); coordinate-descent tuning is a `torch.compile` option
of that compile alone, never inductor's global config.

Why one table: the workloads used to build from names, each its own way (two `make_optimizer`s, an `if name ==`
chain for the norms, a counterpart table, the model's own recipes), so a new value meant finding
every one of them.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping

import torch
from torch import nn
from torch import GradScaler

from ..config.axes import SHIPPED_AXIS_NAMES, Stage, Value
from ..errors import ApextuiError
from ..config.point import Config

if TYPE_CHECKING:
    from .stages import Build

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

    grad_scaler: bool = False  # fp16's loss scaling (torch's GradScaler)
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
    return autocast_at(device, autocast_dtype(precision))


def autocast_dtype(precision: Value) -> torch.dtype | None:
    """The precision's autocast dtype; None where it has none (fp32, tf32)."""
    return None if precision.autocast == "none" else _DTYPES[precision.autocast]


def autocast_at(device: str, dtype: torch.dtype | None) -> ContextManager[Any]:
    """torch.autocast at `dtype` (None: no autocast). Plain torch values only, so that it can run inside a forward
    torch.compile traces: a `Value` there (a `str` subclass) made torch 2.11's dynamo fail every compiled step
    ("UserDefinedObjectVariable(Value) is not a constant")."""
    return nullcontext() if dtype is None else torch.autocast(device_type=device, dtype=dtype)


def grad_scaler(device: str, precision: Value) -> GradScaler | None:
    """A GradScaler where the precision scales its loss (fp16), else None."""
    return GradScaler(device) if PRECISIONS[precision].grad_scaler else None


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


# ---- norms ----------------------------------------------------------------------------------------------------
def _apex_swap(model: nn.Module, report: Any = None) -> list[str]:
    from .norm_swap import swap_norms

    return swap_norms(model, report)


def _liger_swap(model: nn.Module, report: Any = None) -> list[str]:
    from .norm_swap import swap_norms

    return swap_norms(model, report, kernels="liger")


@dataclass(frozen=True)
class Norms:
    """What a norms value builds: each LayerNorm / RMSNorm of the model (the workload's own, or the user's, found by
    what it computes: `norm_swap`) swapped for the kernel's, weights copied; None: the model's own norms stay."""

    swap: Callable[[nn.Module, Any], list[str]] | None


NORMS: Mapping[str, Norms] = MappingProxyType({
    "torch": Norms(None),
    "apex": Norms(_apex_swap),
    "liger": Norms(_liger_swap),
})


# ---- compile ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compile:
    """What a compile value hands torch.compile: its mode (None: eager), or inductor options instead (torch.compile
    takes one or the other): options apply to that compile alone, so a later run in the same process compiles
    without them (inductor's global `config` would carry them over)."""

    mode: str | None
    options: Mapping[str, Any] = field(default_factory=dict)


# compile value -> what torch.compile is given; the whole-step graph compiles in mode "default", and its workload then
# captures the step (transformer.py)
COMPILE_MODES: Mapping[str, Compile] = MappingProxyType({
    "none": Compile(None),
    "default": Compile("default"),
    "max-autotune-no-cudagraphs": Compile("max-autotune-no-cudagraphs"),
    "coordinate-descent": Compile("default", {"coordinate_descent_tuning": True}),
    "reduce-overhead": Compile("reduce-overhead"),
    "graph": Compile("default"),
})


def compile_mode(config: Config) -> str | None:
    """torch.compile's mode for the point (None: eager)."""
    return COMPILE_MODES[config.compile].mode


def compiled(module: nn.Module, config: Config, **options: Any) -> Callable[..., Any] | None:
    """`module` through torch.compile in the point's mode, or with its inductor options (`options`: torch.compile's
    other arguments), None for eager."""
    spec = COMPILE_MODES[config.compile]
    if spec.mode is None:
        return None
    if spec.options:
        return torch.compile(module, options=dict(spec.options), **options)
    return torch.compile(module, mode=spec.mode, **options)


# ---- memory format ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryFormat:
    """A memory format value: the layout of the model's 4-D weights and of the batches' 4-D tensors, and whether
    cuDNN benchmarks its convolution algorithms (the tuning guide pairs the two)."""

    format: torch.memory_format
    cudnn_benchmark: bool


MEMORY_FORMATS: Mapping[str, MemoryFormat] = MappingProxyType({
    "contiguous": MemoryFormat(torch.contiguous_format, False),
    "channels_last": MemoryFormat(torch.channels_last, True),
})


def set_cudnn_benchmark(value: Value) -> None:
    """cuDNN's benchmark mode as the memory format says, set for every value: a run in the same process as a
    channels_last one must not inherit it."""
    torch.backends.cudnn.benchmark = MEMORY_FORMATS[value].cudnn_benchmark


def set_layout(model: nn.Module, value: Value) -> None:
    """The model's 4-D weights in the value's layout (contiguous: left as built)."""
    spec = MEMORY_FORMATS[value]
    if spec.format is not torch.contiguous_format:
        model.to(memory_format=spec.format)  # type: ignore[call-overload]  # a real overload torch's stubs lack


def channels_last(batch: Any) -> Any:
    """`batch` with each 4-D tensor in it (tensors, and tuples, lists and dicts of them, nested) in channels_last
    layout, the rest as it was. Public as `apextui.channels_last`: the answer's code moves each batch with it, as
    apextui's step did."""
    if isinstance(batch, torch.Tensor):
        return batch.contiguous(memory_format=torch.channels_last) if batch.dim() == 4 else batch
    if isinstance(batch, dict):  # a dict subclass comes back a plain dict: `model(**batch)` reads it the same
        return {k: channels_last(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(channels_last(v) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(channels_last(v) for v in batch)
    return batch


def channels_last_batches(value: Value) -> bool:
    """Whether the step feeds the model its batches in channels_last layout (`channels_last`) under the memory
    format `value`: resolved before the step runs, never inside a traced forward (`autocast_at` says why)."""
    return MEMORY_FORMATS[value].format is torch.channels_last


# ---- attention ----------------------------------------------------------------------------------------------
def _backends() -> Mapping[str, Any]:
    from torch.nn.attention import SDPBackend

    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


# attention value -> the SDPA backend its forward is restricted to (None: torch's own choice)
ATTENTION: Mapping[str, str | None] = MappingProxyType({
    "default": None, "flash": "flash", "efficient": "efficient", "cudnn": "cudnn", "math": "math"})
NO_KERNEL = ("No available kernel", "No viable backend")  # torch's words when the restricted backend cannot take a call


def sdpa_backend(backend: str | None) -> ContextManager[Any]:
    """The forward's SDPA backend: `torch.nn.attention.sdpa_kernel` restricted to the named backend (ATTENTION's
    values; strict: a call it cannot take fails, with torch's reasons: `attention_failure`), a no-op for None,
    torch's own choice. It takes the name, not the axis `Value`, for a traced forward (`autocast_at` says why)."""
    if backend is None:
        return nullcontext()
    from torch.nn.attention import sdpa_kernel

    return sdpa_kernel(_backends()[backend])


def attention_failure(exc: BaseException, value: Value, again: Callable[[], Any]) -> str | None:
    """Where `exc` is torch finding no kernel of the attention value's backend for the model's SDPA call: one line
    saying so, with torch's reasons (its warnings, caught by running `again`, the failing forward, once more); else
    None (some other error)."""
    if ATTENTION[value] is None or not any(words in str(exc) for words in NO_KERNEL):
        return None
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            again()
        except Exception:  # noqa: BLE001 - the same failure: what it warned is what we want
            pass
    said = "; ".join(_reasons(str(w.message) for w in caught)[:3]) or str(exc).splitlines()[0]
    return (f"attention={value.name}: torch's {value.name} SDPA kernel cannot take this model's attention call here "
            f"({said}); pick another attention backend (attention=default lets torch choose)")


def _reasons(messages: Any) -> list[str]:
    """torch's warnings of why a kernel was not used, each once, a heading ("Flash attention kernel not used
    because:") joined to the reason after it."""
    out: list[str] = []
    for text in messages:
        line = text.split("(Triggered internally")[0].strip()
        if not line:
            continue
        if out and out[-1].endswith(":"):
            out[-1] = f"{out[-1]} {line}"
        elif line not in out:
            out.append(line)
    return out


# ---- loss ---------------------------------------------------------------------------------------------------
def _liger_flce(model: nn.Module) -> None:
    from .liger import fused_linear_cross_entropy

    fused_linear_cross_entropy(model)


# loss value -> what it does to the model, in place (None: the model's own loss)
LOSSES: Mapping[str, Callable[[nn.Module], None] | None] = MappingProxyType({
    "model": None,
    "liger_flce": _liger_flce,
})


def patch_loss(model: nn.Module, value: Value) -> bool:
    """What the loss value does to the model (Liger's fused linear cross-entropy); whether it changed anything."""
    change = LOSSES[value]
    if change is None:
        return False
    change(model)
    return True


# ---- when each axis acts -------------------------------------------------------------------------------------
# An axis's value acts on a run at the stages its entry names (`Stage`: set-up of the process, the model's kernels,
# its layers, the optimizer, the step, the compile); `stages.Build` calls them stage by stage, in the registry's axis
# order within a stage. An action reads what the stages before built off the `Build` and leaves what it builds there.
Action = Callable[[Value, "Build"], None]


def _swap(value: Value, build: Build) -> None:
    swap_in = NORMS[value].swap
    if swap_in is None:
        return
    from .norm_swap import find_norms

    report, _ = find_norms(build.target())
    if report.swappable == 0:
        raise NotApplicable(f"{report.unavailable_reason()}")
    build.norm_report = report
    build.swapped = swap_in(build.target(), report)


def _optimizer(value: Value, build: Build) -> None:
    build.optimizer = optimizer(build.config, build.params, build.lr)


def _scaler(value: Value, build: Build) -> None:
    build.scaler = grad_scaler(build.device, value)


def _convert(value: Value, build: Build) -> None:
    build.converted = convert(build.target(), value) or build.converted


def _patch_loss(value: Value, build: Build) -> None:
    build.loss_patched = patch_loss(build.target(), value) or build.loss_patched


def _compile(value: Value, build: Build) -> None:
    if COMPILE_MODES[value].mode is None:
        return
    if build.loss_module is None:
        raise RuntimeError(f"compile={value.name}: the compile stage was handed no loss_module")
    build.compiled = compiled(build.loss_module, build.config, **build.compile_options)


def _tf32(value: Value, build: Build) -> None:
    set_tf32(build.device, value)


def _cudnn_benchmark(value: Value, build: Build) -> None:
    set_cudnn_benchmark(value)


def _layout(value: Value, build: Build) -> None:
    set_layout(build.target(), value)


def _wrap(value: Value, build: Build) -> None:
    """The model wrapped for its way of training on several ranks (`parallel.kind`), where its workload trains
    data-parallel (`Build.data_parallel`); a point that replays CUDA graphs is never wrapped."""
    from . import parallel

    how = parallel.kind(build.config) if build.data_parallel else None
    if how is None:
        return
    if build.config.cuda_graphs:
        raise ValueError(f"{build.config.label} captures CUDA graphs; apextui does not run it data-parallel")
    build.model = parallel.wrap(build.target(), how, build.device, shards=build.shards)


def _autocast_step(value: Value, build: Build) -> None:
    build.step.autocast_dtype = autocast_dtype(value)


def _layout_step(value: Value, build: Build) -> None:
    build.step.channels_last = channels_last_batches(value)


def _attention_step(value: Value, build: Build) -> None:
    build.step.sdpa_backend = ATTENTION[value]


ACTS: dict[str, Mapping[Stage, Action]] = {
    "precision": {Stage.PROCESS: _tf32, Stage.LAYERS: _convert,
                  Stage.OPTIMIZER: _scaler, Stage.STEP: _autocast_step},
    "optimizer": {Stage.OPTIMIZER: _optimizer},
    "norms": {Stage.KERNELS: _swap},
    "compile": {Stage.COMPILE: _compile},
    "memory_format": {Stage.PROCESS: _cudnn_benchmark, Stage.LAYERS: _layout, Stage.STEP: _layout_step},
    "attention": {Stage.STEP: _attention_step},
    "loss": {Stage.KERNELS: _patch_loss},
    "parallel": {Stage.PARALLEL: _wrap},
}


def register(axis_name: str, acts: Mapping[Stage, Action]) -> None:
    """The stages a `register`ed axis (`config.axes.register`) acts at, and what it does at each."""
    ACTS[axis_name] = MappingProxyType(dict(acts))


def unregister(axis_name: str) -> None:
    if axis_name in SHIPPED_AXIS_NAMES:
        raise ValueError(f"axis {axis_name!r} is shipped; only a registered one can be taken away")
    ACTS.pop(axis_name, None)


class NotApplicable(ApextuiError, ValueError):
    """A value this model cannot take (no norm the swap can take; an attention backend that cannot take its SDPA call):
    not a fault of the user's code, and said without a class name (`failure.describe_failure`)."""


def undo_patches() -> None:
    """What an earlier run in this process changed outside its own model, put back (Liger's rebinding of names in
    transformers' modules): called before a run builds anything. A no-op where nothing was patched."""
    import sys

    if "apextui.core.workloads.liger" in sys.modules:
        from .liger import undo

        undo()


__all__ = ["ACTS", "ATTENTION", "Action", "COMPILE_MODES", "LOSSES", "MEMORY_FORMATS", "NORMS", "NotApplicable",
           "OPTIMIZERS", "PRECISIONS", "Compile", "MemoryFormat", "Norms", "Precision", "attention_failure", "autocast",
           "autocast_at", "autocast_dtype", "channels_last", "channels_last_batches", "compile_mode", "compiled",
           "convert", "fp8_layer_fits", "grad_scaler", "optimizer", "optimizer_value", "patch_loss", "register",
           "sdpa_backend", "set_cudnn_benchmark", "set_layout", "set_tf32", "undo_patches", "unregister"]
