"""The condensed doctor report: device, Apex status, one line per fused feature."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from .. import doctor_view


class StatusPane(VerticalScroll):
    """Says "probing…" until the device probe and the doctor report arrive."""

    can_focus = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Apex doctor"
        self._device: Text = Text("device: probing…", style="dim")
        self._body: list[Text] = [Text("Apex: probing…", style="dim")]

    def compose(self) -> ComposeResult:
        yield Static(self._render_text(), id="status-body")

    def _render_text(self) -> Text:
        return Text("\n").join([self._device, *self._body])

    def _refresh(self) -> None:
        if self.is_mounted:
            self.query_one("#status-body", Static).update(self._render_text())

    def set_device(self, line: str, gpu: bool) -> None:
        self._device = Text(line, style="bold" if gpu else "bold yellow")
        self._refresh()

    def set_device_error(self, message: str) -> None:
        self._device = Text(message, style="bold red")
        self._refresh()

    def set_report(self, report: Any) -> None:
        data = doctor_view.as_dict(report)
        self._body = [doctor_view.apex_line(data), *doctor_view.feature_lines(data), doctor_view.problems_line(data)]
        self.border_subtitle = "d: full report"
        self._refresh()

    def set_error(self, message: str) -> None:
        self._body = [Text(f"doctor failed: {message}", style="bold red")]
        self._refresh()
