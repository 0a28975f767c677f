"""A user's own training loop for a preset's workload, with nothing of apextui's runner in it: the reference
apextui's reported ms/step is checked against (benchmarks/bare_loop.py, monitor_cost.py, monitor_parts.py,
overhead.py, overhead_blocks.py, kernel_breakdown.py, timing_truth.py).

It builds the preset's model, data and optimizer with apextui's workload code (the training step itself, which
is what is being measured), compiles or captures once where the preset does, and times plain steps: no clock,
no events between steps, no loss read, no printing. Two timings of the same loop: `timed_steps`, the wall time
between two synchronisations (what a user's loop takes), and `event_timed_steps`, one CUDA event before the
steps and one after (GPU time, as apextui's clock reads it; the wall time on CPU)."""

from __future__ import annotations

import time
from typing import Any, Callable


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def compile_once(workload: Any) -> float | None:
    """Compile / capture a workload that does (before any timed step, as the runner does); its seconds, or None."""
    return workload.warm_up() if getattr(workload, "compiles", False) else None


def build_workload(preset: Any, device: str, steps: int, warm_up: bool = True) -> Any:
    """`preset`'s workload at its size for `device`, for `steps` steps, and, unless `warm_up` is False, compiled or
    captured where it does: no apextui runner involved."""
    from apextui.core.workloads import builders

    size = preset.size if device == "cuda" else preset.cpu_size
    workload = builders.build(preset, device, size, steps)
    if warm_up:
        compile_once(workload)
    return workload


def build(preset_name: str, device: str, steps: int, warm_up: bool = True) -> tuple[Any, Any]:
    """(the preset named, its workload from `build_workload`)."""
    from apextui.core.presets import resolve

    preset = resolve(preset_name)
    return preset, build_workload(preset, device, steps, warm_up)


def plain_steps(step: Callable[[Any], Any], steps: int, mark: Any = None) -> Any:
    """`steps` calls of a workload's `step`, untimed and unsynchronised; the last one's (loss, scale)."""
    if mark is None:
        from apextui.core.measure.marker import NoMark  # the workloads call `clock.mark()`; here nobody listens

        mark = NoMark()
    out = None
    for _ in range(steps):
        out = step(mark)
    return out


def timed_steps(workload: Any, steps: int, device: str) -> float:
    """ms/step of `steps` plain steps between two synchronisations (the loop's wall time)."""
    from apextui.core.measure.marker import NoMark

    mark = NoMark()
    step = workload.step
    synchronize(device)
    t0 = time.perf_counter()
    plain_steps(step, steps, mark)
    synchronize(device)
    return (time.perf_counter() - t0) * 1000.0 / steps


def event_timed_steps(workload: Any, steps: int, device: str) -> tuple[float, Any]:
    """(ms/step, the last step's (loss, scale)) of `steps` plain steps after a synchronisation: on CUDA the
    time between a CUDA event before them and one after (the GPU's time, no final wait in it), on CPU their
    wall time."""
    from apextui.core.measure.marker import NoMark

    mark = NoMark()
    step = workload.step
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = plain_steps(step, steps, mark)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / steps, out
    t0 = time.perf_counter()
    out = plain_steps(step, steps, mark)
    return (time.perf_counter() - t0) * 1000.0 / steps, out


def bare_block(workload: Any, warmup: int, steps: int, device: str) -> float:
    """`warmup` untimed steps, then `timed_steps`: the same shape as an apextui run of warmup + steps."""
    plain_steps(workload.step, warmup)
    return timed_steps(workload, steps, device)
