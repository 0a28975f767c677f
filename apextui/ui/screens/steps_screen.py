"""`n`: the number of steps every next run takes (as `--steps` does), typed in; empty for each preset's own."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from apextui.core.presets import MAX_STEPS

# what the screen hands back: ("set", N), ("set", None) for each preset's own steps, or None (cancelled)
StepsChoice = tuple[str, int | None] | None


def parse_steps(text: str) -> int | None:
    """A whole number from 1 to MAX_STEPS, or None for '' (each preset's own); ValueError naming what is allowed."""
    text = text.strip().replace("_", "")
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number: type 1 to {MAX_STEPS}, or nothing") from None
    if not 1 <= n <= MAX_STEPS:
        raise ValueError(f"{n} is out of range: type 1 to {MAX_STEPS}, or nothing")
    return n


class StepsScreen(ModalScreen[StepsChoice]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: int | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="steps-box") as box:
            box.border_title = "Steps of the next runs"
            now = f"now {self.current} steps a run" if self.current else "now each preset's own steps"
            yield Static(f"{now}; the runs already in the table keep theirs")
            yield Input(value=str(self.current or ""), placeholder="each preset's own", id="steps-input")
            yield Static("", id="steps-error")
            yield Static("enter set · empty: each preset's own · esc cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#steps-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            steps = parse_steps(event.value)
        except ValueError as exc:
            self.query_one("#steps-error", Static).update(str(exc))
            return
        self.dismiss(("set", steps))

    def action_cancel(self) -> None:
        self.dismiss(None)
