"""The watched run's extra metrics (learning rate, grad norm, ...): one small plot a metric, its latest value beside.

Fed by `attach_app` from the run's `metric` lines (`core/watch/replay.py` keeps each metric's recent values);
at most `MAX_PLOTS` metrics, in the order they first came; hidden while the run has none."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from .axis_chart import AxisChart

MAX_PLOTS = 4


def _label(value: float) -> str:
    return f"{value:.3g}"


class MetricPlots(Vertical):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Metrics"
        self.names: list[str] = []
        self._shown: dict[str, tuple[float, ...]] = {}

    def compose(self) -> ComposeResult:
        for i in range(MAX_PLOTS):
            with Horizontal(id=f"metric-row-{i}", classes="metric-row"):
                yield Static("", id=f"metric-label-{i}", classes="metric-label")
                yield AxisChart(label=_label, id=f"metric-chart-{i}", classes="metric-chart")

    def on_mount(self) -> None:
        self.show({})

    def reset(self) -> None:
        """Another run: none of the last run's metrics."""
        self.names, self._shown = [], {}
        self.show({})

    def show(self, history: Mapping[str, tuple[float, ...]]) -> None:
        """Each metric's recent values; redraws only the rows whose values changed."""
        for name in history:
            if name not in self.names and len(self.names) < MAX_PLOTS:
                self.names.append(name)
        self.display = bool(self.names)
        extra = len(history) - len(self.names)
        self.border_subtitle = f"+{extra} more in the stream" if extra > 0 else ""
        for i in range(MAX_PLOTS):
            row = self.query_one(f"#metric-row-{i}")
            row.display = i < len(self.names)
            if i >= len(self.names):
                continue
            name = self.names[i]
            values = history.get(name, ())
            if self._shown.get(name) == values:
                continue
            self._shown[name] = values
            last = _label(values[-1]) if values else "—"
            self.query_one(f"#metric-label-{i}", Static).update(
                Text.assemble((name, "bold"), "\n", (last, "")), layout=False)
            self.query_one(f"#metric-chart-{i}", AxisChart).set_data(values)
