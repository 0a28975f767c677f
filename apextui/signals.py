"""Ctrl-C and SIGTERM while the headless front ends train: the first signal asks the work to stop after its
current step; another one reports what was measured and exits at once. A handler rather than
KeyboardInterrupt, so nothing is interrupted half-way."""

from __future__ import annotations

import os
import signal
from typing import Any, Callable

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
SIGNAL_EXIT = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}
SIGNAL_WORD = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}


class StopOnSignals:
    """Within `with`: SIGINT/SIGTERM calls `first(signum)` once, then `again(signum)` and exits with 130 (SIGINT)
    or 143 (SIGTERM). `count` and `exit_code` (of the latest signal) are kept for the caller."""

    def __init__(self, first: Callable[[int], None], again: Callable[[int], None]) -> None:
        self.first, self.again = first, again
        self.count = 0
        self.exit_code = EXIT_INTERRUPTED
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.exit_code = SIGNAL_EXIT.get(signum, EXIT_INTERRUPTED)
        if self.count == 1:
            self.first(signum)
            return
        try:
            self.again(signum)
        finally:
            os._exit(self.exit_code)

    def __enter__(self) -> "StopOnSignals":
        self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNAL_EXIT}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
