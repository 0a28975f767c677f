"""What one run is asked to do, as one frozen value: the front ends build it from the command line and hand it on
(headless, data-parallel, a user's model, the worker process), instead of the same five loose arguments at every
step. Picklable: it crosses the worker-process boundary as it is."""

from __future__ import annotations

from dataclasses import dataclass

from ..presets import Preset


@dataclass(frozen=True)
class RunRequest:
    """One run: `preset` on `device` ("auto", "cpu", "cuda" as asked; the resolved one once a front end has
    resolved it), `steps` (None: the preset's), metrics sampled every `sample_interval` s, `force` past the
    memory estimate, and for a data-parallel run the one-GPU `baseline_path` to scale against."""

    preset: Preset
    device: str
    steps: int | None = None
    sample_interval: float = 1.0
    force: bool = False
    baseline_path: str | None = None
    cpu_threads: int | None = None  # a CPU run's intra-op threads (None: torch's own count; `advise.cpu_share`)


@dataclass(frozen=True)
class RunSettings:
    """What every run one front end starts has in common, before a preset is picked: the TUI's `--device` as asked,
    `--steps` (None: each preset's own; the TUI's `n` changes it) and `--sample-interval`. `request` makes a
    run's `RunRequest` from it, so the three travel as one value rather than loose through the app."""

    device: str = "auto"
    steps: int | None = None
    sample_interval: float = 1.0

    def request(self, preset: Preset, device: str) -> RunRequest:
        """`preset`'s request on `device` (the resolved one)."""
        return RunRequest(preset, device, self.steps, self.sample_interval)
