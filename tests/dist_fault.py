"""torchrun entry point for tests/test_distributed.py: `apextui` on every rank, with one real fault on one rank.

Usage: torchrun ... tests/dist_fault.py MODE RANK STEP -- APEXTUI ARGS. MODE is `raise` (the step raises),
`hang` (the step never returns) or `die` (the process kills itself with SIGKILL), on rank RANK at step STEP;
`none` injects nothing. The fault is in the Transformer's step, where a user's bug or a stuck kernel would be.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from apextui.cli import main
from apextui.core.workloads import transformer


def inject(mode: str, rank: int, at: int) -> None:
    if mode == "none" or int(os.environ["RANK"]) != rank:
        return
    real = transformer.TransformerWorkload.step
    count = [0]

    def step(self, clock):  # type: ignore[no-untyped-def]
        count[0] += 1
        if count[0] == at:
            if mode == "raise":
                raise ValueError("injected fault")
            if mode == "hang":
                # SIGTERM's default action from here: once rank 0 has ended the run, torchrun SIGTERMs this rank, and
                # apextui's handler (stop after the current step) would wait for a step that never ends, until
                # torchrun's SIGKILL 30 s later (its grace is not settable for this path). Rank 0 sees the same hang.
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                while True:
                    time.sleep(1)
            if mode == "die":
                os.kill(os.getpid(), signal.SIGKILL)
        return real(self, clock)

    transformer.TransformerWorkload.step = step  # type: ignore[method-assign]


if __name__ == "__main__":
    mode, rank, at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    inject(mode, rank, at)
    raise SystemExit(main(sys.argv[5:]))
