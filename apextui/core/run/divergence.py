"""Whether a run's training diverged, read from its step records in the training thread: a non-finite loss, or
(fp16 with GradScaler) too many skipped steps in a row; the delivery thread counts the skips for the snapshots."""

from __future__ import annotations

import math

from .timing import StepRecord

# An fp16 run (GradScaler) fails once this many steps in a row were skipped: each skip halves the loss
# scale, so 20 in a row take the default 2**16 down to 2**-4 -- gradients that overflow fp16 even then
# are inf/NaN, not merely large (the training diverged). Occasional skips (normal) never fail a run.
MAX_CONSECUTIVE_SKIPS = 20


class SkipCounter:
    """Steps GradScaler skipped, inferred from its scale: it lowers the scale only after skipping a step
    (inf/NaN gradients) and raises it only after a run of clean steps. The training thread (to fail a run
    that keeps skipping) and the delivery thread (to report the count) each feed it the same records."""

    def __init__(self) -> None:
        self.total = 0
        self.in_a_row = 0
        self.first_of_row = 0  # the first step of the current row of skips
        self.scale: float | None = None

    def add(self, rec: StepRecord) -> bool:
        """Feed the next interval; True when it had a skipped step. A block of several steps is read once:
        each skip halves the scale, so a scale 2**-n of the previous one counts n skips (a growth inside
        the same block, once in 2000 clean steps by default, would hide one)."""
        if rec.loss_scale is None:
            return False
        prev, self.scale = self.scale, rec.loss_scale
        skipped = prev is not None and rec.loss_scale < prev
        if skipped:
            n = max(1, round(math.log2(prev / rec.loss_scale))) if rec.loss_scale > 0 else 1  # type: ignore[operator]
            n = min(n, rec.steps)
            if self.in_a_row == 0:
                self.first_of_row = rec.step - n + 1
            self.total += n
            self.in_a_row += n
        else:
            self.in_a_row = 0
        return skipped


class LossGuard:
    """Checks harvested steps in the training thread (no extra synchronisation): a run without GradScaler
    fails at its first non-finite loss; a GradScaler run fails after MAX_CONSECUTIVE_SKIPS skips in a row."""

    def __init__(self, uses_grad_scaler: bool) -> None:
        self.uses_grad_scaler = uses_grad_scaler
        self.skips = SkipCounter()

    def divergence(self, records: list[StepRecord]) -> str | None:
        """The reason to fail the run, or None."""
        for rec in records:
            if self.uses_grad_scaler:
                self.skips.add(rec)
                if self.skips.in_a_row >= MAX_CONSECUTIVE_SKIPS:
                    return (f"GradScaler skipped {self.skips.in_a_row} steps in a row (steps "
                            f"{self.skips.first_of_row}-{rec.step}, loss scale now {self.skips.scale:.3g}): "
                            f"the gradients stay inf/NaN, the training diverged (try a lower lr)")
            elif rec.loss is not None and not math.isfinite(rec.loss):
                return f"loss became {rec.loss} at step {rec.step} (the training diverged; try a lower lr)"
        return None
