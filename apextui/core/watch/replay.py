"""A watched run's events back into the engine's `Snapshot`s, so the run pane, its bridge and the comparison
table show a watched run exactly as they show a preset's.

Statistics are recomputed from the step lines read (`StepStats`, as the delivery thread computes them): the same
numbers as the run's own while its stream is whole; after rotation, over the newest lines kept. The `end` line's
summary, over every step, is the one a comparison row uses (`rows.py`)."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..monitor.sampler import GPU_METRICS, METRIC_UNITS, NO_GPU, GpuReading, MonitorReading
from ..run.merge import MergedRecord
from ..run.snapshot import RunInfo, Snapshot, Status
from ..measure.stats import StepStats
from ..run.timing import StepRecord
from .lines import WORKLOAD

METRIC_POINTS = 240  # each extra metric: its most recent values


def _float(v: Any) -> float | None:
    """A finite number as a float; None for anything else (an integer too large for a float too)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _int(v: Any, default: int = 0) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _record(e: Mapping[str, Any]) -> StepRecord | None:
    ms = _float(e.get("ms"))
    step = e.get("step")
    if ms is None or not isinstance(step, int):
        return None
    return StepRecord(step=step, ms=ms, loss=_float(e.get("loss")), opt_ms=_float(e.get("opt_ms")),
                      loss_scale=_float(e.get("loss_scale")), steps=max(1, _int(e.get("steps"), 1)))


def _gpu_metrics(g: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _float(g.get(k)) for k in GPU_METRICS}


def _reading(e: Mapping[str, Any], when: float) -> MonitorReading:
    listed = e.get("gpus")
    gpus = tuple(GpuReading(index=_int(g.get("index")), in_use=True, **_gpu_metrics(g))
                 for g in (listed if isinstance(listed, list) else ()) if isinstance(g, dict))
    values: dict[str, Any] = {k: _float(e.get(k)) for k in METRIC_UNITS}  # the metric fields alone
    why = "not in the stream" if gpus else NO_GPU
    na = {k: why if k.startswith("gpu_") else "not in the stream" for k, v in values.items() if v is None}
    return MonitorReading(time=when, gpus=gpus, na=MappingProxyType(na), **values)


class Replay:
    """Folds events in (`add`); `snapshot()` is the run as it stands, its new steps those since the last one."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None
        self.setup: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.info: RunInfo | None = None
        self.stats = StepStats(0)
        self.done = 0
        self.final_loss: float | None = None
        self.status: Status = "starting"
        self.error: str | None = None
        self.notes: list[str] = []
        self.metrics: dict[str, deque[float]] = {}
        self._new: list[StepRecord] = []
        self._monitor: MonitorReading | None = None
        self._monitor_key: tuple[Any, ...] | None = None

    @property
    def name(self) -> str:
        return str(self.start.get("preset")) if self.start else "?"

    @property
    def started(self) -> float | None:
        watch = self.start.get("watch") if self.start else None
        return _float(watch.get("start")) if isinstance(watch, dict) else None

    def add(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            kind = e.get("event")
            if kind == "start":
                self.start = e
                self.stats = StepStats(_int(e.get("warmup")))
                self._set_info()
            elif kind == "setup":
                self.setup = e
                self._set_info()
            elif kind == "step":
                rec = _record(e)
                if rec is None:
                    continue
                self.stats.add(rec.ms, rec.steps)
                self.done += rec.steps
                if rec.loss is not None:
                    self.final_loss = rec.loss
                self._new.append(rec)
                key = tuple(e.get(k) for k in METRIC_UNITS) + (repr(e.get("gpus")),)
                if key != self._monitor_key:  # a new sample (the bridge keeps a reading's history by its time)
                    self._monitor_key = key
                    self._monitor = _reading(e, time.time())
            elif kind == "metric":
                values = e.get("values")  # a line of another shape (a damaged stream) is skipped, as a bad line is
                for name, value in (values.items() if isinstance(values, dict) else ()):
                    v = _float(value)
                    if v is not None:
                        self.metrics.setdefault(str(name), deque(maxlen=METRIC_POINTS)).append(v)
            elif kind == "note" and isinstance(e.get("message"), str):
                self.notes.append(e["message"])
            elif kind == "end":
                self.end = e
                status = e.get("status")
                self.status = status if status in ("ok", "stopped", "failed") else "failed"
                self.error = e.get("error") if isinstance(e.get("error"), str) else None

    def _set_info(self) -> None:
        s, u = self.start or {}, self.setup or {}
        name = str(s.get("preset") or "?")
        self.info = RunInfo(
            preset=name, workload=WORKLOAD, variant=name, device=str(u.get("device") or s.get("device") or "cpu"),
            size_name="default", size={}, steps=_int(s.get("steps")), warmup=_int(s.get("warmup")), amp="none",
            units=str(u.get("units") or "steps"), units_per_step=max(1, _int(u.get("units_per_step"), 1)),
            baseline="", params=s.get("params") if isinstance(s.get("params"), int) else None)
        if self.status == "starting" and self.setup is not None:
            self.status = "running"

    def gone(self, error: str) -> None:
        """The writer died without an `end` line: the run is over, failed, and `error` says when."""
        self.status, self.error = "failed", error

    def snapshot(self) -> Snapshot:
        summary = self.stats.summary()
        info = self.info
        elapsed = 0.0
        summary_line = self.end.get("summary") if self.end is not None else None
        if isinstance(summary_line, dict) and _float(summary_line.get("elapsed_s")) is not None:
            elapsed = float(summary_line["elapsed_s"])
        elif self.started is not None:
            elapsed = max(0.0, time.time() - self.started)
        new, self._new = tuple(self._new), []
        return Snapshot(
            status=self.status, info=info, steps_done=self.done, new_steps=new, stats=summary,
            throughput=summary.throughput(info.units_per_step) if summary and info else None, skipped_steps=0,
            monitor=self._monitor, elapsed_s=elapsed, error=self.error, final_loss=self.final_loss)

    def metric_history(self) -> dict[str, tuple[float, ...]]:
        return {k: tuple(v) for k, v in self.metrics.items()}


class RankTimes:
    """The other ranks of a torchrun run, each followed in its own stream: every rank's latest ms/step, which
    `with_ranks` puts on rank 0's latest interval as a data-parallel run's merged record has them (the run pane
    then shows each rank and the slowest). Each rank sizes its own blocks, so these are each rank's latest
    interval, not one step of every rank."""

    def __init__(self, metas: list[Any]) -> None:
        from .reader import Follower

        self.ranks = [int(m.rank) for m in metas]
        self._followers = {int(m.rank): Follower(Path(m.path)) for m in metas}
        self.latest: dict[int, float] = {}

    def poll(self) -> None:
        for rank, follower in self._followers.items():
            steps = [e for e in follower.poll() if e.get("event") == "step"]
            ms = _float(steps[-1].get("ms")) if steps else None
            if ms is not None:
                self.latest[rank] = ms

    def with_ranks(self, snap: Snapshot) -> Snapshot:
        last = snap.last
        if last is None or len(self.latest) < 2:
            return snap
        rank_ms = tuple(self.latest.get(r, math.nan) for r in self.ranks)
        slowest = max(range(len(rank_ms)), key=lambda i: rank_ms[i] if math.isfinite(rank_ms[i]) else -1.0)
        merged = MergedRecord(step=last.step, ms=last.ms, loss=last.loss, opt_ms=last.opt_ms,
                              loss_scale=last.loss_scale, steps=last.steps, rank_ms=rank_ms, slowest_rank=slowest)
        return replace(snap, new_steps=(*snap.new_steps[:-1], merged))
