"""The normalisation experiment: forward + backward of LayerNorm / RMSNorm, torch against Apex."""

from __future__ import annotations

import copy
from typing import Mapping

import torch
from torch import nn

from . import apply
from .base import Workload
from ..measure.details import CorrectnessCheck
from ..measure.marker import Marker
from .spec import WorkloadSpec, NormKind
from .stages import Build
from ..config.axes import Stage
from ..config.point import Config

TOLERANCE_FP32 = 1e-3
TORCH_NORMS: dict[NormKind, type[nn.Module]] = {"layer_norm": nn.LayerNorm, "rms_norm": nn.RMSNorm}
# the check's reference: torch's module, named as the preset that times it
TORCH_NAME: dict[type[nn.Module], str] = {nn.LayerNorm: "layernorm", nn.RMSNorm: "rmsnorm"}


class NormWorkload(Workload):
    """Input (batch, seq, hidden) with random affine weights; a step is forward + backward. The module is torch's norm
    of the workload's kind (`WorkloadSpec.norm`), swapped by the kernels stage where its point's norms value says so;
    one that is not torch's own is checked against torch's, on the same input and weights."""

    units = "samples"

    def __init__(self, config: Config, spec: WorkloadSpec, size: Mapping[str, int], device: str, seed: int) -> None:
        batch, seq, hidden = size["batch"], size["seq"], size["hidden"]
        g = torch.Generator().manual_seed(seed)
        self.config = config
        build = Build(config, device).apply(Stage.PROCESS)
        if spec.norm is None:
            raise ValueError(f"the {spec.name} workload times no norm")
        torch_norm = TORCH_NORMS[spec.norm](hidden).to(device)
        with torch.no_grad():
            for p in torch_norm.parameters():
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
        reference = copy.deepcopy(torch_norm)
        holder = nn.Sequential(torch_norm)  # the kernels stage swaps a model's children: the norm is the holder's
        build.through(Stage.COMPILE, model=holder, params=list(holder.parameters()))  # no optimizer step: unused
        self.norm = holder[0]
        self.x = torch.randn(batch, seq, hidden, generator=g).to(device).requires_grad_(True)
        self.grad_out = torch.randn(batch, seq, hidden, generator=g).to(device)
        self.device = device
        self.units_per_step = batch
        self.params = sum(p.numel() for p in self.norm.parameters())
        self.work = spec.work(size, None, config)
        self._grad_out: dict[torch.dtype, torch.Tensor] = {self.grad_out.dtype: self.grad_out}
        if build.swapped:
            self.check = self._compare(reference, TORCH_NAME[type(reference)])

    def _forward_backward(self, module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        self.x.grad = None
        with apply.autocast(self.device, self.config.precision):
            out = module(self.x)
        out.backward(self.grad_out.to(out.dtype))
        assert self.x.grad is not None  # x requires grad: backward() just set it
        grad = self.x.grad.detach().clone()
        self.x.grad = None
        return out.detach(), grad

    def _compare(self, reference: nn.Module, ref_name: str) -> CorrectnessCheck:
        """Max absolute error of this norm against its torch counterpart, given this norm's weights, on the same
        input."""
        with torch.no_grad():
            # strict=False: an RMSNorm reference has a weight and no bias, LayerNorm both (the check then differs)
            for p_ref, p in zip(reference.parameters(), self.norm.parameters(), strict=False):
                p_ref.copy_(p)
        out, grad = self._forward_backward(self.norm)
        out_ref, grad_ref = self._forward_backward(reference)
        err_out = (out.float() - out_ref.float()).abs().max().item()
        err_grad = (grad.float() - grad_ref.float()).abs().max().item()
        tol = TOLERANCE_FP32 if self.config.autocast == "none" else 5e-2
        err = max(err_out, err_grad)
        return CorrectnessCheck(against=ref_name, max_abs_err=err, max_abs_err_output=err_out,
                                max_abs_err_grad=err_grad, tolerance=tol, passed=bool(err < tol))

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        self.x.grad = None
        if self.config.autocast == "none":  # no autocast context at all: the user's fp32 loop has none
            out = self.norm(self.x)
        else:
            with apply.autocast(self.device, self.config.precision):
                out = self.norm(self.x)
        grad_out = self._grad_out.get(out.dtype)
        if grad_out is None:  # under autocast: cast once, not every step
            grad_out = self._grad_out[out.dtype] = self.grad_out.to(out.dtype)
        out.backward(grad_out)
        return None, None
