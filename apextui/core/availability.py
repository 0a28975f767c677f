"""Can a preset run here? Apex presets need working Apex kernels and a CUDA device; CUDA-graph presets a
CUDA device; torch.compile presets a working inductor backend (see needs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from .config.checks import apex_check, config_availability
from .needs import check as check_needs
from .presets import Preset


@dataclass(frozen=True)
class Availability:
    """Whether a preset can run on a device, and if not why and how to fix it."""

    ok: bool
    reason: str = ""
    fix: str = ""


def availability(preset: Preset, device: str) -> Availability:
    """Check the Apex features, CUDA graphs or torch.compile backend a preset needs (a model preset: its
    configuration's axes values, `config.axes`); never substitutes another implementation."""
    if preset.config is not None:
        why = preset.config.builds_on(preset.workload)
        if why is not None:
            return Availability(False, why, "pick another value of that axis")
        c = config_availability(preset.config, device)
        return Availability(c.ok, c.reason, c.fix)
    needs = check_needs(preset.workload, preset.variant, device)
    if not needs.ok:
        return Availability(False, needs.reason, needs.fix)
    apex = apex_check(preset.needs_apex, device)
    return Availability(apex.ok, apex.reason, apex.fix)
