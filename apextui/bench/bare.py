"""A user's own training loop for a preset's workload, with nothing of apextui's runner in it: the reference
apextui's reported ms/step is checked against (benchmarks/bare_loop.py, monitor_cost.py, monitor_parts.py).

It builds the preset's model, data and optimizer with apextui's workload code (the training step itself, which
is what is being measured), compiles or captures once where the preset does, and times plain steps between
two synchronisations: no clock, no events, no loss read, no printing."""

from __future__ import annotations

import time
from typing import Any


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def build(preset_name: str, device: str, steps: int) -> tuple[Any, Any]:
    """(preset, its workload built, compiled or captured where it does): no apextui runner involved."""
    from apextui.core import workloads
    from apextui.core.presets import resolve

    preset = resolve(preset_name)
    size = preset.size if device == "cuda" else preset.cpu_size
    workload = workloads.build(preset, device, size, steps)
    if getattr(workload, "compiles", False):
        workload.warm_up()
    return preset, workload


def timed_steps(workload: Any, steps: int, device: str) -> float:
    """ms/step of `steps` plain steps between two synchronisations (the loop's wall time)."""
    from apextui.core.run.timing import NoMark  # the workloads call `clock.mark()`; here nobody listens

    mark = NoMark()
    step = workload.step
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(mark)
    synchronize(device)
    return (time.perf_counter() - t0) * 1000.0 / steps


def bare_block(workload: Any, warmup: int, steps: int, device: str) -> float:
    """`warmup` untimed steps, then `timed_steps`: the same shape as an apextui run of warmup + steps."""
    from apextui.core.run.timing import NoMark

    mark = NoMark()
    for _ in range(warmup):
        workload.step(mark)
    return timed_steps(workload, steps, device)
