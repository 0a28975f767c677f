"""The answer in the user's own terms: the code that applies a configuration in a training script, and a
preset TOML that reproduces it (`apextui --preset FILE.toml`). Both are plain text; no torch.

The code runs as measured: it calls the model as the engine called it (`calling.Calling`, which a run records) and
names the device the configuration was measured on: `torch.autocast(device_type="cuda")` pasted into a CPU script
is disabled with a warning and the step runs fp32.

Each value's lines are one entry of `LINES`, at the stage it acts in (`tests/test_config.py` checks every value has its
entry), as what it builds is one entry of `workloads/apply.py`'s, at the same stage; the code is written in the
stages' order, as the engine applies them (`workloads/stages.py`)."""

from __future__ import annotations

import json

from typing import Mapping

from .axes import SHIPPED_AXIS_NAMES, Stage
from .calling import Calling
from .point import Config

# optimizer value -> its lines
OPTIMIZER = {
    "adamw": ["optimizer = torch.optim.AdamW(model.parameters(), lr=lr)"],
    "foreach": ["optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)"],
    "fused": ["optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)"],
    "apex": ["from apex.optimizers import FusedAdam",
             "optimizer = FusedAdam(model.parameters(), lr=lr, adam_w_mode=True, weight_decay=0.01)"],
    "lamb": ["from apex.optimizers import FusedLAMB",
             "optimizer = FusedLAMB(model.parameters(), lr=lr, weight_decay=0.01)"],
    "capturable": ["optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True, capturable=True)"],
    "apex_distributed": ["from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam",
                         "# after torch.distributed.init_process_group; the model is not wrapped in DDP",
                         "optimizer = DistributedFusedAdam(model.parameters(), lr=lr, adam_w_mode=True, "
                         "weight_decay=0.01, overlap_grad_sync=True)"],
}


def _norm_swap(kernels: str) -> list[str]:
    """The norm swap `advise` measured, written out (no apextui in it): every module that computes a LayerNorm or
    RMSNorm (nn.LayerNorm, nn.RMSNorm, a model's own `...RMSNorm` class) replaced by the kernel's own, weights
    copied."""
    if kernels == "apex":
        head = ["from apex.normalization import FusedLayerNorm, FusedRMSNorm"]
        layer, rms = ("FusedLayerNorm(size, eps=eps, elementwise_affine=child.weight is not None)",
                      "FusedRMSNorm(size, eps=eps, elementwise_affine=child.weight is not None)")
    else:
        head = ["from liger_kernel.transformers import LigerLayerNorm, LigerRMSNorm"]
        layer, rms = ("LigerLayerNorm(size, eps=eps, bias=child.bias is not None)",
                      "LigerRMSNorm(size, eps=eps, in_place=False)")
    return ["# each LayerNorm / RMSNorm (nn.LayerNorm, nn.RMSNorm, your own ...RMSNorm class) -> the fused kernel's, "
            "weights copied;",
            "# an own ...RMSNorm class must compute weight * x / sqrt(mean(x^2) + eps) (not Gemma's (1 + weight))",
            *head,
            "def swap_norms(module):",
            "    for name, child in module.named_children():",
            "        weight = getattr(child, \"weight\", None)",
            "        eps = getattr(child, \"eps\", None) or getattr(child, \"variance_epsilon\", None) or 1e-6",
            "        if isinstance(child, torch.nn.LayerNorm) and weight is not None:",
            f"            size = child.normalized_shape[-1]; new = {layer}",
            "        elif (isinstance(child, torch.nn.RMSNorm) or type(child).__name__.endswith(\"RMSNorm\")) \\",
            "                and weight is not None:",
            f"            size = weight.shape[-1]; new = {rms}",
            "        else:",
            "            swap_norms(child)",
            "            continue",
            "        new.load_state_dict(child.state_dict(), strict=False)",
            "        setattr(module, name, new.to(weight.device, weight.dtype))",
            "swap_norms(model)"]


# what Liger's family patch is asked for, as `workloads.liger.flags` asks it (this module imports nothing above it)
_LIGER_FLAGS = ("rope", "rms_norm", "layer_norm", "swiglu", "geglu", "cross_entropy", "fused_linear_cross_entropy")


def _liger_family(apply_fn: str, takes: tuple[str, ...], norms: bool, flce: bool) -> list[str]:
    """Liger's own patch of a Hugging Face model family, as measured: its kernels (`norms`: norms, SwiGLU/GeGLU,
    RoPE), its fused linear cross-entropy (`flce`), each flag the family's function takes (`takes`) written out."""
    value = {f: norms for f in _LIGER_FLAGS[:5]} | {"cross_entropy": False, "fused_linear_cross_entropy": flce}
    flags = ", ".join(f"{k}={value[k]}" for k in _LIGER_FLAGS if k in takes)
    call = f"{apply_fn}(model=model, {flags})" if flags else f"{apply_fn}(model=model)"
    return [f"from liger_kernel.transformers import {apply_fn}", call]


# norms value -> its lines (Liger's for a model of a family it patches: `_liger_family`)
NORMS: dict[str, list[str]] = {"torch": [], "apex": _norm_swap("apex"), "liger": _norm_swap("liger")}
# loss value -> its lines: Liger's fused linear cross-entropy comes with its family patch (`_liger_family`); the
# family's name is the model's, so where it is not known the line says how to find it
LOSS: dict[str, list[str]] = {
    "model": [],
    "liger_flce": ["# Liger's fused linear cross-entropy: the loss from the hidden states in chunks, the logits never",
                   "# held whole (the batch keeps its `labels`); apply_liger_kernel_to_<your model's model_type>",
                   "import inspect",
                   "from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN",
                   "apply_liger = MODEL_TYPE_TO_APPLY_LIGER_FN[model.config.model_type]",
                   "flags = dict(rope=False, rms_norm=False, layer_norm=False, swiglu=False, geglu=False,",
                   "             cross_entropy=False, fused_linear_cross_entropy=True)  # the loss alone, as measured",
                   "apply_liger(model=model, **{k: v for k, v in flags.items()",
                   "                            if k in inspect.signature(apply_liger).parameters})"],
}
# compile value -> its line (the whole-step graph: `_whole_step_graph`'s lines)
COMPILE: dict[str, list[str]] = {
    "none": [],
    "default": ["compiled = torch.compile(model)"],
    "max-autotune-no-cudagraphs": ['compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")'],
    "coordinate-descent": ['compiled = torch.compile(model, options={"coordinate_descent_tuning": True})'],
    "reduce-overhead": ['compiled = torch.compile(model, mode="reduce-overhead")'],
    "graph": ["compiled = torch.compile(model)"],
}
_SDPA = ["from torch.nn.attention import SDPBackend, sdpa_kernel"]
_DTYPE = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}  # autocast's dtype, in the whole-step graph's lines
_AUTOCAST = 'torch.autocast(device_type="{device}", dtype=torch.%s)'

# What each value writes, by the stage it acts at (`axes.Stage`, the order the engine applies them in): axis -> stage ->
# value -> lines ("{device}" is the device it was measured on). A set-up stage's lines are statements; the step
# stage's are the contexts the forward runs under. What the step does besides (a batch's layout, GradScaler's step,
# CUDA graphs' step marker) is written by `snippet` itself, from what the point is.
LINES: dict[str, dict[Stage, Mapping[str, list[str]]]] = {
    "precision": {
        Stage.PROCESS: {"tf32": ["torch.backends.cuda.matmul.allow_tf32 = True",
                                 "torch.backends.cudnn.allow_tf32 = True"]},
        Stage.LAYERS: {"fp8": ["from torchao.float8 import convert_to_float8_training",
                               "# nn.Linear -> Float8Linear where float8 matmuls can take it (dimensions divisible by "
                               "16)",
                               "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: isinstance(m, "
                               "torch.nn.Linear)",
                               "                           and m.in_features % 16 == 0 and m.out_features % 16 == 0)"]},
        Stage.OPTIMIZER: {"fp16": ["from torch import GradScaler", 'scaler = GradScaler("{device}")']},
        Stage.STEP: {"bf16": [_AUTOCAST % "bfloat16"], "fp16": [_AUTOCAST % "float16"],
                     "fp8": [_AUTOCAST % "bfloat16"]},
    },
    "optimizer": {Stage.OPTIMIZER: OPTIMIZER},
    "norms": {Stage.KERNELS: NORMS},
    "compile": {Stage.COMPILE: COMPILE},
    "memory_format": {
        Stage.PROCESS: {"channels_last": ["torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest "
                                          "convolution for each shape"]},
        Stage.LAYERS: {"channels_last": ["model = model.to(memory_format=torch.channels_last)"]},
    },
    "attention": {
        Stage.PROCESS: {"flash": _SDPA, "efficient": _SDPA, "cudnn": _SDPA, "math": _SDPA},
        Stage.STEP: {"flash": ["sdpa_kernel(SDPBackend.FLASH_ATTENTION)"],
                     "efficient": ["sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)"],
                     "cudnn": ["sdpa_kernel(SDPBackend.CUDNN_ATTENTION)"], "math": ["sdpa_kernel(SDPBackend.MATH)"]},
    },
    "loss": {Stage.KERNELS: LOSS},
    "parallel": {Stage.PARALLEL: {
        "ddp": ["# under torchrun, after torch.distributed.init_process_group",
                "from torch.nn.parallel import DistributedDataParallel",
                "model = DistributedDataParallel(model)  # on CUDA: device_ids=[torch.cuda.current_device()]"],
        "fsdp2": ["# under torchrun, after torch.distributed.init_process_group",
                  "from torch.distributed.fsdp import fully_shard",
                  "for block in model.blocks:  # your model's repeated blocks first, then the whole model",
                  "    fully_shard(block)",
                  "fully_shard(model)"],
    }},
}


def register(axis_name: str, lines: Mapping[Stage, Mapping[str, list[str]]]) -> None:
    """What a `register`ed axis (`axes.register`) writes, by stage and value, as `LINES` holds the shipped axes'."""
    LINES[axis_name] = dict(lines)


def unregister(axis_name: str) -> None:
    if axis_name in SHIPPED_AXIS_NAMES:
        raise ValueError(f"axis {axis_name!r} is shipped; only a registered one can be taken away")
    LINES.pop(axis_name, None)


def _lines(config: Config, stage: Stage, device: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Every axis's lines at `stage`, in the registry's order (`skip`: axes whose lines another wrote)."""
    out: list[str] = []
    for name, value in config.items():
        if name not in skip:
            out += [line.replace("{device}", device) for line in LINES[name].get(stage, {}).get(value.name, [])]
    return out


_TO_CHANNELS_LAST = [
    "def to_channels_last(x):  # a batch's 4-D tensors (in a tuple, list or dict too) to channels_last",
    "    if torch.is_tensor(x):",
    "        return x.to(memory_format=torch.channels_last) if x.dim() == 4 else x",
    "    if isinstance(x, dict):",
    "        return {k: to_channels_last(v) for k, v in x.items()}",
    "    if isinstance(x, (list, tuple)):",
    "        items = [to_channels_last(v) for v in x]",
    "        return type(x)(*items) if hasattr(x, \"_fields\") else type(x)(items)  # a namedtuple too",
    "    return x"]


def snippet(config: Config, *, calling: Calling | None = None, device: str = "cuda",
            liger_apply: tuple[str, tuple[str, ...]] = ("", ())) -> str:
    """Python lines for a training script, stage by stage as the engine applies the point (`axes.Stage`: the process's
    settings, the model's kernels and layers, the optimizer, the compile), then the step (its contexts, GradScaler on
    `device`, the forward and loss as `calling` says). `model`, `lr`, `batch` (one batch as make_batch returns it) and
    `loss_fn` are the script's own. Without a `calling` (nothing saw the model called: a shipped workload, or a model
    whose probe never ran its forward) the step is ModelSetup's documented form, `inputs, targets = batch` and
    `loss_fn(model(inputs), targets)`: pasted, the code must run. `liger_apply`: Liger's
    `apply_liger_kernel_to_<family>` for the model's Hugging Face family and the flags it takes, where it has one (its
    norms and loss are then that patch, as measured); else the norm swap written out. Nothing of apextui's is imported:
    the code depends on what the configuration uses alone."""
    lines = ["import torch", ""]
    lines += _lines(config, Stage.PROCESS, device)
    if liger_apply[0] and (config.norms == "liger" or config.loss == "liger_flce"):
        lines += _liger_family(*liger_apply, config.norms == "liger", config.loss == "liger_flce")
        # the family patch is Liger's norms and loss, as measured: only another norms value's swap is written beside it
        lines += _lines(config, Stage.KERNELS, device, skip=("norms", "loss") if config.norms == "liger" else ("loss",))
    else:
        lines += _lines(config, Stage.KERNELS, device)
    lines += _lines(config, Stage.LAYERS, device)
    calling = calling if calling is not None else Calling()
    simple = calling.loss == "loss_fn" and calling.inputs == "one"  # one inputs tensor
    if config.channels_last and not simple:
        lines += _TO_CHANNELS_LAST
    lines += _lines(config, Stage.PARALLEL, device)
    if config.whole_step_graph:
        return _whole_step_graph(lines, config)
    lines += _lines(config, Stage.OPTIMIZER, device)
    compile_lines = _lines(config, Stage.COMPILE, device)
    lines += compile_lines
    target = "compiled" if compile_lines else "model"
    lines += ["", "# each step (batch: one batch, as your make_batch returns it)"]
    call = calling.loss_line(target)
    step = ["optimizer.zero_grad()"]
    if config.cuda_graphs:
        step.append("torch.compiler.cudagraph_mark_step_begin()")
    if config.channels_last and not simple:
        step.append("batch = to_channels_last(batch)")
    step += calling.unpack()
    if config.channels_last and simple:
        step.append("inputs = inputs.to(memory_format=torch.channels_last)")
    contexts = _lines(config, Stage.STEP, device)
    if contexts:
        step += [f"with {', '.join(contexts)}:", f"    {call}"]
    else:
        step.append(call)
    if config.precision == "fp16":
        step += ["scaler.scale(loss).backward()", "scaler.step(optimizer)", "scaler.update()"]
    else:
        step += ["loss.backward()", "optimizer.step()"]
    return "\n".join(lines + step) + "\n"


def _whole_step_graph(lines: list[str], config: Config) -> str:
    """The whole step (forward, backward, capturable fused AdamW) captured once in a CUDA graph and replayed."""
    call = "static_loss = loss_fn(compiled(static_inputs), static_targets)"
    if config.autocast != "none":
        forward = [f'    with torch.autocast(device_type="cuda", dtype={_DTYPE[config.autocast]}):', f"        {call}"]
    else:
        forward = [f"    {call}"]
    lines += [*OPTIMIZER["capturable"], *COMPILE["graph"],
              "static_inputs, static_targets = inputs.clone(), targets.clone()  # the graph's input buffers",
              "# warm up (compile) a few steps on a side stream first, as torch.cuda.graphs' docs show; then",
              "optimizer.zero_grad(set_to_none=True)",
              "graph = torch.cuda.CUDAGraph()",
              "with torch.cuda.graph(graph):",
              *forward,
              "    static_loss.backward()",
              "    optimizer.step()",
              "", "# each step",
              "static_inputs.copy_(inputs)", "static_targets.copy_(targets)", "graph.replay()"]
    return "\n".join(lines) + "\n"


def preset_toml(config: Config, model: str, steps: int = 50, description: str = "") -> str:
    """A preset file for the model workload that runs `config` (presets.parse reads it back to `config`)."""
    table = ", ".join(f"{name} = {json.dumps(value.name)}" for name, value in config.items())
    text = description or f"{config.label}: {config.description()}"
    return (f"description = {json.dumps(text)}\nworkload = \"model\"\nmodel = {json.dumps(model)}\n"
            f"config = {{ {table} }}\nsteps = {steps}\n")
