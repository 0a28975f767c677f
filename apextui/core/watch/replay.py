"""A watched run's events back into the engine's `Snapshot`s, so the run pane, its bridge and the comparison
table show a watched run exactly as they show a preset's: the stream's one reader (`run/replay.py`), with the
monitor readings, metrics and notes a watched run adds.

Statistics are recomputed from the step lines read (`StepStats`, as the delivery thread computes them): the same
numbers as the run's own while its stream is whole; after rotation, over the newest lines kept. The `end` line's
summary, over every step, is the one a comparison row uses (`rows.py`)."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..measure.stats import Downsampled
from ..monitor.sampler import GPU_METRICS, METRIC_UNITS, NO_GPU, GpuReading, MonitorReading
from ..run import replay
from ..run.merge import MergedRecord
from ..run.replay import integer, number
from ..run.snapshot import Snapshot

METRIC_POINTS = 240  # each extra metric: its whole series, averaged down as the run grows (`Downsampled`)


def _gpu_metrics(g: Mapping[str, Any]) -> dict[str, Any]:
    return {k: number(g.get(k)) for k in GPU_METRICS}


def _reading(e: Mapping[str, Any], when: float) -> MonitorReading:
    listed = e.get("gpus")
    gpus = tuple(GpuReading(index=integer(g.get("index")), in_use=True, **_gpu_metrics(g))
                 for g in (listed if isinstance(listed, list) else ()) if isinstance(g, dict))
    values: dict[str, Any] = {k: number(e.get(k)) for k in METRIC_UNITS}  # the metric fields alone
    why = "not in the stream" if gpus else NO_GPU
    na = {k: why if k.startswith("gpu_") else "not in the stream" for k, v in values.items() if v is None}
    return MonitorReading(time=when, gpus=gpus, na=MappingProxyType(na), **values)


class Replay(replay.Replay):
    """The run's reader (`run/replay.py`) with what a watched run adds: its monitor readings from the step lines,
    its `metric` and `note` lines; `snapshot()` is the run as it stands."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.metrics: dict[str, Downsampled] = {}
        self._monitor: MonitorReading | None = None
        self._monitor_key: tuple[Any, ...] | None = None

    @property
    def name(self) -> str:
        return str(self.start.get("preset")) if self.start else "?"

    @property
    def started(self) -> float | None:
        watch = self.start.get("watch") if self.start else None
        return number(watch.get("start")) if isinstance(watch, dict) else None

    def on_step(self, line: dict[str, Any]) -> None:
        key = tuple(line.get(k) for k in METRIC_UNITS) + (repr(line.get("gpus")),)
        if key != self._monitor_key:  # a new sample (the bridge keeps a reading's history by its time)
            self._monitor_key = key
            self._monitor = _reading(line, time.time())

    def on_other(self, line: dict[str, Any]) -> None:
        kind = line.get("event")
        if kind == "metric":
            values = line.get("values")  # a line of another shape (a damaged stream) is skipped, as a bad line is
            for name, value in (values.items() if isinstance(values, dict) else ()):
                v = number(value)
                if v is not None:
                    self.metrics.setdefault(str(name), Downsampled(METRIC_POINTS)).add(v)
        elif kind == "note" and isinstance(line.get("message"), str):
            self.notes.append(line["message"])

    def snapshot(self) -> Snapshot:
        elapsed = 0.0
        if number(self.summary.get("elapsed_s")) is not None:
            elapsed = float(self.summary["elapsed_s"])
        elif self.started is not None:
            elapsed = max(0.0, time.time() - self.started)
        return self.snapshot_at(elapsed, self._monitor)

    def metric_history(self) -> dict[str, tuple[float, ...]]:
        return {k: v.snapshot() for k, v in self.metrics.items()}


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
            ms = number(steps[-1].get("ms")) if steps else None
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
