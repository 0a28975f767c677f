"""Per-step clocks.

`CudaClock` times steps with CUDA events recorded on the stream and never
synchronises inside a step: finished events are read in batches with
`Event.query()`; the loss (and AMP loss scale) is copied asynchronously into a
pinned host ring so reading it later costs no synchronisation either.
`CpuClock` uses `time.perf_counter`. Both time a step from the end of the
previous step to the end of this one, so gaps between steps are counted.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepRecord:
    """One finished step."""

    step: int  # 1-based
    ms: float
    loss: float | None = None
    opt_ms: float | None = None  # optimizer step alone, where the workload marks it
    loss_scale: float | None = None  # GradScaler's scale after this step


class CpuClock:
    """Host timing with perf_counter; every step is ready as soon as it ends."""

    def __init__(self) -> None:
        self._prev_end = time.perf_counter()
        self._mark: float | None = None
        self._ready: list[StepRecord] = []

    def start(self) -> None:
        self._prev_end = time.perf_counter()

    def mark(self) -> None:
        """Called by a workload just before its optimizer step."""
        self._mark = time.perf_counter()

    def end_step(self, step: int, loss: Any, scale: Any = None) -> None:
        end = time.perf_counter()
        opt_ms = (end - self._mark) * 1000.0 if self._mark is not None else None
        self._ready.append(StepRecord(
            step=step,
            ms=(end - self._prev_end) * 1000.0,
            loss=float(loss.detach()) if loss is not None else None,
            opt_ms=opt_ms,
            loss_scale=float(scale.detach()) if scale is not None else None,
        ))
        self._prev_end = end
        self._mark = None

    def pending(self) -> int:
        return len(self._ready)

    def harvest(self, wait: bool = False) -> list[StepRecord]:
        """Finished steps since the last harvest."""
        out, self._ready = self._ready, []
        return out


class CudaClock:
    """CUDA-event timing with batched, non-blocking reads.

    Per step it costs the training thread one event record and one or two asynchronous 4-byte copies (loss,
    loss scale) into a pinned host ring. On a host-bound step every CUDA call and tensor index counts (on
    the H200 the first version of this clock cost fused_amp 331 µs a step, this one 158:
    docs/results-h200.md), so the ring's per-slot views are made once, finished values are read through a
    NumPy view of the ring, and events are reused from a pool instead of created and destroyed every step.
    """

    def __init__(self, torch_module: Any, ring: int = 1024) -> None:
        self.torch = torch_module
        self.ring = ring
        self._host = torch_module.empty((ring, 2), dtype=torch_module.float32, pin_memory=True)
        self._loss_slots = self._host[:, 0].unbind(0)  # one 0-d view per slot, made once
        self._scale_slots = self._host[:, 1].unbind(0)
        self._read = self._host.numpy()  # the same memory: reading a value needs no tensor indexing
        self._pending: deque[tuple[int, Any, Any, bool, bool]] = deque()
        self._prev_end: Any = None
        self._mark_event: Any = None
        self._free: list[Any] = []  # events whose times have been read: recorded again later

    def _event(self) -> Any:
        return self._free.pop() if self._free else self.torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._prev_end = self._event()
        self._prev_end.record()

    def mark(self) -> None:
        """Called by a workload just before its optimizer step."""
        self._mark_event = self._event()
        self._mark_event.record()

    @staticmethod
    def _scalar(t: Any) -> Any:
        t = t.detach()
        return t.reshape(()) if t.dim() else t

    def end_step(self, step: int, loss: Any, scale: Any = None) -> None:
        slot = step % self.ring
        if loss is not None:
            self._loss_slots[slot].copy_(self._scalar(loss), non_blocking=True)
        if scale is not None:
            self._scale_slots[slot].copy_(self._scalar(scale), non_blocking=True)
        end = self._event()
        end.record()
        self._pending.append((step, self._mark_event, end, loss is not None, scale is not None))
        self._mark_event = None
        if len(self._pending) >= self.ring - 1:  # never overwrite an unread slot
            self._pending[0][2].synchronize()

    def pending(self) -> int:
        return len(self._pending)

    def harvest(self, wait: bool = False) -> list[StepRecord]:
        """Steps whose end event has completed; with wait=True, all of them."""
        if wait and self._pending:
            self._pending[-1][2].synchronize()
        out: list[StepRecord] = []
        read = self._read
        while self._pending and self._pending[0][2].query():
            step, mark, end, has_loss, has_scale = self._pending.popleft()
            slot = step % self.ring
            out.append(StepRecord(
                step=step,
                ms=self._prev_end.elapsed_time(end),
                loss=float(read[slot, 0]) if has_loss else None,
                opt_ms=mark.elapsed_time(end) if mark is not None else None,
                loss_scale=float(read[slot, 1]) if has_scale else None,
            ))
            self._free.append(self._prev_end)  # finished and read: free to record again
            if mark is not None:
                self._free.append(mark)
            self._prev_end = end
        return out
