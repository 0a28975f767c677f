"""Messages posted to the app from worker and runner threads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from apextui.core.errors import ApextuiError
    from .bridge import RunBridge
    from .doctor_view import DoctorLike
    from .probe import Probe


class ProbeDone(Message):
    """The device is resolved and every preset's availability known."""

    def __init__(self, probe: Probe) -> None:
        super().__init__()
        self.probe = probe


class ProbeFailed(Message):
    """The device probe failed. `ends`: an error that ends the app with its exit code (--device cuda without a GPU:
    `DeviceUnavailable`, exit 3); None: the app stays up, its runs refused with `error`."""

    def __init__(self, error: str, ends: ApextuiError | None = None) -> None:
        super().__init__()
        self.error = error
        self.ends = ends


class DoctorReady(Message):
    """The Apex doctor report arrived (a `DoctorReport`, or a dict of its `to_dict()` shape)."""

    def __init__(self, report: DoctorLike) -> None:
        super().__init__()
        self.report = report


class DoctorFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class RunUpdated(Message):
    """New data for a run is waiting in its bridge; the handler takes the latest state.

    At most one of these is in flight per run, whatever the step rate.
    """

    def __init__(self, bridge: RunBridge) -> None:
        super().__init__()
        self.bridge = bridge
