"""One GPU on one line, as nvitop's compact mode lists them: whether the run uses it, NVML's index, utilisation,
memory used/total, power, temperature and SM clock in fixed columns, then its utilisation history filling the
rest of the line (a few columns at 80, most of the line at 120). A GPU whose NVML calls fail reads "n/a" with
the reason instead."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from apextui.core.monitor.sampler import GpuReading

IN_USE = "●"  # marks the run's GPUs; the pane's subtitle says so


def _cell(value: float | None, text: str, width: int) -> str:
    return (text if value is not None else "n/a").rjust(width)


def row_text(gpu: GpuReading) -> str:
    """The fixed-width part of the row: '●0   99%  10.2/140G  562W 53°C 1980MHz'."""
    head = f"{IN_USE if gpu.in_use else ' '}{gpu.index:<2}"
    if gpu.error is not None:
        return f"{head} n/a: {gpu.error}"
    used, total = gpu.mem_used_mb, gpu.mem_total_mb
    mem = f"{used / 1024:.1f}/{total / 1024:.0f}G" if used is not None and total else (
        f"{used / 1024:.1f}G" if used is not None else "")
    return " ".join((
        head,
        _cell(gpu.util_pct, f"{gpu.util_pct or 0:.0f}%", 4),
        _cell(used, mem, 10),
        _cell(gpu.power_w, f"{gpu.power_w or 0:.0f}W", 5),
        _cell(gpu.temp_c, f"{gpu.temp_c or 0:.0f}°C", 4),
        _cell(gpu.sm_clock_mhz, f"{gpu.sm_clock_mhz or 0:.0f}MHz", 7),
    ))


class GpuRow(Horizontal):
    """One GPU's line in the monitor pane; `show` is cheap when nothing changed (readings come once a second)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="gpu-row")
        self._text = Static("", classes="gpu-text")
        self._spark = Sparkline([], classes="gpu-spark")
        self._shown: tuple[str, tuple[float, ...]] | None = None

    def compose(self) -> ComposeResult:
        yield self._text
        yield self._spark

    def show(self, gpu: GpuReading, history: Sequence[float]) -> None:
        text, data = row_text(gpu), tuple(history) if gpu.error is None else ()
        if (text, data) == self._shown:
            return
        self.set_class(gpu.error is not None, "-na")  # the reason takes the whole line
        if self._shown is None or text != self._shown[0]:
            self._text.update(text, layout=False)
        if self._shown is None or data != self._shown[1]:
            self._spark.data = list(data)
        self._shown = (text, data)
