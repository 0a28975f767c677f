"""One run's analysis: its work, the ceilings, what it achieved, how busy the GPU was and the bottleneck."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bottleneck import Achieved, Bottleneck, achieved, classify
from .ceilings import Ceilings
from .profile import Busy, Probe, busy_from
from .work import Work


@dataclass(frozen=True)
class RunAnalysis:
    """Everything the roofline says about one run; `to_dict()` is what the JSON `end` summary carries."""

    work: Work | None
    ceilings: Ceilings | None
    ceilings_note: str | None
    achieved: Achieved | None
    busy: Busy
    bottleneck: Bottleneck

    def roofline_dict(self) -> dict[str, Any] | None:
        if self.work is None:
            return None
        out: dict[str, Any] = {
            "flops_per_step": self.work.flops, "bytes_per_step": self.work.bytes, "scope": self.work.scope,
            "primary": self.work.primary,
        }
        keys = ("time_ms", "tflops", "gb_s", "precision", "compute_ceiling_tflops", "copy_ceiling_gb_s",
                "compute_fraction", "bandwidth_fraction", "intensity", "ridge")
        a = self.achieved
        out.update({k: getattr(a, k) if a is not None else None for k in keys})
        c = self.ceilings
        out["ceilings"] = None if c is None else {
            "key": c.key, "name": c.name, "device": c.device, "copy_gb_s": c.copy_gb_s,
            "matmul_tflops": dict(c.matmul_tflops), "measured_at": int(c.measured_at), "cached": c.cached}
        out["note"] = self.ceilings_note
        return out


def analyse_run(info: Any, stats: Any, opt_stats: Any, probe: Probe | None,
                nvml_util_pct: float | None = None, nvml_note: str | None = None) -> RunAnalysis | None:
    """Place a finished run on the roofline: `info` a RunInfo (its `work`), `stats`/`opt_stats` the
    step and optimizer-step Stats (median), `probe` what probe_after_run found. None without a work model."""
    work = getattr(info, "work", None) if info is not None else None
    if work is None:
        return None
    probe = probe or Probe()
    step_ms = stats.median_ms if stats is not None else None
    note = probe.busy_note
    if probe.kernel_ms is None and nvml_util_pct is None and nvml_note:
        note = f"{note}; {nvml_note}" if note else nvml_note
    busy = busy_from(probe.kernel_ms, step_ms, nvml_util_pct, note)
    time_ms = (opt_stats.median_ms if opt_stats is not None else None) if work.scope == "opt_step" else step_ms
    got = achieved(work, time_ms, probe.ceilings) if time_ms else None
    return RunAnalysis(work=work, ceilings=probe.ceilings, ceilings_note=probe.ceilings_note, achieved=got,
                       busy=busy, bottleneck=classify(busy.fraction, got, probe.ceilings))
