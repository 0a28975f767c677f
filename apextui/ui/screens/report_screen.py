"""The full Apex doctor report, as `apextui doctor` prints it."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from .. import doctor_view
from .text_screen import TextScreen


class ReportScreen(TextScreen):
    """d on the main screen; esc, q or d close it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "dismiss", "Close", show=False),
        Binding("p", "app.screenshot", "SVG"),  # the app's binding does not reach through a modal screen
    ]
    SCROLL_ID = "report-scroll"
    BODY_ID = "report-body"
    BOX_TITLE = "Apex doctor — full report"

    def __init__(self, report: Any | None, error: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.error = error

    def body(self) -> Static:
        if self.report is None:
            text = Text(self.error or "the doctor is still probing… (try again in a moment)",
                        style="bold red" if self.error else "dim")
        else:
            text = Text("\n").join(doctor_view.full_report_lines(self.report))
        return Static(text, id=self.BODY_ID)
