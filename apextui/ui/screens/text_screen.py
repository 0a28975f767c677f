"""One scrolling text pane over the main screen: the base of the help, worker output, run details and doctor
report screens, so they look and close alike.

A subclass names its pane and body (`SCROLL_ID`, `BODY_ID`: app.tcss styles them), its title (`BOX_TITLE`)
and what the pane shows (`body`); esc and q close every one, and each adds the key that opened it.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

SCROLL_HINT = "↑↓ PgUp PgDn scroll · esc close"


class TextScreen(ModalScreen[None]):
    """A titled, rounded, scrolling box the size of the screen, a footer under it; the box has the focus."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
    ]
    SCROLL_ID: ClassVar[str] = "text-scroll"
    BODY_ID: ClassVar[str] = "text-body"
    BOX_TITLE: ClassVar[str] = ""

    def box_title(self) -> str:
        """The box's title (BOX_TITLE unless the screen's content names it)."""
        return self.BOX_TITLE

    def body(self) -> Static:
        """What the box shows (a Static with id BODY_ID); empty until `update_body`."""
        return Static(id=self.BODY_ID)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id=self.SCROLL_ID) as scroll:
            scroll.border_title = self.box_title()
            scroll.border_subtitle = SCROLL_HINT
            yield self.body()
        yield Footer()

    def on_mount(self) -> None:
        self.scroll_box.focus()

    @property
    def scroll_box(self) -> VerticalScroll:
        return self.query_one(f"#{self.SCROLL_ID}", VerticalScroll)
