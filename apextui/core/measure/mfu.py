"""MFU (model FLOPs utilisation): the model's FLOPs a training step over the step's time, against the GPU's dense
peak for the run's precision. The one place it is computed (`mfu`), and the three values it reads and gives:

- `StepFlops`: a training step's model FLOPs (forward and backward, no optimizer step), counted once per model by
  `workloads/flop_count.py` (torch's `FlopCounterMode`), or given by a watched run (`flops_per_token`, 6N);
- `Peak`: the GPU's dense peak for the precision, from the spec-sheet table (`analysis/peaks.py`), or why none;
- `Mfu`: `summary.mfu` in a run's `end` line (docs/json.md), the TUI's run pane and comparison table, the advice's
  answer. Its `value` is null with a `reason` where the FLOPs could not be counted or no peak is known; its `tflops`
  (achieved) is there whenever the FLOPs and the step time are.

Model FLOPs, not hardware FLOPs: what the model's arithmetic needs (PaLM's definition), so a recomputation (flash
attention's backward, activation checkpointing) raises the time but not the count, and two configurations of one
model are compared on the same count. Pure arithmetic: no torch, cheap to import (the TUI's process unpickles these
inside a run's `RunInfo`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class StepFlops:
    """A training step's model FLOPs (forward + backward), or why there is no count."""

    flops: float | None
    source: str  # how it was found: "FlopCounterMode", "flops_per_token", "6N"
    reason: str | None = None  # why `flops` is None
    note: str | None = None  # how it compares with nanoGPT's 6N + 12·L·H·Q·T (a transformer), or what it leaves out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> StepFlops | None:
        """As a `setup` line holds it; None for anything that is not one (an old or damaged line)."""
        if not isinstance(d, Mapping):
            return None
        return cls(flops=_positive(d.get("flops")), source=_text(d.get("source")) or "?",
                   reason=_text(d.get("reason")), note=_text(d.get("note")))


@dataclass(frozen=True)
class Peak:
    """The GPU's dense peak for one precision (TFLOP/s, sparsity not counted), where it comes from, or why none."""

    tflops: float | None
    precision: str  # the peak's column: "fp32" (non-tensor), "tf32", "bf16", "fp16", "fp8"
    gpu: str | None = None  # the table's entry ("H200 SXM"); None when the GPU is not in it
    device_name: str | None = None  # the name torch / NVML reported ("NVIDIA H200")
    source: str | None = None  # the spec sheet's address
    reason: str | None = None  # why `tflops` is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> Peak | None:
        if not isinstance(d, Mapping):
            return None
        return cls(tflops=_positive(d.get("tflops")), precision=_text(d.get("precision")) or "?",
                   gpu=_text(d.get("gpu")), device_name=_text(d.get("device_name")), source=_text(d.get("source")),
                   reason=_text(d.get("reason")))


@dataclass(frozen=True)
class Mfu:
    """A run's MFU and what it rests on; `value` None with `reason` where it cannot be said."""

    value: float | None = None  # achieved / peak, a fraction (0.31: 31 %)
    tflops: float | None = None  # achieved: model FLOPs a step / the median step time, TFLOP/s
    peak_tflops: float | None = None
    precision: str | None = None  # the peak's precision
    gpu: str | None = None  # the peak table's entry
    flops_per_step: float | None = None
    flops_source: str | None = None
    peak_source: str | None = None  # the spec sheet
    step_ms: float | None = None  # the step time it was computed at (the run's median)
    reason: str | None = None  # why `value` is None
    note: str | None = None  # the FLOP count's note (its comparison with 6N + 12·L·H·Q·T)

    @property
    def percent(self) -> str | None:
        """'31 %' (a value under 10 % keeps one decimal: '4.2 %'); None without a value."""
        if self.value is None:
            return None
        pct = 100 * self.value
        return f"{pct:.1f} %" if pct < 10 else f"{pct:.0f} %"

    def words(self) -> str | None:
        """'31 % of this GPU's bf16 peak' (the advice's answer line); None without a value."""
        return f"{self.percent} of this GPU's {self.precision} peak" if self.value is not None else None

    def at(self, step_ms: float | None) -> Mfu:
        """The same FLOPs and peak at another step time (an advice's median over several runs)."""
        flops = StepFlops(self.flops_per_step, self.flops_source or "?", None if self.flops_per_step else self.reason,
                          self.note)
        peak = Peak(self.peak_tflops, self.precision or "?", self.gpu, None, self.peak_source,
                    None if self.peak_tflops else self.reason)
        return mfu(flops, step_ms, peak)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("value", "tflops", "peak_tflops", "step_ms"):
            if out[key] is not None:
                out[key] = float(f"{out[key]:.4g}")
        return out

    @classmethod
    def from_dict(cls, d: Any) -> Mfu | None:
        """As a results file or a `--json` output holds it; None for anything that is not one; never raises."""
        if not isinstance(d, Mapping):
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            v = d.get(f.name)
            values[f.name] = _positive(v) if str(f.type).startswith("float") else _text(v)
        return cls(**values)


def mfu(flops: StepFlops | None, step_ms: float | None, peak: Peak | None) -> Mfu:
    """The one computation: `flops` a step over `step_ms`, against `peak`. Each missing part gives the reason; the
    achieved TFLOP/s is kept without a peak (a CPU run, a GPU not in the table)."""
    count = flops.flops if flops is not None else None
    note = flops.note if flops is not None else None
    base = Mfu(flops_per_step=count, flops_source=flops.source if flops is not None else None,
               precision=peak.precision if peak is not None else None, gpu=peak.gpu if peak is not None else None,
               peak_tflops=peak.tflops if peak is not None else None,
               peak_source=peak.source if peak is not None else None, note=note)
    if count is None:
        why = flops.reason if flops is not None and flops.reason else "the model's FLOPs a step were not counted"
        return replace(base, reason=why)
    ms = _positive(step_ms)
    if ms is None:
        return replace(base, reason="no measured step time")
    tflops = count / (ms / 1e3) / 1e12
    base = replace(base, tflops=tflops, step_ms=ms)
    if peak is None or peak.tflops is None:
        why = peak.reason if peak is not None and peak.reason else "no peak known for this device"
        return replace(base, reason=why)
    return replace(base, value=tflops / peak.tflops)


def _positive(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and f > 0 else None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None
