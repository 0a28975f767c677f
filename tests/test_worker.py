"""The worker-process runner on CPU: real runs, stop, signals, crashes, a parent that goes away."""

from __future__ import annotations

import os
import signal
import threading
from typing import Callable

import pytest
import worker_fakes

from apextui.core.run.request import RunRequest
from apextui.core.run import worker
from apextui.core.presets import resolve
from apextui.core.run.snapshot import Snapshot
from apextui.core.run.worker import ProcessRunner


def collect() -> tuple[list[Snapshot], threading.Event, Callable[[Snapshot], None]]:
    """The snapshots a run delivers, an event set at its first step, and the callback filling them."""
    snaps: list[Snapshot] = []
    first_step = threading.Event()

    def cb(s: Snapshot) -> None:
        snaps.append(s)
        if s.steps_done:
            first_step.set()

    return snaps, first_step, cb


@pytest.mark.slow
def test_runs_to_the_end_in_another_process_and_cleans_up():
    snaps, _, cb = collect()
    r = ProcessRunner(RunRequest(resolve("adamw"), "cpu", 25), cb).start()
    assert r.join(600)
    assert r.pid != os.getpid() and r._proc.exitcode == 0 and not r.is_alive()
    final = r.result
    assert final is snaps[-1] and final.status == "ok" and final.error is None
    assert [s.finished for s in snaps].count(True) == 1
    assert final.steps_done == 25 and sum(rec.steps for s in snaps for rec in s.new_steps) == 25
    # one record a timed interval (a block of short steps: `steps` of them), every step covered once
    assert [i for s in snaps for rec in s.new_steps for i in range(rec.step - rec.steps + 1, rec.step + 1)] \
        == list(range(1, 26))
    assert final.info is not None and final.info.preset == "adamw"
    assert dict(final.info.size) == dict(resolve("adamw").cpu_size)
    assert final.stats is not None and final.stats.median_ms > 0
    assert not os.path.exists(r.log_path)  # nothing to keep after a good run


@pytest.mark.slow
def test_stop_ends_a_long_run_promptly():
    snaps, first_step, cb = collect()
    r = ProcessRunner(RunRequest(resolve("fp32"), "cpu", 1_000_000), cb).start()
    assert first_step.wait(300)
    r.stop()
    assert r.join(60), "the worker did not stop"  # a bound on a hang; that the stop took is in the steps below
    assert r.result.status == "stopped" and 0 < r.result.steps_done < 1_000_000


@pytest.mark.slow
def test_worker_ignores_sighup_and_sigint():
    """A dropped SSH connection or Ctrl-C reaches the whole process group: the parent decides."""
    snaps, first_step, cb = collect()
    # 1000 steps: with one torch thread a step takes ~3 ms here, so the run is still going when the signals land
    r = ProcessRunner(RunRequest(resolve("adamw"), "cpu", 1000), cb).start()
    assert first_step.wait(300) and r.result is None  # mid-run
    os.kill(r.pid, signal.SIGHUP)
    os.kill(r.pid, signal.SIGINT)
    assert r.join(600)
    assert r.result.status == "ok" and r.result.steps_done == 1000


@pytest.mark.slow
def test_segfault_is_a_failed_run_that_keeps_its_steps_and_log():
    snaps, _, cb = collect()
    r = ProcessRunner(RunRequest(resolve("adamw"), "cpu", 10_000), cb, target=worker_fakes.segfault_after_three_steps)
    r.start()
    assert r.join(600)
    final = r.result
    assert final.status == "failed" and "SIGSEGV" in final.error
    assert "fake extension: about to crash" in final.error and r.log_path in final.error
    assert final.steps_done >= final.info.warmup + 3 and final.stats.steps >= 3  # what was measured is kept
    assert final.info is not None and final.info.preset == "adamw"
    os.unlink(r.log_path)


@pytest.mark.slow
def test_exit_without_a_snapshot_is_reported():
    snaps, _, cb = collect()
    r = ProcessRunner(RunRequest(resolve("adamw"), "cpu", 10), cb, target=worker_fakes.exit_before_reporting).start()
    assert r.join(300)
    assert [s.status for s in snaps] == ["failed"]
    assert "exited with code 7" in snaps[0].error and snaps[0].steps_done == 0 and snaps[0].info is None


@pytest.mark.slow
def test_worker_stops_when_its_parent_stops_listening():
    """The TUI died without stopping the run: the worker notices its pipe is gone and stops."""
    ctx = worker.context()
    recv, send = ctx.Pipe(duplex=False)
    stop = ctx.Event()
    proc = ctx.Process(target=worker.worker_main, args=(RunRequest(resolve("fp32"), "cpu", 1_000_000), send, stop,
                                                         os.devnull))
    proc.start()
    send.close()
    while True:
        snap = recv.recv()
        if snap.steps_done:
            break
    recv.close()
    proc.join(60)
    assert proc.exitcode == 0, "the worker kept training with nobody listening"


def test_bad_steps_rejected_before_a_process_starts():
    with pytest.raises(ValueError, match="steps must be >= 1"):
        ProcessRunner(RunRequest(resolve("adamw"), "cpu", 0), lambda s: None)


def test_sys_exit_in_the_users_build_is_a_failed_run_that_says_so(tmp_path):
    """A worker whose model's build calls `sys.exit(4)`: a failed run naming it, never a worker that ends with code 4
    and no word of why."""
    from apextui.core.config.point import BASELINE
    from apextui.core.model_presets import config_preset

    (tmp_path / "m.py").write_text("import sys\n\ndef build(small=False):\n    sys.exit(4)\n")
    snaps, _, cb = collect()
    r = ProcessRunner(RunRequest(config_preset(f"{tmp_path / 'm.py'}:build", BASELINE, steps=3), "cpu", 3), cb)
    r.start()
    assert r.wait(120) and r.join(60)
    final = snaps[-1]
    assert final.status == "failed" and "your function raised SystemExit: 4" in final.error, final.error
