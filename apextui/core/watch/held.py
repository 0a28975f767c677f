"""What a watched run keeps of its steps until their block is read: Python-number losses, the extras given at a
block's end (a CUDA tensor's copied into a pinned ring, never read in the loop), and the tokens or samples counted.

Why apart from the hook: these are the values the training thread takes without looking at them (no `.item()`, no
synchronisation) and hands over with the block's interval once the clock has read it; the hook (`hook.py`) keeps the
clock and the hand-over. A value that is not a number is left out with one warning a kind (`values.py`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

from ..run.timing import StepRecord
from . import lines, values

RING = 1024  # pinned slots for tensor metrics, as the clock's ring for the loss
MAX_METRICS = 16  # tensor metrics a run may have (Python numbers: any number)
LOSS = "a loss is a tensor of one element or a Python number"
METRIC = "a metric is a number or a tensor of one element"

Warn = Callable[[str, str], None]  # (the kind of problem, once a kind; the message)


def _cuda(x: Any) -> bool:
    return values.is_tensor(x) and bool(getattr(x, "is_cuda", False))


class MetricRing:
    """Tensor metrics on CUDA: copied at the end of a block into pinned host slots, read once the block is done."""

    def __init__(self, torch: Any) -> None:
        self._host = torch.empty((RING, MAX_METRICS), dtype=torch.float32, pin_memory=True)
        self._read = self._host.numpy()
        self.columns: dict[str, int] = {}

    def put(self, step: int, name: str, value: Any) -> tuple[int, int] | None:
        col = self.columns.get(name)
        if col is None:
            if len(self.columns) >= MAX_METRICS:
                return None
            col = self.columns[name] = len(self.columns)
        slot = step % RING
        self._host[slot, col].copy_(value.detach().reshape(()), non_blocking=True)
        return slot, col

    def read(self, where: tuple[int, int]) -> float:
        return float(self._read[where])


class Held:
    """The values of steps whose block is not read yet. The hook writes `floats` and `last_float` inline (a step's
    cost); everything else goes through the methods. `torch`: the torch module, once the hook has it (a ring is made
    only for a CUDA tensor metric)."""

    def __init__(self, warn: Warn) -> None:
        self._warn = warn
        self.torch: Any = None
        self.floats: dict[int, float] = {}  # Python-number losses at the end of a block, by step
        self.last_float: tuple[int, float] | None = None
        self.metrics: dict[int, dict[str, Any]] = {}  # a block's extras, by its last step, until it is read
        self.last_metrics: tuple[int, dict[str, Any]] = (0, {})
        self.ring: MetricRing | None = None
        self.nonfinite = False  # a non-finite loss was noted (the first one only)

    def real(self, subject: str, x: Any, allowed: str) -> float | None:
        """`x` as a float, or None with one warning a kind of problem (the training goes on)."""
        try:
            return values.real(x)
        except values.BadValue as bad:
            self._warn(f"{subject}:{bad.key}", f"{subject} {bad}: left out ({allowed})")
            return None

    def checked_loss(self, loss: Any) -> Any:
        """A tensor loss the clock can read (one real element, with a value), else None with one warning."""
        bad = values.tensor_problem(loss)
        if bad is None:
            return loss
        self._warn(f"the loss:{bad.key}", f"the loss {bad}: left out ({LOSS}, e.g. the mean)")
        return None

    def metric(self, name: str, value: Any, step: int | None) -> Any:
        """One extra as the hand-over reads it: a float, or (at the end of a block, `step`) a CUDA tensor's slot in
        the pinned ring; None (one warning a kind of problem) when it is not a number."""
        subject = f"metric {name!r}"
        try:
            if not values.is_tensor(value):
                return self.real(subject, value, METRIC)
            bad = values.tensor_problem(value)
            if bad is not None:
                self._warn(f"{subject}:{bad.key}", f"{subject} {bad}: left out ({METRIC})")
                return None
            if step is None or not _cuda(value):
                return float(value.detach())
            if self.ring is None:
                self.ring = MetricRing(self.torch)
            where = self.ring.put(step, name, value)
            if where is None:
                self._warn("metrics", f"more than {MAX_METRICS} tensor metrics: {name!r} left out")
            return where
        except Exception as exc:  # noqa: BLE001 - an odd object: this value is left out, the monitor goes on
            self._warn(f"{subject}:error", f"{subject} could not be read ({type(exc).__name__}: {exc}): left out")
            return None

    def keep(self, n: int, metrics: dict[str, Any]) -> None:
        kept = {name: v for name, value in metrics.items() if (v := self.metric(name, value, n)) is not None}
        if kept:
            self.metrics[n] = kept

    def fill(self, records: list[StepRecord]) -> list[dict[str, Any]]:
        """The read intervals with their Python-number losses put in (in place); the lines their held extras make (a
        metric line a block, a note at the first non-finite loss). What was never read (a block closed early) goes."""
        out: list[dict[str, Any]] = []
        for i, rec in enumerate(records):
            if rec.loss is None and rec.step in self.floats:
                records[i] = rec = replace(rec, loss=self.floats.pop(rec.step))
            elif rec.loss is None and self.last_float is not None and self.last_float[0] == rec.step:
                records[i] = rec = replace(rec, loss=self.last_float[1])
            if rec.loss is not None and not math.isfinite(rec.loss) and not self.nonfinite:
                self.nonfinite = True
                out.append(lines.note_event(rec.step, f"the loss is {rec.loss} at step {rec.step} (the first "
                                                      "non-finite loss; training goes on)"))
            kept = self.metrics.pop(rec.step, None)
            if kept:
                ring = self.ring
                read = {k: ring.read(v) if isinstance(v, tuple) and ring is not None else v for k, v in kept.items()}
                out.append(lines.metric_event(rec.step, read))
        for step in [s for s in self.floats if s <= records[-1].step]:  # never read: a block closed early
            del self.floats[step]
        return out


class UnitCount:
    """The tokens or samples the steps trained on: the first kind given is the run's (the hook adds a plain positive
    number inline; anything else comes through `count`)."""

    def __init__(self, warn: Warn) -> None:
        self._warn = warn
        self.kind: str | None = None
        self.total = 0.0
        self.steps = 0

    def count(self, kind: str, units: Any) -> None:
        """A step's count, off the inline path: one that is not a positive finite number is left out (no throughput
        from it), with one warning a kind of problem."""
        if self.kind is not None and kind != self.kind:
            return
        try:
            value = values.count(units)
        except values.BadValue as bad:
            self._warn(f"{kind}:{bad.key}", f"{kind}= {bad}: this step's count is left out ({kind}= is the "
                       "number of tokens or samples the step trained on, a positive Python number)")
            return
        self.kind = kind
        self.total += value
        self.steps += 1

    def per_step(self) -> int | None:
        """The mean count a step, rounded (at least 1); None before any."""
        return max(1, round(self.total / self.steps)) if self.kind is not None and self.steps else None


__all__ = ["Held", "LOSS", "MAX_METRICS", "METRIC", "MetricRing", "RING", "UnitCount"]
