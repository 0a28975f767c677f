"""The answer in the user's own terms: the code that applies a configuration in a training script, and a
preset TOML that reproduces it (`apextui --preset FILE.toml`). Both are plain text; no torch.

The code runs as measured: it calls the model as the engine called it (`calling.Calling`, which a run records) and
names the device the configuration was measured on: `torch.autocast(device_type="cuda")` pasted into a CPU script
is disabled with a warning and the step runs fp32.

Each value's lines are one entry of the tables below (`tests/test_config.py` checks every value has its entry), as
what it builds is one entry of `workloads/apply.py`'s."""

from __future__ import annotations

import json

from .calling import Calling
from .point import Config

# precision value -> its set-up lines (its autocast is `_DTYPE`'s, at its `axes.Value.autocast`)
PRECISION: dict[str, list[str]] = {
    "fp32": [],
    "tf32": ["torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends.cudnn.allow_tf32 = True"],
    "bf16": [],
    "fp16": [],
    "fp8": ["from torchao.float8 import convert_to_float8_training",
            "# nn.Linear -> Float8Linear where float8 matmuls can take it (dimensions divisible by 16)",
            "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear)",
            "                           and m.in_features % 16 == 0 and m.out_features % 16 == 0)"],
}
# optimizer value -> its lines
OPTIMIZER = {
    "adamw": "optimizer = torch.optim.AdamW(model.parameters(), lr=lr)",
    "foreach": "optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)",
    "fused": "optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)",
    "apex": "from apex.optimizers import FusedAdam\n"
            "optimizer = FusedAdam(model.parameters(), lr=lr, adam_w_mode=True, weight_decay=0.01)",
    "lamb": "from apex.optimizers import FusedLAMB\n"
            "optimizer = FusedLAMB(model.parameters(), lr=lr, weight_decay=0.01)",
    "capturable": "optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True, capturable=True)",
    "apex_distributed": "from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam\n"
                        "# after torch.distributed.init_process_group; the model is not wrapped in DDP\n"
                        "optimizer = DistributedFusedAdam(model.parameters(), lr=lr, adam_w_mode=True, "
                        "weight_decay=0.01, overlap_grad_sync=True)",
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

# memory format value -> its set-up lines; the step moves each batch's 4-D tensors (`_MEMORY_STEP`)
MEMORY_FORMAT: dict[str, list[str]] = {
    "contiguous": [],
    "channels_last": ["torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest convolution for each shape",
                      "model = model.to(memory_format=torch.channels_last)"],
}
# attention value -> the SDPA backend the step runs under (None: torch's own choice)
ATTENTION: dict[str, str | None] = {
    "default": None,
    "flash": "SDPBackend.FLASH_ATTENTION",
    "efficient": "SDPBackend.EFFICIENT_ATTENTION",
    "cudnn": "SDPBackend.CUDNN_ATTENTION",
    "math": "SDPBackend.MATH",
}
# compile value -> its line (the whole-step graph: `_whole_step_graph`'s lines)
COMPILE: dict[str, str | None] = {
    "none": None,
    "default": "compiled = torch.compile(model)",
    "max-autotune-no-cudagraphs": 'compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")',
    "coordinate-descent": 'compiled = torch.compile(model, options={"coordinate_descent_tuning": True})',
    "reduce-overhead": 'compiled = torch.compile(model, mode="reduce-overhead")',
    "graph": "compiled = torch.compile(model)",
}
_DTYPE = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}  # autocast's dtype


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
    """Python lines for a training script: set-up (TF32, norm swap, fp8, optimizer, compile) and the step
    (autocast and GradScaler on `device`, the forward and loss as `calling` says). `model`, `lr`, `batch` (one
    batch as make_batch returns it) and `loss_fn` are the script's own. Without a `calling` (nothing saw the model
    called: a shipped workload, or a model whose probe never ran its forward) the step is ModelSetup's documented
    form, `inputs, targets = batch` and `loss_fn(model(inputs), targets)`: pasted, the code must run. `liger_apply`:
    Liger's `apply_liger_kernel_to_<family>` for the model's Hugging Face family and the flags it takes, where it has
    one (its norms and loss are then that patch, as measured); else the norm swap written out. Nothing of apextui's
    is imported: the code depends on what the configuration uses alone."""
    lines = ["import torch", ""]
    # the engine's order: the swap and the loss's patch, then fp8's layers, then the layout
    if liger_apply[0] and (config.norms == "liger" or config.loss == "liger_flce"):
        lines += _liger_family(*liger_apply, config.norms == "liger", config.loss == "liger_flce")
        lines += [] if config.norms == "liger" else NORMS[config.norms]
    else:
        lines += NORMS[config.norms] + LOSS[config.loss]
    lines += PRECISION[config.precision] + MEMORY_FORMAT[config.memory_format]
    calling = calling if calling is not None else Calling()
    simple = calling.loss == "loss_fn" and calling.inputs == "one"  # one inputs tensor
    if config.channels_last and not simple:
        lines += _TO_CHANNELS_LAST
    backend = ATTENTION[config.attention]
    if backend is not None:
        lines.append("from torch.nn.attention import SDPBackend, sdpa_kernel")
    if config.whole_step_graph:
        return _whole_step_graph(lines, config)
    lines += OPTIMIZER[config.optimizer].splitlines()
    if config.precision == "fp16":
        lines.append(f'scaler = torch.amp.GradScaler("{device}")')
    target = "model"
    if COMPILE[config.compile] is not None:
        lines.append(str(COMPILE[config.compile]))
        target = "compiled"
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
    contexts = [f'torch.autocast(device_type="{device}", dtype={_DTYPE[config.autocast]})'] \
        if config.autocast != "none" else []
    contexts += [f"sdpa_kernel({backend})"] if backend is not None else []
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
    lines += [OPTIMIZER["capturable"], str(COMPILE["graph"]),
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
