"""The overhead measurements' shared parts: the geometric mean of ratios with its bootstrap interval, a clock
wrapper that accounts what a run's per-step clock calls cost the training thread, and the host-use account
behind the monitor's cost budget (`HostUse`, `gil_handoff_s`, `monitor_budget`)."""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import random
import statistics
import threading
import time
from typing import Any


def _thread_proc(name: str) -> str:
    with open(f"/proc/thread-self/{name}", encoding="ascii") as fh:
        return fh.read()


def python_threads_cpu_s() -> float:
    """CPU time of this process's Python threads other than the calling one: in a run, the monitor's own
    (delivery, sampler, the JSON printer, the worker's pipe), and not torch's C++ threads (the autograd engine
    runs a CUDA backward on a thread of its own, which `others_cpu_s` counts). Read from each thread's
    `/proc/self/task/<tid>/schedstat` (nanoseconds on a CPU); threads that have ended are not counted. NaN
    where there is no /proc."""
    me = threading.get_native_id()
    total, read = 0, False
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is None or tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as fh:
                total += int(fh.read().split()[0])
            read = True
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9 if read or os.path.exists("/proc/self/task") else math.nan


@dataclasses.dataclass(frozen=True)
class HostUse:
    """What the calling (training) thread and the rest of its process used, read at one moment; the
    difference of two readings is a window's use.

    Why: on a shared host the step-to-step speed of a host-bound loop varies by 10-20 % between blocks a
    second apart, so an A/B of bare and monitored blocks resolves its overhead only to several per cent.
    What the monitor can take from the training thread is bounded by quantities that host noise scales but
    does not hide: the CPU time the process's other threads used (the most they can have held the GIL), the
    training thread's extra voluntary switches (each a wait, for the GPU or the GIL), and its wait on the
    run queue (a core taken by another thread or process). Linux: switches and the run-queue wait read
    `/proc/thread-self`; elsewhere they are 0."""

    wall_s: float
    thread_cpu_s: float
    process_cpu_s: float  # every thread of the process, those already ended included
    switches: int  # the calling thread's voluntary context switches
    runq_s: float  # the calling thread's time waiting on a run queue
    py_threads_cpu_s: float = math.nan  # the process's other Python threads (`python_threads_cpu_s`)

    @classmethod
    def now(cls) -> "HostUse":
        switches, runq = 0, 0.0
        try:
            status = _thread_proc("status")
            switches = int(next(x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches")).split()[1])
            runq = int(_thread_proc("schedstat").split()[1]) / 1e9
        except (OSError, StopIteration, IndexError, ValueError):
            pass
        return cls(time.perf_counter(), time.thread_time(), time.process_time(), switches, runq,
                   python_threads_cpu_s())

    def __sub__(self, earlier: "HostUse") -> "HostUse":
        return HostUse(*(a - b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(earlier), strict=True)))

    @property
    def others_cpu_s(self) -> float:
        """CPU time of the process's threads other than the calling one, over a window."""
        return max(0.0, self.process_cpu_s - self.thread_cpu_s)

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_{k}": v for k, v in dataclasses.asdict(self).items()} | {
            f"{prefix}_others_cpu_s": self.others_cpu_s}


def gil_handoff_s(hops: int = 2000, repeats: int = 5) -> float:
    """The time one thread takes to wake another and hand it the GIL (median of `repeats` ping-pongs of
    `hops` hops): what the training thread loses, beyond the other thread's own work, each time it has to
    wait for the GIL."""
    times = []
    for _ in range(repeats):
        there: queue.SimpleQueue[int] = queue.SimpleQueue()
        back: queue.SimpleQueue[int] = queue.SimpleQueue()

        def echo(there: queue.SimpleQueue[int] = there, back: queue.SimpleQueue[int] = back) -> None:
            for _ in range(hops // 2):
                back.put(there.get())

        t = threading.Thread(target=echo)
        t.start()
        t0 = time.perf_counter()
        for i in range(hops // 2):
            there.put(i)
            back.get()
        times.append((time.perf_counter() - t0) / hops)
        t.join()
    return statistics.median(times)


def monitor_budget(monitored: HostUse, bare: HostUse, clock_s: float, handoff_s: float) -> dict[str, float]:
    """What the monitor can have cost a monitored window, as a fraction of it, against a bare window of the
    same steps: the clock's calls on the training thread (`clock_s`), the monitor's threads' CPU time (the
    process's other Python threads beyond the bare window's: an upper bound of the GIL they held; all other
    threads, torch's included, where that was not read), and the training thread's voluntary switches beyond
    the bare window's, each costing one GIL hand-over (`handoff_s`). Also the run-queue wait beyond the bare
    window's (time a core was taken from the training thread), as its own term. A thread that holds the GIL
    costs a host-bound loop more than its own time (results-h200.md: the `burn` control), so this is an
    account of the monitor's work, not a bound of its cost."""
    py = monitored.py_threads_cpu_s - bare.py_threads_cpu_s
    others = max(0.0, py if math.isfinite(py) else monitored.others_cpu_s - bare.others_cpu_s)
    switches = max(0, monitored.switches - bare.switches)
    gil = others + switches * handoff_s
    return {"clock": clock_s / monitored.wall_s, "gil": gil / monitored.wall_s,
            "runq": max(0.0, monitored.runq_s - bare.runq_s) / monitored.wall_s,
            "total": (clock_s + gil) / monitored.wall_s, "extra_switches": switches, "others_cpu_s": others}


class TimedClock:
    """Wraps a run's clock: adds up the time its per-step calls take on the training thread, and reads that
    thread's CPU time from the clock's start to the final harvest (the steps alone: no Runner setup)."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self.seconds = 0.0
        self.steps_cpu_s = math.nan
        self.use: HostUse | None = None  # the host use from the clock's start to the final harvest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clock, name)

    def start(self) -> None:
        self._use0 = HostUse.now()
        self._clock.start()

    def end_step(self, *args: Any) -> None:
        t0 = time.perf_counter()
        self._clock.end_step(*args)
        self.seconds += time.perf_counter() - t0

    def harvest(self, wait: bool = False) -> Any:
        t0 = time.perf_counter()
        out = self._clock.harvest(wait)
        if not wait:  # the final harvest waits for the GPU: not a per-step cost
            self.seconds += time.perf_counter() - t0
        else:
            self.use = HostUse.now() - self._use0
            self.steps_cpu_s = self.use.thread_cpu_s
        return out


def geomean_ci(ratios: list[float], n: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean of the ratios and its 95 % bootstrap interval. (An arithmetic mean of ratios is
    biased upwards by about their variance: with rounds 10 % apart, +1 % from noise alone.)"""
    logs = [math.log(r) for r in ratios]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(n))
    return math.exp(statistics.fmean(logs)), math.exp(means[int(0.025 * n)]), math.exp(means[int(0.975 * n) - 1])
