"""One worker process for a search's runs, one after another: `apextui advise --model`.

Why: in a worker of its own each run of a search spent most of its time outside its measured steps. On an H200,
HF GPT-2's run took 15-20 s for 3 s of steps: importing transformers (5-15 s), building the model on the CPU (2 s),
CUDA's context and first kernels (2-3 s), the check's fp32 reference steps (2 s); a 300 s search ran 15 points and
no compile. A worker that stays keeps the imports, the user's built model (`user_model.reuse_builds`: each run gets a
copy of it, the same initial weights), the check's fp32 reference and the model's FLOPs a step (MFU's; both
`model_workload.reuse_references`) and CUDA's
context and kernels, so a point costs little more than its steps.

What the shared process must not change, and how it is kept from doing so:
- no profiler window after a run (`Runner(analyse=False)`): torch.profiler leaves CUDA's profiling interface hooked
  into every later kernel launch (a host-bound loop ran 1.28x slower after one window, `worker.py` says more);
- before each run torch.compile's state is reset (`torch._dynamo.reset()`: one point's compiled graphs guard the
  next point's calls, and past the recompile limit a step would run eager), the garbage collected, CUDA's cache of
  freed memory emptied; the peak memory is reset by the runner itself;
- a run that does not end ok ends the worker (an out-of-memory's fragments, a wedged CUDA context, a user's hung
  step): the next run starts a fresh one. A run killed at its deadline kills the worker, as `ProcessRunner`'s would.
What it keeps on purpose: the inductor's caches (a later compile of the same graph is faster, as in the user's own
second run), cuBLAS's and cuDNN's handles and workspaces (the user's training has them after its first step).

$APEXTUI_SEARCH_WORKER=fresh gives every run a worker of its own again (`search_runner_factory`).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import queue
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from .handle import ForwardsSnapshots
from .request import RunRequest
from .runner import Runner, run_steps
from .snapshot import Callback, Snapshot
from .worker import EXIT_GRACE_S, _log_tail, _starting_processes, begin_worker, context, crash_words, \
    describe_exit, end_worker, final_snapshot

SEARCH_WORKER_ENV = "APEXTUI_SEARCH_WORKER"  # "fresh": a worker process per run (`search_runner_factory`)
STARTED = ("started",)  # a worker's message before its first run's snapshots: its start-up is done


# ---- worker side ---------------------------------------------------------------------------
def _between_runs(request: RunRequest) -> None:
    """What one run must not inherit from the run before it in this process (the module docstring)."""
    gc.collect()
    if "torch" not in sys.modules:
        return
    import torch

    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    if request.device == "cpu" and request.cpu_threads:  # the cores other work leaves (`advise.cpu_share`)
        torch.set_num_threads(request.cpu_threads)
    if request.device == "cuda" and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _start_up(request: RunRequest) -> None:
    """What only a worker's first run would pay, paid before it starts, so that the parent can tell the worker's
    start from the run's own cost (`ReusedRun.start_s`): the user's imports and the model's build (kept:
    `user_model.reuse_builds`), CUDA's context. A failure here is left to the run, whose own build reports it."""
    from ..workloads import user_model

    spec = request.preset.model
    try:
        if spec:
            user_model.build(spec, request.device == "cpu", request.preset.seed)
        if request.device == "cuda":
            import torch

            torch.empty(1, device="cuda")
    except Exception:  # noqa: BLE001 - the run meets it again and says so
        pass


def reusable_main(conn: Connection, log_path: str, to_stderr: bool = False) -> None:
    """The worker process: run each request the parent sends, one at a time, each run's snapshots sent back, until
    the parent says "exit", goes away, or a run does not end ok. Messages from the parent: ("run", RunRequest),
    ("stop",) for the current run, ("exit",)."""

    from ..workloads import model_workload, user_model

    begin_worker(log_path, to_stderr)
    user_model.reuse_builds(True)
    model_workload.reuse_references(True)
    inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
    current: list[Runner | None] = [None]

    def listen() -> None:  # the parent's messages; a stop reaches the run while the main thread trains
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the parent is gone: stop, and end
                msg = ("exit",)
            if msg[0] == "stop":
                runner = current[0]
                if runner is not None:
                    runner.stop()
                continue
            inbox.put(msg)
            if msg[0] == "exit":
                runner = current[0]
                if runner is not None:
                    runner.stop()
                return

    threading.Thread(target=listen, name="apextui-reusable-listen", daemon=True).start()

    def send(snap: Snapshot) -> None:
        try:
            conn.send(snap)
        except (BrokenPipeError, EOFError, OSError):
            runner = current[0]
            if runner is not None:
                runner.stop()

    from ..analysis.torch_messages import diverted

    first = True
    while True:
        msg = inbox.get()
        if msg[0] != "run":
            break
        request: RunRequest = msg[1]
        if first:
            _start_up(request)
            send(STARTED)  # type: ignore[arg-type]
            first = False
        _between_runs(request)
        runner = Runner(request, send, gpu_scope="all", analyse=False)
        current[0] = runner
        if to_stderr:
            with diverted():
                final = runner.run()
        else:
            final = runner.run()
        current[0] = None
        if final is None or final.status != "ok":
            break
    conn.close()
    end_worker()


# ---- parent side ---------------------------------------------------------------------------
class ReusableWorker:
    """A `RunnerFactory` whose runs share one worker process (started at the first run, again after a run that
    did not end ok); `close()` ends it. One run at a time: a run is made after the previous one's final snapshot."""

    def __init__(self, *, to_stderr: bool = True, target: Callable[..., None] | None = None,
                 log_path: str | None = None) -> None:
        """`log_path`: every worker's output goes to this one file, kept after `close()` (`advise.search_log`);
        None: each worker's to a temporary file of its own (or to stderr, `to_stderr`), removed at `close()`."""
        self.to_stderr = to_stderr
        self.target = target or reusable_main
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._run: ReusedRun | None = None
        self._retiring = False  # its last run did not end ok: the worker is ending (`reusable_main`)
        self.keep_log = log_path is not None
        self.log_path = log_path or ""
        self.started = 0  # worker processes started (tests, and the lab report's figures)

    def __call__(self, request: RunRequest, callback: Callback, /) -> "ReusedRun":
        run = ReusedRun(self, request, callback)
        with self._lock:
            if self._run is not None and not self._run.finished.is_set():
                raise RuntimeError("a reusable worker runs one run at a time")
            self._run = run
        return run

    # ---- used by ReusedRun -------------------------------------------------------------
    def _send(self, run: "ReusedRun") -> None:
        with self._lock:
            retiring, reader = self._retiring, self._reader
        if retiring and reader is not None:  # let the ending worker go first: a run sent to it would be lost
            reader.join(EXIT_GRACE_S * 3)
        run.sent_at = time.monotonic()  # a new worker's start counts from here (`ReusedRun.start_s`): its process too
        with self._lock:
            if self._proc is None or not self._proc.is_alive() or self._retiring:
                self._start()
            conn, proc = self._conn, self._proc
        assert conn is not None
        run.proc, run.pid = proc, proc.pid
        steps = run_steps(run.request.preset, run.request.steps)
        try:
            conn.send(("run", dataclasses.replace(run.request, steps=steps)))
        except (BrokenPipeError, OSError) as exc:
            run.deliver_final("failed", f"could not hand the run to its worker: {exc}")

    def _start(self) -> None:
        ctx = context()
        if self.keep_log:
            Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        else:
            fd, self.log_path = tempfile.mkstemp(prefix="apextui-search-worker-", suffix=".log")
            os.close(fd)
        ours, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=self.target, name="apextui-search-worker", args=(theirs, self.log_path),
                           kwargs={"to_stderr": True} if self.to_stderr else {})
        with _starting_processes():
            proc.start()
        theirs.close()
        self._proc, self._conn, self._retiring = proc, ours, False
        self.started += 1
        self._reader = threading.Thread(target=self._read_loop, args=(proc, ours), name="apextui-reusable-reader",
                                        daemon=True)
        self._reader.start()

    def _stop(self) -> None:
        conn = self._conn
        if conn is not None:
            try:
                conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.is_alive():
            proc.kill()

    def _read_loop(self, proc: Any, conn: Connection) -> None:
        error: str | None = None
        try:
            while True:
                try:
                    snap = conn.recv()
                except (EOFError, OSError):
                    break
                except Exception as exc:  # noqa: BLE001 - e.g. a snapshot that does not unpickle
                    error = f"cannot read the worker's snapshot: {type(exc).__name__}: {exc}"
                    proc.kill()
                    break
                run = self._run
                if run is None or run.proc is not proc or run.finished.is_set():
                    continue
                if snap == STARTED:
                    run.start_s = time.monotonic() - run.sent_at
                    continue
                if snap.finished and snap.status == "failed" and _log_tail(self.log_path):
                    snap = dataclasses.replace(snap, error=f"{snap.error} (worker log: {self.log_path})")
                if snap.finished and snap.status != "ok":
                    with self._lock:
                        self._retiring = True
                run.deliver(snap)
        finally:
            proc.join(EXIT_GRACE_S)
            if proc.is_alive():
                proc.kill()
                proc.join(EXIT_GRACE_S)
            conn.close()
            run = self._run
            if run is not None and run.proc is proc and not run.finished.is_set():  # the worker ended inside a run
                if run.kill_reason is not None:
                    run.deliver_final("stopped", run.kill_reason)
                else:
                    run.deliver_final("failed", crash_words(error or describe_exit(proc.exitcode), self.log_path))
            with self._lock:
                if self._proc is proc:
                    self._proc, self._conn = None, None

    def close(self) -> None:
        """End the worker: asked to exit after its run, killed where it does not within `EXIT_GRACE_S`."""
        with self._lock:
            proc, conn, reader = self._proc, self._conn, self._reader
        if proc is None:
            return
        if conn is not None:
            try:
                conn.send(("exit",))
            except (BrokenPipeError, OSError):
                pass
        proc.join(EXIT_GRACE_S)
        if proc.is_alive():
            proc.kill()
        if reader is not None:
            reader.join(EXIT_GRACE_S * 2)
        if self.log_path and not self.keep_log:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass


class ReusedRun(ForwardsSnapshots):
    """One run in a `ReusableWorker`: the `RunHandle` a front end holds (start, stop, kill, wait, join)."""

    def __init__(self, worker: ReusableWorker, request: RunRequest, callback: Callback) -> None:
        self.worker, self.request, self.callback = worker, request, callback
        self.preset = request.preset
        self.steps = run_steps(request.preset, request.steps)
        self.finished = threading.Event()
        self._stopping = False
        self.kill_reason: str | None = None
        self.result: Snapshot | None = None
        self.last: Snapshot | None = None
        self.pid: int | None = None
        self.proc: Any = None  # the worker process it was sent to
        self.sent_at = 0.0
        # of this run's wall time, what starting its worker took (its process, the user's imports, the model's first
        # build, CUDA's context): paid by the first run of a worker only (0 for the others)
        self.start_s = 0.0

    def start(self) -> "ReusedRun":
        self.worker._send(self)
        return self

    def stop(self) -> None:
        self._stopping = True
        self.worker._stop()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def kill(self, reason: str | None = None) -> bool:
        """End the worker at once (its run with it): "stopped" with `reason`, else "failed"."""
        self._stopping = True
        self.kill_reason = reason
        self.worker._kill()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        return self.finished.wait(timeout)

    def join(self, timeout: float | None = None) -> bool:
        return self.finished.wait(timeout)

    def is_alive(self) -> bool:
        return not self.finished.is_set()

    def deliver(self, snap: Snapshot) -> None:
        if self.finished.is_set():
            return
        self._deliver(snap)
        if snap.finished:
            self.finished.set()

    def deliver_final(self, status: Any, error: str) -> None:
        self.deliver(final_snapshot(self.last, status, error))


def search_runner_factory(headless: bool = True, log_path: str | None = None) -> ReusableWorker | None:
    """The search's runs in one reusable worker (None: as every other run, a process each: $APEXTUI_WORKER=thread,
    or $APEXTUI_SEARCH_WORKER=fresh); `log_path`: its output goes there, off the terminal (`advise.search_log`)."""
    from .worker import WHERE_ENV

    if os.environ.get(WHERE_ENV) == "thread" or os.environ.get(SEARCH_WORKER_ENV) == "fresh":
        return None
    if log_path is not None:
        return ReusableWorker(to_stderr=False, log_path=log_path)
    return ReusableWorker(to_stderr=headless)
