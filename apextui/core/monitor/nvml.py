"""A tolerant NVML shim over nvidia-ml-py (module `pynvml`).

Every call returns a `Metric`: a value, or None with the reason. No driver, no
GPU, an unsupported metric, a missing or broken library, or a GPU lost mid-run
(NVMLError_GpuIsLost: from then on every metric is None with "GPU lost: ...")
never raise.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Metric:
    """A reading, or None and why not."""

    value: float | str | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


# pynvml error classes after which the GPU will not answer again in this process
GPU_GONE = frozenset({"NVMLError_GpuIsLost", "NVMLError_GpuNotFound"})


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class Nvml:
    """Lazily initialised NVML handle for one GPU; thread-safe, never raises."""

    def __init__(self, index: int = 0, pci_bus_id: str | None = None) -> None:
        self.index = index
        self.pci_bus_id = pci_bus_id
        self._lock = threading.Lock()
        self._lib: Any = None
        self._handle: Any = None
        self._error: str | None = None
        self._ready = False

    def _init(self) -> None:
        if self._ready:
            return
        self._ready = True
        try:
            import pynvml  # provided by nvidia-ml-py
        except BaseException as exc:  # noqa: BLE001
            self._error = f"nvidia-ml-py not importable: {_describe(exc)}"
            return
        try:
            pynvml.nvmlInit()
        except BaseException as exc:  # noqa: BLE001
            self._error = f"NVML unavailable (no NVIDIA driver?): {_describe(exc)}"
            return
        try:
            if self.pci_bus_id:
                self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(self.pci_bus_id)
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except BaseException as exc:  # noqa: BLE001
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            except BaseException:  # noqa: BLE001
                self._error = f"no NVIDIA GPU {self.index}: {_describe(exc)}"
                return
        self._lib = pynvml

    @property
    def available(self) -> bool:
        with self._lock:
            self._init()
            return self._handle is not None

    @property
    def error(self) -> str:
        with self._lock:
            self._init()
            return self._error or ""

    def _call(self, fn: Callable[[Any, Any], Any]) -> Metric:
        with self._lock:
            self._init()
            if self._handle is None:
                return Metric(None, self._error or "NVML unavailable")
            try:
                return Metric(fn(self._lib, self._handle))
            except BaseException as exc:  # noqa: BLE001
                kind = type(exc).__name__
                if kind == "NVMLError_NotSupported":
                    return Metric(None, "not supported on this GPU")
                if kind in GPU_GONE:
                    # the GPU fell off the bus (or was reset): every later call would fail the same way,
                    # possibly slowly, so stop asking; each metric reads None with this reason from now on
                    self._handle = None
                    self._error = f"GPU lost: {_describe(exc)}"
                    return Metric(None, self._error)
                return Metric(None, _describe(exc))

    def name(self) -> Metric:
        return self._call(lambda n, h: _text(n.nvmlDeviceGetName(h)))

    def driver_version(self) -> Metric:
        return self._call(lambda n, h: _text(n.nvmlSystemGetDriverVersion()))

    def utilization(self) -> Metric:
        """GPU busy percentage over the driver's last sample period."""
        return self._call(lambda n, h: float(n.nvmlDeviceGetUtilizationRates(h).gpu))

    def memory(self) -> tuple[Metric, Metric]:
        """(used MiB, total MiB)."""
        m = self._call(lambda n, h: n.nvmlDeviceGetMemoryInfo(h))
        if not m.ok:
            return m, m
        info: Any = m.value
        return Metric(info.used / 2**20), Metric(info.total / 2**20)

    def power(self) -> Metric:
        """Board power in watts."""
        return self._call(lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0)

    def temperature(self) -> Metric:
        """GPU core temperature in °C."""
        return self._call(lambda n, h: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)))

    def sm_clock(self) -> Metric:
        """Current SM clock in MHz."""
        return self._call(lambda n, h: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)))


def _text(value: Any) -> str:
    """NVML may hand back bytes; a byte that is not UTF-8 must not cost a metric."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
