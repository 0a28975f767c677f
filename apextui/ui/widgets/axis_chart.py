"""A small line chart with a labelled y-axis and an optional floor line, drawn with block characters.

Why not a plotting library: `textual-plotext` was tried (see the branch's report). It rebuilds its whole
figure on every repaint (about 6 ms a chart), spends rows on a frame and an x-axis that an 80x24 screen
cannot spare (the loss row has 3-4), draws the floor line under the curve, and plots one point as a
framed box with x ticks 0.5-1.5. This chart renders once per data or size change (cached), uses every
column it is given, and keeps the floor visible.

Layout, for a chart `height` rows tall and `width` columns wide: the y labels (max at the top, min at the
bottom, the floor at its row) right-aligned in a gutter, an axis column (``┤`` at a labelled row, ``│``
elsewhere), then `width - gutter - 1` plot columns. Each column holds one point (the mean of the points
it covers when there are more points than columns; the points stretched over the columns when there are
fewer): an eighth-block character in the row of its value. One row tall, it is a sparkline of filled
bars after a ``min–max`` label. A single point is drawn in one column, not stretched into a block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

EIGHTHS = "▁▂▃▄▅▆▇█"


def _default_label(value: float) -> str:
    return f"{value:.3g}"


def resample(data: Sequence[float], columns: int) -> list[float]:
    """`data` fitted to `columns` points: bucket means when longer, stretched when shorter (2+ points)."""
    n = len(data)
    if columns <= 0 or n == 0:
        return []
    if n == 1:
        return [data[0]]
    if n <= columns:
        return [data[min(n - 1, i * n // columns)] for i in range(columns)]
    out = []
    for i in range(columns):
        a, b = i * n // columns, max(i * n // columns + 1, (i + 1) * n // columns)
        chunk = data[a:b]
        out.append(sum(chunk) / len(chunk))
    return out


def render_chart(data: Sequence[float], width: int, height: int, floor: float | None = None,
                 label: Callable[[float], str] = _default_label, style: str = "",
                 floor_style: str = "") -> list[Text]:
    """The chart's lines (each exactly `width` cells); a pure function so tests can check it."""
    width, height = max(width, 0), max(height, 1)
    if width == 0:
        return [Text("") for _ in range(height)]
    if not data:
        return [Text(" " * width) for _ in range(height)]
    values = list(data) + ([floor] if floor is not None else [])
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        pad = abs(hi) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    if height == 1:
        head = f"{label(min(data))}–{label(max(data))} "
        cols = max(width - len(head), 0)
        if cols < 4:  # too narrow for a label: bars only
            head, cols = "", width
        points = resample(data, cols)
        t = Text(head, style="dim")
        t.append("".join(EIGHTHS[int((v - lo) / (hi - lo) * 7.999)] for v in points), style=style)
        t.append(" " * (width - len(t)))
        return [t]

    levels = height * 8 - 1

    def level(v: float) -> int:
        return max(0, min(levels, round((v - lo) / (hi - lo) * levels)))

    labels: dict[int, str] = {height - 1: label(hi), 0: label(lo)}  # row from the bottom -> label
    floor_row = None
    if floor is not None:
        floor_row = level(floor) // 8
        labels[floor_row] = label(floor)
    gutter = max(len(s) for s in labels.values())
    if width - gutter - 1 < 4:  # too narrow for labels: plot only
        labels, gutter = {}, -1
    cols = width - gutter - 1
    points = resample(data, cols)
    grid = [[" "] * cols for _ in range(height)]
    for c, v in enumerate(points):
        lv = level(v)
        grid[lv // 8][c] = EIGHTHS[lv % 8]
    lines = []
    for row in range(height - 1, -1, -1):
        t = Text()
        if gutter >= 0:
            name = labels.get(row)
            t.append((name or "").rjust(gutter), style="bold cyan" if row == floor_row and name else "dim")
            t.append("┤" if name else "│", style="dim")
        for cell in grid[row]:
            if cell == " " and row == floor_row:
                t.append("─", style=floor_style)
            else:
                t.append(cell, style=style)
        lines.append(t)
    return lines


class AxisChart(Widget):
    """`data` and `floor` are set by the live-run pane; the chart fills whatever size it is given."""

    DEFAULT_CSS = """
    AxisChart { height: 1; }
    AxisChart > .axis-chart--line { color: $success; }
    AxisChart > .axis-chart--floor { color: $accent; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"axis-chart--line", "axis-chart--floor"}

    data: reactive[tuple[float, ...]] = reactive(tuple, always_update=False)
    floor: reactive[float | None] = reactive(None)

    def __init__(self, *, label: Callable[[float], str] = _default_label, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.label = label
        self._key: tuple[object, ...] | None = None
        self._lines: list[Text] = []

    def set_data(self, data: Sequence[float], floor: float | None = None) -> None:
        self.data = tuple(data)
        self.floor = floor

    def lines(self, size: Size | None = None) -> list[Text]:
        """The rendered lines for the widget's size (cached: rebuilt only when the data or size change)."""
        size = size or self.content_size
        line = self.get_component_rich_style("axis-chart--line")
        floor = self.get_component_rich_style("axis-chart--floor")
        key = (self.data, self.floor, size.width, size.height, line, floor)
        if key != self._key:
            self._key = key
            self._lines = render_chart(self.data, size.width, size.height, self.floor, self.label,
                                       style=str(line) if line else "", floor_style=str(floor) if floor else "")
        return self._lines

    def render(self) -> Text:
        return Text("\n").join(self.lines())
