"""Stopping a run while torch.compile is still compiling (seconds to minutes with no step): headless says
so and stops before the first measured step; a worker process can be ended at once, as a stopped run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from apextui.core.config import needs as variant_needs
from apextui.core.presets import resolve
from apextui.core.run.worker import ProcessRunner
from apextui.core.run.request import RunRequest

from helpers import ROOT, cli_env

pytestmark = pytest.mark.slow  # every test here takes over ~1.5 s (a subprocess, a real run)

pytest.importorskip("torch")
needs_cpu_compile = pytest.mark.skipif(not variant_needs.compile_availability("cpu").ok,
                                       reason="torch.compile on CPU needs a C++ compiler and Python's headers")


def cold_compile_env() -> dict[str, str]:
    """Inductor's graph caches off, so the whole compile (tracing, lowering, code generation) runs every test run:
    ~10 s here. Its C++ kernels may come from the session's inductor cache (a fresh cache folder would add ~30 s of
    g++ to every run, and the Ctrl-C lands well within the compile either way)."""
    return {**cli_env(), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}


@needs_cpu_compile
def test_ctrl_c_while_compiling_says_so_and_stops_before_the_first_step():
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "torch_compile", "--json", "--device",
                             "cpu", "--steps", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cold_compile_env(), cwd=ROOT)
    err_lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "".join(err_lines)
        err_lines.append(line)
        if "compiling torch_compile" in line:
            break
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    err = "".join(err_lines) + proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, err
    assert "not part of the measured steps" in err
    assert "interrupted: stopping once compilation ends, before the first measured step (Ctrl-C again" in err
    assert "Traceback" not in err
    events = [json.loads(line) for line in out.splitlines()]
    end = events[-1]
    assert end["event"] == "end" and end["status"] == "stopped"
    assert not [e for e in events if e["event"] == "step"]


def test_a_killed_worker_with_a_reason_is_a_stopped_run_that_keeps_its_steps():
    snaps = []
    first_step = threading.Event()

    def cb(snap):
        snaps.append(snap)
        if snap.steps_done:
            first_step.set()

    r = ProcessRunner(RunRequest(resolve("fp32"), "cpu", 1_000_000), cb).start()
    assert first_step.wait(120)
    r.kill("ended by the test")
    assert r.join(60) and r._proc.exitcode == -signal.SIGKILL
    final = r.result
    assert final is snaps[-1] and final.status == "stopped" and final.error == "ended by the test"
    assert final.steps_done >= 1 and final.final_loss is not None  # what was measured is kept
    assert not os.path.exists(r.log_path)
    # without a reason a kill is still a failure, naming the signal
    r2 = ProcessRunner(RunRequest(resolve("fp32"), "cpu", 1_000_000), lambda s: None).start()
    time.sleep(1.0)
    r2.kill()
    assert r2.join(60) and r2.result.status == "failed" and "SIGKILL" in r2.result.error
