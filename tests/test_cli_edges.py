"""Issue 15, sections 1 and 4: a stdout that cannot be written, and signals at every moment, end with the
documented exit code and never a traceback (subprocess tests: `python -m apextui`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, cli_env

CASES = {
    "run": ["--preset", "adamw", "--json", "--steps", "5", "--device", "cpu"],
    "unavailable": ["--preset", "fused_adam", "--json", "--device", "cpu"],
    "list": ["list", "--device", "cpu"],
    "list_json": ["list", "--json", "--device", "cpu"],
    "doctor_json": ["doctor", "--json"],
}


def _run(args: list[str], stdout, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apextui", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=cli_env(), cwd=ROOT, **kw)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.slow
def test_full_disk_ends_with_one_line_and_exit_1(case):
    with open("/dev/full", "w") as full:
        proc = _run(CASES[case], full)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot write to stdout: No space left on device" in proc.stderr


@pytest.mark.parametrize("case", ["run", "list_json"])
@pytest.mark.slow
def test_closed_stdout_ends_with_one_line_and_exit_1(case):
    proc = _run(CASES[case], None, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot write to stdout: it is closed" in proc.stderr


@pytest.mark.parametrize("case", ["list_json", "doctor_json", "unavailable"])
@pytest.mark.slow
def test_reader_gone_exits_141_quietly(case):
    r, w = os.pipe()
    os.close(r)  # the reader has gone before the first write: EPIPE
    try:
        proc = _run(CASES[case], w)
    finally:
        os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.mark.slow
def test_reader_gone_stops_a_long_run_at_once():
    r, w = os.pipe()
    os.close(r)
    t0 = time.monotonic()
    try:
        proc = _run(["--preset", "adamw", "--json", "--steps", "1000000", "--device", "cpu"], w)
    finally:
        os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 60  # a million steps would take many minutes


def _popen(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "apextui", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT)


def test_sigint_while_importing_exits_130_without_traceback():
    """Ctrl-C while the command's modules import. A signal that lands while Python itself still starts (`site`,
    the editable-install finder: no apextui code has run) is out of apextui's reach; on a loaded machine 0.15 s
    can still be that early, so the signal is sent later, up to 3 times, until apextui's code has it."""
    for delay in (0.15, 0.3, 0.6):
        proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"])
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            # KNOWN, open: on a fresh checkout's first runs (bytecode not yet cached) a first Ctrl-C in a narrow
            # window before the handlers are in was lost once in a while (the run went on, nothing on stderr).
            # The second one must still end the run as documented.
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        in_startup = "init_import_site" in err or proc.returncode == -signal.SIGINT
        if in_startup and "/apextui/" not in err:  # no frame of apextui's package: Python's own start-up had it
            continue
        break
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [json.loads(line) for line in out.splitlines()]
    if lines:  # the start line came first: then an end line too
        assert lines[-1]["event"] == "end" and lines[-1]["status"] == "stopped"


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.slow
def test_second_signal_just_after_start_still_prints_an_end_line(sig, code):
    proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"])
    first = json.loads(proc.stdout.readline())
    assert first["event"] == "start"
    proc.send_signal(sig)
    time.sleep(0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err
    last = json.loads(out.splitlines()[-1])
    assert last["event"] == "end" and last["status"] == "stopped"
