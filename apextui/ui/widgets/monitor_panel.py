"""GPU (NVML) and process (psutil) metrics with short histories; n/a with the reason where missing.

One GPU: each metric on its own with its history. Several (the TUI samples every GPU NVML sees): one compact
row per GPU (`GpuRow`), the run's marked, with its utilisation history; the process's CPU and memory move to
the pane's bottom border so that eight GPUs fit an 80x24 terminal."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static

from apextui.core.monitor.sampler import MonitorReading

from .. import widget_format as fmt
from .gpu_row import IN_USE, GpuRow
from .metric_cell import MetricCell

GPU_FIELDS = ("gpu_util_pct", "gpu_mem_used_mb", "gpu_power_w", "gpu_temp_c", "gpu_sm_clock_mhz")
HOST_FIELDS = ("cpu_pct", "rss_mb")
LABELS = {
    "gpu_util_pct": "GPU", "gpu_mem_used_mb": "mem", "gpu_power_w": "pwr", "gpu_temp_c": "temp",
    "gpu_sm_clock_mhz": "SM", "cpu_pct": "CPU", "rss_mb": "RSS",
}
TITLE = "GPU · process"


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


def _missing(reason: str) -> tuple[str, str]:
    """A metric without a value: what its 14-column cell shows, and the reason for the pane's border ("" when
    the cell says it all). "n/a (measuring (needs two samples))" was cut to "CPU n/a (meas…"."""
    if reason.startswith("measuring"):
        return "measuring…", ""
    return "n/a", reason


class MonitorPanel(Vertical):
    """Updated from the run's snapshots; before a run it says readings start with one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = TITLE
        self._mode: str | None = None  # "none" (the reason), "one" (a metric grid), "many" (a row per GPU)
        self._reading: MonitorReading | None = None
        self._rows: dict[int, GpuRow] = {}

    def compose(self) -> ComposeResult:
        yield Static("readings start with a run", id="gpu-na")
        with Grid(id="gpu-grid"):
            for name in GPU_FIELDS:
                yield MetricCell(LABELS[name], id=f"m-{name}", classes="metric")
        yield Vertical(id="gpu-rows")
        with Grid(id="host-grid"):
            for name in HOST_FIELDS:
                yield MetricCell(LABELS[name], id=f"m-{name}", classes="metric")

    def on_mount(self) -> None:
        self._show_mode("none")
        self.query_one("#host-grid").display = False  # until the first reading

    def _show_mode(self, mode: str) -> None:
        if mode != self._mode:
            self._mode = mode
            self.query_one("#gpu-na").display = mode == "none"
            self.query_one("#gpu-grid").display = mode == "one"
            self.query_one("#gpu-rows").display = mode == "many"
            if mode != "many":
                self.border_title, self.border_subtitle = TITLE, ""

    def update_reading(self, reading: MonitorReading | None, history: Mapping[str, tuple[float, ...]],
                       gpu_history: Mapping[int, tuple[float, ...]] | None = None) -> None:
        """Show a sampler reading; a no-op for the reading already shown (they come once a second).
        `gpu_history`: each GPU's recent utilisation, by NVML index."""
        if reading is None or reading is self._reading:
            return
        self._reading = reading
        if len(reading.gpus) > 1:
            self._show_many(reading, gpu_history or {})
            return
        gpu = any(getattr(reading, n) is not None for n in GPU_FIELDS)
        self._show_mode("one" if gpu else "none")
        host = self.query_one("#host-grid")
        if not host.display:
            host.display = True
        if not gpu:
            reason = next((reading.na[n] for n in GPU_FIELDS if n in reading.na), "no reading")
            self.query_one("#gpu-na", Static).update(f"GPU n/a: {reason}", layout=False)
        names = (GPU_FIELDS if gpu else ()) + HOST_FIELDS
        missing = []
        for name in names:
            value = _value(name, reading)
            if value == "n/a" and name in reading.na:
                value, why = _missing(reading.na[name])
                if why:
                    missing.append(f"{LABELS[name]} n/a: {why}")
            self.query_one(f"#m-{name}", MetricCell).set(value, history.get(name, ()))
        self.border_subtitle = " · ".join(missing)

    def _show_many(self, reading: MonitorReading, gpu_history: Mapping[int, tuple[float, ...]]) -> None:
        """A row per GPU; the process's metrics in the bottom border."""
        self._show_mode("many")
        self.query_one("#host-grid").display = False
        indices = [g.index for g in reading.gpus]
        if list(self._rows) != indices:  # the first reading of a run, or GPUs came or went
            rows = self.query_one("#gpu-rows")
            rows.remove_children()
            self._rows = {i: GpuRow() for i in indices}
            rows.mount(*self._rows.values())
        for gpu in reading.gpus:
            self._rows[gpu.index].show(gpu, gpu_history.get(gpu.index, ()))
        self.border_title = f"{len(indices)} GPUs · process"
        host = " · ".join(f"{LABELS[n]} {_value(n, reading)}" for n in HOST_FIELDS)
        self.border_subtitle = f"{IN_USE} this run · {host}" if reading.run_gpus else host

    def reset(self, text: str = "readings start with a run") -> None:
        """No readings: before a run, and once one has ended (its last CPU and RSS, left on screen, read as
        the idle app's own)."""
        self._reading = None
        self._show_mode("none")
        self.border_title, self.border_subtitle = TITLE, ""
        self.query_one("#host-grid").display = False
        self.query_one("#gpu-na", Static).update(text)
