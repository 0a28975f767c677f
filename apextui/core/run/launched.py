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
from collections.abc import Callable
from typing import Any

from .handle import ForwardsSnapshots, RunControl
from .replay import Replay
from .request import RunRequest
from .runner import run_steps
from .snapshot import Callback, Snapshot
from .worker import _log_tail, describe_exit

EXIT_GRACE_S = 30.0  # after the end line, how long the launcher and its ranks get to exit before they are killed


class LaunchedRunner(ForwardsSnapshots, RunControl):
    """`RunHandle` of a data-parallel run on `nproc` ranks, in a launcher process (see the module docstring)."""

    def __init__(self, request: RunRequest, callback: Callback, *, nproc: int) -> None:
        self.request = request
        self.nproc, self.callback = nproc, callback
        self.steps = run_steps(request.preset, request.steps)
        self.cmd = [sys.executable, "-m", "apextui", "--nproc", str(nproc), "--preset", request.preset.path, "--json",
                    "--device", request.device, "--steps", str(self.steps),
                    "--sample-interval", str(request.sample_interval)]
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
        replay = Replay()  # the stream's one reader (also `apextui attach`'s)
        try:
            for text in self._proc.stdout:
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(line, dict):
                    continue
                replay.add([line])
                kind = line.get("event")
                if kind == "unavailable":
                    self._deliver(self._empty("failed", replay.error or "unavailable"))
                    break
                if kind in ("setup", "step", "end"):  # a snapshot a line, once the run's info is known
                    self._deliver(replay.snapshot_at(time.perf_counter() - self._t0))
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
