"""The condensed doctor report: device, Apex status, one line per fused feature.

The pane is at most 45 % of its column (app.tcss): at 80x24 its wrapped lines are cut at its bottom edge, which
left "DistributedFusedAdam: NVIDIA" mid-sentence as if that were all. Where they do not fit, the last row shown
ends in "…" (d shows the whole report)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
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
        text = Text("\n").join([self._device, *self._body])
        room, width = self._room()
        if room is None:
            return text
        rows = text.wrap(self.app.console, width)
        if len(rows) <= room:
            return text
        kept = list(rows)[:room]
        last = kept[-1]
        last.rstrip()
        if last.cell_len > width - 2:
            last.truncate(width - 2)
            last.rstrip()
        last.append(" …", style="bold")
        return Text("\n").join(kept)

    def _room(self) -> tuple[int | None, int]:
        """(rows, columns) the body has at most (the pane's max-height less its border), or (None, 0) before the
        pane is laid out."""
        max_height, parent = self.styles.max_height, self.parent
        if not self.is_mounted or not isinstance(parent, Widget) or max_height is None or self.size.width < 8:
            return None, 0
        gutter = self.styles.gutter
        room = int(max_height.resolve(parent.size, self.app.size)) - gutter.height
        return (room, self.size.width) if room > 0 else (None, 0)  # size: the content's, inside the gutter

    def on_resize(self) -> None:
        self._refresh()

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
