"""The full Apex doctor report, as `apextui doctor` prints it."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from .. import doctor_view
from .text_screen import SCROLL_HINT, TextScreen

SIDEWAYS_HINT = "← → scroll sideways (long fix lines)"


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
        self._lines: list[Text] = []
        self._wrapped_at = -1  # the width the body was last wrapped to

    def body(self) -> Static:
        if self.report is None:
            text = Text(self.error or "the doctor is still probing… (try again in a moment)",
                        style="bold red" if self.error else "dim")
            return Static(text, id=self.BODY_ID)
        self._lines = doctor_view.full_report_lines(self.report)
        return Static(Text("\n").join(self._lines), id=self.BODY_ID)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self._wrap)

    def on_resize(self) -> None:
        self.call_after_refresh(self._wrap)

    def _wrap(self) -> None:
        """Wrap the report to the box's width (doctor_view.wrap_report); where a fix command is still wider, the
        border says that ← → scroll sideways (nothing said so, and the cut looked like the end of the line)."""
        if self.report is None or not self._lines:
            return
        box = self.scroll_box
        width = box.size.width - box.styles.gutter.width - 1  # the border, the padding, the vertical scrollbar
        if width == self._wrapped_at:
            return
        self._wrapped_at = width
        text, wider = doctor_view.wrap_report(self._lines, width)
        self.query_one(f"#{self.BODY_ID}", Static).update(text)
        box.border_subtitle = f"{SIDEWAYS_HINT} · {SCROLL_HINT}" if wider else SCROLL_HINT
