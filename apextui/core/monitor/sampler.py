"""A background thread that samples GPU (NVML) and host (psutil) metrics at a fixed interval."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from .nvml import Metric, Nvml

# reading field -> unit, for front ends that label values
METRIC_UNITS: Mapping[str, str] = MappingProxyType({
    "gpu_util_pct": "%",
    "gpu_mem_used_mb": "MiB",
    "gpu_mem_total_mb": "MiB",
    "gpu_power_w": "W",
    "gpu_temp_c": "°C",
    "gpu_sm_clock_mhz": "MHz",
    "cpu_pct": "%",
    "rss_mb": "MiB",
    "ram_used_pct": "%",
})


@dataclass(frozen=True)
class MonitorReading:
    """One sample; None where a metric is not available, with the reason in `na`."""

    time: float
    gpu_util_pct: float | None = None
    gpu_mem_used_mb: float | None = None
    gpu_mem_total_mb: float | None = None
    gpu_power_w: float | None = None
    gpu_temp_c: float | None = None
    gpu_sm_clock_mhz: float | None = None
    cpu_pct: float | None = None
    rss_mb: float | None = None
    ram_used_pct: float | None = None
    na: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def metrics(self) -> dict[str, float | None]:
        """The metric fields as a flat dict (no time, no reasons)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in METRIC_UNITS}


class Sampler:
    """Samples every `interval` seconds in a daemon thread; `latest` is always safe to read."""

    def __init__(self, interval: float = 1.0, gpu: bool = True, gpu_index: int = 0,
                 pci_bus_id: str | None = None, nvml: Nvml | None = None) -> None:
        self.interval = interval
        self._nvml = nvml if nvml is not None else (Nvml(gpu_index, pci_bus_id) if gpu else None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: Any = None  # a psutil.Process once read (psutil ships no type hints)
        self.latest: MonitorReading | None = None

    def sample(self) -> MonitorReading:
        """Take one reading now."""
        values: dict[str, float | None] = {}
        na: dict[str, str] = {}

        def put(name: str, metric: Metric) -> None:
            values[name] = metric.value if isinstance(metric.value, (int, float)) else None
            if values[name] is None:
                na[name] = metric.reason or "n/a"

        if self._nvml is None:
            for name in ("gpu_util_pct", "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_power_w",
                         "gpu_temp_c", "gpu_sm_clock_mhz"):
                put(name, Metric(None, "running on CPU: no GPU in use"))
        else:
            put("gpu_util_pct", self._nvml.utilization())
            used, total = self._nvml.memory()
            put("gpu_mem_used_mb", used)
            put("gpu_mem_total_mb", total)
            put("gpu_power_w", self._nvml.power())
            put("gpu_temp_c", self._nvml.temperature())
            put("gpu_sm_clock_mhz", self._nvml.sm_clock())
        for name, metric in self._host().items():
            put(name, metric)
        return MonitorReading(time=time.time(), na=MappingProxyType(na), **values)

    def _host(self) -> dict[str, Metric]:
        try:
            import psutil
        except BaseException as exc:  # noqa: BLE001
            m = Metric(None, f"psutil not importable: {exc}")
            return {"cpu_pct": m, "rss_mb": m, "ram_used_pct": m}
        out: dict[str, Metric] = {}
        try:
            if self._proc is None:
                self._proc = psutil.Process(os.getpid())
                self._proc.cpu_percent(None)  # the first call only primes the counter
                out["cpu_pct"] = Metric(None, "measuring (needs two samples)")
            else:
                out["cpu_pct"] = Metric(self._proc.cpu_percent(None))
            out["rss_mb"] = Metric(self._proc.memory_info().rss / 2**20)
        except Exception as exc:  # noqa: BLE001
            out["cpu_pct"] = out["rss_mb"] = Metric(None, str(exc))
        try:
            out["ram_used_pct"] = Metric(psutil.virtual_memory().percent)
        except Exception as exc:  # noqa: BLE001
            out["ram_used_pct"] = Metric(None, str(exc))
        return out

    def start(self) -> "Sampler":
        if self._thread is None:
            try:
                self.latest = self.sample()
            except Exception as exc:  # noqa: BLE001
                self.latest = self._failed_reading(f"sampling failed: {type(exc).__name__}: {exc}")
            self._thread = threading.Thread(target=self._run, name="apextui-sampler", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.latest = self.sample()
            except Exception as exc:  # noqa: BLE001 - a broken metric source must not end sampling
                self.latest = self._failed_reading(f"sampling failed: {type(exc).__name__}: {exc}")

    @staticmethod
    def _failed_reading(reason: str) -> MonitorReading:
        """A reading with every metric None and `reason` as the why."""
        return MonitorReading(time=time.time(), na=MappingProxyType({name: reason for name in METRIC_UNITS}))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
