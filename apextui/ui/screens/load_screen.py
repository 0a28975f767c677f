"""Load a results file into the comparison table: pick a recent one, or type a path.

The recent files are `apextui-results-*.json` in the run history folder (the user's data folder) and in
the start folder, newest first (`history.recent_results`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..history import RecentFile

LOAD_BOX_MAX = 110  # columns: app.tcss's #load-box max-width


def describe(f: RecentFile, home: Path | None = None, width: int = 0) -> Text:
    """Two lines: '2026-12-01 03:40  apextui-results-20261201-034012.json  3 KiB', then the folder
    ('~/.local/share/apextui'), shortened from its start ('…/share/apextui') to `width` columns when given.
    On one line the folder came last and was cut off, even at 120 columns."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(f.mtime))
    folder = str(f.path.parent)
    if home is not None and (folder == str(home) or folder.startswith(str(home) + "/")):
        folder = "~" + folder[len(str(home)):]
    folder = f"  in {folder}"
    if width and len(folder) > width:
        folder = "  in …" + folder[len(folder) - width + 6:]
    size = f"{max(1, round(f.size / 1024))} KiB"
    return Text.assemble(f"{when}  {f.path.name}  {size}\n", (folder, "dim"))


class LoadScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, recent: Sequence[RecentFile] = ()) -> None:
        super().__init__()
        self.recent = list(recent)

    def compose(self) -> ComposeResult:
        with Vertical(id="load-box") as box:
            box.border_title = "Load results"
            yield Static("A file saved with w, or the output of `apextui --preset NAME --json`.")
            if self.recent:
                try:
                    home: Path | None = Path.home()
                except RuntimeError:
                    home = None
                room = min(LOAD_BOX_MAX, self.app.size.width) - 8  # the box's border and padding, the list's
                yield OptionList(*(Option(describe(f, home, room), id=str(i)) for i, f in enumerate(self.recent)),
                                 id="load-recent")
            else:
                yield Static("no saved results yet in the run history or the start folder", classes="hint",
                             id="load-none")
            yield Input(placeholder="path/to/apextui-results.json", id="load-path")
            hint = "↑↓ enter load a recent file · tab type a path · esc cancel" if self.recent else \
                "enter load · esc cancel"
            yield Static(hint, classes="hint")

    def on_mount(self) -> None:
        if self.recent:
            recent = self.query_one("#load-recent", OptionList)
            recent.highlighted = 0
            recent.focus()
        else:
            self.query_one("#load-path", Input).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(str(self.recent[int(event.option.id or 0)].path))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
