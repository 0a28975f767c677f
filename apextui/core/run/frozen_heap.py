"""Keep the garbage collector off the objects a workload's set-up made, for the measured steps."""

from __future__ import annotations

import gc


class FrozenHeap:
    """`gc.freeze()` for the measured steps, undone after them (Python docs, `gc.freeze`).

    Why: the objects a workload's set-up just made (the model's modules, torch.compile's graphs) are young, and
    the first collections after set-up walk all of them. A user's bare loop allocates and frees in balance and
    triggers no collection; the monitor keeps a few records and snapshots alive for a moment and does, so that
    walk (milliseconds, holding the GIL in whichever thread triggers it) would be the monitor's cost, charged
    to the steps. Frozen, a collection walks only what was allocated since. A process that froze its heap
    itself (the TUI app) is left as it is."""

    def __init__(self) -> None:
        self.frozen = False

    def __enter__(self) -> "FrozenHeap":
        if gc.get_freeze_count() == 0 and gc.isenabled():
            gc.freeze()
            self.frozen = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.frozen:
            gc.unfreeze()  # the workload's objects are collectable again once the run lets go of them
            self.frozen = False
