"""A label, its current value and a short history sparkline, on one line."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static


class MetricCell(Horizontal):
    def __init__(self, label: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.label = label
        self._value = ""

    def compose(self) -> ComposeResult:
        yield Static(f"{self.label} —", classes="metric-value")
        yield Sparkline([], classes="metric-spark")

    def set(self, value: str, history: Sequence[float] | None = None) -> None:
        text = f"{self.label} {value}"
        if text != self._value:
            self._value = text
            self.query_one(".metric-value", Static).update(text, layout=False)
        if history is not None:
            spark = self.query_one(".metric-spark", Sparkline)
            if tuple(spark.data or ()) != tuple(history):
                spark.data = list(history)
