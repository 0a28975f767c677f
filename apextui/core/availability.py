"""Can a preset run here: the one answer, for every workload (every preset carries its point, `Preset.config`).

The point's values must be built by the preset's workload (`axes.Value.workloads`) and run together on the device
(`Config.conflict`: flash attention at fp32 on CUDA does not), their needs met on the device
(`config.needs`: torch.compile, CUDA graphs, CUDA, torchao, an sm_89 GPU, the SDPA kernels, Liger, Triton), and the
Apex features the preset needs (`Preset.needs_apex`) must import and work (`apex.probe`, a child process, cached;
CUDA only), checked
last because that check is the slow one. Never substitutes another implementation.
"""

from __future__ import annotations

from .config.needs import Availability, needs_availability
from .presets import Preset

__all__ = ["Availability", "availability"]


def availability(preset: Preset, device: str) -> Availability:
    """Whether `preset` (its point on `preset.workload`) can run on `device`, and if not why and how to fix it."""
    config = preset.config
    why = config.builds_on(preset.workload)
    if why is not None:
        return Availability(False, why, "pick another value of that axis")
    why = config.conflict(device)
    if why is not None:
        return Availability(False, why, "pick precision=bf16 or precision=fp16 with it, or another value of that axis")
    needs = needs_availability(config.needs, device)
    if not needs.ok:
        return needs
    return _apex(preset.needs_apex, device)


def _apex(features: tuple[str, ...], device: str) -> Availability:
    """Working Apex kernels for `features` on `device` (CUDA only; checked in a child process, cached)."""
    if not features:
        return Availability(True)
    if device != "cuda":
        return Availability(False, f"needs NVIDIA Apex ({', '.join(features)}), whose fused kernels run on CUDA "
                                   "only; this run is on CPU",
                            "run on a machine with an NVIDIA GPU and Apex built with APEX_CPP_EXT=1 APEX_CUDA_EXT=1, "
                            "or pick a torch preset")
    from .apex.probe import features_availability

    checks = features_availability(features, cuda_available=True)
    for feature in features:
        if not checks[feature].ok:
            return Availability(False, f"needs Apex {feature}: {checks[feature].reason}", checks[feature].fix)
    return Availability(True)
