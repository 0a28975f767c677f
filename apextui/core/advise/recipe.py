"""The practitioner's recipe: the configuration an experienced engineer writes by default, the search's floor.

Why a floor: a search that starts from the model as written (fp32) and adds one value at a time, each judged on
single runs, landed on answers slower than this recipe (HF Llama on an H100: Liger's norms kept eager at 38.7 ms
where bf16 + fused AdamW + torch.compile runs 32.1). Measured first, side by side with the model as written, the
recipe is where exploration starts, and the answer is never slower than it beyond noise.

On CUDA: bf16 autocast (fp16 + `GradScaler` where bf16 cannot run), torch's fused AdamW, `torch.compile` in its
default mode, and channels_last where the model has 2-D convolutions. On CPU: fused AdamW only (bf16 is slower
than fp32 on most CPUs, and a compile costs more than a short search has: the search tries it as a move, priced by
the cost model). A part that cannot run here is left out, and the recipe says so (`Recipe.left_out`).

Pure: the axes and an availability function in, a point out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..config.axes import axis
from ..config.point import BASELINE, Config

Available = Callable[[Config], Any]  # -> an object with ok, reason

# the recipe's parts, in the order they are added: (axis, the values to try, the first that can run is taken)
CUDA_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("precision", ("bf16", "fp16")),
    ("optimizer", ("fused",)),
    ("compile", ("default",)),
    ("memory_format", ("channels_last",)),
)
CPU_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (("optimizer", ("fused",)),)


@dataclass(frozen=True)
class Recipe:
    """The recipe's point, and each part left out with why (`(axis=value, reason)`)."""

    point: Config
    left_out: tuple[tuple[str, str], ...] = ()

    def words(self) -> str:
        """'bf16+fused+compile (left out: compile=default: no compiler)' for a progress line."""
        out = f"{self.point.label}"
        if self.left_out:
            out += " (left out: " + "; ".join(f"{part}: {why}" for part, why in self.left_out) + ")"
        return out


def recipe(device: str, workload: str, available: Available | None = None) -> Recipe:
    """The recipe for `device` ("cuda" or "cpu") and `workload` (a `Scope`: only values that apply to the model are
    taken, channels_last only where it has 2-D convolutions); `available(point)` says whether a point can run here
    (None: every point can)."""
    point = BASELINE
    left_out: list[tuple[str, str]] = []
    for ax_name, names in (CUDA_PARTS if device == "cuda" else CPU_PARTS):
        ax = axis(ax_name)
        offered = {v.name for v in ax.values_for(workload)}
        for name in names:
            if name not in offered:
                break  # it does not apply to this model: nothing to say
            cand = point.with_(ax_name, name)
            a = available(cand) if available is not None else None
            if a is None or getattr(a, "ok", True):
                point = cand
                break
            left_out.append((f"{ax_name}={name}", getattr(a, "reason", "") or "unavailable"))
    return Recipe(point, tuple(left_out))


def without_part(point: Config, failed_first: tuple[str, ...] = ("compile", "memory_format", "precision",
                                                                 "optimizer")) -> list[Config]:
    """Where the recipe fails to run or fails its correctness check: the recipe less one part, the likeliest culprit
    first (a compile fails more often than a fused optimizer)."""
    return [point.with_(a, axis(a).default.name) for a in failed_first if getattr(point, a) != axis(a).default]
