"""A tolerant NVML shim over nvidia-ml-py (module `pynvml`): the one module that imports it.

Every call returns a `Metric`: a value, or None with the reason. No driver, no
GPU, an unsupported metric, a missing or broken library, or a GPU lost mid-run
(NVMLError_GpuIsLost: from then on every metric is None with "GPU lost: ...")
never raise. `all_gpus()` lists every GPU NVML sees; one whose handle cannot be
had is still listed, each of its metrics None with the reason (as nvitop keeps it).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """A reading, or None and why not (a number or text for a metric; `Nvml.query` may give any NVML answer)."""

    value: Any
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


# pynvml error classes after which the GPU will not answer again in this process
GPU_GONE = frozenset({"NVMLError_GpuIsLost", "NVMLError_GpuNotFound"})


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# Whatever a broken NVML or pynvml raises (SystemExit included) is a reading's reason, never an error; Ctrl-C is
# not: a KeyboardInterrupt while pynvml imports (a signal before the command's handlers are in) must reach the
# command, which exits 130, instead of being swallowed here and leaving the run going.
NOT_CTRL_C = (Exception, SystemExit)


def open_library() -> tuple[Any, str]:
    """(the initialised `pynvml` module, "") or (None, why not). nvmlInit counts its callers, so each user
    opens it for itself; never raises."""
    try:
        with warnings.catch_warnings():  # the old `pynvml` distribution warns that it is deprecated on import
            warnings.simplefilter("ignore")
            import pynvml  # provided by nvidia-ml-py
    except NOT_CTRL_C as exc:  # noqa: BLE001
        return None, f"nvidia-ml-py not importable: {_describe(exc)}"
    try:
        pynvml.nvmlInit()
    except NOT_CTRL_C as exc:  # noqa: BLE001
        return None, f"NVML unavailable (no NVIDIA driver?): {_describe(exc)}"
    return pynvml, ""


def all_gpus() -> tuple[list[Nvml], str]:
    """One `Nvml` for every GPU NVML sees (the whole machine, in NVML's order: nvidia-smi's indices, whatever
    CUDA_VISIBLE_DEVICES says), and "" ; or ([], why none). A GPU whose handle fails is still in the list."""
    lib, error = open_library()
    if lib is None:
        return [], error
    try:
        count = int(lib.nvmlDeviceGetCount())
    except NOT_CTRL_C as exc:  # noqa: BLE001
        return [], f"NVML cannot count the GPUs: {_describe(exc)}"
    return [Nvml(i) for i in range(count)], ""


def driver_version() -> Metric:
    """The NVIDIA driver's version, asked of NVML itself (no GPU needed)."""
    lib, error = open_library()
    if lib is None:
        return Metric(None, error)
    try:
        return Metric(_text(lib.nvmlSystemGetDriverVersion()))
    except NOT_CTRL_C as exc:  # noqa: BLE001
        return Metric(None, _describe(exc))


_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)$")


def normalise_bus_id(value: object) -> str | None:
    """A PCI bus id in one spelling ("00000000:18:00.0"), whether NVML's 8-digit domain, the legacy 4-digit
    one, bytes or torch's; None when it does not parse."""
    m = _BUS_ID.match(_text(value).strip().rstrip("\x00"))
    if m is None:
        return None
    domain, bus, device, function = (int(g or "0", 16) for g in m.groups())
    return f"{domain:08x}:{bus:02x}:{device:02x}.{function:x}"


class Nvml:
    """Lazily initialised NVML handle for one GPU; thread-safe, never raises.

    Found by `pci_bus_id` when given (the run's GPU, as torch sees it), else by NVML `index`; `index` is
    NVML's index of the GPU found, once it is (it can differ from torch's under CUDA_VISIBLE_DEVICES)."""

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
        pynvml, error = open_library()
        if pynvml is None:
            self._error = error
            return
        try:
            if self.pci_bus_id:
                self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(self.pci_bus_id)
                # NVML's own index of the GPU torch calls current (it only labels the GPU: unknown keeps `index`)
                self.index = _answer(lambda: int(pynvml.nvmlDeviceGetIndex(self._handle)), self.index)
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except NOT_CTRL_C as exc:  # noqa: BLE001
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            except NOT_CTRL_C:  # noqa: BLE001
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
            except NOT_CTRL_C as exc:  # noqa: BLE001
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

    def compute_capability(self) -> Metric:
        """CUDA compute capability, "major.minor"."""
        return self._call(lambda n, h: "{}.{}".format(*n.nvmlDeviceGetCudaComputeCapability(h)))

    def bus_id(self) -> Metric:
        """The GPU's PCI bus id, normalised (see `normalise_bus_id`)."""
        return self._call(lambda n, h: normalise_bus_id(n.nvmlDeviceGetPciInfo(h).busId))

    def nvlinks(self) -> Metric:
        """The GPU's active NVLinks, one (remote kind, remote PCI bus id) each: kind "gpu", "switch" or None when
        NVML cannot say, bus id None likewise; () for a GPU without NVLink. Links past the GPU's own count
        answer with an error and are skipped; a GPU that is lost ends the question (`_call`)."""

        def read(n: Any, h: Any) -> tuple[tuple[str | None, str | None], ...]:
            kinds = {getattr(n, "NVML_NVLINK_DEVICE_TYPE_GPU", 0): "gpu",
                     getattr(n, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2): "switch"}

            def remote(link: int) -> tuple[str | None, str | None]:
                kind = _answer(lambda: kinds.get(n.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)))
                bus = _answer(lambda: normalise_bus_id(n.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
                return kind, bus

            links: list[tuple[str | None, str | None]] = []
            errors: list[BaseException] = []
            for link in range(int(getattr(n, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    active = n.nvmlDeviceGetNvLinkState(h, link)
                except NOT_CTRL_C as exc:
                    if type(exc).__name__ in GPU_GONE:
                        raise
                    errors.append(exc)
                    continue
                if active != getattr(n, "NVML_FEATURE_ENABLED", 1):
                    continue
                links.append(remote(link))
            if not links and errors and not any(type(e).__name__ == "NVMLError_NotSupported" for e in errors):
                raise errors[0]  # every link failed, and not because the GPU has no NVLink
            return tuple(links)

        return self._call(read)

    def common_ancestor(self, other: Nvml) -> Metric:
        """NVML's topology level of the closest PCIe ancestor of this GPU and `other` (NVML_TOPOLOGY_*: 0 the
        same board ... 50 across NUMA nodes)."""
        with other._lock:
            other._init()
            handle, why = other._handle, other._error
        if handle is None:
            return Metric(None, why or "NVML unavailable")
        return self._call(lambda n, h: int(n.nvmlDeviceGetTopologyCommonAncestor(h, handle)))

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


    def compute_processes(self) -> Metric:
        """The compute processes on this GPU: ((pid, used MiB or None), ...); NVML's answer, whatever process
        it is (the contention check leaves apextui's own out)."""

        def read(n: Any, h: Any) -> tuple[tuple[int, float | None], ...]:
            procs = n.nvmlDeviceGetComputeRunningProcesses(h)
            out = []
            for p in procs:
                used = getattr(p, "usedGpuMemory", None)
                out.append((int(p.pid), used / 2**20 if isinstance(used, int) and 0 <= used < 2**60 else None))
            return tuple(out)

        return self._call(read)

    def throttle_reasons(self) -> Metric:
        """The bitmask of why the clocks are held down now (NVML's clocks-event reasons; the older name for
        drivers before 535)."""

        def read(n: Any, h: Any) -> int:
            fn = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                  or n.nvmlDeviceGetCurrentClocksThrottleReasons)
            return int(fn(h))

        return self._call(read)

def _answer(fn: Callable[[], Any], default: Any = None) -> Any:
    """`fn()`, or `default` when NVML cannot answer it (a lost GPU still raises, to end the question)."""
    try:
        return fn()
    except NOT_CTRL_C as exc:
        if type(exc).__name__ in GPU_GONE:
            raise
        return default


def _text(value: Any) -> str:
    """NVML may hand back bytes; a byte that is not UTF-8 must not cost a metric."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
