"""The optimizer experiment: a deep stack of Linear layers, timing the whole step and the optimizer alone."""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

from .base import Marker, Workload, autocast, grad_scaler, scale_tensor


def make_optimizer(variant: str, params: list[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """torch AdamW (defaults), torch AdamW fused=True, or apex FusedAdam in AdamW mode."""
    if variant == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    if variant == "adamw_fused":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    if variant == "fused_adam":
        from apex.optimizers import FusedAdam

        return FusedAdam(params, lr=lr, adam_w_mode=True, weight_decay=0.01)  # AdamW's default decay
    raise ValueError(f"unknown optimizer variant {variant!r}")


class OptimizerWorkload(Workload):
    """`layers` x (Linear(width, width) + ReLU), MSE on random targets."""

    units = "samples"

    def __init__(self, variant: str, size: Mapping[str, int], device: str, amp: str, lr: float) -> None:
        width, batch = size["width"], size["batch"]
        blocks: list[nn.Module] = []
        for _ in range(size["layers"]):
            blocks += [nn.Linear(width, width), nn.ReLU()]
        self.model = nn.Sequential(*blocks).to(device)
        self.opt = make_optimizer(variant, list(self.model.parameters()), lr)
        self.x = torch.randn(batch, width, device=device)
        self.y = torch.randn(batch, width, device=device)
        self.device, self.amp = device, amp
        self.scaler = grad_scaler(device, amp)
        self.uses_grad_scaler = self.scaler is not None
        self.units_per_step = batch
        self.params = sum(p.numel() for p in self.model.parameters())

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        self.opt.zero_grad()  # set_to_none is the default; apex FusedAdam takes no argument
        with autocast(self.device, self.amp):
            loss = nn.functional.mse_loss(self.model(self.x).float(), self.y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            clock.mark()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            clock.mark()
            self.opt.step()
        return loss, scale_tensor(self.scaler)
