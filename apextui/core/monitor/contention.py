"""Was other work competing with the run? CPU time of other processes, other processes on the run's GPU, and
the GPU's clocks held down, sampled with the metrics the monitor already reads (psutil, NVML).

Why: on a 2-core box that other work kept at load 4-5 the same preset measured 65.3 and 36.6 ms/step minutes
apart, and no screen said the machine was busy. A `Contention` is one sample's answer (`ContentionProbe.read`,
called by the `Sampler` thread once a sample); a `ContentionTally` adds up a run's samples into the record its
`end` line carries. Every source is optional: what cannot be read is None with the reason in `na`, never an
error, and the level is "unknown" only when nothing at all could be read.

- **CPU**: the CPU time the cores this process may run on spent busy (psutil's per-CPU times, `sched_getaffinity`)
  less the time this process and its children used, over the interval since the last sample, in cores. Busy
  when other processes used at least `CPU_BUSY_SHARE` of those cores (at least `CPU_BUSY_MIN_CORES`), or when
  they took at least `CPU_HEADROOM_CORES` and they and the run together left less than that free (a compile
  filling a 2-core box by itself was marked busy with 0.0 cores of other work, and with one sample's 0.1).
- **GPU**: NVML's compute processes on the run's GPU, less this process, its ancestors and their other children
  (the TUI, the worker's server, the other ranks of a data-parallel run): any other one is competing.
- **Clocks**: NVML's clocks-event reasons: a thermal or hardware slowdown marks the run "throttled" (a software
  power cap is normal at full load and is only listed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from .nvml import Nvml

Level = Literal["quiet", "busy", "throttled", "unknown"]
LEVELS: tuple[Level, ...] = get_args(Level)
CPU_BUSY_SHARE = 0.25  # other processes using a quarter of the cores the run may use: busy
CPU_BUSY_MIN_CORES = 0.5  # ... but never less than half a core (a 2-core box: half a core)
CPU_HEADROOM_CORES = 0.25  # other processes took at least this and left the run less than this free: busy
RUN_BUSY_SHARE = 0.1  # a run is marked busy when at least this share of its samples were (and at least one)

# NVML clocks-event reason bits (nvml.h): the ones that mean the GPU ran slower than it could
THROTTLE_BITS: Mapping[int, str] = MappingProxyType({
    0x4: "power cap", 0x8: "hardware slowdown", 0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown", 0x80: "power brake slowdown",
})
SLOWDOWN_BITS = 0x8 | 0x20 | 0x40 | 0x80  # these mark a run "throttled"; a power cap alone does not


@dataclass(frozen=True)
class GpuProcess:
    """Another process with a CUDA context on the run's GPU (NVML), and the GPU memory it holds (MiB, or None)."""

    pid: int
    name: str
    mem_mb: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "name": self.name,
                "mem_mb": round(self.mem_mb, 1) if self.mem_mb is not None else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuProcess:
        """A record's process as a file holds it (what is ill-typed: -1, '?' or None)."""
        pid, name, mem = d.get("pid"), d.get("name"), d.get("mem_mb")
        return cls(pid if isinstance(pid, int) and not isinstance(pid, bool) else -1,
                   name if isinstance(name, str) else "?",
                   mem if isinstance(mem, (int, float)) and not isinstance(mem, bool) else None)


@dataclass(frozen=True)
class Contention:
    """One sample: the level and what it was read from (None where unknown, the reason in `na`)."""

    level: Level
    other_cpu_cores: float | None = None  # cores' worth of CPU other processes used since the last sample
    own_cpu_cores: float | None = None  # this process and its children, likewise
    cores: int | None = None  # the cores this process may run on
    gpu_processes: tuple[GpuProcess, ...] = ()
    throttle: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # why the level is what it is, one line each
    na: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def competing(self) -> bool:
        """Other work competed (busy) or the GPU was slowed down (throttled)."""
        return self.level in ("busy", "throttled")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the `start` line (docs/json.md)."""
        return {"level": self.level, "other_cpu_cores": _round(self.other_cpu_cores),
                "own_cpu_cores": _round(self.own_cpu_cores), "cores": self.cores,
                "gpu_processes": [p.to_dict() for p in self.gpu_processes], "throttle": list(self.throttle),
                "reasons": list(self.reasons), "na": dict(self.na)}

    @property
    def short(self) -> str:
        """A few words for the run pane: 'busy: other work 1.9/2 CPU cores', 'busy: 1 other GPU process',
        'throttled: hardware thermal slowdown'; '' when quiet or unknown."""
        if not self.competing:
            return ""
        if self.level == "throttled":
            return "throttled: " + ", ".join(t for t in self.throttle if t != "power cap")
        parts = []
        if self.other_cpu_cores is not None and any("CPU" in r for r in self.reasons):
            parts.append(f"other work {self.other_cpu_cores:.1f}/{self.cores} CPU cores")
        if self.gpu_processes:
            n = len(self.gpu_processes)
            parts.append(f"{n} other GPU process{'es' if n > 1 else ''}")
        return "busy: " + ", ".join(parts)

    def step_fields(self) -> dict[str, Any]:
        """The few keys each `step` line carries (the latest sample's)."""
        return {"contention": self.level, "other_cpu_cores": _round(self.other_cpu_cores),
                "other_gpu_processes": len(self.gpu_processes)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def level_of(other: float | None, own: float | None, cores: int | None, gpu_processes: int,
             throttle_bits: int | None) -> tuple[Level, tuple[str, ...]]:
    """The rule: busy (other work competed), throttled (the GPU slowed itself down), quiet, or unknown when
    nothing was read; and why."""
    reasons: list[str] = []
    if other is not None and cores:
        free = cores - other - (own or 0.0)
        if other >= max(CPU_BUSY_MIN_CORES, CPU_BUSY_SHARE * cores):
            reasons.append(f"other processes used {other:.1f} of {cores} CPU cores")
        elif free < CPU_HEADROOM_CORES <= other:
            reasons.append(f"other processes used {other:.1f} of {cores} CPU cores, the run {own or 0.0:.1f}: "
                           f"{max(free, 0.0):.1f} left free")
    if gpu_processes:
        reasons.append(f"{gpu_processes} other process{'es' if gpu_processes > 1 else ''} on the run's GPU")
    if reasons:
        return "busy", tuple(reasons)
    if throttle_bits is not None and throttle_bits & SLOWDOWN_BITS:
        names = [name for bit, name in THROTTLE_BITS.items() if throttle_bits & bit & SLOWDOWN_BITS]
        return "throttled", (f"GPU clocks held down: {', '.join(names)}",)
    if other is None and throttle_bits is None and gpu_processes == 0:
        return "unknown", ()
    return "quiet", ()


def throttle_names(bits: int | None) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS.items() if bits is not None and bits & bit)


class ContentionProbe:
    """Reads one `Contention` a call (`read`); the CPU share needs the previous call's counters, so the first
    call has it unknown ("measuring"). `psutil_module` and `nvml`: the real ones unless a test gives fakes."""

    def __init__(self, nvml: Nvml | None = None, *, psutil_module: Any = None, pid: int | None = None) -> None:
        self.nvml = nvml
        self.pid = pid if pid is not None else os.getpid()
        self._psutil = psutil_module
        self._last: tuple[float, float, float] | None = None  # (wall, busy CPU s on my cores, own CPU s)
        self._ours: frozenset[int] | None = None
        self._me: Any = None  # psutil's Process of `pid`, made once (the pid is fixed)

    def _ps(self) -> Any:
        if self._psutil is None:
            import psutil

            self._psutil = psutil
        return self._psutil

    def _process(self) -> Any:
        if self._me is None:
            self._me = self._ps().Process(self.pid)
        return self._me

    def read(self) -> Contention:
        na: dict[str, str] = {}
        other = own = None
        cores: int | None = None
        try:
            ps = self._ps()
            cpus = _my_cpus(ps)
            cores = len(cpus)
            per_cpu = ps.cpu_times(percpu=True)
            busy = sum(_busy(per_cpu[i]) for i in cpus if i < len(per_cpu))
            mine = _own_cpu_s(self._process())
            now = time.monotonic()
            if self._last is not None and now > self._last[0]:
                wall = now - self._last[0]
                own = max(0.0, (mine - self._last[2]) / wall)
                other = max(0.0, (busy - self._last[1]) / wall - own)
            else:
                na["other_cpu_cores"] = "measuring (needs two samples)"
            self._last = (now, busy, mine)
        except Exception as exc:  # noqa: BLE001 - no psutil, /proc unreadable: CPU contention unknown
            na["other_cpu_cores"] = f"CPU times unreadable: {type(exc).__name__}: {exc}"
        procs: tuple[GpuProcess, ...] = ()
        bits: int | None = None
        if self.nvml is None:
            na["gpu_processes"] = na["throttle"] = "no GPU in use"
        else:
            listed = self.nvml.compute_processes()
            if listed.ok:
                procs = self._others(listed.value)
            else:
                na["gpu_processes"] = listed.reason or "n/a"
            reasons = self.nvml.throttle_reasons()
            if isinstance(reasons.value, int):
                bits = reasons.value
            else:
                na["throttle"] = reasons.reason or "n/a"
        level, why = level_of(other, own, cores, len(procs), bits)
        return Contention(level, other, own, cores, procs, throttle_names(bits), why, MappingProxyType(na))

    def _others(self, listed: Any) -> tuple[GpuProcess, ...]:
        if all(pid == self.pid for pid, _ in listed):  # the common case: the run alone on its GPU; no tree walk
            return ()
        ours = self._our_pids()
        out = []
        for pid, mem in listed:
            if pid in ours:
                continue
            out.append(GpuProcess(pid, _name(self._psutil, pid), mem))
        return tuple(out)

    def _our_pids(self) -> frozenset[int]:
        """This process, its children, and the chain of Python ancestors above it with theirs (the worker's server
        and the TUI; torchrun and its other ranks), up to the first ancestor that is not Python (the shell: its
        other children are the user's other work). Found again each call (a rank may start after the first)."""
        pids = {self.pid}
        try:
            me = self._process()
            family = [me]
            for parent in me.parents():
                if not _ours(parent):
                    break
                family.append(parent)
            for p in family:
                pids.add(p.pid)
                pids.update(c.pid for c in p.children(recursive=True))
        except Exception:  # noqa: BLE001 - without psutil: this process only
            pass
        return frozenset(pids)


def _ours(proc: Any) -> bool:
    """An ancestor that is apextui's: a Python process (the TUI, the worker's server, torchrun)."""
    try:
        name = str(proc.name()).lower()
    except Exception:  # noqa: BLE001
        return False
    return any(word in name for word in ("python", "apextui", "torchrun", "pytest"))


def _my_cpus(ps: Any) -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU
        return list(range(ps.cpu_count() or 1))


def _busy(t: Any) -> float:
    """A CPU's busy seconds: everything but idle and iowait."""
    total = sum(float(v) for v in t)
    return total - float(getattr(t, "idle", 0.0)) - float(getattr(t, "iowait", 0.0))


def _own_cpu_s(proc: Any) -> float:
    """This process's CPU seconds, its reaped children's, and its live descendants' (inductor's compile workers)."""
    t = proc.cpu_times()
    total = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    try:
        for child in proc.children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except Exception:  # noqa: BLE001 - it ended meanwhile
                pass
    except Exception:  # noqa: BLE001
        pass
    return float(total)


def _name(ps: Any, pid: int) -> str:
    try:
        return str(ps.Process(pid).name())
    except Exception:  # noqa: BLE001 - another user's process, or it ended
        return "?"


class ContentionTally:
    """A run's samples added up: what the `end` line's `summary.contention` holds (`record`). Thread-safe enough
    for one writer (the sampler thread) and readers that take a `record()` (a frozen copy)."""

    def __init__(self) -> None:
        self.samples = 0
        self.busy = 0
        self.throttled = 0
        # other processes' CPU cores: count, sum and max of the samples that had it (kept running: `to_dict` is
        # called every sample, and a list of every sample grew, and was summed, for the run's whole length)
        self.cpu_samples = 0
        self.cpu_sum = 0.0
        self.cpu_max: float | None = None
        self.cores: int | None = None
        self.gpu: dict[int, GpuProcess] = {}
        self.throttle: set[str] = set()
        self.reasons: dict[str, None] = {}  # first seen first, each once
        self.na: dict[str, str] = {}

    def add(self, c: Contention) -> None:
        self.samples += 1
        self.busy += c.level == "busy"
        self.throttled += c.level == "throttled"
        if c.other_cpu_cores is not None:
            self.cpu_samples += 1
            self.cpu_sum += c.other_cpu_cores
            self.cpu_max = c.other_cpu_cores if self.cpu_max is None else max(self.cpu_max, c.other_cpu_cores)
        self.cores = c.cores if c.cores is not None else self.cores
        for p in c.gpu_processes:
            seen = self.gpu.get(p.pid)
            if seen is None or (p.mem_mb or 0) > (seen.mem_mb or 0):
                self.gpu[p.pid] = p
        self.throttle.update(c.throttle)
        for r in c.reasons:
            self.reasons.setdefault(r, None)
        self.na = dict(c.na)

    @property
    def level(self) -> Level:
        if not self.samples:
            return "unknown"
        if self.busy and self.busy >= RUN_BUSY_SHARE * self.samples:
            return "busy"
        if self.throttled and self.throttled >= RUN_BUSY_SHARE * self.samples:
            return "throttled"
        if not self.cpu_samples and "gpu_processes" in self.na and "throttle" in self.na:
            return "unknown"
        return "quiet"

    def record(self) -> RunContention:
        """The run's record so far (the sampler hands one out with every reading)."""
        n, total, most = self.cpu_samples, self.cpu_sum, self.cpu_max
        return RunContention(self.level, self.samples, self.busy, self.throttled, _round(total / n) if n else None,
                             _round(most) if n else None, self.cores, tuple(self.gpu.values()),
                             tuple(sorted(self.throttle)), tuple(self.reasons)[:8])


RUN_CONTENTION_KEYS = ("level", "samples", "busy_samples", "throttled_samples", "other_cpu_cores_mean",
                       "other_cpu_cores_max", "cores", "gpu_processes", "throttle", "reasons")


@dataclass(frozen=True)
class RunContention:
    """A run's samples added up (`ContentionTally.record`): the `end` line's `summary.contention` (`to_dict`), read
    back from a results file or a `--json` output by `from_dict` (an ill-typed value None, an unknown key kept)."""

    level: Level | None = None
    samples: int | None = None
    busy_samples: int | None = None
    throttled_samples: int | None = None
    other_cpu_cores_mean: float | None = None  # other processes' CPU cores over the samples that read them
    other_cpu_cores_max: float | None = None
    cores: int | None = None
    gpu_processes: tuple[GpuProcess, ...] = ()  # every other process seen on the run's GPU, at its largest
    throttle: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # the first few distinct reasons a sample was busy or throttled
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def competing(self) -> bool:
        """Other work competed with the run, or the GPU was throttled."""
        return self.level in ("busy", "throttled")

    def to_dict(self) -> dict[str, Any]:
        out = {"level": self.level, "samples": self.samples, "busy_samples": self.busy_samples,
               "throttled_samples": self.throttled_samples, "other_cpu_cores_mean": self.other_cpu_cores_mean,
               "other_cpu_cores_max": self.other_cpu_cores_max, "cores": self.cores,
               "gpu_processes": [p.to_dict() for p in self.gpu_processes], "throttle": list(self.throttle),
               "reasons": list(self.reasons)}
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunContention:
        def whole(key: str) -> int | None:
            v = d.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        def cores(key: str) -> float | None:
            v = d.get(key)
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        def words(key: str) -> tuple[str, ...]:
            v = d.get(key)
            return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list) else ()

        level = d.get("level")
        procs = d.get("gpu_processes")
        return cls(level if level in LEVELS else None, whole("samples"), whole("busy_samples"),
                   whole("throttled_samples"), cores("other_cpu_cores_mean"), cores("other_cpu_cores_max"),
                   whole("cores"),
                   tuple(GpuProcess.from_dict(p) for p in procs if isinstance(p, Mapping))
                   if isinstance(procs, list) else (), words("throttle"), words("reasons"),
                   {k: v for k, v in d.items() if k not in RUN_CONTENTION_KEYS})


def competing(record: RunContention | None) -> bool:
    """Whether a run's contention record (a summary's `contention`) says other work competed or the GPU was
    throttled."""
    return record is not None and record.competing


def describe(record: RunContention | None) -> str:
    """One short line for a run's record: 'busy: other processes used 1.9 of 2 CPU cores', '' when quiet."""
    if record is None or not record.competing:
        return ""
    return f"{record.level}: {record.reasons[0]}" if record.reasons else str(record.level)


START_WINDOW_S = 0.2  # how long the check before a run looks at the CPU (the `start` line's record)


def sample_now(nvml: Nvml | None, window_s: float = START_WINDOW_S) -> Contention:
    """One record now, the CPU share over `window_s` (the `start` line's, before the run's sampler runs)."""
    probe = ContentionProbe(nvml)
    probe.read()
    time.sleep(window_s)
    return probe.read()
