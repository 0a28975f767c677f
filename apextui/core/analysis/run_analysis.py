"""One run's analysis: its work, the ceilings, what it achieved, how busy the GPU was and the bottleneck."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.details import Bottleneck, CeilingsUsed, Roofline
from .bottleneck import Achieved, achieved, classify
from .ceilings import Ceilings
from .profile import Busy, Probe, busy_from
from .work import Work


@dataclass(frozen=True)
class RunAnalysis:
    """Everything the roofline says about one run; the `end` summary carries its `roofline()` and `bottleneck`."""

    work: Work | None
    ceilings: Ceilings | None
    ceilings_note: str | None
    achieved: Achieved | None
    busy: Busy
    bottleneck: Bottleneck

    def roofline(self) -> Roofline | None:
        """The run on the roofline, the summary's `roofline` record; None without a work model."""
        if self.work is None:
            return None
        a, c = self.achieved, self.ceilings
        return Roofline(
            flops_per_step=self.work.flops, bytes_per_step=self.work.bytes, scope=self.work.scope,
            primary=self.work.primary, time_ms=a.time_ms if a else None, tflops=a.tflops if a else None,
            gb_s=a.gb_s if a else None, precision=a.precision if a else None,
            compute_ceiling_tflops=a.compute_ceiling_tflops if a else None,
            copy_ceiling_gb_s=a.copy_ceiling_gb_s if a else None, compute_fraction=a.compute_fraction if a else None,
            bandwidth_fraction=a.bandwidth_fraction if a else None, intensity=a.intensity if a else None,
            ridge=a.ridge if a else None,
            ceilings=None if c is None else CeilingsUsed(c.key, c.name, c.device, c.copy_gb_s, dict(c.matmul_tflops),
                                                         int(c.measured_at), c.cached),
            note=self.ceilings_note)


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
