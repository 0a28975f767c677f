"""The article's experiments as workloads, built from a preset."""

from __future__ import annotations

from typing import Mapping

from ..presets import Preset
from .base import Workload


def build(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    """Instantiate the workload a preset names, on `device`, at `size`, for a run of `steps` steps."""
    import torch

    torch.manual_seed(preset.seed)
    if preset.workload == "optimizer":
        from .optimizer import OptimizerWorkload

        return OptimizerWorkload(preset.variant, size, device, preset.amp, preset.lr)
    if preset.workload == "norm":
        from .norm import NormWorkload

        return NormWorkload(preset.variant, size, device, preset.amp, preset.seed)
    if preset.workload == "transformer":
        from .transformer import TransformerWorkload

        return TransformerWorkload(preset.variant, size, device, preset.amp, preset.lr, preset.seed, steps)
    raise ValueError(f"unknown workload {preset.workload!r}")


__all__ = ["Workload", "build"]
