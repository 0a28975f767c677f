"""Step clocks: what apextui reports as ms/step, timed so that timing does not change the loop it times.

`CudaClock` times with CUDA events recorded on the stream and never synchronises inside a step: finished
events are read in batches with `Event.query()`; the loss (and AMP loss scale) is copied asynchronously
into a pinned host ring so reading it later costs no synchronisation either. `CpuClock` uses
`time.perf_counter`. Both time an interval from the end of the previous one to the end of this one, so
gaps between steps are counted: their sum is the loop's wall time.

**Short steps are timed in blocks** (`BlockSchedule`). Warm-up steps are timed one by one; at the end of
the warm-up the clock takes the warm-up's second half as an estimate of a step and, where steps are
shorter than the block target, times the measured steps in blocks of k consecutive steps (k so that a
block lasts at least the target, but at most measured steps / `MIN_BLOCKS`, so that a run keeps at least
that many timed intervals). A block is one interval: one event (one loss copy) for k steps, one record
whose `ms` is the block's per-step mean and whose `steps` is k. The steps inside a block cost the clock
one comparison each. Steps as long as the target or longer are timed one by one (k = 1).
Why: on a 0.2 ms step every per-step event, loss copy, record and JSON line is host work the user's own
loop does not have; with blocks the monitor's work per second is bounded whatever the step time.

**The block target follows the clock's own cost.** During the warm-up the clock times its own work on an
interval (the event records and loss copies: on the H200's host 115-145 µs, the CUDA calls of a host-bound
step) and sets the target so that this work is at most `CLOCK_SHARE` of a block: `BLOCK_TARGET_MS` (5 ms)
where an interval costs 12.5 µs or less, longer where it costs more (about 50 ms on that host). Why: on a
host-bound step the GPU waits for the host, so every microsecond of the clock's work adds to the step; a
fixed 5 ms target cost such steps 1-2 % there. The target is capped at `MAX_TARGET_MS` (about one hand-over
interval), so that a run whose clock calls read slow still shows its steps about 4 times a second: the calls' time
includes any wait for room in the GPU's launch queue, which on a GPU-bound step is no cost to the loop.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

BLOCK_TARGET_MS = 5.0  # steps shorter than this are timed in blocks at least this long
MIN_BLOCKS = 10  # ... but never fewer timed intervals than this in a run's measured steps
CLOCK_SHARE = 0.0025  # the clock's own work on an interval: at most this share of a block (the target grows)
MAX_TARGET_MS = 250.0  # ... up to this: a block lasts about one hand-over interval (runner.HARVEST_INTERVAL_S)
cost_clock = time.perf_counter  # what the clock times its own work with (tests pin it)


@dataclass(frozen=True)
class StepRecord:
    """One timed interval: a step, or a block of `steps` consecutive steps ending at `step`."""

    step: int  # 1-based: the interval's last step
    ms: float  # per step: the interval's time / steps
    loss: float | None = None  # the last step's
    opt_ms: float | None = None  # the last step's optimizer step alone, where the workload marks it
    loss_scale: float | None = None  # GradScaler's scale after the last step
    steps: int = 1


def block_steps(step_ms: float, measured_steps: int, target_ms: float = BLOCK_TARGET_MS,
                min_blocks: int = MIN_BLOCKS) -> int:
    """Steps a timed block holds, for steps of about `step_ms`: 1 for steps of `target_ms` or longer."""
    if not math.isfinite(step_ms) or step_ms <= 0 or step_ms >= target_ms:
        return 1
    return max(1, min(math.ceil(target_ms / step_ms - 1e-9), measured_steps // min_blocks))  # 1e-9: 5 / 0.2


class BlockSchedule:
    """Which steps end a timed interval, and the warm-up measurement that sets the block size.

    `warmup` and `steps` are the run's (0 and None: every step is its own interval). Calibration measures
    the warm-up's second half, steps `half + 1 .. warmup` (half = warmup // 2): the first steps of a run
    are slow (allocations, autotuning) and would make blocks too short."""

    def __init__(self, warmup: int = 0, steps: int | None = None) -> None:
        self.warmup = warmup
        self.last = steps
        self.block = 1
        self.open = 0  # steps in the interval not yet closed
        self.half = warmup // 2
        self.calibrates = steps is not None and warmup >= 2 and steps > warmup
        self.costs_s: list[float] = []  # the clock's own work on each warm-up interval
        self.target_ms = BLOCK_TARGET_MS
        self.interval_cost_ms = math.nan  # the clock's own work on an interval, measured in the warm-up
        # a data-parallel run: every rank must time the same blocks, so the ranks agree on the step time (and
        # keep the fixed BLOCK_TARGET_MS: a target from each rank's own cost could differ between ranks)
        self.agree: Callable[[float], float] | None = None

    def closes(self, step: int) -> bool:
        """Whether `step` ends an interval (the step after `open` steps of the current one)."""
        return self.block == 1 or self.open + 1 >= self.block or step == self.last

    def costing(self, step: int) -> bool:
        """Whether the clock times its own work on `step` (the warm-up's second half: set-up costs are over)."""
        return self.calibrates and self.half < step <= self.warmup

    def calibrate(self, step_ms: float) -> None:
        if self.costs_s:
            self.interval_cost_ms = statistics.median(self.costs_s) * 1000.0
        if self.agree is not None:
            step_ms = self.agree(step_ms)
        elif self.costs_s:
            self.target_ms = min(MAX_TARGET_MS, max(BLOCK_TARGET_MS, self.interval_cost_ms / CLOCK_SHARE))
        self.block = block_steps(step_ms, (self.last or 0) - self.warmup, self.target_ms)


class _IntervalClock:
    """What both clocks share: which steps end an interval (`schedule`), the open block's latest loss, and
    closing an open block early. Subclasses record an interval (`_record`) and take the two calibration
    readings (`_calibration`: at the end of step `half`, then at the end of the warm-up)."""

    schedule: BlockSchedule
    _done: int
    _last: tuple[Any, Any]
    _mark_cost = 0.0  # the last mark's own time, on a step whose cost is timed

    def end_step(self, step: int, loss: Any, scale: Any = None) -> None:
        self._done = step
        sched = self.schedule
        if not sched.closes(step):  # inside a block: all a step costs
            sched.open += 1
            self._last = (loss, scale)
            return
        if sched.costing(step):
            t0 = cost_clock()
            self._record(step, sched.open + 1, loss, scale)
            sched.costs_s.append(cost_clock() - t0 + self._mark_cost)
            self._mark_cost = 0.0
        else:
            self._record(step, sched.open + 1, loss, scale)
        if sched.calibrates and step in (sched.half, sched.warmup):
            self._calibration(last=step == sched.warmup)

    def close(self) -> None:
        """End the open block now (a run stopped inside one): its steps become one shorter interval."""
        if self.schedule.open:
            self._forget_mark()
            self._record(self._done, self.schedule.open, *self._last)

    def _record(self, step: int, n: int, loss: Any, scale: Any) -> None:
        raise NotImplementedError

    def _calibration(self, last: bool) -> None:
        raise NotImplementedError

    def _forget_mark(self) -> None:
        raise NotImplementedError


class CpuClock(_IntervalClock):
    """Host timing with perf_counter (`now`: another clock, a test's fake one); every interval is ready as soon as
    it ends."""

    def __init__(self, warmup: int = 0, steps: int | None = None,
                 now: Callable[[], float] | None = None) -> None:
        self.schedule = BlockSchedule(warmup, steps)
        self._now = now or time.perf_counter  # looked up here: a test that pins time.perf_counter pins this
        self._prev_end = self._now()
        self._mark: float | None = None
        self._done = 0  # steps ended
        self._last: tuple[Any, Any] = (None, None)  # the open block's latest loss and scale (no copy)
        self._cal_start = 0.0
        self._ready: list[StepRecord] = []

    def start(self) -> None:
        self._prev_end = self._cal_start = self._now()

    def mark(self) -> None:
        """Called by a workload just before its optimizer step (read only on a step that ends an interval)."""
        if self.schedule.closes(self._done + 1):
            self._mark = self._now()

    def _calibration(self, last: bool) -> None:
        sched = self.schedule
        if last:
            sched.calibrate((self._prev_end - self._cal_start) * 1000.0 / (sched.warmup - sched.half))
        else:
            self._cal_start = self._prev_end

    def _forget_mark(self) -> None:
        self._mark = None

    def _record(self, step: int, n: int, loss: Any, scale: Any) -> None:
        end = self._now()
        self.schedule.open = 0
        self._ready.append(StepRecord(
            step=step,
            ms=(end - self._prev_end) * 1000.0 / n,
            loss=float(loss.detach()) if loss is not None else None,
            opt_ms=(end - self._mark) * 1000.0 if self._mark is not None else None,
            loss_scale=float(scale.detach()) if scale is not None else None,
            steps=n,
        ))
        self._prev_end = end
        self._mark = None

    def pending(self) -> int:
        return len(self._ready)

    def harvest(self, wait: bool = False) -> list[StepRecord]:
        """Finished intervals since the last harvest."""
        out, self._ready = self._ready, []
        return out


class CudaClock(_IntervalClock):
    """CUDA-event timing with batched, non-blocking reads.

    Per interval it costs the training thread one event record and one or two asynchronous 4-byte copies
    (loss, loss scale) into a pinned host ring; a step inside a block costs one comparison. Events are recorded
    on the stream the clock started on, looked up once: `Event.record()` with no stream looks the current
    stream up on every call, which on the H200 took 6 of its 8 µs. On a host-bound
    step every CUDA call and tensor index counts (on the H200 the first version of this clock cost fused_amp
    331 µs a step, this one 158: docs/results-h200.md), so the ring's per-slot views are made once, finished
    values are read through a NumPy view of the ring, and events are reused from a pool instead of created
    and destroyed every step.
    """

    def __init__(self, torch_module: Any, ring: int = 1024, warmup: int = 0, steps: int | None = None) -> None:
        self.torch = torch_module
        self.ring = ring
        self.schedule = BlockSchedule(warmup, steps)
        self._host = torch_module.empty((ring, 2), dtype=torch_module.float32, pin_memory=True)
        self._loss_slots = self._host[:, 0].unbind(0)  # one 0-d view per slot, made once
        self._scale_slots = self._host[:, 1].unbind(0)
        self._read = self._host.numpy()  # the same memory: reading a value needs no tensor indexing
        self._pending: deque[tuple[int, Any, Any, bool, bool, int]] = deque()
        self._prev_end: Any = None
        self._stream: Any = None  # the training thread's stream, from `start`
        self._mark_event: Any = None
        self._done = 0  # steps ended
        self._last: tuple[Any, Any] = (None, None)  # the open block's latest loss and scale (no copy)
        self._free: list[Any] = []  # events whose times have been read: recorded again later
        # warm-up calibration: events of their own (pooled ones are recycled once read)
        self._cal: tuple[Any, Any] = ((torch_module.cuda.Event(enable_timing=True),
                                       torch_module.cuda.Event(enable_timing=True))
                                      if self.schedule.calibrates else (None, None))

    def _event(self) -> Any:
        return self._free.pop() if self._free else self.torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._stream = self.torch.cuda.current_stream()
        self._prev_end = self._event()
        self._prev_end.record(self._stream)

    def mark(self) -> None:
        """Called by a workload just before its optimizer step (recorded only on a step that ends an interval)."""
        step = self._done + 1
        if not self.schedule.closes(step):
            return
        if self.schedule.costing(step):
            t0 = cost_clock()
            self._mark_event = self._event()
            self._mark_event.record(self._stream)
            self._mark_cost = cost_clock() - t0
        else:
            self._mark_event = self._event()
            self._mark_event.record(self._stream)

    @staticmethod
    def _scalar(t: Any) -> Any:
        t = t.detach()
        return t.reshape(()) if t.dim() else t

    def _calibration(self, last: bool) -> None:
        sched = self.schedule
        if last:
            self._cal[1].record(self._stream)
            self._cal[1].synchronize()  # once, at the end of the warm-up
            sched.calibrate(self._cal[0].elapsed_time(self._cal[1]) / (sched.warmup - sched.half))
        else:
            self._cal[0].record(self._stream)

    def _forget_mark(self) -> None:
        self._mark_event = None

    def _record(self, step: int, n: int, loss: Any, scale: Any) -> None:
        self.schedule.open = 0
        slot = step % self.ring
        if loss is not None:
            self._loss_slots[slot].copy_(self._scalar(loss), non_blocking=True)
        if scale is not None:
            self._scale_slots[slot].copy_(self._scalar(scale), non_blocking=True)
        end = self._event()
        end.record(self._stream)
        self._pending.append((step, self._mark_event, end, loss is not None, scale is not None, n))
        self._mark_event = None
        if len(self._pending) >= self.ring - 1:  # never overwrite an unread slot
            self._pending[0][2].synchronize()

    def pending(self) -> int:
        return len(self._pending)

    def harvest(self, wait: bool = False) -> list[StepRecord]:
        """Intervals whose end event has completed; with wait=True, all of them."""
        if wait and self._pending:
            self._pending[-1][2].synchronize()
        out: list[StepRecord] = []
        read = self._read
        while self._pending and self._pending[0][2].query():
            step, mark, end, has_loss, has_scale, n = self._pending.popleft()
            slot = step % self.ring
            out.append(StepRecord(
                step=step,
                ms=self._prev_end.elapsed_time(end) / n,
                loss=float(read[slot, 0]) if has_loss else None,
                opt_ms=mark.elapsed_time(end) if mark is not None else None,
                loss_scale=float(read[slot, 1]) if has_scale else None,
                steps=n,
            ))
            self._free.append(self._prev_end)  # finished and read: free to record again
            if mark is not None:
                self._free.append(mark)
            self._prev_end = end
        return out
