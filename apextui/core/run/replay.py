"""A run's JSON lines (docs/json.md) read back into the engine's `Snapshot`s: the one reader of the stream.

Two front ends read a stream instead of a runner's callback: the TUI's data-parallel run (`launched.py`: the
merged `--json` stream of `apextui --nproc N`) and `apextui attach` (`watch/replay.py`: a watched run's lines,
which add `metric` and `note`). Both fold the same lines the same way here: the run's info from `start` and
`setup`, each `step` line a record (a data-parallel one with its ranks), statistics recomputed from the records
read (`StepStats`, as the delivery thread computes them), the outcome from `end` or `unavailable`. A damaged
line (a number too large for a float, a field of the wrong type) is taken as missing, never raised on."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..measure.mfu import Peak, StepFlops
from ..presets import recorded
from .merge import MergedRecord
from .snapshot import TERMINAL, RunInfo, Snapshot, Status
from ..measure.details import CorrectnessCheck, Distributed
from ..measure.stats import StepStats
from .timing import StepRecord


def number(v: Any) -> float | None:
    """A finite number as a float; None for anything else (an integer too large for a float too)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def integer(v: Any, default: int = 0) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def record_from(line: Mapping[str, Any]) -> StepRecord | None:
    """A `step` line's record: a data-parallel interval (`rank_ms`) as a `MergedRecord`; None without a step
    number and a time."""
    ms, step = number(line.get("ms")), line.get("step")
    if ms is None or not isinstance(step, int):
        return None
    fields: dict[str, Any] = dict(
        step=step, ms=ms, loss=number(line.get("loss")), opt_ms=number(line.get("opt_ms")),
        loss_scale=number(line.get("loss_scale")), steps=max(1, integer(line.get("steps"), 1)))
    rank_ms = line.get("rank_ms")
    if not isinstance(rank_ms, list) or not rank_ms:
        return StepRecord(**fields)
    return MergedRecord(**fields, rank_ms=tuple(v if (v := number(r)) is not None else math.nan for r in rank_ms),
                        slowest_rank=integer(line.get("slowest_rank")), throughput=number(line.get("throughput")))


def info_from(start: Mapping[str, Any], setup: Mapping[str, Any]) -> RunInfo:
    """The run's info from its `start` and `setup` lines (either may still be empty); the device is the setup's
    where it has one (a watched run's clock may move to CUDA after its first steps)."""
    name = str(start.get("preset") or "?")
    size = start.get("size_params")
    workload, point = recorded(start) if start.get("workload") else ("?", None)
    return RunInfo(
        preset=name, workload=str(workload), config=point,
        device=str(setup.get("device") or start.get("device") or "cpu"), size_name=str(start.get("size") or "default"),
        size=dict(size) if isinstance(size, dict) else {}, steps=integer(start.get("steps")),
        warmup=integer(start.get("warmup")), autocast=str(start.get("amp") or "none"),
        units=str(setup.get("units") or "steps"), units_per_step=max(1, integer(setup.get("units_per_step"), 1)),
        baseline=str(start.get("baseline") or ""), loss_floor=number(setup.get("loss_floor")),
        check=CorrectnessCheck.from_dict(setup["check"]) if isinstance(setup.get("check"), dict) else None,
        uses_grad_scaler=bool(setup.get("grad_scaler")),
        params=setup.get("params") if isinstance(setup.get("params"), int) else None,
        compile_s=number(setup.get("compile_s")), model_flops=StepFlops.from_dict(setup.get("model_flops")),
        peak=Peak.from_dict(setup.get("peak")))


class Replay:
    """Folds a run's lines in (`add`); `snapshot_at(elapsed_s)` is the run as it stands, its new steps those read
    since the last snapshot."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None
        self.setup: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.info: RunInfo | None = None
        self.stats = StepStats(0)
        self.done = 0
        self.final_loss: float | None = None
        self.loss_scale: float | None = None
        self.status: Status = "starting"
        self.error: str | None = None
        self._new: list[StepRecord] = []

    def add(self, lines: list[dict[str, Any]]) -> None:
        for e in lines:
            kind = e.get("event")
            if kind == "start":
                self.start = e
                self.stats = StepStats(integer(e.get("warmup")))
                self._set_info()
            elif kind == "setup":
                self.setup = e
                self._set_info()
            elif kind == "step":
                rec = record_from(e)
                if rec is None:
                    continue
                self.stats.add(rec.ms, rec.steps)
                # a step line's number counts every step up to it, timed or not (a watched loop's first step
                # starts the clock, done and never timed)
                self.done = max(self.done + rec.steps, rec.step)
                self.final_loss = rec.loss if rec.loss is not None else self.final_loss
                self.loss_scale = rec.loss_scale if rec.loss_scale is not None else self.loss_scale
                self._new.append(rec)
                self.on_step(e)
            elif kind == "end":
                self.end = e
                status = e.get("status")
                self.status = status if status in ("ok", "stopped", "failed") else "failed"
                self.error = e.get("error") if isinstance(e.get("error"), str) else None
                self.done = integer(self.summary.get("steps"), self.done) or self.done
            elif kind == "unavailable":
                self.status, self.error = "failed", f"unavailable: {e.get('reason')}"
            else:
                self.on_other(e)

    def on_step(self, line: dict[str, Any]) -> None:
        """A step line was taken (a watched run reads its monitor fields here)."""

    def on_other(self, line: dict[str, Any]) -> None:
        """A line of a kind this reader does not fold (a watched run's `metric` and `note`)."""

    @property
    def summary(self) -> dict[str, Any]:
        """The `end` line's summary (empty before it, or when it has none)."""
        s = self.end.get("summary") if self.end is not None else None
        return s if isinstance(s, dict) else {}

    def _set_info(self) -> None:
        self.info = info_from(self.start or {}, self.setup or {})
        if self.status == "starting" and self.setup is not None:
            self.status = "running"

    def gone(self, error: str) -> None:
        """The writer died without an `end` line: the run is over, failed, and `error` says when."""
        self.status, self.error = "failed", error

    def snapshot_at(self, elapsed_s: float, monitor: Any = None) -> Snapshot:
        # a finished run's last statistics keep its step times, as the delivery thread's do (measure/samples.py)
        st, info = self.stats.read(samples=self.status in TERMINAL), self.info
        new, self._new = tuple(self._new), []
        distributed = self.summary.get("distributed")
        return Snapshot(
            status=self.status, info=info, steps_done=self.done, new_steps=new, stats=st,
            throughput=st.throughput(info.units_per_step) if st and info else None,
            skipped_steps=integer(self.summary.get("skipped_steps")), monitor=monitor, elapsed_s=elapsed_s,
            error=self.error, final_loss=self.final_loss, loss_scale=self.loss_scale,
            distributed=Distributed.from_dict(distributed) if isinstance(distributed, dict) else None)
