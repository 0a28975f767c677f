"""A stand-in for nvidia-ml-py's `pynvml` with N GPUs, for the CPU tests of the sampler, the monitor pane and
the doctor's topology (`monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(8, ...))`).

Deterministic readings that differ per GPU and per sample (so histories move); `failing` GPUs answer every
device call with NVMLError_Unknown (their handle is still found, as when a GPU falls over mid-run);
`no_handle` GPUs cannot even be opened. `links` picks the NVLink wiring: "none" (PCIe cards), "pairs" (GPUs
2k and 2k+1 bridged directly, as on a 2-GPU NVLink box) or "switch" (every GPU into NVSwitches, as on an HGX
board); `pcie` is the NVML topology level every pair answers without NVLink (30: a host bridge)."""

from __future__ import annotations

import types
from typing import Literal

MIB = 2**20


def fake_nvml(count: int, *, failing: frozenset[int] | set[int] = frozenset(),
              no_handle: frozenset[int] | set[int] = frozenset(),
              links: Literal["none", "pairs", "switch"] = "none", nvlinks: int = 18, pcie: int = 30,
              remote_type: bool = True) -> types.ModuleType:
    """`remote_type=False`: an older NVML without nvmlDeviceGetNvLinkRemoteDeviceType (the remote end's PCI
    bus id must then tell a GPU from a switch)."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        text = "Unknown Error"

        def __str__(self) -> str:
            return self.text

    def error(name: str, text: str) -> type[NVMLError]:
        return type(name, (NVMLError,), {"text": text})

    m.NVMLError = NVMLError
    m.NVMLError_Unknown = error("NVMLError_Unknown", "Unknown Error")
    m.NVMLError_NotSupported = error("NVMLError_NotSupported", "Not Supported")
    m.NVMLError_InvalidArgument = error("NVMLError_InvalidArgument", "Invalid Argument")
    m.NVMLError_GpuIsLost = error("NVMLError_GpuIsLost", "GPU is lost")
    m.NVML_TEMPERATURE_GPU, m.NVML_CLOCK_SM = 0, 1
    m.NVML_FEATURE_ENABLED, m.NVML_NVLINK_MAX_LINKS = 1, 18
    m.NVML_NVLINK_DEVICE_TYPE_GPU, m.NVML_NVLINK_DEVICE_TYPE_SWITCH = 0, 2
    m.samples = [0] * count  # utilisation reads per GPU: each one moves that GPU's reading on

    class Handle:
        def __init__(self, index: int) -> None:
            self.index = index
            self.bus = f"00000000:{0x18 + 0x10 * index:02X}:00.0"  # NVML's spelling: upper case, 8-digit domain

    handles = [Handle(i) for i in range(count)]
    switch_bus = "00000000:C0:00.0"

    def device(fn):
        def call(handle, *args):
            if handle.index in failing:
                raise m.NVMLError_Unknown()
            return fn(handle, *args)
        return call

    def by_index(i: int) -> Handle:
        if not 0 <= i < count:
            raise m.NVMLError_InvalidArgument()
        if i in no_handle:
            raise m.NVMLError_Unknown()
        return handles[i]

    def by_bus(bus: str | bytes) -> Handle:
        text = bus.decode() if isinstance(bus, bytes) else bus
        for h in handles:
            if h.bus.lower().endswith(text.lower()[-7:]) and h.index not in no_handle:
                return h
        raise m.NVMLError_InvalidArgument()

    def utilization(h: Handle) -> types.SimpleNamespace:
        k = m.samples[h.index]
        m.samples[h.index] += 1
        return types.SimpleNamespace(gpu=(35 + 9 * h.index + 13 * k) % 101, memory=30)

    def nvlink_peer(h: Handle, link: int) -> Handle | None:
        """The GPU at the other end of a direct link, or None for a link into a switch."""
        if links == "pairs" and (h.index ^ 1) < count:
            return handles[h.index ^ 1]
        return None

    def nvlink_state(h: Handle, link: int) -> int:
        if links == "none":
            raise m.NVMLError_NotSupported()
        if link >= nvlinks:
            raise m.NVMLError_InvalidArgument()
        if links == "pairs" and nvlink_peer(h, link) is None:  # the odd one out of an odd count
            return 0
        return 1

    def remote_pci(h: Handle, link: int) -> types.SimpleNamespace:
        peer = nvlink_peer(h, link)
        return types.SimpleNamespace(busId=(peer.bus if peer else switch_bus).encode())

    def common_ancestor(a: Handle, b: Handle) -> int:
        if b.index in failing:
            raise m.NVMLError_Unknown()
        return pcie

    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: b"570.133.20"
    m.nvmlDeviceGetCount = lambda: count
    m.nvmlDeviceGetHandleByIndex = by_index
    m.nvmlDeviceGetHandleByPciBusId = by_bus
    m.nvmlDeviceGetIndex = device(lambda h: h.index)
    m.nvmlDeviceGetPciInfo = device(lambda h: types.SimpleNamespace(busId=h.bus.encode()))
    m.nvmlDeviceGetName = device(lambda h: b"NVIDIA H200")
    m.nvmlDeviceGetCudaComputeCapability = device(lambda h: (9, 0))
    m.nvmlDeviceGetUtilizationRates = device(utilization)
    m.nvmlDeviceGetMemoryInfo = device(lambda h: types.SimpleNamespace(
        used=(2048 + 4096 * h.index) * MIB, total=143771 * MIB))
    m.nvmlDeviceGetPowerUsage = device(lambda h: 120_000 + 55_000 * h.index)
    m.nvmlDeviceGetTemperature = device(lambda h, sensor: 34 + 3 * h.index)
    m.nvmlDeviceGetClockInfo = device(lambda h, clock: 1980 - 15 * h.index)
    m.nvmlDeviceGetNvLinkState = device(nvlink_state)
    m.nvmlDeviceGetNvLinkRemotePciInfo = device(remote_pci)
    if remote_type:
        m.nvmlDeviceGetNvLinkRemoteDeviceType = device(
            lambda h, link: m.NVML_NVLINK_DEVICE_TYPE_GPU if nvlink_peer(h, link) else m.NVML_NVLINK_DEVICE_TYPE_SWITCH)
    m.nvmlDeviceGetTopologyCommonAncestor = device(common_ancestor)
    # the contention check's: `m.processes[i]` the (pid, bytes) compute processes on GPU i, `m.clock_events[i]`
    # its clocks-event reasons bitmask (both empty / 0 unless a test sets them)
    m.processes = {i: [] for i in range(count)}
    m.clock_events = {i: 0 for i in range(count)}
    m.nvmlDeviceGetComputeRunningProcesses = device(lambda h: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in m.processes[h.index]])
    m.nvmlDeviceGetCurrentClocksEventReasons = device(lambda h: m.clock_events[h.index])
    return m
