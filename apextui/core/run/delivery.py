"""The delivery thread: turns the step records the training thread hands over into `Snapshot`s (statistics, the
latest monitor reading, the final analysis) and calls the consumer's callback, so that a slow consumer never
holds up training. Its inbox carries `(kind, payload)` messages: "info", "status", "probe", "steps",
"traceback" and, last, "end"."""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from typing import Any, Callable

from ..analysis import Probe, UtilAverage, analyse_run
from ..monitor.sampler import Sampler
from .divergence import SkipCounter
from .snapshot import Callback, RunInfo, Snapshot, Status
from ..measure.stats import StepStats
from .timing import StepRecord

Inbox = queue.SimpleQueue[tuple[str, Any]]


class Delivery:
    """One run's delivery: `loop` runs in its own thread until the "end" message; `result` is then the final
    snapshot and `finished` is set (after the consumer had it)."""

    def __init__(self, inbox: Inbox, callback: Callback, warmup: int, device: str,
                 sampler: Callable[[], Sampler | None]) -> None:
        self.inbox = inbox
        self.callback = callback
        self.warmup = warmup
        self.device = device
        self.sampler = sampler  # the run's sampler, once the training thread has made it
        self.t0 = 0.0  # when the run started (perf_counter): snapshots' elapsed_s
        self.result: Snapshot | None = None
        self.finished = threading.Event()

    def loop(self) -> None:
        stats, opt_stats = StepStats(self.warmup), StepStats(self.warmup)
        info: RunInfo | None = None
        done, final_loss = 0, None
        skips = SkipCounter()
        status: Status = "starting"
        error: str | None = None
        held: tuple[str, Any] | None = None
        probe: Probe | None = None
        peak: int | None = None
        gpu_util = UtilAverage()  # NVML, over the measured steps: the busy fraction if profiling fails
        while True:
            kind, payload = held if held is not None else self.inbox.get()
            held = None
            new: tuple[StepRecord, ...] = ()
            sampler = self.sampler()
            if kind == "info":
                info, status = payload, "running"
            elif kind == "status":
                status = payload
            elif kind == "probe":
                probe = payload
                continue
            elif kind == "peak_memory":
                peak = payload
                continue
            elif kind == "steps":
                batch = list(payload)
                while True:  # a backlog (slow consumer) becomes one snapshot: the inbox stays short
                    try:
                        held = self.inbox.get_nowait()
                    except queue.Empty:
                        break
                    if held[0] != "steps":
                        break
                    batch.extend(held[1])
                    held = None
                new = tuple(batch)
                for rec in new:
                    stats.add(rec.ms, rec.steps)
                    if rec.opt_ms is not None:
                        opt_stats.add(rec.opt_ms, rec.steps)
                    if rec.loss is not None:
                        final_loss = rec.loss
                    skips.add(rec)
                    # a record's step number counts every step up to it, timed or not: a watched loop's first
                    # step (it starts the clock) is done but never timed
                    done = max(done + rec.steps, rec.step)
                if done > self.warmup and sampler is not None:
                    gpu_util.start(time.time())
                    gpu_util.add(sampler.latest)
            elif kind == "traceback":
                print(payload, file=sys.stderr, end="")
                continue
            elif kind == "end":
                status, error = payload
                if sampler is not None:
                    sampler.stop()
            st = stats.read(samples=kind == "end")  # a finished run keeps its step times (measure/samples.py)
            analysis = None
            if kind == "end" and status == "ok" and probe is not None:
                try:
                    analysis = analyse_run(info, st, opt_stats.read(), probe, gpu_util.mean,
                                           gpu_util.note if self.device == "cuda" else None)
                except Exception:  # noqa: BLE001 - the run's figures matter more than their analysis
                    traceback.print_exc(file=sys.stderr)
            snap = Snapshot(
                status=status, info=info, steps_done=done, new_steps=new, stats=st,
                throughput=st.throughput(info.units_per_step) if st and info else None,
                skipped_steps=skips.total, monitor=sampler.latest if sampler else None,
                elapsed_s=time.perf_counter() - self.t0, error=error, final_loss=final_loss,
                opt_stats=opt_stats.read(), loss_scale=skips.scale, analysis=analysis,
                peak_memory_bytes=peak,
            )
            if snap.finished:
                self.result = snap
            try:
                self.callback(snap)
            except Exception:  # noqa: BLE001 - a broken consumer must not kill delivery
                traceback.print_exc(file=sys.stderr)
            if kind == "end":
                self.finished.set()
                return
