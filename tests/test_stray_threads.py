"""A thread the user's model starts and never ends (not a daemon) holds neither a command whose outcome is out nor a
finished worker: Python joins every such thread before a process exits, and this one sleeps an hour."""

from __future__ import annotations

import json

import pytest

from helpers import TINY_MODEL, run_cli

from apextui.core.config.point import BASELINE
from apextui.core.model_presets import config_preset
from apextui.core.run.request import RunRequest
from apextui.core.run.worker import ProcessRunner

pytestmark = pytest.mark.slow

STARTS_A_THREAD = TINY_MODEL.replace("def build(small=False):", '''import threading, time


class Threads(nn.Sequential):
    def forward(self, x):
        if not getattr(self, "started", False):
            self.started = True
            threading.Thread(target=time.sleep, args=(3600,), name="users-sleeper", daemon=False).start()
        return super().forward(x)


def build(small=False):''').replace("model=nn.Sequential(", "model=Threads(")


def test_a_headless_run_prints_its_end_line_and_exits_past_the_users_thread(tmp_path):
    """The headless run trains in its own process: the user's thread is there when it is done."""
    path = tmp_path / "threads.py"
    path.write_text(STARTS_A_THREAD)
    proc = run_cli("--model", f"{path}:build", "--config", "precision=fp32", "--device", "cpu", "--steps", "3",
                   "--json", timeout=600)  # before: still running an hour later
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["event"] == "end"
    # one from the probe's forward, one from the run's: both in this process
    assert "threads still running (users-sleeper, users-sleeper): threads your code started" in proc.stderr


def test_advise_prints_its_answer_and_exits_past_the_users_thread(tmp_path):
    """`advise` runs the user's code in worker processes (its probe and its runs), each ended once it is done."""
    path = tmp_path / "threads.py"
    path.write_text(STARTS_A_THREAD)
    proc = run_cli("advise", "--model", f"{path}:build", "--device", "cpu", "--config", "precision=fp32",
                   "--repeats", "1", "--steps", "3", "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["workloads"]


def test_a_finished_worker_process_exits_by_itself_past_the_users_thread(tmp_path):
    """Before: the parent killed it `EXIT_GRACE_S` after its run (exit code -9)."""
    path = tmp_path / "threads.py"
    path.write_text(STARTS_A_THREAD)
    finals = []
    run = ProcessRunner(RunRequest(config_preset(f"{path}:build", BASELINE, steps=3, warmup=1), "cpu", 3),
                        lambda s: finals.append(s) if s.finished else None).start()
    assert run.wait(300) and run.join(300)
    assert finals and finals[-1].status == "ok", finals
    assert run._proc.exitcode == 0
