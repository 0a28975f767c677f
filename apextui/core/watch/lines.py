"""The JSON lines of a watched run: the `--json` shapes (`run/events.py`) with what a watched run adds.

`start` has the keys of a preset run's (`workload` "watch", `preset` the run's name, `config` null, `steps` null
when unknown) and a `watch` object (name, pid, host, start, rank, argv, and what the run trains where the hook was
told: `model` and `batch`, `workload.py`; an older stream has neither); `setup` adds `device` (the clock may
move to CUDA after the first steps); `step` and `end` are `events.step_event` and `events.end_event` as they
are. Two kinds are a watched run's own: `metric` (the user's extras at the end of an interval: learning rate,
grad norm, ...) and `note` (something the reader should know: a non-finite loss, the clock moved to CUDA, the
monitor stopped)."""

from __future__ import annotations

import math
import sys
from typing import Any, Mapping

from ..run import events
from ..run.snapshot import RunInfo
from .store import RunMeta

WORKLOAD = "watch"


def start_event(meta: RunMeta, device: str, steps: int | None, warmup: int, env: Mapping[str, Any],
                model: Mapping[str, Any] | None = None, batch: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """No 0.2 s contention check at the start of the user's training (`contention` null): the step lines carry
    the sampler's. `model` and `batch`: what the run trains (`workload.py`; null where not told)."""
    return events.start_line(
        preset=meta.name, workload=WORKLOAD, device=device, steps=steps, warmup=warmup, env=env,
        watch={"name": meta.name, "pid": meta.pid, "host": meta.host, "start": meta.start, "rank": meta.rank,
               "argv": list(sys.argv), "model": dict(model) if model else None,
               "batch": dict(batch) if batch else None})


def setup_event(info: RunInfo) -> dict[str, Any]:
    return {**events.setup_event(info), "device": info.device}


def _value(v: float) -> float | None:
    return float(f"{v:.6g}") if math.isfinite(v) else None


def metric_event(step: int, values: Mapping[str, float]) -> dict[str, Any]:
    """The user's extras at `step` (non-finite values null)."""
    return {"event": "metric", "step": step, "values": {k: _value(v) for k, v in values.items()}}


def note_event(step: int, message: str) -> dict[str, Any]:
    return {"event": "note", "step": step, "message": message}
