"""`apextui attach` without a name: pick a watched run (live ones first, then finished ones, newest first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from apextui.core.watch.store import RunMeta


class RunPicker(ModalScreen["RunMeta | None"]):
    """Dismissed with the chosen run, or None (escape, or no runs)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Back"), Binding("q", "cancel", "Back")]
    DEFAULT_CSS = """
    RunPicker { align: center middle; }
    #picker-box { width: 90%; max-width: 100; height: auto; max-height: 80%; border: round $accent;
                  background: $surface; padding: 0 1; }
    #picker-list { height: auto; max-height: 20; }
    """

    def __init__(self, live: Sequence[RunMeta], finished: Sequence[RunMeta]) -> None:
        super().__init__()
        self.runs = [*live, *finished]
        self.live = len(live)

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box"):
            if not self.runs:
                yield Static("No watched runs yet. In your training loop:\n\n"
                             "    mon = apextui.watch(name=\"my-run\")\n    ...  mon.step(loss=loss)\n\n"
                             "escape: back", id="picker-empty")
                return
            yield Static(Text("watched runs · enter: attach · escape: back", style="bold"))
            options = []
            for i, meta in enumerate(self.runs):
                mark = ("● live", "bold green") if i < self.live else ("  done", "dim")
                options.append(Option(Text.assemble(mark, "  ", (meta.name, "bold"), "  ",
                                                    (meta.describe().removeprefix(meta.name).strip(), "dim")),
                                      id=str(i)))
            yield OptionList(*options, id="picker-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.runs[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)
