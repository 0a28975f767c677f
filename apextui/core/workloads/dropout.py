"""Dropout of the user's model, for the loss-parity check: found, and switched off for the check alone.

Eager configurations draw the same dropout masks as fp32 when the random stream is seeded identically before each; a
compiled graph draws its own random numbers, so its check runs with dropout switched off: every `nn.Dropout*`
module's `p` and every float attribute whose name says dropout (`dropout`, `attn_dropout`, `attention_dropout`,
`dropout_p`, as HF attention modules and `nn.MultiheadAttention` keep them) set to 0, then put back. The
measured steps keep the user's dropout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import torch
from torch import nn

from ..measure.details import DropoutHandling

__all__ = ["DropoutHandling", "disabled", "has_dropout", "same_stream"]


def _attrs(module: nn.Module) -> list[str]:
    """The module's own float attributes that hold a dropout probability above 0."""
    names = []
    for name, value in vars(module).items():
        if "dropout" in name.lower() and isinstance(value, float) and 0.0 < value < 1.0:
            names.append(name)
    if isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
        names.append("p")
    return names


def has_dropout(model: nn.Module) -> bool:
    return any(_attrs(m) for m in model.modules())


@contextmanager
def disabled(model: nn.Module) -> Iterator[None]:
    """Every dropout probability of `model` at 0 inside the block, back to the user's after it."""
    saved = [(m, name, getattr(m, name)) for m in model.modules() for name in _attrs(m)]
    try:
        for m, name, _ in saved:
            setattr(m, name, 0.0)
        yield
    finally:
        for m, name, value in saved:
            setattr(m, name, value)


@contextmanager
def same_stream(seed: int, device: str) -> Iterator[None]:
    """The random stream (torch's CPU generator and, on CUDA, the current device's) seeded with `seed` inside
    the block, and put back as it was after it: the reference and the configuration draw the same numbers, and the
    measured steps the ones they would have drawn without the check."""
    devices = [torch.cuda.current_device()] if device == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)  # seeds the CUDA generators too
        yield
