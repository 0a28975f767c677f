"""NO_COLOR that stays readable.

Under NO_COLOR Textual turns every colour grey by its luminance (`textual.filter.Monochrome`). Red is dark
(a fifth of its brightness is luminance), so "NOT INSTALLED" and the ✗ marks came out grey 237 on the
panes' 234/235: nearly invisible. This filter does the same conversion and then lifts any foreground too
close to its background to a light grey (or darkens it on a light background)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter, Monochrome

MIN_CONTRAST = 0.4  # brightness difference (0-1) below which a foreground is lifted
LIGHT = Color(200, 200, 200)
DARK = Color(40, 40, 40)


def _grey(color: Color) -> Color:
    return color.monochrome


def readable_style(style: Style | None, background: Color) -> Style | None:
    """`style` in greys, its foreground at least MIN_CONTRAST from its (or the screen's) background."""
    if style is None:
        return None
    bg = _grey(Color.from_rich_color(style.bgcolor)) if style.bgcolor is not None else _grey(background)
    fg = _grey(Color.from_rich_color(style.color)) if style.color is not None else None
    if fg is not None and abs(fg.brightness - bg.brightness) < MIN_CONTRAST:
        fg = LIGHT if bg.brightness < 0.5 else DARK
    return style + Style.from_color(fg.rich_color if fg is not None else None,
                                    bg.rich_color if style.bgcolor is not None else None)


class ReadableMonochrome(LineFilter):
    """Monochrome with a contrast floor for the foreground."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, readable_style(style, background), None) for text, style, _ in segments]


def install(app: object) -> None:
    """Swap Textual's NO_COLOR Monochrome filter for ReadableMonochrome (no-op without NO_COLOR)."""
    filters = getattr(app, "_filters", None)  # Textual keeps its line filters here (no public setter)
    if not filters:
        return
    for i, f in enumerate(filters):
        if type(f) is Monochrome:
            filters[i] = ReadableMonochrome()
