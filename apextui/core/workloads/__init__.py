"""The article's experiments as workloads, and the user's own model (`--model`), built from a preset.

Each workload is declared once in the registry (`spec.WORKLOADS`); importing this package is cheap (no
torch): the workload classes are imported when one is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .spec import WORKLOADS, VariantSpec, WorkloadSpec

if TYPE_CHECKING:
    from ..presets import Preset
    from .base import Workload


def build(preset: Preset, device: str, size: Mapping[str, int], steps: int) -> Workload:
    """Instantiate the workload a preset names, on `device`, at `size`, for a run of `steps` steps."""
    import torch

    torch.manual_seed(preset.seed)
    spec = WORKLOADS.get(preset.workload)
    if spec is None:
        raise ValueError(f"unknown workload {preset.workload!r}")
    return spec.builder(preset, device, size, steps)


def __getattr__(name: str) -> Any:
    """`Workload` on first use: its module imports torch."""
    if name == "Workload":
        from .base import Workload

        return Workload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["WORKLOADS", "VariantSpec", "Workload", "WorkloadSpec", "build"]
