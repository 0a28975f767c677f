"""What a workload's step is handed to mark where its optimizer step starts (`Marker`: the run's clocks in
run/timing.py are markers), and the marker that marks nothing (`NoMark`).

No torch and no other module of the engine: the workloads, the clocks and the GPU-busy profile all name these,
so they sit below all three.
"""

from __future__ import annotations

from typing import Protocol


class Marker(Protocol):
    def mark(self) -> None: ...


class NoMark:
    """A clock that times nothing: for steps run outside the timed window (the GPU-busy profile window,
    warm-ups, benchmarks), where a workload's `clock.mark()` has nobody to tell."""

    def mark(self) -> None:
        """Nothing to time."""


__all__ = ["Marker", "NoMark"]
