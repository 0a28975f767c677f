"""GPU (NVML) and process (psutil) metrics with short histories; n/a with the reason where missing."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static

from apextui.core.monitor.sampler import MonitorReading

from .. import fmt
from .metric_cell import MetricCell

GPU_FIELDS = ("gpu_util_pct", "gpu_mem_used_mb", "gpu_power_w", "gpu_temp_c", "gpu_sm_clock_mhz")
HOST_FIELDS = ("cpu_pct", "rss_mb")
LABELS = {
    "gpu_util_pct": "GPU", "gpu_mem_used_mb": "mem", "gpu_power_w": "pwr", "gpu_temp_c": "temp",
    "gpu_sm_clock_mhz": "SM", "cpu_pct": "CPU", "rss_mb": "RSS",
}


def _value(name: str, reading: MonitorReading) -> str:
    v = getattr(reading, name)
    if v is None:
        return "n/a"
    if name == "gpu_util_pct" or name == "cpu_pct":
        return f"{v:.0f}%"
    if name == "gpu_mem_used_mb":
        total = reading.gpu_mem_total_mb
        return f"{v / 1024:.1f}/{total / 1024:.0f}G" if total else fmt.mib(v)
    if name == "gpu_power_w":
        return f"{v:.0f} W"
    if name == "gpu_temp_c":
        return f"{v:.0f}°C"
    if name == "gpu_sm_clock_mhz":
        return f"{v:.0f} MHz"
    if name == "rss_mb":
        return fmt.mib(v)
    return f"{v:g}"


class MonitorPanel(Vertical):
    """Updated from the run's snapshots; before a run it says readings start with one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "GPU · process"
        self._gpu_state: bool | None = None
        self._reading: MonitorReading | None = None

    def compose(self) -> ComposeResult:
        yield Static("readings start with a run", id="gpu-na")
        with Grid(id="gpu-grid"):
            for name in GPU_FIELDS:
                yield MetricCell(LABELS[name], id=f"m-{name}", classes="metric")
        with Grid(id="host-grid"):
            for name in HOST_FIELDS:
                yield MetricCell(LABELS[name], id=f"m-{name}", classes="metric")

    def on_mount(self) -> None:
        self._show_gpu(False)
        self.query_one("#host-grid").display = False  # until the first reading

    def _show_gpu(self, gpu: bool) -> None:
        if gpu != self._gpu_state:
            self._gpu_state = gpu
            self.query_one("#gpu-grid").display = gpu
            self.query_one("#gpu-na").display = not gpu

    def update_reading(self, reading: MonitorReading | None, history: Mapping[str, tuple[float, ...]]) -> None:
        """Show a sampler reading; a no-op for the reading already shown (they come once a second)."""
        if reading is None or reading is self._reading:
            return
        self._reading = reading
        gpu = any(getattr(reading, n) is not None for n in GPU_FIELDS)
        self._show_gpu(gpu)
        host = self.query_one("#host-grid")
        if not host.display:
            host.display = True
        if not gpu:
            reason = next((reading.na[n] for n in GPU_FIELDS if n in reading.na), "no reading")
            self.query_one("#gpu-na", Static).update(f"GPU n/a: {reason}", layout=False)
        names = (GPU_FIELDS if gpu else ()) + HOST_FIELDS
        for name in names:
            value = _value(name, reading)
            if value == "n/a" and name in reading.na:
                value = f"n/a ({reading.na[name]})"
            self.query_one(f"#m-{name}", MetricCell).set(value, history.get(name, ()))

    def reset(self) -> None:
        self._reading = None
        self._show_gpu(False)
        self.query_one("#host-grid").display = False
        self.query_one("#gpu-na", Static).update("readings start with a run")
