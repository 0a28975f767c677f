"""A CPU search's runs on a shared machine: intra-op threads that fit the cores other work leaves free, and OpenMP
threads that sleep rather than spin while they wait.

Why: beside one CPU burner on a 2-core box the GPT example's fp32 steps read a median of 8.7 ms and a p90 of 792 ms
(torch's default: a thread a core, each spinning while it waits for the others, and one of them sharing its core with
the burner); with one thread 5.9 ms (p90 8.4), with `OMP_WAIT_POLICY=PASSIVE` 4.35 ms (p90 4.45); quiet 5.6 ms. One
such baseline (538 ms a step) ended a search at 21 of its 60 s with "nothing ran but fp32".

The wait policy is OpenMP's, read when its library loads: it is set in the environment before the search's worker
processes start (`passive_wait`), where other work was running then; the thread count is set in the worker before
each run (`RunRequest.cpu_threads`), from what other work used during the run before (its contention record; where
that holds no reading, the count stays) or, before the first, over a short look.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Mapping, MutableMapping

WAIT_ENV = "OMP_WAIT_POLICY"
LOOK_S = 0.3  # how long the first look at other work's CPU use lasts


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fit_threads(cores: int, others: float | None) -> int:
    """The intra-op threads a run gets: the cores other work leaves free (rounded), at least one; all of them where
    other work's use is not known."""
    if others is None or not math.isfinite(others) or others <= 0:
        return max(1, cores)
    return max(1, min(cores, math.floor(cores - others + 0.5)))


BUSY_CORES = 0.5  # other work using this many cores when the search starts: its OpenMP threads wait passively


def passive_wait(others: float | None, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Where other work used `BUSY_CORES` or more when the search started, OpenMP's threads sleep while they wait
    (`OMP_WAIT_POLICY=PASSIVE`), unless the user set a policy; the policy in force (None: OpenMP's default), for the
    run's environment record. Not on a quiet machine: there a passive wait made the GPT example's fp32 step 3.2x
    slower on a 2-core box (2.92 -> 9.47 ms: each parallel region wakes sleeping threads), and the answer is for
    the user's training, which runs with the default."""
    env = os.environ if environ is None else environ
    if others is not None and others >= BUSY_CORES:
        env.setdefault(WAIT_ENV, "PASSIVE")
    return env.get(WAIT_ENV)


def others_now(look_s: float = LOOK_S, clock: Any = time.monotonic) -> float | None:
    """Cores other processes used over a short look (all CPU time less this process's and its children's), None
    where psutil cannot say."""
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []

    def mine() -> float:  # this process and its children, those reaped during the look too (children_*)
        t = me.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for p in me.children(recursive=True):
            try:
                c = p.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                continue
        return total

    try:
        busy0, mine0, t0 = _busy(psutil, cpus), mine(), clock()
        time.sleep(look_s)
        busy1, mine1, t1 = _busy(psutil, cpus), mine(), clock()
    except (psutil.Error, OSError):
        return None
    wall = t1 - t0
    return max(0.0, (busy1 - busy0) - (mine1 - mine0)) / wall if wall > 0 else None


def _busy(psutil: Any, cpus: list[int]) -> float:
    """CPU seconds the cores this process may run on (`cpus`; all where unknown) have spent busy."""
    per = psutil.cpu_times(percpu=True)
    chosen = [per[i] for i in cpus if i < len(per)] or per
    return float(sum(t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
                     for t in chosen))


def others_in(contention: Mapping[str, Any] | None) -> float | None:
    """Cores other work used during a run, from its contention record (`RunContention.to_dict`)."""
    if not contention:
        return None
    value = contention.get("other_cpu_cores_mean")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
