"""What a watched run's MFU rests on (`apextui.watch(flops_per_token=..., model=..., precision=...)`): the FLOPs a
step and the GPU's peak, for the one computation (`measure/mfu.py`) that the `end` line and `apextui attach` read.

A watched loop hands over no batch, so its FLOPs are not counted on a step as a run's are (`workloads/flop_count.py`):
they are the user's `flops_per_token` (a training step's, forward and backward), or 6N a token from the model (N its
parameters in matrix products; the attention's 12·L·H·Q·T left out), times the tokens `mon.step(tokens=...)` gives.
The peak's precision is the user's `precision`, else the model's parameters' (bf16, fp16), else bf16 (the peak most
training is measured against, as nanoGPT's `estimate_mfu`). A bad option is one warning and no MFU (with its reason),
never an error in the user's training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.peaks import PRECISIONS, peak
from ..measure.mfu import Peak, StepFlops
from . import values
from .options import shown

Warn = Callable[[str, str], None]
NOT_GIVEN = ("no FLOPs a token: give apextui.watch(flops_per_token=...) or apextui.watch(model=...), and "
             "mon.step(tokens=...)")
DEFAULT_PRECISION = "bf16"


@dataclass(frozen=True)
class FlopsPerToken:
    """A watched run's FLOPs a token (None with the reason), and where they come from."""

    per_token: float | None
    source: str
    reason: str | None = None
    note: str | None = None

    @classmethod
    def given(cls, flops_per_token: Any, model: Any, warn: Warn) -> FlopsPerToken:
        """From the options: `flops_per_token` first, else 6N of `model`; a value that is not one is warned about."""
        if flops_per_token is not None:
            given = f"flops_per_token={shown(flops_per_token)}"
            try:
                value = values.real(flops_per_token)
                problem = None if math.isfinite(value) and value > 0 else "is not a positive number"
            except values.BadValue as bad:  # a string, a tensor, an int too large for a float (10**400)
                problem = str(bad)
            if problem is None:
                return cls(value, "flops_per_token")
            why = f"{given} {problem} (a training step's FLOPs a token: a positive, finite number)"
            warn("flops_per_token", f"{why}: no MFU")
            return cls(None, "flops_per_token", reason=why)
        if model is not None:
            try:
                from ..workloads.flop_count import matmul_params, six_n
                from .workload import unwrapped

                model = unwrapped(model)  # torch.compile's, DDP's, FSDP's wrappers seen through
                n = matmul_params(model)
                return cls(six_n(model), "6N", note=(
                    f"6N a token (N {n:,} parameters in matrix products); the attention's 12·L·H·Q·T is left out: "
                    "give flops_per_token to count it"))
            except Exception as exc:  # noqa: BLE001 - not a torch module, or its parameters uncountable: no MFU
                why = f"the model's parameters could not be counted ({type(exc).__name__}: {exc})"
                warn("model", f"{why}: no MFU")
                return cls(None, "6N", reason=why)
        return cls(None, "none", reason=NOT_GIVEN)

    def per_step(self, units: str, units_per_step: int) -> StepFlops:
        """The FLOPs of a step of `units_per_step` `units` (MFU needs tokens)."""
        if self.per_token is None:
            return StepFlops(None, self.source, reason=self.reason or NOT_GIVEN)
        if units != "tokens":
            return StepFlops(None, self.source, reason="MFU needs the tokens a step: mon.step(tokens=...)")
        return StepFlops(self.per_token * units_per_step, self.source, note=self.note)


def precision_of(precision: Any, model: Any, warn: Warn) -> str:
    """The peak's precision: `precision` where it is one of the table's, else the model's 16-bit parameters', else
    bf16; a value not in the table is warned about and kept (its peak then says why there is none)."""
    if precision is not None:
        if not (isinstance(precision, str) and precision in PRECISIONS):
            warn("precision", f"precision={shown(precision)} is not one of {', '.join(PRECISIONS)}: no MFU")
            return precision if isinstance(precision, str) else shown(precision)
        return precision
    try:
        dtype = str(next(p for p in model.parameters() if p.is_floating_point()).dtype) if model is not None else ""
    except Exception:  # noqa: BLE001 - no parameters, or not a module
        dtype = ""
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(dtype, DEFAULT_PRECISION)


def peak_of(device: str, precision: str, torch: Any) -> Peak:
    """The run's GPU's dense peak for `precision` (`analysis.peaks`); the GPU's name from torch."""
    name = None
    if device == "cuda" and torch is not None:
        try:
            name = torch.cuda.get_device_name()
        except Exception:  # noqa: BLE001 - its peak then says the name could not be read
            name = None
    return peak(device, name, precision)
