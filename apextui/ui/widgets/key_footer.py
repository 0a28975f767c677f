"""The main screen's footer: every key hint from 80 columns; in a narrower terminal only those that matter.

At 60 columns Textual's footer cut the hints off after `p SVG  l`, and `? Help` was lost. Narrow, the footer
leaves out the keys of `NARROW_HIDDEN` (they are in ? help and the ctrl+p palette, and still work) and
shortens the descriptions in `NARROW_DESCRIPTION`, so start, stop, doctor, save, load, quit and help fit.
`s Stop` is shown only while a run is active (`WHILE_RUNNING`; the app refreshes the bindings when a run starts
and ends): with nothing running it promised something the key cannot do.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer

NARROW_HIDDEN = frozenset({"advise", "screenshot"})
WHILE_RUNNING = frozenset({"stop"})  # hints shown only while a run is active (the keys still answer when idle)
NARROW_DESCRIPTION = {"save": "Save"}


class KeyFooter(Footer):
    """`narrow` is set by the app when the terminal is under 80 columns (`set_narrow`)."""

    def __init__(self) -> None:
        super().__init__(show_command_palette=False)  # 80 columns hold the keys and "? Help", not "^p palette"
        self.narrow = False

    def set_narrow(self, narrow: bool) -> None:
        if narrow != self.narrow:
            self.narrow = narrow
            self.refresh(recompose=True)

    def compose(self) -> ComposeResult:
        shown = 0
        running = getattr(self.app, "active", None) is not None
        for widget in super().compose():
            action = getattr(widget, "action", None)  # a FooterKey's
            if action in WHILE_RUNNING and not running:
                continue
            if self.narrow and action is not None:
                if action in NARROW_HIDDEN:
                    continue
                widget.description = NARROW_DESCRIPTION.get(action, widget.description)  # type: ignore[attr-defined]
            shown += 1
            yield widget
        if self.narrow:
            self.styles.grid_size_columns = shown  # one grid column per hint shown
