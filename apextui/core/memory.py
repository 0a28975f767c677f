"""Will a preset fit? An estimate of the memory a run takes, checked before anything is allocated.

Why: presets within the size limits can still ask for more than the machine has (an optimizer of 1024 x
Linear(2048, 2048), a Transformer with vocab 32768) and then take the host's memory for many seconds before
failing, or get the process killed. The estimate is deliberately simple and on the high side: tensors a
step keeps alive, counted in fp32 (autocast's half-precision copies are not subtracted), nothing for the
allocator's caching or the framework's own working set.

Each workload's spec (`workloads/spec.py`, its `memory`) counts its own tensors: parameters P x 4 bytes,
gradients the same, AdamW's state 2 x P x 4, its activations and data, and what it builds on the host.
"""

from __future__ import annotations

from typing import Mapping

from .presets import Preset
from .workloads.spec import WORKLOADS, Estimate

FIT_FRACTION = 0.9  # refuse when the estimate exceeds this share of the free memory
# which size keys to halve, in turn, to find a size to suggest (declared in the workload registry)
SHRINK_ORDER = {w: spec.shrink_order for w, spec in WORKLOADS.items()}


def estimate(preset: Preset, size: Mapping[str, int], steps: int) -> Estimate:
    """The memory a run of `preset` at `size` for `steps` steps needs: its workload's memory model (none: an empty
    estimate, which always fits)."""
    model = WORKLOADS[preset.workload].memory
    return model(size, steps) if model is not None else Estimate({})


def free_bytes(device: str) -> int | None:
    """Memory free for a run now: available host memory (CPU), or free memory of the GPU (CUDA: from torch
    where it is imported already, else NVML, so the TUI's process need not import torch); None when it
    cannot be read."""
    import sys

    try:
        if device == "cuda":
            if "torch" in sys.modules:
                torch = sys.modules["torch"]
                return int(torch.cuda.mem_get_info()[0])
            from .monitor.nvml import Nvml

            used, total = Nvml().memory()
            if used.value is None or total.value is None:
                return None
            return int((float(total.value) - float(used.value)) * 2**20)  # MiB
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - unknown is not an error: the run goes ahead
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _fits(est: Estimate, device: str, free_device: int, free_host: int | None) -> bool:
    if device == "cpu":
        return est.device + est.host <= FIT_FRACTION * free_device
    host_ok = free_host is None or est.host <= FIT_FRACTION * free_host
    return host_ok and est.device <= FIT_FRACTION * free_device


def smaller(preset: Preset, size: Mapping[str, int], steps: int, device: str, free_device: int,
            free_host: int | None) -> dict[str, int] | None:
    """A size that fits, halving the workload's keys in turn (SHRINK_ORDER); None when none is found."""
    trial = dict(size)
    fix = WORKLOADS[preset.workload].shrink_fix
    for _ in range(64):
        if _fits(estimate(preset, trial, steps), device, free_device, free_host):
            return trial
        for key in SHRINK_ORDER[preset.workload]:
            if trial[key] > 1:
                trial[key] //= 2
                if fix is not None:
                    fix(trial)
                break
        else:
            return None
    return None


def refusal(preset: Preset, device: str, steps: int) -> str | None:
    """Why `preset` will not fit on `device` (one line, with the estimate and a smaller size to try), or
    None when it fits or free memory cannot be read. The user's model (workload "model") has no estimate:
    its run fails with an out-of-memory error instead."""
    if WORKLOADS[preset.workload].memory is None:  # a workload without a memory model (the user's model)
        return None
    table = "cpu_size" if device == "cpu" else "size"
    size = preset.cpu_size if device == "cpu" else preset.size
    est = estimate(preset, size, steps)
    free_device = free_bytes(device)
    free_host = free_bytes("cpu") if device == "cuda" else free_device
    if free_device is None or _fits(est, device, free_device, free_host):
        return None
    parts = ", ".join(f"{k} {_gib(v)}" for k, v in est.parts.items() if v)
    where = "host memory" if device == "cpu" else "GPU memory"
    need = est.device + (est.host if device == "cpu" else 0)
    text = (f"preset {preset.name!r} needs about {_gib(need)} of {where} ({parts}"
            + (f", Markov chain on the host {_gib(est.host)}" if est.host else "")
            + f") but {_gib(free_device)} is free")
    if device == "cuda" and free_host is not None and est.host > FIT_FRACTION * free_host:
        text += f" (and {_gib(est.host)} of host memory for the Markov chain, {_gib(free_host)} free)"
    fit = smaller(preset, size, steps, device, free_device, free_host)
    if fit is not None:
        changes = ", ".join(f"{k} = {v}" for k, v in fit.items() if v != size[k])
        text += f": try a smaller [{table}] ({changes})"
    return text + ", or --force to run anyway"
