"""`apextui advise --model` with real worker processes on CPU: a hung step is ended by the budget, one signal ends
advise while a step hangs, the model's build counts against the budget; and no process of advise is left after it
(issue 41 rows 9 and 12b). The deadline logic itself: test_advise_budget.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import ROOT, TINY_MODEL, cli_env

pytestmark = pytest.mark.slow  # each starts advise, torch and its worker processes

pytest.importorskip("psutil")


# ---- the CLI, real worker processes ---------------------------------------------------------------------------
# the forward hangs: it never returns, so the training loop never looks at a stop request (a sleep rather than
# `while True: pass` only to spare the shared CPU: the run is as hung either way)
HUNG = TINY_MODEL.replace("from apextui import ModelSetup\n", '''from apextui import ModelSetup
import sys, time


class Hung(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        print("hung in forward", file=sys.stderr, flush=True)
        while True:
            time.sleep(0.05)
''').replace("model=nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 1))", "model=Hung()")


# the same, hung in the run only: advise's own probe of the model (one forward in its thread "apextui-probe-forward",
# model_presets._one_forward) returns, so the hung step is reached PROBE_FORWARD_S (15 s) sooner
HUNG_IN_RUN = HUNG.replace("import sys, time\n", "import sys, threading, time\n").replace(
    '        print("hung in forward"',
    '        if threading.current_thread().name == "apextui-probe-forward":\n'
    '            return self.lin(x)\n'
    '        print("hung in forward"')


def start_advise(tmp_path: Path, source: str, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "m.py").write_text(source)
    env = {**cli_env(), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "apextui", "advise", "--model", f"{tmp_path / 'm.py'}:build",
                             "--device", "cpu", "--json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)


def descendants(pid: int) -> set[int]:
    import psutil

    try:
        return {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def gone(pids: set[int], timeout: float = 30.0) -> set[int]:
    """Those of `pids` still running after up to `timeout` s (zombies count as gone)."""
    import psutil

    end = time.monotonic() + timeout
    while True:
        left = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.add(pid)
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.2)


def finish(proc: subprocess.Popen[str], timeout: float, seen: set[int],
           on_line=None) -> tuple[str, str]:
    """Read stderr line by line (calling `on_line` on each) while noting the process's descendants, until it exits
    or `timeout` s pass (then kill it: the test fails)."""
    lines: list[str] = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            if on_line is not None:
                on_line(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    end = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < end:
        seen |= descendants(proc.pid)
        time.sleep(0.2)
    if proc.poll() is None:
        seen |= descendants(proc.pid)
        for pid in seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.kill()
        proc.wait()
        pytest.fail(f"advise did not end within {timeout} s:\n{''.join(lines)}")
    out = proc.stdout.read()
    reader.join(10)
    return out, "".join(lines)


def test_a_hung_step_is_ended_by_the_budget_and_no_process_is_left(tmp_path):
    # 40 s: the budget counts advise's start-up (torch's import, the model check, the worker's start), which
    # took 20 s on a loaded 2-core box before the hung step was reached; the step hangs, so this costs no CPU
    proc = start_advise(tmp_path, HUNG_IN_RUN, "--budget", "40")
    seen: set[int] = set()
    out, err = finish(proc, 300, seen)
    assert proc.returncode == 1, err  # every run failed (docs/advise.md)
    assert "no step finished in" in err and "ended by the budget" in err, err
    t = json.loads(out)["search"]["trials"][0]
    assert t["status"] == "failed" and "ended by the budget" in t["reason"]
    assert seen and not gone(seen), "processes of advise left running"


def search_log_says(text: str) -> bool:
    """The search's log (its runs' output goes there, off the terminal: `advise.search_log`) holds `text`."""
    from apextui.core.advise.search_log import FOLDER

    folder = Path(os.environ["APEXTUI_CACHE_DIR"]) / FOLDER
    for path in folder.glob("*-search.log") if folder.is_dir() else ():
        try:
            if text in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_one_signal_ends_advise_while_a_step_hangs(tmp_path, sig, code):
    # SIGINT: the model hangs in advise's probe too (advise gives up on it and goes on: its line on the terminal);
    # SIGTERM: in the run only. The run's forward prints into the search's log, not on the terminal
    source, probe_hangs = (HUNG, 1) if sig == signal.SIGINT else (HUNG_IN_RUN, 0)
    proc = start_advise(tmp_path, source, "--budget", "3600")
    seen: set[int] = set()

    def signal_once_the_run_hangs() -> None:
        end = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < end:
            if search_log_says("hung in forward"):
                proc.send_signal(sig)
                return
            time.sleep(0.2)

    threading.Thread(target=signal_once_the_run_hangs, daemon=True).start()
    out, err = finish(proc, 300, seen)
    assert err.count("hung in forward") == probe_hangs
    assert search_log_says("hung in forward")
    assert proc.returncode == code, err
    assert json.loads(out)["status"] == "partial"
    assert seen and not gone(seen), "processes of advise left running"


SLOW_BUILD = TINY_MODEL.replace("def build(small=False):\n", "def build(small=False):\n    import time\n"
                                                            "    time.sleep(15)\n")


def test_the_models_build_counts_against_the_budget(tmp_path):
    """A 15 s build, --budget 10: the CLI's own build to check the model spends the budget, and `advise` waits for
    it no longer than the budget (`tests/test_advise_hostile_build.py` has builds that never return)."""
    proc = start_advise(tmp_path, SLOW_BUILD, "--budget", "10")
    seen: set[int] = set()
    out, err = finish(proc, 300, seen)
    assert proc.returncode == 1, err
    assert out == "" and "had not returned after 10 s, the whole budget" in err
    assert not gone(seen)
