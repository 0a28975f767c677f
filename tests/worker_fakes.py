"""Worker-process stand-ins for failures that a healthy CPU run cannot produce (a segfaulting
extension, a process that dies before reporting). Module level: the worker imports them by name."""

from __future__ import annotations

import os
import signal

from apextui.core.run import worker
from apextui.core.run.runner import Runner


def segfault_after_three_steps(request, conn, stop, log_path) -> None:
    """Train for real, then die of SIGSEGV once three measured steps have been sent to the parent."""
    worker.redirect_output(log_path)

    def send(snap) -> None:
        conn.send(snap)
        if snap.info is not None and snap.steps_done >= snap.info.warmup + 3:
            print("fake extension: about to crash", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)

    Runner(request, send).run()


def exit_before_reporting(request, conn, stop, log_path) -> None:
    os._exit(7)
