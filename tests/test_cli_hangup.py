"""SIGHUP (the terminal went away) in the headless front ends: as SIGINT/SIGTERM, the work stops after its current
step and what was measured is reported, exit 129 (they used to die by the signal: no `end` line, no advice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from helpers import ROOT, cli_env, gone_within, kill_all, wait_for_worker


@pytest.mark.slow
def test_a_hang_up_ends_a_headless_run_with_its_end_line_and_129():
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "adamw", "--json", "--device", "cpu",
                             "--steps", "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(), cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
            if json.loads(line)["event"] == "step":
                break
        proc.send_signal(signal.SIGHUP)
        out = proc.stdout.read()
        err = proc.stderr.read()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 129, err
    events = [json.loads(line) for line in lines + out.splitlines()]
    end = events[-1]
    assert end["event"] == "end" and end["status"] == "stopped" and end["summary"]["steps"] >= 1, end
    assert "hung up (SIGHUP): stopping after the current step" in err
    assert "leaked semaphore" not in err and "Traceback" not in err


@pytest.mark.slow
def test_a_hang_up_of_the_terminal_ends_advise_with_the_partial_advice_and_129():
    """The whole process group gets the SIGHUP, as when a terminal closes: advise stops its run and prints the
    partial advice; its worker, the forkserver and the resource tracker survive the signal to end cleanly after."""
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "advise", "--json", "--device", "cpu", "--workloads",
                             "optimizer", "--steps", "1000000", "--repeats", "1"], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    kids: list[psutil.Process] = []
    try:
        kids = wait_for_worker(psutil.Process(proc.pid))
        os.killpg(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
        left = gone_within(kids, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        kill_all(kids)
    assert proc.returncode == 129, err
    doc = json.loads(out)
    assert doc["kind"] == "apextui-advice" and doc["status"] == "partial" and doc["runs"]["stopped"] == 1, doc["runs"]
    assert "hung up (SIGHUP): stopping after the current step" in err
    assert "leaked semaphore" not in err and "Traceback" not in err and "resource_tracker" not in err, err
    assert not left, left


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.slow
def test_under_nohup_a_hang_up_is_still_ignored():
    """Started with SIGHUP ignored (`nohup apextui ... &`): the run goes on to its end, as the user asked."""
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "adamw", "--json", "--device", "cpu",
                             "--steps", "200"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(), cwd=ROOT, preexec_fn=_ignore_sighup)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert json.loads(first)["event"] == "start"
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    end = json.loads(out.splitlines()[-1])
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["steps"] == 200
