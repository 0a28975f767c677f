"""A data-parallel run for the TUI: `apextui --nproc N --preset P --json` in a worker process, its merged JSON
lines turned back into `Snapshot`s, so the TUI shows it like any run (`RunHandle`).

Why a command rather than the ranks in this process: the ranks are started by torchrun's own API
(`apextui.cli.launch`), each in its own process as a single run's worker is, and rank 0 already merges them
(core/run/merge.py); here one reader thread parses its lines. `stop()` sends SIGINT, which the launcher forwards to
every rank (they stop after the same step and rank 0 prints the `end` line); `kill()` ends the whole process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .merge import MergedRecord
from .request import RunRequest
from .handle import ForwardsSnapshots
from .runner import Callback, RunControl, RunInfo, Snapshot, run_steps
from ..measure.stats import StepStats
from .worker import _log_tail, describe_exit

EXIT_GRACE_S = 30.0  # after the end line, how long the launcher and its ranks get to exit before they are killed


def info_from(start: Mapping[str, Any], setup: Mapping[str, Any]) -> RunInfo:
    """The run's info from its `start` and `setup` lines (docs/json.md)."""
    return RunInfo(
        preset=start["preset"], workload=start["workload"], variant=start["variant"], device=start["device"],
        size_name=start["size"], size=dict(start["size_params"]), steps=start["steps"], warmup=start["warmup"],
        amp=start["amp"], units=setup["units"], units_per_step=setup["units_per_step"], baseline=start["baseline"],
        loss_floor=setup.get("loss_floor"), check=setup.get("check"), uses_grad_scaler=bool(setup.get("grad_scaler")),
        params=setup.get("params"), compile_s=setup.get("compile_s"),
    )


def record_from(line: Mapping[str, Any]) -> MergedRecord:
    return MergedRecord(step=line["step"], ms=line["ms"], loss=line.get("loss"), opt_ms=line.get("opt_ms"),
                        loss_scale=line.get("loss_scale"), steps=line["steps"],
                        rank_ms=tuple(line.get("rank_ms") or ()), slowest_rank=line.get("slowest_rank") or 0,
                        throughput=line.get("throughput"))


class LaunchedRunner(ForwardsSnapshots, RunControl):
    """`RunHandle` of a data-parallel run on `nproc` ranks, in a launcher process (see the module docstring)."""

    def __init__(self, request: RunRequest, callback: Callback, *, nproc: int) -> None:
        preset, device = request.preset, request.device
        self.request = request
        self.nproc, self.preset, self.device, self.callback = nproc, preset, device, callback
        self.steps = run_steps(preset, request.steps)
        self.cmd = [sys.executable, "-m", "apextui", "--nproc", str(nproc), "--preset", preset.path, "--json",
                    "--device", device, "--steps", str(self.steps), "--sample-interval", str(request.sample_interval)]
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        fd, self.log_path = tempfile.mkstemp(prefix="apextui-ranks-", suffix=".log")
        os.close(fd)
        self._reader = threading.Thread(target=self._read_loop, name="apextui-ranks-reader")
        self.result: Snapshot | None = None
        self.last: Snapshot | None = None
        self._t0 = 0.0

    def start(self) -> "LaunchedRunner":
        self._t0 = time.perf_counter()
        with open(self.log_path, "w", encoding="utf-8") as log:
            # its own session: Ctrl-C in the TUI's terminal never reaches it, and kill() reaches every rank
            self._proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                          text=True, start_new_session=True)
        self._reader.start()
        return self

    def stop(self) -> None:
        first = not self._stop.is_set()
        self._stop.set()
        if first and self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # the launcher forwards it to every rank

    def kill(self, reason: str | None = None) -> bool:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except OSError:
                pass
        return True

    def join(self, timeout: float | None = None) -> bool:
        if self._reader.ident is not None:
            self._reader.join(timeout)
        return not self.is_alive()

    def is_alive(self) -> bool:
        return self._reader.is_alive() or (self._proc is not None and self._proc.poll() is None)

    def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        start: dict[str, Any] = {}
        info: RunInfo | None = None
        stats: StepStats | None = None
        done, loss, scale = 0, None, None
        try:
            for text in self._proc.stdout:
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                kind = line.get("event")
                if kind == "start":
                    start = line
                    stats = StepStats(line["warmup"])
                    continue
                if kind == "unavailable":
                    self._deliver(self._empty("failed", f"unavailable: {line.get('reason')}"))
                    break
                new: tuple[MergedRecord, ...] = ()
                status: Any = "running"
                error = None
                if kind == "setup":
                    info = info_from(start, line)
                elif kind == "step" and stats is not None:
                    rec = record_from(line)
                    stats.add(rec.ms, rec.steps)
                    done += rec.steps
                    loss = rec.loss if rec.loss is not None else loss
                    scale = rec.loss_scale if rec.loss_scale is not None else scale
                    new = (rec,)
                elif kind == "end":
                    status, error = line["status"], line.get("error")
                    summary = line.get("summary") or {}
                    done = summary.get("steps") or done
                else:
                    continue
                st = stats.summary() if stats is not None else None
                summary = line.get("summary") if kind == "end" else None
                self._deliver(Snapshot(
                    status=status, info=info, steps_done=done, new_steps=new, stats=st,
                    throughput=st.throughput(info.units_per_step) if st and info else None,
                    skipped_steps=(summary or {}).get("skipped_steps") or 0, monitor=None,
                    elapsed_s=time.perf_counter() - self._t0,
                    error=error, final_loss=loss, loss_scale=scale,
                    distributed=(summary or {}).get("distributed"),
                ))
                if kind == "end":
                    break
            try:
                self._proc.wait(EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                self.kill()
                self._proc.wait(EXIT_GRACE_S)
            if self.result is None:
                tail = _log_tail(self.log_path)
                why = f"{describe_exit(self._proc.returncode)} before the run ended"
                self._deliver(self._empty("failed", f"{why}; its last output (full log: {self.log_path}):\n{tail}"
                                          if tail else why))
        finally:
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._finished.set()

    def _empty(self, status: Any, error: str) -> Snapshot:
        if self.last is not None:
            from dataclasses import replace

            return replace(self.last, status=status, new_steps=(), error=error)
        return Snapshot(status=status, info=None, steps_done=0, new_steps=(), stats=None, throughput=None,
                        skipped_steps=0, monitor=None, elapsed_s=0.0, error=error)


def launched_factory(nproc: int) -> Callable[[RunRequest, Callback], LaunchedRunner]:
    """A `RunnerFactory` whose runs are data-parallel on `nproc` ranks (the TUI's `--nproc N`)."""

    def factory(request: RunRequest, callback: Callback) -> LaunchedRunner:
        return LaunchedRunner(request, callback, nproc=nproc)

    return factory
