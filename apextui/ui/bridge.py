"""From the runner's delivery thread to the UI: accumulate, coalesce, post.

`Runner` calls a `RunBridge` on its delivery thread for every snapshot. The
bridge folds the snapshot's new steps into bounded histories under a lock and
posts a `RunUpdated` message only when none is waiting and the UI has not
taken the state for `min_interval` seconds ("push when idle"); otherwise it
only marks itself dirty and the app, which re-checks `dirty` `min_interval`
after each `take()`, pulls it ("pull while busy"). So however fast snapshots
come, at most one message is queued and about 1/min_interval a second are
posted; `take()` always returns the latest state, so nothing is lost, and the
final snapshot is always posted at once.

The bridge also keeps a smoothed loss (`LossAverage`) for the run pane: a single batch's loss can dip below
the data's entropy floor, the expected loss cannot, so the pane sets the floor against the smoothed one.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from textual.message import Message

from apextui.core.monitor.sampler import METRIC_UNITS
from apextui.core.measure.stats import Downsampled
from apextui.core.run.merge import MergedRecord
from apextui.core.run.snapshot import Snapshot

from .messages import RunUpdated

LOSS_POINTS = 256  # whole-run loss curve, averaged down as the run grows (`Downsampled`)
STEP_POINTS = 240  # most recent step times
MONITOR_POINTS = 120  # most recent monitor readings (2 minutes at 1 s)
LOSS_SMOOTHING_STEPS = 20  # the smoothed loss averages over about this many steps


class LossAverage:
    """An exponential moving average of the loss, α = 2 / (N + 1) a step with N = `steps` (the weights of
    the last N steps add up to about 86 %). A record of a block of k steps carries only its last step's loss
    (`StepRecord.steps`): it counts as k steps at that loss, weight 1 - (1 - α)^k, so the average spans the
    same steps however the run is timed."""

    def __init__(self, steps: int = LOSS_SMOOTHING_STEPS) -> None:
        self.alpha = 2.0 / (steps + 1)
        self.value: float | None = None

    def add(self, loss: float, steps: int = 1) -> None:
        if self.value is None:
            self.value = loss
            return
        self.value += (1.0 - (1.0 - self.alpha) ** max(1, steps)) * (loss - self.value)


@dataclass(frozen=True)
class RunView:
    """Everything the live pane shows for one run at one moment (immutable)."""

    run_id: int
    snapshot: Snapshot
    step_ms: tuple[float, ...]  # recent step times
    losses: tuple[float, ...]  # whole run, downsampled
    first_loss: float | None
    last_ms: float | None
    last_loss: float | None  # the last batch's
    loss_scale: float | None
    monitor: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # metric -> recent readings
    gpu_util: Mapping[int, tuple[float, ...]] = field(default_factory=dict)  # GPU (NVML index) -> recent util %
    updates: int = 0  # snapshots folded in so far
    smooth_loss: float | None = None  # `LossAverage` of the losses so far
    # a data-parallel run's latest interval with each rank's time: kept from the snapshot that brought it, since
    # the one the UI takes may bring no step (a coalesced final snapshot, a monitor reading)
    last_ranks: MergedRecord | None = None

    @property
    def finished(self) -> bool:
        return self.snapshot.finished


class RunBridge:
    """The Runner callback for one run. `__call__` runs on the delivery thread, `take` on the UI thread."""

    def __init__(self, run_id: int, post: Callable[[Message], object], min_interval: float = 0.1) -> None:
        self.run_id = run_id
        self._post = post
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._pending = False
        self._dirty = False
        self._last_delivery = float("-inf")
        self._closed = False
        self._snapshot: Snapshot | None = None
        self._step_ms: deque[float] = deque(maxlen=STEP_POINTS)
        self._losses = Downsampled(LOSS_POINTS)
        self._first_loss: float | None = None
        self._last_ms: float | None = None
        self._last_loss: float | None = None
        self._smooth = LossAverage()
        self._scale: float | None = None
        self._monitor: dict[str, deque[float]] = {k: deque(maxlen=MONITOR_POINTS) for k in METRIC_UNITS}
        self._monitor_time: float | None = None
        self._gpu_util: dict[int, deque[float]] = {}
        self._updates = 0
        self._last_ranks: MergedRecord | None = None
        self.posted = 0  # messages posted (for tests and the overhead check)

    # ---- delivery thread ----------------------------------------------------------------
    def __call__(self, snap: Snapshot) -> None:
        with self._lock:
            if self._closed:
                return
            self._fold(snap)
            self._dirty = True
            if self._pending:
                return
            now = time.monotonic()
            if not snap.finished and now - self._last_delivery < self.min_interval:
                return  # too soon after the last delivery: the UI pulls it (see `dirty`)
            self._pending = True
            self._last_delivery = now
        try:
            self._post(RunUpdated(self))
            self.posted += 1
        except Exception:  # noqa: BLE001 - the app is gone (its loop closed): nothing to show
            with self._lock:
                self._closed = True

    def _fold(self, snap: Snapshot) -> None:
        self._snapshot = snap
        self._updates += 1
        warmup = snap.info.warmup if snap.info is not None else 0
        for rec in snap.new_steps:
            if rec.step > warmup:  # warm-up steps would flatten the step-time sparkline
                self._step_ms.append(rec.ms)
            self._last_ms = rec.ms
            if rec.loss is not None and math.isfinite(rec.loss):
                self._losses.add(rec.loss)
                self._smooth.add(rec.loss, rec.steps)
                self._last_loss = rec.loss
                if self._first_loss is None:
                    self._first_loss = rec.loss
            if rec.loss_scale is not None:
                self._scale = rec.loss_scale
            if isinstance(rec, MergedRecord) and rec.rank_ms:
                self._last_ranks = rec
        reading = snap.monitor
        if reading is not None and reading.time != self._monitor_time:
            self._monitor_time = reading.time
            for name, value in reading.metrics().items():
                if value is not None and name in self._monitor:
                    self._monitor[name].append(float(value))
            for gpu in reading.gpus:
                if gpu.util_pct is not None:
                    self._gpu_util.setdefault(gpu.index, deque(maxlen=MONITOR_POINTS)).append(float(gpu.util_pct))

    # ---- UI thread ----------------------------------------------------------------------
    def take(self) -> RunView | None:
        """The latest state; re-arms posting. None before the first snapshot."""
        with self._lock:
            self._pending = False
            self._dirty = False
            self._last_delivery = time.monotonic()
            snap = self._snapshot
            if snap is None:
                return None
            return RunView(
                run_id=self.run_id, snapshot=snap, step_ms=tuple(self._step_ms), losses=self._losses.snapshot(),
                first_loss=self._first_loss, last_ms=self._last_ms, last_loss=self._last_loss,
                loss_scale=self._scale, monitor={k: tuple(v) for k, v in self._monitor.items()},
                gpu_util={k: tuple(v) for k, v in self._gpu_util.items()},
                updates=self._updates, smooth_loss=self._smooth.value, last_ranks=self._last_ranks,
            )

    @property
    def dirty(self) -> bool:
        """Snapshots arrived since the last `take()`."""
        return self._dirty

    def close(self) -> None:
        """Stop posting (the app is shutting down)."""
        with self._lock:
            self._closed = True
