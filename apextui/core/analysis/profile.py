"""The GPU busy fraction: a short torch.profiler window after the measured steps, else NVML utilisation;
`probe_after_run` runs it (and fetches the ceilings) on the training thread."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..measure.marker import NoMark
from . import torch_messages
from .ceilings import Ceilings, CeilingsUnavailable, get_ceilings

PROFILE_GRAPHS_ENV = "APEXTUI_PROFILE_GRAPHS"  # "1": profile CUDA-graph workloads too (see profile_skip_reason)
PROFILE_STEPS = 10  # extra steps profiled after the run for the GPU busy fraction


@dataclass(frozen=True)
class Busy:
    """How much of a step the GPU was busy."""

    fraction: float | None
    kernel_ms: float | None = None  # GPU time per step (profiler)
    source: Literal["profiler", "nvml"] | None = None
    note: str | None = None  # why there is no figure, or a caveat

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def busy_from(kernel_ms: float | None, step_ms: float | None, nvml_util_pct: float | None = None,
              note: str | None = None) -> Busy:
    """The busy fraction: profiled kernel time over the median step (capped at 1), else NVML utilisation."""
    if kernel_ms is not None and step_ms:
        return Busy(min(1.0, kernel_ms / step_ms), kernel_ms, "profiler", note)
    if nvml_util_pct is not None:
        return Busy(min(1.0, nvml_util_pct / 100.0), None, "nvml", note)
    return Busy(None, None, None, note)


MIN_NVML_SAMPLES = 3  # fewer utilisation readings than this over the measured steps: no NVML busy figure
NVML_WINDOW_S = 1.0  # a reading averages up to the last second: count only those taken this long after the
#                      measured steps began (earlier ones also saw set-up, compiling or warm-up)


class UtilAverage:
    """Mean NVML GPU utilisation over readings taken while the measured steps ran (each counted once);
    None, with a note saying why, when there were too few of them (a short run, a slow sampler)."""

    def __init__(self, min_samples: int = MIN_NVML_SAMPLES) -> None:
        self.min_samples = min_samples
        self._since: float | None = None
        self._last_time: float | None = None
        self._sum = 0.0
        self._n = 0

    def start(self, now: float) -> None:
        """The measured steps began at `now` (the readings' clock, time.time())."""
        if self._since is None:
            self._since = now + NVML_WINDOW_S

    def add(self, reading: Any) -> None:
        value = getattr(reading, "gpu_util_pct", None)
        when = getattr(reading, "time", None)
        if value is None or when is None or when == self._last_time:
            return
        if self._since is None or when < self._since:
            return
        self._last_time = when
        self._sum += float(value)
        self._n += 1

    @property
    def mean(self) -> float | None:
        return self._sum / self._n if self._n >= self.min_samples else None

    @property
    def note(self) -> str | None:
        if self._n >= self.min_samples:
            return None
        return (f"NVML gave {self._n} utilisation reading(s) during the measured steps, fewer than "
                f"{self.min_samples}: too short a run for it (run more steps, or lower --sample-interval)")


def profile_kernel_ms(step: Callable[[], Any], steps: int = PROFILE_STEPS, warmup: int = 0) -> float:
    """GPU time per step: the summed duration of every CUDA kernel, memcpy and memset torch.profiler
    (CUPTI) records over `steps` calls of `step`, after `warmup` unprofiled calls."""
    import torch
    from torch.autograd import DeviceType

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with torch_messages.profile_window(), \
            torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    busy_us = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    return busy_us / 1000.0 / steps


@dataclass(frozen=True)
class Probe:
    """What the training thread measures after the run's last step."""

    kernel_ms: float | None = None
    profiled_steps: int = 0
    busy_note: str | None = None
    ceilings: Ceilings | None = None
    ceilings_note: str | None = None


def _err(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}".strip().splitlines() or [type(exc).__name__])[0][:300]


def profile_skip_reason(workload: Any, device: str, profile_steps: int = PROFILE_STEPS) -> str | None:
    """Why the GPU-busy profile window is not run for this workload, or None when it is."""
    if device != "cuda":
        return "CPU run: no GPU"
    if profile_steps <= 0:
        return "profiling switched off"
    if getattr(workload, "uses_cuda_graphs", False) and os.environ.get(PROFILE_GRAPHS_ENV) != "1":
        return (f"not profiled: the workload replays CUDA graphs captured before the profiler would start "
                f"(unsafe on some CUDA/torch versions; {PROFILE_GRAPHS_ENV}=1 profiles anyway)")
    return None


def probe_after_run(workload: Any, device: str, profile_steps: int = PROFILE_STEPS,
                    want_ceilings: bool = True) -> Probe:
    """Profile `profile_steps` more steps of `workload` (CUDA only) and fetch the ceilings; never raises."""
    kernel_ms = None
    note = profile_skip_reason(workload, device, profile_steps)
    if note is None:
        marker = NoMark()
        try:
            kernel_ms = profile_kernel_ms(lambda: workload.step(marker), steps=profile_steps)
            if kernel_ms <= 0:
                kernel_ms, note = None, "the profiler recorded no GPU activity"
        except Exception as exc:  # noqa: BLE001 - e.g. CUPTI not permitted in this container
            note = f"profiler failed: {_err(exc)}"
    ceilings, ceilings_note = None, None
    if want_ceilings:
        try:
            ceilings = get_ceilings(device)
            ceilings_note = ceilings.note
        except Exception as exc:  # noqa: BLE001
            ceilings_note = str(exc) if isinstance(exc, CeilingsUnavailable) else _err(exc)
    return Probe(kernel_ms, profile_steps if kernel_ms is not None else 0, note, ceilings, ceilings_note)
