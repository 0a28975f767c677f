"""Ask for a results file to load into the comparison table."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class LoadScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="load-box") as box:
            box.border_title = "Load results"
            yield Static("A file saved with w, or the output of `apextui --preset NAME --json`.")
            yield Input(placeholder="path/to/apextui-results.json", id="load-path")
            yield Static("enter load · esc cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
