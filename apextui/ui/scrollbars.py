"""Scrollbars drawn in whole cells.

Textual draws a thumb's ends as partial blocks (▁▂▃▅); a one-column scrollbar beside the doctor pane's
status lines then looks like one more sparkline bar. Whole-cell thumbs on a visible track (app.tcss) read
as a scrollbar."""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


def install() -> None:
    """Use whole-cell thumbs for every scrollbar of the app (Textual's documented way: ScrollBar.renderer)."""
    ScrollBar.renderer = WholeCellScrollBarRender
