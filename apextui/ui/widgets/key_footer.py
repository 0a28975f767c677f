"""The main screen's footer: every key hint from 80 columns; in a narrower terminal only those that matter.

At 60 columns Textual's footer cut the hints off after `p SVG  l`, and `? Help` was lost. Narrow, the footer
leaves out the keys of `NARROW_HIDDEN` (they are in ? help and the ctrl+p palette, and still work) and
shortens the descriptions in `NARROW_DESCRIPTION`, so start, stop, doctor, save, load, quit and help fit.
From 80 to 99 columns `p SVG` gives its room to `e Export` and `w Save JSON` reads `w Save`; from 100 every hint is
shown. `s Stop` is shown only while a run is active (`WHILE_RUNNING`; the app refreshes the bindings when a run starts
and ends): with nothing running it promised something the key cannot do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.app import ComposeResult
from textual.widgets import Footer

if TYPE_CHECKING:
    from ..app_base import AppBase

NARROW_HIDDEN = frozenset({"advise", "screenshot", "export"})
# from 80 columns to `FULL_COLS`, these give their room to the export's hint (`e Export`: where a run's results go)
MEDIUM_HIDDEN = frozenset({"screenshot"})
FULL_COLS = 100  # from here every hint is shown
WHILE_RUNNING = frozenset({"stop"})  # hints shown only while a run is active (the keys still answer when idle)
NARROW_DESCRIPTION = {"save": "Save"}  # under `FULL_COLS`


class KeyFooter(Footer):
    """`narrow` is set by the app when the terminal is under 80 columns (`set_narrow`)."""

    def __init__(self) -> None:
        super().__init__(show_command_palette=False)  # 80 columns hold the keys and "? Help", not "^p palette"
        self.narrow = False
        self.full = True

    def set_width(self, width: int, narrow_cols: int) -> None:
        narrow, full = width < narrow_cols, width >= FULL_COLS
        if (narrow, full) != (self.narrow, self.full):
            self.narrow, self.full = narrow, full
            self.refresh(recompose=True)

    def compose(self) -> ComposeResult:
        shown = 0
        running = cast("AppBase", self.app).measuring() == "run"
        for widget in super().compose():
            action = getattr(widget, "action", None)  # a FooterKey's
            if action in WHILE_RUNNING and not running:
                continue
            if not self.full and not self.narrow and action in MEDIUM_HIDDEN:
                continue
            if not self.full and action is not None:
                if self.narrow and action in NARROW_HIDDEN:
                    continue
                widget.description = NARROW_DESCRIPTION.get(action, widget.description)  # type: ignore[attr-defined]
            shown += 1
            yield widget
        if self.narrow:
            self.styles.grid_size_columns = shown  # one grid column per hint shown
