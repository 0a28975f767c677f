"""The worker output of this session's runs, in a pane beside the comparison table when the terminal is wide.

The same text as the log screen (o), following the end; it reads the logs twice a second only while it is
shown (in a narrower terminal it is hidden and costs nothing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..run_log import LogState, RunLog, poll_logs

REFRESH_S = 0.5


class LogPane(VerticalScroll):
    """`logs` is called on every refresh (runs are added as they start)."""

    def __init__(self, logs: Callable[[], Sequence[RunLog]], *, id: str | None = None,
                 refresh_s: float = REFRESH_S) -> None:
        super().__init__(id=id, can_focus=False)
        self.logs = logs
        self.refresh_s = refresh_s
        self.border_title = "Worker output"
        self.border_subtitle = "o: full screen"
        self._drawn: LogState | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="log-pane-body")

    def on_mount(self) -> None:
        self.set_interval(self.refresh_s, self.refresh_log)

    def refresh_log(self) -> None:
        """Read new output and follow the end; nothing while the pane is hidden."""
        if not self.display:
            return
        self._drawn, text = poll_logs(list(self.logs()), self._drawn)
        if text is not None:
            self.query_one("#log-pane-body", Static).update(text)
            self.scroll_end(animate=False)
