"""`o`: what the worker processes printed (compile messages, warnings such as Apex's FutureWarning,
errors), every run of the session, oldest first; it follows a running run's output twice a second."""

from __future__ import annotations

from typing import Callable, ClassVar, Sequence

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ..run_log import RunLog
from .text_screen import TextScreen

REFRESH_S = 0.5


def log_text(logs: Sequence[RunLog]) -> Text:
    """One section per run: a title line, then its output (or why there is none)."""
    if not logs:
        return Text("no run yet: the output of each run's worker appears here", style="dim")
    out = Text()
    for n, log in enumerate(logs):
        if n:
            out.append("\n")
        state = "running" if log.open else "ended"
        out.append(f"── {log.title} · {state} ──\n", style="bold")
        if log.truncated:
            out.append("(earlier output dropped: only the last part is kept)\n", style="dim")
        if log.text:
            out.append(log.text if log.text.endswith("\n") else log.text + "\n")
        elif log.note:
            out.append(log.note + "\n", style="dim")
        else:
            out.append("(no output)\n", style="dim")
    return out


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
        self._drawn: tuple[tuple[int, int, bool, str], ...] | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.refresh_log()
        self.set_interval(self.refresh_s, self.refresh_log)

    def refresh_log(self) -> None:
        """Read new output; redraw (and follow the end) only when something changed."""
        logs = list(self.logs())
        for log in logs:
            log.poll()
        state = tuple((id(log), len(log.text), log.open, log.note) for log in logs)
        if state == self._drawn:
            return
        self._drawn = state
        self.redraws += 1
        self.query_one(f"#{self.BODY_ID}", Static).update(log_text(logs))
        self.scroll_box.scroll_end(animate=False)

    def action_scroll_end(self) -> None:
        self.scroll_box.scroll_end(animate=False)
