"""The TUI when the SSH connection drops (SIGHUP on a real pseudo-terminal), and 30 start/stop cycles."""

from __future__ import annotations

import glob
import json
import os
import pty
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from ui_fakes import alive, highlight, no_gpu_report, provider, read_pty_until, wait_for

from apextui.ui.app import make_app

pytestmark = pytest.mark.slow  # each test over ~1.5 s

ROOT = Path(__file__).resolve().parents[2]
CYCLES = 30


def _drain(fd: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


def test_sighup_stops_the_run_saves_results_and_exits(tmp_path):
    """`apextui --preset adamw` in a real pty; the terminal hangs up mid-run: exit 129, the run saved as
    stopped with its steps, no process left behind."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "adamw", "--device", "cpu",
                             "--steps", "1000000"], stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path,
                            env=env, start_new_session=True)
    os.close(slave)
    app = psutil.Process(proc.pid)
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        worker = None
        while worker is None and time.monotonic() < deadline:  # the worker: a grandchild via the forkserver
            _drain(master, 0.5)
            descendants = app.children(recursive=True)
            worker = next((p for p in descendants if p.ppid() != proc.pid), None)
        assert worker is not None, "no worker process started"
        assert read_pty_until(master, rb"[1-9][0-9]*/1000000 ", 120), "the run never counted a step"  # trained
        os.close(master)  # the terminal goes away ...
        os.killpg(proc.pid, signal.SIGHUP)  # ... and the whole session gets SIGHUP
        assert proc.wait(90) == 128 + signal.SIGHUP
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    (saved,) = glob.glob(str(tmp_path / "apextui-results-*.json"))
    (run,) = json.loads(Path(saved).read_text())["runs"]
    assert run["preset"] == "adamw" and run["status"] == "stopped" and run["summary"]["steps"] > 0
    summary = run["summary"]  # what was measured is kept (how far it got depends on the machine's load)
    assert summary["final_loss"] is not None and summary["elapsed_s"] > 0, json.dumps(run)
    assert summary["measured_steps"] == max(0, summary["steps"] - summary["warmup"])
    # the worker, the forkserver and the resource tracker end once apextui has (the forkserver notices by polling its
    # parent: on a loaded box that takes a moment); wait for it rather than for a fixed time
    left = descendants
    end = time.monotonic() + 30
    while time.monotonic() < end:
        left = [p for p in descendants if alive(p.pid)]
        if not left:
            break
        time.sleep(0.2)
    assert not left


def unwritable_dir(tmp_path: Path) -> Path:
    """A folder this process cannot create files in: a 0555 one, or (as root, who may write anywhere) /sys,
    /proc; skip when there is none."""
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    for candidate in (ro, Path("/sys"), Path("/proc")):
        try:
            fd, name = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(fd)
        os.unlink(name)
    pytest.skip("every folder here can be written to")


def test_sighup_in_a_read_only_directory_saves_to_the_user_data_folder(tmp_path):
    """Started in a folder it cannot write to, the TUI hangs up: exit 129, the run saved in the user's data
    folder instead, and a line on the terminal says why and where."""
    cwd = unwritable_dir(tmp_path)
    data_home = tmp_path / "data"
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "XDG_DATA_HOME": str(data_home)}
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "adamw", "--device", "cpu",
                             "--steps", "1000000"], stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                            env=env, start_new_session=True)
    os.close(slave)
    screen = bytearray()  # everything written to the terminal, read until it closes (a full pty would block it)

    def read_all() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    app = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.ppid() != proc.pid for p in app.children(recursive=True)):
            time.sleep(0.5)  # until the worker (a grandchild via the forkserver) runs
        os.killpg(proc.pid, signal.SIGHUP)
        assert proc.wait(90) == 128 + signal.SIGHUP
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(10)
        os.close(master)
        (tmp_path / "read-only").chmod(0o755)
    (saved,) = glob.glob(str(data_home / "apextui" / "apextui-results-*.json"))
    (run,) = json.loads(Path(saved).read_text())["runs"]
    assert run["preset"] == "adamw" and run["status"] == "stopped"
    text = screen.decode("utf-8", errors="replace")
    assert f"cannot write to {cwd.resolve()}" in text and f"saved 1 run(s) to {saved}" in text, text[-2000:]


@pytest.mark.asyncio
async def test_start_and_stop_30_times_leaks_nothing(tmp_path):
    """Start a real run and stop it, 30 times: every run ends, no thread or worker process is left (a cycle that
    leaks leaves one a cycle: 30 show it as surely as 100 did, at a third of the ~45 s of CPU)."""
    app = make_app(device="cpu", steps=1_000_000, report_provider=provider(no_gpu_report()), save_dir=tmp_path)
    threads_before = set(threading.enumerate())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.probe is not None, 60, "device probe")
            await highlight(pilot, app, "adamw")
            helpers = {p.pid for p in psutil.Process().children()}  # forkserver, resource tracker
            # simulate_key: the key's own path (bindings, actions) as pilot.press takes it, without press's waits for
            # the app to go idle, which last up to 1 s a key while a run is drawn; the waits below are the conditions
            for i in range(CYCLES):
                app.simulate_key("enter")
                await wait_for(pilot, lambda: app.active is not None, what=f"run {i} to start")
                app.simulate_key("s")
                await wait_for(pilot, lambda: app.active is None, 60, f"run {i} to stop")
            rows = app.table.rows_data
            assert len(rows) == CYCLES and {r.status for r in rows} <= {"stopped", "ok"}

            def workers() -> list[psutil.Process]:
                return [p for p in psutil.Process().children(recursive=True) if p.pid not in helpers and alive(p.pid)]

            # a run hands over its last snapshot before its worker has exited: wait for the exit, a leak never ends
            await wait_for(pilot, lambda: not workers(), 60, "the last run's worker process to exit")
    finally:
        assert app.shutdown_runs(30)

    def leaked() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in threads_before and t.is_alive()
                and t.name.startswith("apextui")]

    end = time.monotonic() + 60  # a bound on a hang: the last run's reader thread ends with its worker
    while leaked() and time.monotonic() < end:
        time.sleep(0.1)
    assert not leaked(), f"threads left: {leaked()}"
