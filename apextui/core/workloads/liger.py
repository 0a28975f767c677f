"""Liger-Kernel's patch for a Hugging Face model family it knows, applied to one built model, and undone for the
next run in the same process.

Liger patches a family by `apply_liger_kernel_to_<family>(..., model=model)` (its table
`MODEL_TYPE_TO_APPLY_LIGER_FN`, keyed by `model.config.model_type`, as HF Trainer's `use_liger_kernel` uses it): the
model's own modules get Liger's forward in place (RMSNorm, SwiGLU MLP), and with `fused_linear_cross_entropy` its
forward computes the loss from the hidden states in chunks. It also rebinds names in transformers' modules
(`modeling_llama.apply_rotary_pos_emb`, `modeling_llama.LlamaRMSNorm`): the rotary embedding is read from there at
every call, so a later run of the same model in the same process (the search's reused worker, `run.reusable`) would
run Liger's RoPE while it measures torch's. `patch` records what it changed in transformers' modules and `undo`
puts it back; `ModelWorkload` calls `undo` before it builds anything.

Liger is imported only here, and only for a run that uses it; `patched` is the one question the norms value and the
loss value ask ("does Liger have a patch for this model?").
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

from torch import nn

MONKEY_PATCH = "liger_kernel.transformers.monkey_patch"
_changed: list[tuple[Any, str, Any, bool]] = []  # (module, name, old value, whether it had one), oldest first


def model_type(model: nn.Module) -> str:
    """The Hugging Face model type of `model` ("llama"), "" for a model that is not a transformers model."""
    config = getattr(model, "config", None)
    value = getattr(config, "model_type", "") if config is not None else ""
    return value if isinstance(value, str) else ""


def family_patch(model: nn.Module) -> Callable[..., None] | None:
    """Liger's `apply_liger_kernel_to_<family>` for this model's type, None where Liger has none (or the model is not
    a transformers model). Imports Liger."""
    return _family_fn(model_type(model))


def _family_fn(kind: str) -> Callable[..., None] | None:
    """Liger's table entry for a model type (`MODEL_TYPE_TO_APPLY_LIGER_FN`), None where it has none. Imports Liger
    (ImportError where it is not installed)."""
    if not kind:
        return None
    import importlib

    fn = getattr(importlib.import_module(MONKEY_PATCH), "MODEL_TYPE_TO_APPLY_LIGER_FN", {}).get(kind)
    return fn if callable(fn) else None


FLAGS = ("rope", "rms_norm", "layer_norm", "swiglu", "geglu", "cross_entropy", "fused_linear_cross_entropy")


def flags(norms: bool, fused_linear_cross_entropy: bool) -> dict[str, bool]:
    """What `patch` asks of a family's function: its kernels (`norms`: norms, SwiGLU/GeGLU, RoPE) and its loss."""
    return {"rope": norms, "rms_norm": norms, "layer_norm": norms, "swiglu": norms, "geglu": norms,
            "cross_entropy": False, "fused_linear_cross_entropy": fused_linear_cross_entropy}


def apply_call(kind: str) -> tuple[str, tuple[str, ...]]:
    """Liger's `apply_liger_kernel_to_<family>` for a Hugging Face model type ("llama"): its name and which of `FLAGS`
    it takes (families differ: Gemma's takes no `swiglu`), ("", ()) where Liger has none or is not installed here
    (the answer's code then writes the norm swap out)."""
    try:
        fn = _family_fn(kind)
    except Exception:  # noqa: BLE001 - not installed, or broken: the swap written out does without it
        return "", ()
    name = getattr(fn, "__name__", "") if fn is not None else ""
    if not isinstance(name, str) or not name.isidentifier():
        return "", ()
    params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    return name, tuple(f for f in FLAGS if f in params)


def _snapshot() -> dict[str, dict[str, Any]]:
    """The attributes of every loaded transformers module (what a family patch may rebind)."""
    return {name: dict(vars(m)) for name, m in list(sys.modules.items())
            if m is not None and name.startswith("transformers.")}


def patch(model: nn.Module, *, norms: bool, fused_linear_cross_entropy: bool) -> bool:
    """Liger's family patch on `model` in place: its norms, SwiGLU MLP and RoPE (`norms`), its fused linear
    cross-entropy (`fused_linear_cross_entropy`), nothing else (cross_entropy off: the fused one replaces it). False
    where Liger has no patch for this model. What it rebinds in transformers' modules is undone by `undo`."""
    fn = family_patch(model)
    if fn is None:
        return False
    asked = flags(norms, fused_linear_cross_entropy)
    params = inspect.signature(fn).parameters
    before = _snapshot()
    fn(model=model, **{k: v for k, v in asked.items() if k in params})
    for name, old in before.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        now = vars(module)
        for key, value in list(now.items()):
            if key not in old or old[key] is not value:
                _changed.append((module, key, old.get(key), key in old))
    return True


def undo() -> None:
    """Put back what `patch` rebound in transformers' modules in this process, newest first."""
    while _changed:
        module, key, value, had = _changed.pop()
        if had:
            setattr(module, key, value)
        else:
            vars(module).pop(key, None)


def fused_linear_cross_entropy(model: nn.Module) -> None:
    """Liger's fused linear cross-entropy in a Hugging Face causal LM of a family Liger patches: its forward computes
    the loss from the hidden states in chunks, the logits never held whole (the batch must keep its `labels`).
    Public as `apextui.fused_linear_cross_entropy`: the answer's code calls it, as `advise` did when it measured.
    ValueError where Liger has no patch for the model."""
    if not patch(model, norms=False, fused_linear_cross_entropy=True):
        kind = model_type(model)
        raise ValueError(f"Liger-Kernel has no patch for {f'model type {kind!r}' if kind else type(model).__name__} "
                         "(its fused linear cross-entropy comes with the patch of a Hugging Face model family it "
                         "knows: Llama, Mistral, Qwen, Gemma, ...)")
