"""How each workload of the registry is built from a preset: `build`, the one call the runner (and the
benchmarks) make, and `BUILDERS`, one builder a workload.

Why apart from spec.py: the workload modules import torch and read their own specs from the registry, so the
registry cannot name them back; this module sits above both and imports a workload's module only when one is
built (importing it stays cheap). A new workload adds its builder here (tests/test_registry.py checks that every
workload of the registry has one).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Mapping

from .spec import WORKLOADS

if TYPE_CHECKING:
    from ..presets import Preset
    from .base import Workload

# (preset, device, size, steps): every builder builds the preset's point (`preset.config`)
Builder = Callable[["Preset", str, Mapping[str, int], int], "Workload"]


def _build_optimizer(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    from .optimizer import OptimizerWorkload

    return OptimizerWorkload(preset.config, size, device, preset.lr, preset.name)


def _build_norm(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    from .norm import NormWorkload

    return NormWorkload(preset.config, WORKLOADS[preset.workload], size, device, preset.seed)


def _build_transformer(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    from .transformer import TransformerWorkload

    return TransformerWorkload(preset.config, size, device, preset.lr, preset.seed, steps, preset.name)


def _build_model(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    from .model_workload import ModelWorkload

    if preset.model is None:
        raise ValueError(f"preset {preset.name!r} has workload 'model' but names no model")
    return ModelWorkload(preset.model, preset.config, device, preset.lr, preset.seed, steps)


BUILDERS: Mapping[str, Builder] = MappingProxyType({
    "optimizer": _build_optimizer, "layer_norm": _build_norm, "rms_norm": _build_norm,
    "transformer": _build_transformer, "model": _build_model})


def build(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    """Instantiate the workload a preset names, on `device`, at `size`, for a run of `steps` steps."""
    import torch

    torch.manual_seed(preset.seed)
    builder = BUILDERS.get(preset.workload)
    if builder is None or preset.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {preset.workload!r}")
    return builder(preset, device, size, steps)


__all__ = ["BUILDERS", "Builder", "build"]
