"""What a front end holds of a run, alike for a run in a thread of this process (`runner.Runner`) and in a worker
process (`worker.ProcessRunner`): stop and wait (`RunControl`), the handle's interface (`RunHandle`) and the
factory that makes one (`RunnerFactory`)."""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol

from ..presets import Preset
from .request import RunRequest
from .snapshot import Snapshot


class RunControl:
    """Stop and wait, alike for a run in this process (`Runner`) and in a worker (`ProcessRunner`): each
    sets `_stop` (an Event the training loop polls) and `_finished` (set once the final snapshot is out). Each
    keeps its `request` whole; `preset` and `device` read it."""

    request: RunRequest
    _stop: Any
    _finished: threading.Event

    @property
    def preset(self) -> Preset:
        return self.request.preset

    @property
    def device(self) -> str:
        """As the request has it (resolved: every front end resolves the device before it asks for a run)."""
        return self.request.device

    def stop(self) -> None:
        """Ask the run to stop after the current step; safe from any thread."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the final snapshot has been delivered; True when it has.
        Safe to interrupt (an Event wait), unlike Thread.join."""
        return self._finished.wait(timeout)


class ForwardsSnapshots:
    """What a run in another process shares (`ProcessRunner`, `LaunchedRunner`): its reader thread hands each
    snapshot to the consumer, keeps the latest and the final one, and survives a consumer that raises."""

    callback: Any
    last: Any
    result: Any

    def _deliver(self, snap: Any) -> None:
        self.last = snap
        if snap.finished:
            self.result = snap
        try:
            self.callback(snap)
        except Exception:  # noqa: BLE001 - a broken consumer must not stop the reader
            import sys
            import traceback

            traceback.print_exc(file=sys.stderr)


class RunHandle(Protocol):
    """What a front end holds of a run, whether it trains in a thread of this process (`Runner`) or in a worker
    process (`worker.ProcessRunner`); what a `RunnerFactory` returns."""

    def start(self) -> "RunHandle":
        """Begin training in the background; returns the handle itself."""
        ...

    def stop(self) -> None:
        """Ask the run to stop after its current step; safe from any thread."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether `stop()` (or `kill()`) was asked."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the final snapshot's delivery; True when it was delivered."""
        ...

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run's threads (and process) to end; True when they have."""
        ...

    def is_alive(self) -> bool:
        """Whether anything of the run is still running."""
        ...

    def kill(self, reason: str | None = None) -> bool:
        """End the run at once where that is possible (True: a worker process); otherwise ask it to stop as
        `stop()` does and return False (a thread cannot be killed)."""
        ...


class RunnerFactory(Protocol):
    """Makes a run's handle: `thread_runner_factory` here, the TUI's worker-process factory, tests' fakes. It takes
    the one `RunRequest` (preset, device, steps, sample interval) the front ends build, as every runner does, and
    the callback that gets the run's snapshots (positional: a factory names its parameters as it likes)."""

    def __call__(self, request: RunRequest, callback: Callable[[Snapshot], None], /) -> RunHandle:
        ...
