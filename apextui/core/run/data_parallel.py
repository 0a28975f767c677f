"""The engine of a data-parallel run (torchrun): rank 0's `Collector` merges every rank's step records into one
stream of snapshots, the other ranks' `Reporter` sends theirs to it through the rendezvous store, and
`DataParallelRuns` is a `RunnerFactory` for a sequence of such runs in one process group (`apextui advise` under
torchrun). The front end (cli/torchrun.py) parses, prints and picks exit codes; how the ranks stop together:
core/run/distributed.py and docs/distributed.md."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..exits import EXIT_FAILED
from ..presets import Preset
from ..workloads.spec import WORKLOADS
from .distributed import Channel, Coordinator, Group
from .merge import Baseline, Merger, RankEnd, from_row, merged_snapshot, overall, to_row
from .request import RunRequest
from .runner import Runner, run_steps, warmup_steps
from .snapshot import Snapshot

POLL_S = 0.25  # how often rank 0 reads the other ranks' records (the runner's own hand-over interval)
MAX_GRACE_S = 15.0  # after its own run, rank 0 waits at most this long (or the collective timeout) for the others


def log(rank: int, message: str) -> None:
    print(f"apextui[rank {rank}]: {message}", file=sys.stderr, flush=True)


def data_parallel_problem(preset: Preset) -> str | None:
    """Why a preset cannot run data-parallel, or None."""
    spec = WORKLOADS[preset.workload]
    if spec.kernel_only:
        return f"the {preset.workload} workload times one kernel and has no model to train data-parallel; pick a " \
               "transformer or optimizer preset"
    if not spec.trains_data_parallel:
        return f"apextui trains the {preset.workload} workload in one process (its model is never wrapped for " \
               "several ranks); run it without --nproc or torchrun, or pick a transformer or optimizer preset"
    if preset.config.cuda_graphs:
        return f"{preset.name} captures CUDA graphs, which apextui does not run data-parallel"
    return None


class Collector:
    """Rank 0: merges its own snapshots (the runner's callback) with the other ranks' records (read from the
    store every `POLL_S` on a thread of its own) and prints the merged stream. A rank that reports a failure
    stops this one; if this one cannot stop (stuck in a collective), the collector ends the process itself
    with the `end` line after `grace` seconds."""

    def __init__(self, channel: Channel, world_size: int, warmup: int, printer: Callable[[Snapshot], None],
                 backend: str, baseline: Baseline | None, grace: float) -> None:
        self.channel, self.world_size, self.printer = channel, world_size, printer  # printer: any consumer
        self.final: Snapshot | None = None
        self.backend, self.baseline, self.grace = backend, baseline, grace
        self.merger = Merger(world_size, warmup)
        self.lock = threading.Lock()
        self.local: Snapshot | None = None
        self.ends: dict[int, RankEnd] = {}
        self.runner: Runner | None = None
        self._stop = threading.Event()
        self._reading = threading.Lock()  # one reader of the channel at a time (`_poll`)
        self._peer_failed_at: float | None = None
        self._thread = threading.Thread(target=self._loop, name="apextui-collect", daemon=True)

    def start(self) -> "Collector":
        self._thread.start()
        return self

    def on_local(self, snap: Snapshot) -> None:
        with self.lock:
            self.local = snap
            if snap.info is not None:
                self.merger.units_per_step = snap.info.units_per_step * self.world_size
            self.merger.add(0, snap.new_steps)
            if not snap.finished:
                self._emit()

    def _emit(self) -> None:
        """Print what every rank has timed since the last call (the caller holds the lock)."""
        new = self.merger.merged()
        if self.local is not None and (new or self.local.info is not None):
            self.printer(replace(merged_snapshot(self.local, self.merger, new, self.world_size),
                                 status="running" if self.local.finished else self.local.status))

    def _poll(self, wait: float = -1.0) -> bool:
        """Read what the other ranks sent since the last call; False if another reader held the channel for `wait` s
        (-1: as long as it takes). One reader at a time: the collector's thread and `finish` (after the run, or on a
        second signal) share the channel's read positions, and two readers at once read a batch twice or wait on a
        key the other had deleted."""
        if not self._reading.acquire(timeout=wait):
            return False
        try:
            for r in range(1, self.world_size):
                # the end first: a rank writes it after its last rows, so every row it sent before its end is in
                # the store by then (read the other way round, rows sent between the two reads were lost: the end
                # closed the wait for them, and a run of 45 steps printed 38)
                end = self.channel.ended(r) if r not in self.ends else None
                if end is not None:
                    self._ended(r, end)
                rows = self.channel.receive(r)
                with self.lock:
                    self.merger.add(r, [from_row(x) for x in rows])
        finally:
            self._reading.release()
        return True

    def _ended(self, rank: int, end: dict[str, Any]) -> None:
        with self.lock:
            self.ends[rank] = RankEnd(rank, end["status"], end.get("error"), int(end.get("steps") or 0))
            if end["status"] == "failed" and self._peer_failed_at is None:
                self._peer_failed_at = time.monotonic()
                if self.runner is not None:
                    self.runner.stop()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._poll()
                with self.lock:
                    if self.local is not None and not self.local.finished:
                        self._emit()
            except Exception as exc:  # noqa: BLE001 - the store is gone: rank 0's own run ends by itself
                log(0, f"cannot read the other ranks' records: {type(exc).__name__}: {exc}")
                return
            stuck = self._peer_failed_at is not None and time.monotonic() - self._peer_failed_at > self.grace
            if stuck and (self.local is None or not self.local.finished):
                log(0, f"another rank failed and this one did not stop within {self.grace:.0f} s: ending it")
                self.finish(final=self.local, waited=True)
                os._exit(EXIT_FAILED)  # rank 0 ends itself, stuck after another rank failed

    def finish(self, final: Snapshot | None, waited: bool = False) -> str:
        """After rank 0's run (or when it is stuck): wait up to `grace` for the other ranks' ends, print the
        merged `end` line; the run's overall status."""
        self._stop.set()
        deadline = time.monotonic() + (0 if waited else self.grace)
        while True:
            try:
                # a second signal's finish waits for the collector's read a second at most, then prints what it has
                if not self._poll(wait=1.0 if waited else -1.0):
                    break
            except Exception:  # noqa: BLE001 - the store went with a failed rank: what arrived is kept
                break
            if len(self.ends) == self.world_size - 1 or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        with self.lock:
            local = final if final is not None else self.local
            own = (RankEnd(0, local.status if local.finished else "failed",  # type: ignore[arg-type]
                           local.error if local.finished else "stuck in a collective after another rank failed",
                           local.steps_done)
                   if local is not None else RankEnd(0, "failed", "no result"))
            ends = [own] + [self.ends.get(r) or RankEnd(r, "failed", f"sent no result within {self.grace:.0f} s "
                                                         "of rank 0's end (its process died or hangs)")
                            for r in range(1, self.world_size)]
            status, error = overall(ends)
            if local is None:
                local = Snapshot(status=status, info=None, steps_done=0, new_steps=(), stats=None, throughput=None,
                                 skipped_steps=0, monitor=None, elapsed_s=0.0)
            new = self.merger.merged()
            units = local.info.units_per_step * self.world_size if local.info else 0
            snap = merged_snapshot(local, self.merger, new, self.world_size, status, error)
            snap = replace(snap, distributed=self.merger.distributed(self.backend, units, ends, self.baseline))
            self.final = snap
            self.printer(snap)
            return status


class Reporter:
    """Ranks 1..N-1: the runner's callback sends each batch of records, and the end, to rank 0."""

    def __init__(self, channel: Channel, rank: int) -> None:
        self.channel, self.rank = channel, rank
        self.runner: Runner | None = None
        self.broken = False

    def __call__(self, snap: Snapshot) -> None:
        if self.broken:
            return
        try:
            if snap.new_steps:
                self.channel.send(self.rank, [to_row(r) for r in snap.new_steps])
            if snap.finished:
                self.channel.end(self.rank, {"status": snap.status, "error": snap.error, "steps": snap.steps_done})
        except Exception as exc:  # noqa: BLE001 - rank 0 (the store's host) is gone: nobody reads this run
            self.broken = True
            log(self.rank, f"cannot reach rank 0: {type(exc).__name__}: {exc}; stopping")
            if self.runner is not None:
                self.runner.stop()


class DataParallelRuns:
    """A `RunnerFactory` for a sequence of data-parallel runs in one process group (`apextui advise` under
    torchrun): every rank makes the same runs in the same order; run i keeps its records under its own store
    prefix. On rank 0 the callback gets the merged snapshots; on the others nothing (their advice is not printed).
    `on_remote_stop` is called when a run stopped because another rank was asked to (e.g. only rank 0 got Ctrl-C),
    so that this rank's sequence stops too instead of starting a run the others never join."""

    def __init__(self, group: Group, grace: float) -> None:
        self.group, self.grace = group, grace
        self.count = 0
        self.on_remote_stop: Callable[[], None] | None = None

    def __call__(self, request: RunRequest, callback: Callable[[Snapshot], None]) -> "DataParallelRun":
        import torch.distributed as dist

        self.count += 1
        channel = Channel(dist.PrefixStore(f"run{self.count}/", self.group.store), self.group.world_size)
        return DataParallelRun(self, channel, request, callback)


class DataParallelRun:
    """One run of `DataParallelRuns`: `run()` trains on this thread and returns once rank 0 has the merged end."""

    def __init__(self, owner: DataParallelRuns, channel: Channel, request: RunRequest,
                 callback: Callable[[Snapshot], None]) -> None:
        group = owner.group
        self.owner = owner
        warmup = warmup_steps(request.preset, run_steps(request.preset, request.steps))
        self.collector: Collector | None = None
        if group.rank == 0:
            self.collector = Collector(channel, group.world_size, warmup, callback, group.backend, None, owner.grace)
            consume: Any = self.collector.on_local
        else:
            consume = Reporter(channel, group.rank)
        self.runner = Runner(request, consume, analyse=False, coordinator=Coordinator(group))
        if isinstance(consume, Reporter):
            consume.runner = self.runner
        else:
            self.collector.runner = self.runner  # type: ignore[union-attr]
        self.result: Snapshot | None = None

    def run(self) -> Snapshot | None:
        if self.collector is not None:
            self.collector.start()
        self.runner.run()
        local = self.runner.result
        if self.collector is not None:
            self.collector.finish(local)
            self.result = self.collector.final
        else:
            self.result = local
        remote = local is not None and local.status == "stopped" and not self.runner.stopping
        if remote and self.owner.on_remote_stop is not None:
            self.owner.on_remote_stop()
        return self.result

    def stop(self) -> None:
        self.runner.stop()

    @property
    def stopping(self) -> bool:
        return self.runner.stopping

    def wait(self, timeout: float | None = None) -> bool:
        return self.runner.wait(timeout)

    def join(self, timeout: float | None = None) -> bool:
        return self.runner.join(timeout)

    def is_alive(self) -> bool:
        return self.runner.is_alive()

    def kill(self, reason: str | None = None) -> bool:
        return self.runner.kill(reason)

    def start(self) -> "DataParallelRun":
        raise NotImplementedError("a data-parallel run trains on the calling thread: call run()")
