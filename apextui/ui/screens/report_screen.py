"""The full Apex doctor report, as `apextui doctor` prints it."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from .. import doctor_view


class ReportScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("d", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
        Binding("p", "app.screenshot", "SVG"),  # the app's binding does not reach through a modal screen
    ]

    def __init__(self, report: Any | None, error: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.error = error

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="report-scroll") as scroll:
            scroll.border_title = "Apex doctor — full report"
            scroll.border_subtitle = "↑↓ PgUp PgDn scroll · esc close"
            if self.report is None:
                text = Text(self.error or "the doctor is still probing… (try again in a moment)",
                            style="bold red" if self.error else "dim")
            else:
                text = Text("\n").join(doctor_view.full_report_lines(self.report))
            yield Static(text, id="report-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#report-scroll").focus()
