"""Which runs the advice makes: the runnable presets of each workload, and why the others are not run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..presets import Preset
from ..workloads.spec import FORMER_NORM, SHIPPED, WORKLOADS
from .records import AdviceError, Measurement


@dataclass(frozen=True)
class WorkloadPlan:
    workload: str
    baseline: str | None
    runnable: tuple[Preset, ...]
    skipped: tuple[Measurement, ...]  # unavailable or not comparable


AvailabilityFn = Callable[[Preset], Any]  # -> an object with ok, reason, fix (core.availability.Availability)


def parse_workloads(value: str | Iterable[str] | None, allowed: Sequence[str] = SHIPPED) -> tuple[str, ...]:
    """'optimizer,rms_norm' (or a list) -> ('optimizer', 'rms_norm'), in the order given, duplicates dropped; "norm"
    (one workload for both norms until 2026-12-06) is both norms' workloads; None -> every workload with shipped
    presets. Raises AdviceError naming the unknown one. `allowed`: the model workload too where the presets hold a
    model's (`advise --model`)."""
    if value is None:
        return tuple(SHIPPED)
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    items = [p for p in items if p]
    if not items:
        raise AdviceError(f"no workload given; choose from {', '.join(allowed)}")
    out: list[str] = []
    norms = tuple(w for w in allowed if WORKLOADS[w].kernel_only)
    for p in [w for item in items for w in (norms if item == FORMER_NORM and norms else (item,))]:
        if p not in allowed:
            hint = "; for your own model use --model FILE.py:FUNC" if p in WORKLOADS else ""
            raise AdviceError(f"unknown workload {p[:40]!r}; choose from {', '.join(allowed)}{hint}")
        if p not in out:
            out.append(p)
    return tuple(out)


SINGLE_DEVICE_ONLY = ("a data-parallel preset: on one device it measures its wrapper's overhead, not a way to "
                      "train faster there")
DATA_PARALLEL_FIX = "apextui advise --nproc N measures it on N GPUs"


def plan(presets: Sequence[Preset], device: str, workloads: Sequence[str],
         availability_fn: AvailabilityFn, data_parallel: bool = False) -> list[WorkloadPlan]:
    """Which presets of each workload run, and why the others do not. A one-device advice (`data_parallel`
    False) runs no data-parallel preset: one is never offered as a one-device option."""
    plans = []
    size_key = "cpu_size" if device == "cpu" else "size"
    for w in workloads:
        mine = [p for p in presets if p.workload == w]
        bases = sorted((p for p in mine if p.is_baseline), key=lambda p: p.name != p.baseline)
        base = bases[0] if bases else None
        runnable, skipped = [], []
        for p in mine:
            kw: dict[str, Any] = dict(preset=p.name, workload=w, config=p.config, needs_apex=tuple(p.needs_apex),
                                      autocast=p.config.autocast)
            if base is not None and dict(getattr(p, size_key)) != dict(getattr(base, size_key)):
                skipped.append(Measurement(**kw, available=False, not_compared=True,
                                           fix="give it the baseline's size to compare it",
                                           reason=f"not comparable: its [{size_key}] differs from the baseline "
                                                  f"{base.name}'s"))
                continue
            if not data_parallel and p.config.data_parallel:
                skipped.append(Measurement(**kw, available=False, not_compared=True, reason=SINGLE_DEVICE_ONLY,
                                           fix=DATA_PARALLEL_FIX))
                continue
            a = availability_fn(p)
            if a is None or not a.ok:
                skipped.append(Measurement(**kw, available=False, reason=a.reason if a else "not checked",
                                           fix=a.fix if a else ""))
                continue
            runnable.append(p)
        plans.append(WorkloadPlan(w, base.name if base else None, tuple(runnable), tuple(skipped)))
    return plans
