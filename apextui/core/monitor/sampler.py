"""A background thread that samples GPU (NVML) and host (psutil) metrics at a fixed interval.

Which GPUs: the run's (`scope="run"`: the GPU it trains on, plus `run_bus_ids` for other GPUs of the same run),
or every GPU NVML sees (`scope="all"`, the TUI's pane), each marked whether the run uses it. The flat `gpu_*`
fields of a reading are the run's first GPU, as they were when a run had one; `gpus` lists every GPU sampled.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from .contention import Contention, ContentionProbe, ContentionTally, RunContention
from .nvml import Metric, Nvml, all_gpus, normalise_bus_id

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
# a GpuReading's metric fields: the flat `gpu_*` fields' names without the prefix
GPU_METRICS: tuple[str, ...] = tuple(k.removeprefix("gpu_") for k in METRIC_UNITS if k.startswith("gpu_"))
NO_GPU = "running on CPU: no GPU in use"

GpuScope = Literal["run", "all"]


@dataclass(frozen=True)
class GpuReading:
    """One GPU in one sample: NVML's index (nvidia-smi's), whether the run uses it, and its metrics; None where
    a metric is not available, with the reason in `na`."""

    index: int
    in_use: bool
    util_pct: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    na: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def error(self) -> str | None:
        """Why this GPU gave no reading at all (lost, no handle, NVML failing on it); None when it gave one."""
        if any(getattr(self, name) is not None for name in GPU_METRICS):
            return None
        return next((self.na[name] for name in GPU_METRICS if name in self.na), "n/a")

    def metrics(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in GPU_METRICS}


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
    gpus: tuple[GpuReading, ...] = ()  # every GPU sampled: the run's in its order; scope "all": NVML's order
    contention: Contention | None = None  # was other work competing at this sample (contention.py)
    run_contention: RunContention | None = None  # every sample so far added up (`ContentionTally.record`)

    def metrics(self) -> dict[str, float | None]:
        """The metric fields as a flat dict (no time, no reasons, no per-GPU list)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in METRIC_UNITS}

    @property
    def run_gpus(self) -> tuple[GpuReading, ...]:
        """The GPUs the run uses (what `--json` reports)."""
        return tuple(g for g in self.gpus if g.in_use)


def read_gpu(nvml: Nvml, in_use: bool) -> GpuReading:
    """Every metric of one GPU; a failing call costs that metric only (the reason goes in `na`)."""
    values: dict[str, float | None] = {}
    na: dict[str, str] = {}

    def put(name: str, metric: Metric) -> None:
        values[name] = metric.value if isinstance(metric.value, (int, float)) else None
        if values[name] is None:
            na[name] = metric.reason or "n/a"

    put("util_pct", nvml.utilization())
    used, total = nvml.memory()
    put("mem_used_mb", used)
    put("mem_total_mb", total)
    put("power_w", nvml.power())
    put("temp_c", nvml.temperature())
    put("sm_clock_mhz", nvml.sm_clock())
    return GpuReading(index=nvml.index, in_use=in_use, na=MappingProxyType(na), **values)


def _key(nvml: Nvml) -> str:
    """What identifies a GPU across handles: its PCI bus id, else NVML's index."""
    bus = nvml.bus_id().value or normalise_bus_id(nvml.pci_bus_id or "")
    return bus or f"index {nvml.index}"


class Sampler:
    """Samples every `interval` seconds in a daemon thread; `latest` is always safe to read.

    `nvml` (or the GPU at `pci_bus_id` / `gpu_index`; none with gpu=False) is the run's GPU; `run_bus_ids`
    names more GPUs of the same run (a distributed run's other local ranks); `scope="all"` lists every other GPU
    NVML sees too, marked not in use."""

    def __init__(self, interval: float = 1.0, gpu: bool = True, gpu_index: int = 0,
                 pci_bus_id: str | None = None, nvml: Nvml | None = None, *, scope: GpuScope = "run",
                 run_bus_ids: Sequence[str] = ()) -> None:
        self.interval = interval
        self.scope = scope
        self._nvml = nvml if nvml is not None else (Nvml(gpu_index, pci_bus_id) if gpu else None)
        run = [self._nvml] if self._nvml is not None else []
        self._run_gpus: list[Nvml] = run + [Nvml(pci_bus_id=bus) for bus in run_bus_ids]
        self._gpus: list[tuple[Nvml, bool]] | None = None  # (GPU, in use), found by the first sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: Any = None  # a psutil.Process once read (psutil ships no type hints)
        self.contention = ContentionProbe(self._nvml)
        self.tally = ContentionTally()  # the run's samples added up: its `end` line's summary.contention
        self.latest: MonitorReading | None = None

    def _sampled_gpus(self) -> list[tuple[Nvml, bool]]:
        """The GPUs to read, found once: the run's, and with scope "all" every other one NVML lists (a GPU the
        run uses keeps the run's handle, so it is read once)."""
        if self._gpus is None:
            gpus = [(g, True) for g in self._run_gpus]
            if self.scope == "all":
                run = {_key(g): g for g in self._run_gpus}
                listed, _ = all_gpus()  # none listed (no NVML): the run's GPUs stay, with their reasons
                seen: set[str] = set()
                merged: list[tuple[Nvml, bool]] = []
                for g in listed:
                    key = _key(g)
                    seen.add(key)
                    merged.append((run[key], True) if key in run else (g, False))
                gpus = merged + [(g, True) for key, g in run.items() if key not in seen]
            self._gpus = gpus
        return self._gpus

    def sample(self) -> MonitorReading:
        """Take one reading now."""
        sampled = self._sampled_gpus()
        gpus = tuple(read_gpu(nvml, in_use) for nvml, in_use in sampled)
        values: dict[str, float | None] = {}
        na: dict[str, str] = {}
        # the flat fields: the GPU this process trains on
        own = next((r for (nvml, _), r in zip(sampled, gpus, strict=True) if nvml is self._nvml), None)
        for name in GPU_METRICS:
            values[f"gpu_{name}"] = getattr(own, name) if own is not None else None
            if own is None:
                na[f"gpu_{name}"] = NO_GPU
            elif name in own.na:
                na[f"gpu_{name}"] = own.na[name]
        for name, metric in self._host().items():
            values[name] = metric.value if isinstance(metric.value, (int, float)) else None
            if values[name] is None:
                na[name] = metric.reason or "n/a"
        contention = self._contention()
        return MonitorReading(time=time.time(), na=MappingProxyType(na), gpus=gpus, contention=contention,
                              run_contention=self.tally.record(), **values)

    def _contention(self) -> Contention | None:
        try:
            c = self.contention.read()
        except Exception:  # noqa: BLE001 - the contention check never costs the other metrics
            return None
        self.tally.add(c)
        return c

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

    def start(self) -> Sampler:
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
