"""Can a preset run here? Apex presets need working Apex kernels and a CUDA device; CUDA-graph presets a
CUDA device; torch.compile presets a working inductor backend (see needs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from .apex.check import check_features
from .needs import check as check_needs
from .presets import Preset


@dataclass(frozen=True)
class Availability:
    """Whether a preset can run on a device, and if not why and how to fix it."""

    ok: bool
    reason: str = ""
    fix: str = ""


def availability(preset: Preset, device: str) -> Availability:
    """Check the Apex features, CUDA graphs or torch.compile backend a preset needs; never substitutes
    another implementation."""
    needs = check_needs(preset.workload, preset.variant, device)
    if not needs.ok:
        return Availability(False, needs.reason, needs.fix)
    if not preset.needs_apex:
        return Availability(True)
    if device != "cuda":
        return Availability(
            False,
            f"needs NVIDIA Apex ({', '.join(preset.needs_apex)}), whose fused kernels run on CUDA only; "
            "this run is on CPU",
            "run on a machine with an NVIDIA GPU and Apex built with APEX_CPP_EXT=1 APEX_CUDA_EXT=1, "
            "or pick a torch preset",
        )
    checks = check_features(preset.needs_apex, cuda_available=True)  # in a child process, cached
    for feature in preset.needs_apex:
        check = checks[feature]
        if not check.ok:
            return Availability(False, f"needs Apex {feature}: {check.reason}", check.fix)
    return Availability(True)
