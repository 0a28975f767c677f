"""Train a preset in a worker process; the caller gets the same `Snapshot`s as from `Runner`.

Why a process: on the H200 a host-bound step (fused_amp) ran 5-8 % slower when its training loop ran
in a background thread of a busy interpreter than on a main thread (docs/results-h200.md). The TUI
owns its main thread, so it trains here instead: the worker's main thread only trains (`Runner.run`),
and a crash in an extension, an out-of-memory or a hang cannot take the UI down with it; everything
a run allocated goes when its process exits.

Workers are forked from a multiprocessing forkserver that has imported torch already, so after the
first run a new one starts in a fraction of a second. The worker ignores SIGINT and SIGHUP (its
parent decides when a run stops), stops by itself when its parent stops listening, dies with its
parent however that ends (the forkserver too: lifeline.py), and writes its stdout/stderr to a log
file, not to the terminal the TUI draws on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from types import MappingProxyType
from typing import Any, Callable, Iterator

from .request import RunRequest
from .. import exits
from .handle import ForwardsSnapshots, RunControl, RunnerFactory
from .lifeline import guard_worker
from .runner import Runner, run_steps, thread_runner_factory
from .snapshot import Callback, FinalStatus, Snapshot

# torch._dynamo: the first optimizer step imports it (~1.5 s); imported once here, not in every worker. The guard
# first: the server dies with apextui's process from then on, even while torch imports (lifeline.py)
PRELOAD = ["apextui.core.run.forkserver_guard", "torch", "torch._dynamo", "torch.optim", "apextui.core.run.runner",
           "apextui.core.workloads"]
START_METHOD_ENV = "APEXTUI_WORKER_START"
WHERE_ENV = "APEXTUI_WORKER"  # "thread": runs train in a thread of this process (tests, debugging)
LOG_TAIL_LINES = 12
EXIT_GRACE_S = 10.0  # how long a finished worker gets to exit before it is killed

_context_lock = threading.Lock()
_stderr_lock = threading.Lock()
_context: Any = None


def context() -> Any:
    """The multiprocessing context workers come from: a forkserver with torch preloaded (spawn where
    there is no forkserver); $APEXTUI_WORKER_START (spawn, forkserver) overrides it."""
    global _context
    with _context_lock:
        if _context is None:
            methods = multiprocessing.get_all_start_methods()
            chosen = os.environ.get(START_METHOD_ENV)
            if chosen not in methods:
                chosen = "forkserver" if "forkserver" in methods else "spawn"
            _context = multiprocessing.get_context(chosen)
            if chosen == "forkserver":
                _context.set_forkserver_preload(PRELOAD)
        return _context


@contextlib.contextmanager
def _starting_processes() -> Iterator[None]:
    """Around what may start a process (the forkserver, the resource tracker, a worker): SIGHUP blocked on this
    thread, so that the new process inherits it blocked; a terminal that goes away sends SIGHUP to every process
    of its foreground group, and these must outlive it until apextui has stopped its run and reported it (a blocked
    SIGHUP sent here meanwhile waits, it is not lost). And the real stderr lent (`_real_stderr`)."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        with _real_stderr():
            yield
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        with _real_stderr():
            yield
    finally:
        mask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _real_stderr() -> Iterator[None]:
    """multiprocessing hands its helper processes `sys.stderr.fileno()`; under Textual sys.stderr is a
    capture object whose fileno() is -1, which fails that. Lend it the process's real stderr meanwhile."""
    try:
        ok = sys.stderr is not None and sys.stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        ok = False
    if ok or sys.__stderr__ is None:
        yield
        return
    with _stderr_lock:
        saved, sys.stderr = sys.stderr, sys.__stderr__
        try:
            yield
        finally:
            sys.stderr = saved


def prestart() -> None:
    """Start the forkserver now (it imports torch in the background), so that runs start quickly."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _starting_processes():
            forkserver.ensure_running()


def _mappingproxy(d: dict[Any, Any]) -> MappingProxyType:
    return MappingProxyType(d)


def _reduce_mappingproxy(m: MappingProxyType) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _mappingproxy, (dict(m),)


# presets and run info keep their tables in read-only mappings, which do not pickle by themselves
ForkingPickler.register(MappingProxyType, _reduce_mappingproxy)


def describe_exit(code: int | None) -> str:
    return exits.describe_exit(code, "the worker process")


def _log_tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [line.rstrip() for line in fh.readlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def crash_words(reason: str, log_path: str) -> str:
    """Why a run whose worker ended before its final snapshot failed, with the tail of the worker's log."""
    tail = _log_tail(log_path)
    words = f"{reason} before the run ended"
    return f"{words}; its last output (full log: {log_path}):\n{tail}" if tail else words


def final_snapshot(last: Snapshot | None, status: FinalStatus, error: str) -> Snapshot:
    """The last snapshot a worker sent (its steps and figures kept), made final; or an empty one."""
    if last is not None:
        return dataclasses.replace(last, status=status, new_steps=(), error=error)
    return Snapshot(status=status, info=None, steps_done=0, new_steps=(), stats=None, throughput=None,
                    skipped_steps=0, monitor=None, elapsed_s=0.0, error=error)


# ---- worker side ---------------------------------------------------------------------------
def redirect_output(log_path: str) -> None:
    """Point this process's stdout and stderr (the file descriptors, so C/CUDA output too) at `log_path`: the
    terminal belongs to the app. Public for the benchmarks' own worker processes, which do the same."""
    import sys

    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)


def begin_worker(log_path: str, to_stderr: bool) -> None:
    """A worker process's first steps, whatever it runs (a run, the search's runs, the model's probe): it ends with its
    parent even spinning in a hung user step (`guard_worker`), leaves SIGINT and SIGHUP to its parent (which stops it
    and reports), and sends its output where its front end wants it: `to_stderr` (the headless front ends, whose
    stdout carries JSON only) the terminal's stderr, else `log_path` (the TUI draws on the terminal)."""
    guard_worker()
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if to_stderr:
        os.dup2(2, 1)
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    else:
        redirect_output(log_path)


def end_worker() -> None:
    """End this worker process now that its runs are over: its output flushed, then `os._exit`. Why not return:
    multiprocessing's bootstrap joins every non-daemon thread before the process exits, and a thread the user's model
    started must not keep a finished worker alive until its parent kills it."""
    exits.exit_now(0)


def worker_main(request: RunRequest, conn: Connection, stop: Any, log_path: str, to_stderr: bool = False) -> None:
    """The worker process: train `request` on this main thread, send every snapshot to the parent. A `target`
    of `ProcessRunner` takes these same arguments (`to_stderr` only where it is asked for).

    `to_stderr` (the headless front ends): the user's prints and their C code's output go to the terminal's stderr,
    as they do in the front end's own process (its stdout carries JSON only), and torch's notes on apextui's own use
    of it to the torch-messages log (`torch_messages.diverted`); otherwise (the TUI, which draws on the terminal)
    everything goes to `log_path`."""
    begin_worker(log_path, to_stderr)
    runner: Runner | None = None

    def send(snap: Snapshot) -> None:
        try:
            conn.send(snap)
        except (BrokenPipeError, EOFError, OSError):  # the parent is gone: nobody is watching, stop
            if runner is not None:
                runner.stop()
        except Exception:  # a snapshot that cannot be sent: stop; the parent reports this log's tail
            import traceback

            traceback.print_exc()
            if runner is not None:
                runner.stop()
            raise

    # the TUI's monitor pane lists every GPU of the machine, the run's marked
    runner = Runner(request, send, gpu_scope="all")

    def stop_when_asked() -> None:
        stop.wait()
        runner.stop()

    threading.Thread(target=stop_when_asked, name="apextui-stop-watch", daemon=True).start()
    if to_stderr:
        from ..analysis.torch_messages import diverted

        with diverted():
            runner.run()
    else:
        runner.run()
    conn.close()
    end_worker()


# ---- parent side ---------------------------------------------------------------------------
class ProcessRunner(ForwardsSnapshots, RunControl):
    """`Runner`'s interface (start, stop, wait, join, is_alive, result), training in a worker process.

    `callback` runs on a reader thread of this process, once per snapshot, in order; the last one is
    final. A worker that dies without a final snapshot (a crash, a kill) gives a "failed" one, with
    the exit signal or code and the tail of its log, and the steps measured until then.
    """

    def __init__(self, request: RunRequest, callback: Callback, *, target: Callable[..., None] | None = None,
                 to_stderr: bool = False) -> None:
        self.request = request
        self.callback = callback
        self.steps = run_steps(request.preset, request.steps)
        ctx = context()
        with _starting_processes():  # creating the event may start multiprocessing's resource tracker
            self._stop = ctx.Event()
        self._recv, self._send = ctx.Pipe(duplex=False)
        fd, self.log_path = tempfile.mkstemp(prefix="apextui-worker-", suffix=".log")
        os.close(fd)
        self._proc = ctx.Process(
            target=target or worker_main, name=f"apextui-worker-{request.preset.name}",
            args=(dataclasses.replace(request, steps=self.steps), self._send, self._stop, self.log_path),
            kwargs={"to_stderr": True} if to_stderr else {},
        )
        self._reader = threading.Thread(target=self._read_loop, name="apextui-worker-reader")
        self._finished = threading.Event()
        self.result: Snapshot | None = None
        self.last: Snapshot | None = None
        self._kill_reason: str | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def start(self) -> "ProcessRunner":
        with _starting_processes():
            self._proc.start()
        self._send.close()  # the worker holds the only sending end now: its exit means EOF here
        self._reader.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the final snapshot and the worker's exit; True when both happened."""
        if self._reader.ident is not None:
            self._reader.join(timeout)
        return not self.is_alive()

    def is_alive(self) -> bool:
        return self._reader.is_alive() or self._proc.is_alive()

    def kill(self, reason: str | None = None) -> bool:
        """End the worker at once; True (see `RunHandle.kill`). The run's final snapshot then says it was killed
        ("failed"), or, given `reason` (the user ended it, e.g. during a long compile), "stopped" with that
        reason."""
        self._kill_reason = reason
        if self._proc.is_alive():
            self._proc.kill()
        return True

    # ---- reader thread ---------------------------------------------------------------------
    def _read_loop(self) -> None:
        error: str | None = None
        try:
            while True:
                try:
                    snap = self._recv.recv()
                except (EOFError, OSError):
                    break
                except Exception as exc:  # noqa: BLE001 - e.g. a snapshot that does not unpickle
                    error = f"cannot read the worker's snapshot: {type(exc).__name__}: {exc}"
                    self._proc.kill()
                    break
                if snap.finished and snap.status == "failed" and _log_tail(self.log_path):
                    snap = dataclasses.replace(snap, error=f"{snap.error} (worker log: {self.log_path})")
                self._deliver(snap)
                if snap.finished:
                    break
            self._proc.join(EXIT_GRACE_S)
            if self._proc.is_alive():  # finished but stuck in teardown
                self._proc.kill()
                self._proc.join(EXIT_GRACE_S)
            if self.result is None and self._kill_reason is not None:
                self._deliver(self._ended_snapshot(self._kill_reason))
            elif self.result is None:
                self._deliver(self._crash_snapshot(error or describe_exit(self._proc.exitcode)))
            elif self.result.status != "failed":
                self._remove_log()
        finally:
            self._recv.close()
            self._finished.set()

    def _crash_snapshot(self, reason: str) -> Snapshot:
        return final_snapshot(self.last, "failed", crash_words(reason, self.log_path))

    def _ended_snapshot(self, reason: str) -> Snapshot:
        self._remove_log()
        return final_snapshot(self.last, "stopped", reason)

    def _remove_log(self) -> None:
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


def process_runner_factory(request: RunRequest, callback: Callback) -> ProcessRunner:
    """A run in a worker process of its own, its output to a log: the TUI's runs (the terminal is the TUI's)."""
    return ProcessRunner(request, callback)


def headless_runner_factory(request: RunRequest, callback: Callback) -> ProcessRunner:
    """A run in a worker process of its own, the user's prints to the terminal's stderr: `apextui advise`'s runs.

    Why a process per run (besides the GIL, above): a run leaves state behind in its process that slows the runs
    after it. torch.profiler's window (the GPU-busy probe after each run) leaves CUDA's profiling interface hooked
    into every later kernel launch: on the H200 a host-bound loop ran 1.28x slower after one window, and
    `advise --model examples/gpt.py:build`, every point in one process, measured bf16 + fused AdamW + torch.compile
    at 26.8 ms a step where the same point alone ran 20.8 and the hand-written loop 21.2 (docs/results-h200.md). A
    process per run measures each configuration as the user's own training would run it."""
    return ProcessRunner(request, callback, to_stderr=True)


def env_runner_factory(headless: bool = False) -> RunnerFactory:
    """A worker process per run (`headless`: its output to stderr), or a thread of this process where
    $APEXTUI_WORKER is "thread"."""
    if os.environ.get(WHERE_ENV) == "thread":
        return thread_runner_factory
    return headless_runner_factory if headless else process_runner_factory
