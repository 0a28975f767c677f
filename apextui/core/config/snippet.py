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
# the swap `advise` measured, as it measured it: every module that computes a LayerNorm or RMSNorm, found by what
# it computes (a model's own RMSNorm class too, which a test of `type(m) is nn.RMSNorm` would miss), weights copied
NORM_SWAP = ["# each module that computes a LayerNorm / RMSNorm Apex can take (nn.LayerNorm, nn.RMSNorm, the model's",
             "# own RMSNorm class) -> Apex's FusedLayerNorm / FusedRMSNorm, weights copied: the swap apextui measured",
             "from apextui import swap_norms", "swap_norms(model)"]
# norms value -> its lines
NORMS: dict[str, list[str]] = {
    "torch": [], "apex": NORM_SWAP,
    "liger": ["# Liger-Kernel, as apextui measured it: for a Hugging Face model family Liger patches, its",
              "# apply_liger_kernel_to_<family>(model=model) (RMSNorm, SwiGLU, RoPE); elsewhere every module that",
              "# computes a LayerNorm / RMSNorm -> LigerLayerNorm / LigerRMSNorm, weights copied",
              "from apextui import swap_norms", 'swap_norms(model, kernels="liger")'],
}
# loss value -> its lines
LOSS: dict[str, list[str]] = {
    "model": [],
    "liger_flce": ["# Liger's fused linear cross-entropy in the model's forward (its family's Liger patch): the loss",
                   "# from the hidden states in chunks, the logits never held whole (the batch keeps its `labels`)",
                   "from apextui import fused_linear_cross_entropy", "fused_linear_cross_entropy(model)"],
}
# memory format value -> its set-up lines; the step moves each batch's 4-D tensors (`_MEMORY_STEP`)
MEMORY_FORMAT: dict[str, list[str]] = {
    "contiguous": [],
    "channels_last": ["torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest convolution for each shape",
                      "model = model.to(memory_format=torch.channels_last)",
                      "from apextui import channels_last  # a batch's 4-D tensors to channels_last, each step"],
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


def snippet(config: Config, *, calling: Calling | None = None, device: str = "cuda") -> str:
    """Python lines for a training script: set-up (TF32, norm swap, fp8, optimizer, compile) and the step
    (autocast and GradScaler on `device`, the forward and loss as `calling` says). `model`, `lr`, `batch` (one
    batch as make_batch returns it) and `loss_fn` are the script's own. Without a `calling` (none was recorded:
    only fp32 ran, or a shipped workload) the step is ModelSetup's documented form, `loss_fn(model(inputs),
    targets)`."""
    lines = ["import torch", ""]
    # the engine's order: the swap and the loss's patch, then fp8's layers, then the layout
    lines += NORMS[config.norms] + LOSS[config.loss] + PRECISION[config.precision] + MEMORY_FORMAT[config.memory_format]
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
    lines += ["", "# each step" + (" (batch: one batch, as your make_batch returns it)" if calling else "")]
    call = calling.loss_line(target) if calling is not None else f"loss = loss_fn({target}(inputs), targets)"
    step = ["optimizer.zero_grad()"]
    if config.cuda_graphs:
        step.append("torch.compiler.cudagraph_mark_step_begin()")
    if config.channels_last:
        step.append("batch = channels_last(batch)" if calling is not None else "inputs = channels_last(inputs)")
    step += calling.unpack() if calling is not None else []
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
