"""What the app needs to know before a run can start: the device and each preset's availability.

`probe_environment` imports torch (through the core), so the app calls it in a
thread worker after the first paint, never on the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apextui.core.availability import Availability
from apextui.core.presets import Preset

@dataclass(frozen=True)
class Probe:
    device: str  # "cuda" | "cpu"
    requested: str  # "auto" | "cpu" | "cuda"
    availability: Mapping[str, Availability]
    env: Mapping[str, Any] = field(default_factory=dict)  # apextui.core.env.describe(device)

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    @property
    def device_line(self) -> str:
        """Where runs go, short enough for the status pane."""
        if self.gpu:
            return f"GPU {self.env.get('gpu') or 'CUDA device'}"
        if self.requested == "cpu":
            return "CPU (--device cpu): small sizes"
        return "No GPU: CPU runs, small sizes"

    @property
    def device_note(self) -> str:
        """The same, plainly and in full."""
        if self.gpu:
            return f"running on {self.env.get('gpu') or 'the CUDA GPU'} at the presets' full size"
        if self.requested == "cpu":
            return "running on CPU (--device cpu) at the presets' small size"
        if self.env.get("torch") and self.env.get("torch_cuda") is None:
            why = f"torch {self.env.get('torch')} is a CPU-only build"
        else:
            why = "no CUDA GPU is visible"
        return (f"No GPU here ({why}): presets run on CPU at their small size; "
                "presets that need Apex's CUDA kernels are unavailable.")


ProbeFn = Callable[[str, Sequence[Preset]], Probe]


def probe_environment(requested: str, presets: Sequence[Preset]) -> Probe:
    """Resolve the device and check every preset; raises DeviceUnavailable for an unusable --device cuda."""
    from apextui.core.availability import availability
    from apextui.core.env import describe, resolve_device

    device = resolve_device(requested)
    avail = {p.name: availability(p, device) for p in presets}
    try:
        env = describe(device)
    except Exception as exc:  # noqa: BLE001 - only used for labels and saved results
        env = {"error": f"{type(exc).__name__}: {exc}"}
    return Probe(device=device, requested=requested, availability=avail, env=env)
