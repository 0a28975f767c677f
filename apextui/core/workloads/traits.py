"""What a model has that a configuration value needs to do anything (`axes.Value.applies`): a 2-D convolution
(a memory format), a call of `scaled_dot_product_attention` (an attention backend), a norm the finder can swap
(Apex's or Liger's norms), a Hugging Face causal LM that computes its own loss (Liger's fused linear cross-entropy).

Convolutions and norms are read off the built model. An SDPA call is seen only by running the model: `count_sdpa`
counts the calls over one forward, through a TorchFunctionMode (every call of the builtin, however the model
imported it) and through `torch.nn.functional`'s own name, which the Python functions of torch that call SDPA inside
(nn.MultiheadAttention's `multi_head_attention_forward`) look up at call time: a TorchFunctionMode does not see
calls made inside a function it already intercepted. `model_presets.probe` runs that forward once per model, on its
CPU-size build; `ModelWorkload` counts its own eager fp32 check steps the same way, for the runs no probe preceded.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from ..config.calling import LossForm


class SdpaCount:
    """The calls of scaled_dot_product_attention seen so far (`count_sdpa`)."""

    def __init__(self) -> None:
        self.calls = 0


class _Mode(TorchFunctionMode):
    def __init__(self, count: SdpaCount, original: Any) -> None:
        super().__init__()
        self.count, self.original, self.inside = count, original, False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is self.original and not self.inside:
            self.count.calls += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def count_sdpa() -> Iterator[SdpaCount]:
    """Counts the calls of F.scaled_dot_product_attention made inside the block (its `calls`)."""
    count = SdpaCount()
    original = F.scaled_dot_product_attention
    mode = _Mode(count, original)

    def counted(*args: Any, **kwargs: Any) -> Any:
        count.calls += 1
        mode.inside = True  # the builtin below reaches the mode too: counted once
        try:
            return original(*args, **kwargs)
        finally:
            mode.inside = False

    F.scaled_dot_product_attention = counted
    try:
        with mode:
            yield count
    finally:
        F.scaled_dot_product_attention = original


def count_convs(model: nn.Module) -> int:
    """The model's 2-D convolutions (nn.Conv2d and its subclasses)."""
    return sum(1 for m in model.modules() if isinstance(m, nn.Conv2d))


def causal_lm_loss(model: nn.Module, loss: LossForm | None) -> bool:
    """A Hugging Face causal LM (a `...ForCausalLM` with a `config.model_type`) whose loss the model computes
    itself (no loss_fn: its output's `loss`, from the batch's `labels`): the loss Liger's fused linear cross-entropy
    replaces."""
    from .liger import model_type

    return type(model).__name__.endswith("ForCausalLM") and bool(model_type(model)) and loss in ("attribute", "key")


def traits(model: nn.Module, *, norms: int, sdpa_calls: int | None, loss: LossForm | None) -> frozenset[str]:
    """The model's traits (`axes.Trait`) from what was found: `sdpa_calls` None where no forward was counted (then
    "sdpa" is assumed: an attention backend is not ruled out unseen)."""
    found = {"conv2d": count_convs(model) > 0, "sdpa": sdpa_calls is None or sdpa_calls > 0, "norms": norms > 0,
             "causal_lm_loss": causal_lm_loss(model, loss)}
    return frozenset(name for name, has in found.items() if has)


__all__ = ["SdpaCount", "causal_lm_loss", "count_convs", "count_sdpa", "traits"]
