"""`o`: what the worker processes printed (compile messages, warnings such as Apex's FutureWarning,
errors), every run of the session, oldest first; it follows a running run's output twice a second."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Static

from ..run_log import LogState, RunLog, log_text, poll_logs
from .text_screen import TextScreen

REFRESH_S = 0.5

__all__ = ["LogScreen", "log_text"]


class LogScreen(TextScreen):
    """`logs` is called on every refresh, so runs started while the screen is open appear too."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "dismiss", "Close", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]
    SCROLL_ID = "log-scroll"
    BODY_ID = "log-body"
    BOX_TITLE = "Worker output"

    def __init__(self, logs: Callable[[], Sequence[RunLog]], refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.logs = logs
        self.refresh_s = refresh_s
        self.redraws = 0
        self._drawn: LogState | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.refresh_log()
        self.set_interval(self.refresh_s, self.refresh_log)

    def refresh_log(self) -> None:
        """Read new output; redraw (and follow the end) only when something changed."""
        self._drawn, text = poll_logs(list(self.logs()), self._drawn)
        if text is None:
            return
        self.redraws += 1
        self.query_one(f"#{self.BODY_ID}", Static).update(text)
        self.scroll_box.scroll_end(animate=False)

    def action_scroll_end(self) -> None:
        self.scroll_box.scroll_end(animate=False)
