"""Placing a run on the roofline (`achieved`: work over time against the ceilings) and labelling its
bottleneck (`classify`, pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.details import Bottleneck
from ..number_format import pct as _pct
from .ceilings import Ceilings
from .work import Primary, Scope, Work

HOST_BOUND_BELOW = 0.6  # GPU busy fraction under which a step is host-bound
# The roofline labels a step by the ceiling it comes nearest; under this fraction of either ceiling neither
# bounds it (on CPU: Python and operator dispatch; on a GPU: launches and small kernels), and a label read off
# the fractions ("memory-bound" at 2.6 % of the copy bandwidth) would be a guess
TRUSTED_FROM = 0.2
# A CPU's ceilings measured with the host's load average over this per core are lowered by the other work
# (two of the ceilings' cores taken): fractions against them overstate what the run reaches
BUSY_HOST_LOAD = 0.5


@dataclass(frozen=True)
class Achieved:
    """A run's work over its time, and as fractions of the ceilings (None where unknown)."""

    time_ms: float
    scope: Scope
    tflops: float | None
    gb_s: float | None
    precision: str | None = None  # the matmul ceiling compared with
    compute_ceiling_tflops: float | None = None
    copy_ceiling_gb_s: float | None = None
    compute_fraction: float | None = None
    bandwidth_fraction: float | None = None
    intensity: float | None = None  # FLOP/byte of the work model
    ridge: float | None = None  # FLOP/byte where the two ceilings meet
    primary: Primary = "bytes"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def achieved(work: Work, time_ms: float, ceilings: Ceilings | None) -> Achieved:
    """`work` done in `time_ms` milliseconds, against `ceilings` (None: figures without fractions)."""
    if not time_ms > 0:
        raise ValueError(f"time_ms must be > 0, got {time_ms}")
    tflops = work.flops / time_ms / 1e9 if work.flops is not None else None
    gb_s = work.bytes / time_ms / 1e6 if work.bytes is not None else None
    peak, precision, copy, ridge = None, None, None, None
    if ceilings is not None:
        peak, precision = ceilings.compute_tflops(work.precision)
        copy = ceilings.copy_gb_s
        ridge = ceilings.ridge(work.precision)
    return Achieved(
        time_ms=time_ms, scope=work.scope, tflops=tflops, gb_s=gb_s, precision=precision,
        compute_ceiling_tflops=peak, copy_ceiling_gb_s=copy,
        compute_fraction=tflops / peak if tflops is not None and peak else None,
        bandwidth_fraction=gb_s / copy if gb_s is not None and copy else None,
        intensity=work.intensity, ridge=ridge, primary=work.primary,
    )


# ---- bottleneck -----------------------------------------------------------------------------------
# `Bottleneck` ("host-bound" | "memory-bound" | "compute-bound" | "unknown", why, and the figures that decided it) is
# the record a run's summary holds (measure/details.py); `classify` makes it


def classify(busy_fraction: float | None, achieved: Achieved | None, ceilings: Ceilings | None = None,
             host_threshold: float = HOST_BOUND_BELOW) -> Bottleneck:
    """Label a run.

    1. GPU busy fraction known and < `host_threshold`: "host-bound" (the device waits for the host).
    2. The fractions cannot be trusted (`untrusted_because`: under TRUSTED_FROM of both ceilings, or a CPU's
       ceilings measured on a busy host): "unknown", and the reason says why.
    3. Both roofline fractions known: the higher one decides ("memory-bound" if bandwidth's, else
       "compute-bound"); on a tie, intensity against the ridge point.
    4. Otherwise intensity against the ridge point: below it "memory-bound", at or above "compute-bound".
    5. Nothing to decide with: "unknown".
    `ceilings` supplies the ridge point when `achieved` lacks it.
    """
    figures: dict[str, float | str | None] = {}
    if busy_fraction is not None:
        figures["busy_fraction"] = busy_fraction
        figures["host_threshold"] = host_threshold
        if busy_fraction < host_threshold:
            return Bottleneck("host-bound", f"the GPU is busy {_pct(busy_fraction)} of the step (under "
                              f"{_pct(host_threshold)}): it waits for the host (Python, kernel launches, "
                              "synchronisation)", figures)
    if achieved is None:
        return Bottleneck("unknown", "no work model or step time to place the run on the roofline", figures)
    comp, band = achieved.compute_fraction, achieved.bandwidth_fraction
    intensity = achieved.intensity
    ridge = achieved.ridge
    if ridge is None and ceilings is not None:
        ridge = ceilings.ridge(achieved.precision or "fp32")
    figures.update({"compute_fraction": comp, "bandwidth_fraction": band, "intensity": intensity, "ridge": ridge})
    busy = f"GPU busy {_pct(busy_fraction)}; " if busy_fraction is not None else ""
    prec = achieved.precision or "matmul"
    untrusted = untrusted_because(achieved, ceilings)
    if untrusted is not None:
        figures["untrusted"] = untrusted
        return Bottleneck("unknown", f"{busy}cannot be trusted: {untrusted}", figures)
    if comp is not None and band is not None and comp != band:
        figures["decided_by"] = "fractions"
        if band > comp:
            return Bottleneck("memory-bound", f"{busy}{_pct(band)} of the copy bandwidth against {_pct(comp)} of "
                              f"the {prec} matmul ceiling", figures)
        return Bottleneck("compute-bound", f"{busy}{_pct(comp)} of the {prec} matmul ceiling against {_pct(band)} "
                          "of the copy bandwidth", figures)
    if intensity is not None and ridge is not None:
        figures["decided_by"] = "intensity"
        if intensity < ridge:
            return Bottleneck("memory-bound", f"{busy}{intensity:.3g} FLOP/byte, under the ridge point "
                              f"{ridge:.3g} FLOP/byte", figures)
        return Bottleneck("compute-bound", f"{busy}{intensity:.3g} FLOP/byte, at or over the ridge point "
                          f"{ridge:.3g} FLOP/byte", figures)
    return Bottleneck("unknown", f"{busy}no ceilings (or work model) to compare with", figures)


def untrusted_because(achieved: Achieved, ceilings: Ceilings | None = None) -> str | None:
    """Why a memory/compute label read off `achieved`'s fractions cannot be trusted, or None: the run reaches
    under TRUSTED_FROM of both ceilings (neither bounds it), or the ceilings are a CPU's measured while the
    host was busy (`load_per_core` over BUSY_HOST_LOAD)."""
    comp, band = achieved.compute_fraction, achieved.bandwidth_fraction
    known = [f for f in (comp, band) if f is not None]
    if known and max(known) < TRUSTED_FROM:
        prec = achieved.precision or "matmul"
        parts = ([f"{_pct(band)} of the copy bandwidth"] if band is not None else []) + \
                ([f"{_pct(comp)} of the {prec} matmul ceiling"] if comp is not None else [])
        return (f"at {' and '.join(parts)} neither ceiling bounds the step (under {_pct(TRUSTED_FROM)} of each: "
                "overheads such as Python, operator dispatch or kernel launches take its time)")
    load = (ceilings.details.get("load_per_core") if ceilings is not None and ceilings.device == "cpu" else None)
    if isinstance(load, (int, float)) and load > BUSY_HOST_LOAD:
        return (f"the CPU's ceilings were measured while other work kept it busy (load {load:.2f} a core): "
                "they are too low, so the fractions against them are too high")
    return None
