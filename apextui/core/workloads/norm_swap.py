"""Every norm of the user's model, found by what it computes, and its swap for Apex's fused one or Liger's.

Models define their own norms (HF `LlamaRMSNorm`, `T5LayerNorm`, the `RMSNorm` class nearly every LLM codebase
writes), so a norm is recognised by structure and behaviour, not by class: a module with a 1-D `weight` over the
last dimension (and an optional 1-D bias of the same size), or a bare `normalized_shape` of one dimension, and an
epsilon attribute (`EPS_ATTRS`); its output on a random fp32 input of shape (2, 3, hidden), with random weights
(so that a weight of ones cannot hide a wrong formula), must match torch's `layer_norm` or `rms_norm` with that
weight, bias and eps within `PROBE_RTOL` / `PROBE_ATOL`. The probe runs on a copy of the module, so the model's
weights are never touched. A look-alike that computes something else (a weight of `1 + w`, another scale) is
left alone, and the record says why.

Both kernels' norms are swapped by the same finder (`swap_norms(model, kernels=...)`): Apex's FusedLayerNorm /
FusedRMSNorm, or Liger-Kernel's LigerLayerNorm / LigerRMSNorm. Neither takes a bias-free LayerNorm or an RMSNorm with a
bias, so the finder leaves those alone for both. For a Hugging Face model family Liger patches, `kernels="liger"` is
Liger's own patch of it (`liger.patch`: its norms, SwiGLU MLP and RoPE), as HF users apply it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from ..measure.details import NormClassCount, NormsFound

EPS_ATTRS = ("eps", "variance_epsilon", "epsilon", "layer_norm_eps", "rms_norm_eps")
PROBE_RTOL = 1e-4
PROBE_ATOL = 1e-5
NormKind = Literal["layer_norm", "rms_norm"]
Kernels = Literal["apex", "liger"]


@dataclass
class NormClass:
    """What the finder saw of one class: how many modules, how many it would swap, the rest and why."""

    found: int = 0
    swappable: int = 0
    left_alone: int = 0
    reasons: list[str] = field(default_factory=list)  # one per distinct reason a module was left alone


@dataclass
class NormReport:
    """The finder's record, per class name; `seen`: other classes whose name says norm (BatchNorm2d, GroupNorm)
    that are not candidates at all, so that "no norm found" can name what there was."""

    classes: dict[str, NormClass] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    swapped: dict[str, int] = field(default_factory=dict)  # filled by the swap

    @property
    def swappable(self) -> int:
        return sum(c.swappable for c in self.classes.values())

    def description(self) -> str:
        """'5 LlamaRMSNorm found, 5 swappable' (or swapped, after the swap); 'no norm found; saw: BatchNorm2d'."""
        parts = []
        for name, c in self.classes.items():
            done = (f"{self.swapped.get(name, 0)} swapped" if self.swapped else f"{c.swappable} swappable")
            text = f"{c.found} {name} found, {done}"
            if c.left_alone:
                text += f", {c.left_alone} left alone ({'; '.join(c.reasons)})"
            parts.append(text)
        if not parts:
            return "no norm found" + (f"; saw: {', '.join(self.seen)}" if self.seen else "")
        return "; ".join(parts)

    def unavailable_reason(self) -> str:
        """Why the norm swap does not apply, naming the classes seen."""
        if not self.classes:
            return "no module computes a LayerNorm or RMSNorm (" + self.description() + ")"
        return "no module Apex could swap: " + self.description()

    def found(self) -> NormsFound:
        """The report as a run's norm swap records it (a frozen copy: the report itself is filled by the swap)."""
        return NormsFound({name: NormClassCount(c.found, c.swappable, self.swapped.get(name, 0), c.left_alone,
                                                tuple(c.reasons)) for name, c in self.classes.items()},
                          tuple(self.seen), self.swappable, self.description())

    def as_dict(self) -> dict[str, Any]:
        return self.found().to_dict()


def _eps(module: nn.Module) -> float | None | Literal[False]:
    """The module's epsilon; None for nn.RMSNorm's default (finfo's eps); False: it has none."""
    for attr in EPS_ATTRS:
        if attr in vars(module) or hasattr(type(module), attr):
            value = getattr(module, attr, False)
            if value is None and isinstance(module, nn.RMSNorm):
                return None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return False


def _hidden(module: nn.Module) -> int | None:
    """The size of the last dimension the module normalises, from its 1-D weight (and bias), or from a one-dimension
    `normalized_shape` where it has no weight; None: not shaped like a norm."""
    weight = module._parameters.get("weight")
    bias = module._parameters.get("bias")
    if weight is not None:
        if weight.dim() != 1 or (bias is not None and bias.shape != weight.shape):
            return None
        return int(weight.numel())
    shape = getattr(module, "normalized_shape", None)
    if bias is None and isinstance(shape, (tuple, list)) and len(shape) == 1 and not list(module.parameters()):
        return int(shape[0])
    return None


def classify(module: nn.Module) -> tuple[NormKind | None, str] | None:
    """None: not a candidate (no weight or eps of that shape, or it does not map a (2, 3, hidden) input to one of
    the same shape, as BatchNorm and GroupNorm do not); (kind, "") for a module that computes a LayerNorm or RMSNorm
    Apex can swap; (None, why) for a candidate left alone."""
    eps = _eps(module)
    hidden = _hidden(module)
    if eps is False or hidden is None or list(module.children()):
        return None
    try:
        probe = copy.deepcopy(module).float()
    except Exception as exc:  # noqa: BLE001 - a module that cannot be copied is not probed
        return None, f"cannot be probed ({type(exc).__name__})"
    weight, bias = probe._parameters.get("weight"), probe._parameters.get("bias")
    device = weight.device if weight is not None else torch.device("cpu")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(2, 3, hidden, generator=gen).to(device)
    with torch.no_grad():
        if weight is not None:
            weight.copy_(torch.rand(hidden, generator=gen) + 0.5)
        if bias is not None:
            bias.copy_(torch.randn(hidden, generator=gen) * 0.1)
        try:
            out = probe(x)
        except Exception:  # noqa: BLE001 - it does not take a (..., hidden) input: not a norm over the last dim
            return None
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            return None
        out = out.float()
        e = eps if eps is not None else torch.finfo(torch.float32).eps
        w = None if weight is None else weight.detach()
        b = None if bias is None else bias.detach()
        ln = torch.nn.functional.layer_norm(x, (hidden,), w, b, e)
        rms = torch.nn.functional.rms_norm(x, (hidden,), w, e)
        if b is not None:
            rms = rms + b
        if torch.allclose(out, ln, rtol=PROBE_RTOL, atol=PROBE_ATOL):
            if w is not None and b is None:
                return None, ("a LayerNorm without bias (neither Apex's FusedLayerNorm nor Liger's LayerNorm has a "
                              "bias-free form)")
            return "layer_norm", ""
        if torch.allclose(out, rms, rtol=PROBE_RTOL, atol=PROBE_ATOL):
            if b is not None:
                return None, "an RMSNorm with a bias (Apex's FusedRMSNorm and Liger's RMSNorm have none)"
            return "rms_norm", ""
    return None, "its output matches neither layer_norm nor rms_norm with its weight and eps"


def find_norms(model: nn.Module) -> tuple[NormReport, dict[int, NormKind]]:
    """The record, and the kind of each module to swap (by id: a module used twice is counted once)."""
    report = NormReport()
    kinds: dict[int, NormKind] = {}
    done: set[int] = set()
    for module in model.modules():
        if id(module) in done:
            continue
        done.add(id(module))
        name = type(module).__name__
        verdict = classify(module)
        if verdict is None:
            if "norm" in name.lower() and name not in report.seen:
                report.seen.append(name)
            continue
        kind, why = verdict
        entry = report.classes.setdefault(name, NormClass())
        entry.found += 1
        if kind is not None:
            entry.swappable += 1
            kinds[id(module)] = kind
        else:
            entry.left_alone += 1
            if why not in entry.reasons:
                entry.reasons.append(why)
    return report, kinds


def count_norms(model: nn.Module) -> int:
    """The modules the norm swap would replace."""
    return find_norms(model)[0].swappable


def swap_norms(model: nn.Module, report: NormReport | None = None, kernels: Kernels = "apex") -> list[str]:
    """Every norm the finder matched replaced in place by apex FusedLayerNorm / FusedRMSNorm (`kernels="apex"`) or
    Liger's LigerLayerNorm / LigerRMSNorm (`kernels="liger"`) with the same size, eps, weights, dtype and device; for
    `kernels="liger"` on a Hugging Face model of a family Liger patches, Liger's patch of it instead (its norms,
    SwiGLU MLP and RoPE, in place). Returns the swapped (or patched) norms' names; `report` (when given) gets the
    count per class. Public as `apextui.swap_norms`: the answer's snippet calls it, so the user's script swaps
    exactly the modules `advise` swapped when it measured (call it before the optimizer is made)."""
    if kernels not in ("apex", "liger"):
        raise ValueError(f"kernels={kernels!r}: allowed: apex, liger")
    found, kinds = find_norms(model)
    report = report if report is not None else found
    if kernels == "liger":
        from . import liger

        if liger.patch(model, norms=True, fused_linear_cross_entropy=False):
            return _count_in_place(model, kinds, report)
    layer_norm, rms_norm = _kernel_classes(kernels)
    swapped: list[str] = []
    new_of: dict[int, nn.Module] = {}  # one module used in two places stays one module
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            kind = kinds.get(id(child))
            if kind is None:
                continue
            new = new_of.get(id(child))
            if new is None:
                new = _fused(child, kind, layer_norm if kind == "layer_norm" else rms_norm, kernels)
                new_of[id(child)] = new
                cls = type(child).__name__
                report.swapped[cls] = report.swapped.get(cls, 0) + 1
            setattr(parent, name, new)
            swapped.append(f"{parent_name}.{name}" if parent_name else name)
    return swapped


def _kernel_classes(kernels: Kernels) -> tuple[Any, Any]:
    """(the LayerNorm class, the RMSNorm class) of these kernels (imported here: only a swap needs them)."""
    if kernels == "liger":
        from liger_kernel.transformers import LigerLayerNorm, LigerRMSNorm  # type: ignore[import-not-found]

        return LigerLayerNorm, LigerRMSNorm
    from apex.normalization import FusedLayerNorm, FusedRMSNorm

    return FusedLayerNorm, FusedRMSNorm


def _count_in_place(model: nn.Module, kinds: dict[int, NormKind], report: NormReport) -> list[str]:
    """The norms the finder matched, counted as swapped where a patch replaced their forward in place."""
    names = []
    for name, module in model.named_modules():
        if id(module) in kinds:
            cls = type(module).__name__
            report.swapped[cls] = report.swapped.get(cls, 0) + 1
            names.append(name)
    return names


def _fused(child: nn.Module, kind: NormKind, fused: Any, kernels: Kernels = "apex") -> nn.Module:
    hidden = _hidden(child)
    eps = _eps(child)
    eps = torch.finfo(torch.float32).eps if eps is None or eps is False else eps
    weight, bias = child._parameters.get("weight"), child._parameters.get("bias")
    if kernels == "apex":
        new = fused(hidden, eps=eps, elementwise_affine=weight is not None)
    elif kind == "layer_norm":  # LigerLayerNorm(hidden_size, eps, bias): always affine (the finder saw a weight)
        new = fused(hidden, eps=eps, bias=bias is not None)
    else:  # LigerRMSNorm(hidden_size, eps, ...): its backward not in place (a model of any shape may read its output's
        # gradient again; Liger's own family patches choose per family), a weight-free one where it takes that
        import inspect

        takes = inspect.signature(fused).parameters
        extra = {k: v for k, v in (("in_place", False), ("elementwise_affine", weight is not None)) if k in takes}
        new = fused(hidden, eps=eps, **extra)
    if weight is not None:
        new = new.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            new.weight.copy_(weight)
            if kind == "layer_norm" and bias is not None:
                new.bias.copy_(bias)
    return new
