"""Imported by multiprocessing's forkserver, first of `worker.PRELOAD`: the import guards the server, so that it
dies with apextui's process (lifeline.py says why). Imported anywhere else it does nothing."""

from __future__ import annotations

import sys
from types import FrameType

from .lifeline import guard_forkserver


def _in_forkserver() -> bool:
    """Imported from `multiprocessing.forkserver.main` (its preload loop), i.e. in the server process."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(("multiprocessing/forkserver.py",
                                                                 "multiprocessing\\forkserver.py")):
            return True
        frame = frame.f_back
    return False


if _in_forkserver():
    guard_forkserver()
