"""The search's reusable worker (core/run/reusable.py), real processes on CPU: several points run in one process
and train exactly as each would in a worker of its own (the same initial weights, batches and check); a run that
fails or is killed ends its worker and the next run gets a fresh one; `close()` leaves no process behind."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from helpers import TINY_MODEL

from apextui.core.config.point import BASELINE, Config, parse
from apextui.core.model_presets import config_preset
from apextui.core.run.request import RunRequest
from apextui.core.run.reusable import ReusableWorker
from apextui.core.run.worker import ProcessRunner

pytestmark = pytest.mark.slow  # worker processes that import torch

# bf16's forward raises on the CPU path where the model sees autocast on: a run that fails mid-set-up (its check)
FAILS_UNDER_AUTOCAST = TINY_MODEL.replace("from apextui import ModelSetup\n", '''from apextui import ModelSetup


class Picky(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("no autocast here")
        return self.lin(x)
''').replace("model=nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 1))", "model=Picky()")

HANGS_UNDER_AUTOCAST = FAILS_UNDER_AUTOCAST.replace('raise RuntimeError("no autocast here")',
                                                    'import sys; print("hung", file=sys.stderr, flush=True)\n'
                                                    '            while True: time.sleep(0.05)').replace(
    "import torch\n", "import time\nimport torch\n", 1)



def _point(**values: str) -> Config:
    config = BASELINE
    for axis, value in values.items():
        config = config.with_(axis, value)
    return config


def run_one(factory, spec: str, config: Config, steps: int = 6, timeout: float = 120.0):
    done = threading.Event()
    finals = []

    def callback(snap):
        if snap.finished:
            finals.append(snap)
            done.set()

    run = factory(RunRequest(config_preset(spec, config, steps=steps, warmup=1), "cpu", steps), callback)
    run.start()
    assert done.wait(timeout), "the run did not end"
    run.join(timeout)
    return run, finals[-1]


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(TINY_MODEL)
    return f"{path}:build"


def test_points_share_one_worker_and_train_as_in_their_own(model_file):
    worker = ReusableWorker(to_stderr=False)
    try:
        first, a = run_one(worker, model_file, BASELINE)
        second, b = run_one(worker, model_file, _point(precision="bf16"))
        again, c = run_one(worker, model_file, BASELINE)
    finally:
        worker.close()
    assert [a.status, b.status, c.status] == ["ok", "ok", "ok"], (a.error, b.error, c.error)
    assert worker.started == 1 and first.pid == again.pid
    # the worker's start (process, imports, the model's first build) is the first run's alone, and said apart
    assert first.start_s > 0 and second.start_s == 0 and again.start_s == 0
    # the same initial weights and batches in every run: fp32 after bf16 trains to the same loss as before it
    assert a.final_loss is not None and c.final_loss == a.final_loss
    # bf16's correctness check ran against fp32's reference (kept from the first run in this process)
    assert b.info is not None and b.info.check is not None and b.info.check.passed
    # and a worker of its own gives the same losses as the shared one
    _, own = run_one(lambda r, cb: ProcessRunner(r, cb), model_file, BASELINE)
    assert own.status == "ok" and own.final_loss == a.final_loss


def test_a_run_that_fails_ends_its_worker_and_the_next_gets_a_fresh_one(tmp_path):
    path = tmp_path / "picky.py"
    path.write_text(FAILS_UNDER_AUTOCAST)
    spec = f"{path}:build"
    worker = ReusableWorker(to_stderr=False)
    try:
        _, a = run_one(worker, spec, BASELINE)
        failed_run, b = run_one(worker, spec, _point(precision="bf16"))
        next_run, c = run_one(worker, spec, BASELINE)
    finally:
        worker.close()
    assert a.status == "ok" and c.status == "ok", (a.error, c.error)
    assert b.status == "failed" and "no autocast here" in (b.error or "")
    assert worker.started == 2 and next_run.pid != failed_run.pid


def test_a_killed_run_says_why_and_the_next_run_starts_a_fresh_worker(tmp_path):
    import psutil

    path = tmp_path / "hangs.py"
    path.write_text(HANGS_UNDER_AUTOCAST)
    spec = f"{path}:build"
    worker = ReusableWorker(to_stderr=False)
    try:
        _, a = run_one(worker, spec, BASELINE)
        done = threading.Event()
        finals = []

        def callback(snap):
            if snap.finished:
                finals.append(snap)
                done.set()

        hung = worker(RunRequest(config_preset(spec, _point(precision="bf16"), steps=6, warmup=1), "cpu", 6),
                      callback)
        hung.start()
        # wait (bounded only against a hang of the test itself) until the worker's log says the step hangs
        deadline = time.monotonic() + 60
        while "hung" not in open(worker.log_path).read() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not done.is_set()
        hung.kill("ended by the budget after 9 s")
        assert done.wait(60)
        hung_pid = hung.pid
        _, c = run_one(worker, spec, BASELINE)
    finally:
        worker.close()
    assert a.status == "ok" and c.status == "ok"
    assert finals[-1].status == "stopped" and finals[-1].error == "ended by the budget after 9 s"
    assert worker.started == 2
    assert not psutil.pid_exists(hung_pid) or psutil.Process(hung_pid).status() == psutil.STATUS_ZOMBIE


def test_close_ends_the_worker(model_file):
    import psutil

    worker = ReusableWorker(to_stderr=False)
    run, a = run_one(worker, model_file, BASELINE)
    assert a.status == "ok"
    worker.close()
    pid = run.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_finished_worker_exits_at_once_past_a_thread_the_users_model_started(tmp_path):
    """Python joins every non-daemon thread before a process exits: the user's sleeping thread held the finished
    worker until `close` killed it `EXIT_GRACE_S` later (exit code -9). It exits by itself."""
    from test_stray_threads import STARTS_A_THREAD

    path = tmp_path / "threads.py"
    path.write_text(STARTS_A_THREAD)
    worker = ReusableWorker(to_stderr=False)
    run, final = run_one(worker, f"{path}:build", BASELINE)
    assert final.status == "ok"
    proc = worker._proc
    worker.close()
    # not killed by `close` (-9); the forkserver reports 255 where it cannot read the status, never this
    assert proc is not None and proc.exitcode != -signal.SIGKILL, proc.exitcode


# a model that adds a parameter in its first forward, drawn from torch's random stream
GROWS = '''
import torch
from torch import nn
from apextui import ModelSetup


class Grows(nn.Module):
    """Adds a parameter in its first forward, drawn from torch's random stream."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        if not hasattr(self, "extra"):
            self.extra = nn.Parameter(torch.randn(4, device=x.device))
        return self.lin(x) + self.extra


def build(small=False):
    return ModelSetup(model=Grows(), loss_fn=nn.functional.cross_entropy,
                      make_batch=lambda d, g: (torch.randn(16, 8, device=d, generator=g),
                                               torch.randint(0, 4, (16,), device=d, generator=g)))
'''


def test_every_point_in_the_shared_worker_trains_a_model_that_makes_a_parameter_in_its_forward(tmp_path):
    """A model whose forward makes part of its state (a parameter created on its first call, as lazy initialisation
    does): every point of a search, each in the one worker the search shares, trains it from its initial weights, and
    none fails with a bare `KeyError: 'extra' (while setting up the workload)` (the weights were taken before the first
    forward had made `extra`, and putting them back after the check's fp32 steps met an entry they did not have)."""
    path = tmp_path / "grows.py"
    path.write_text(GROWS)
    spec = f"{path}:build"
    worker = ReusableWorker(to_stderr=False)
    points = [BASELINE, parse("optimizer=foreach"), parse("precision=bf16"), BASELINE, parse("optimizer=foreach")]
    try:
        finals = [run_one(worker, spec, point)[1] for point in points]
        log = open(worker.log_path).read() if worker.log_path else ""
    finally:
        worker.close()
    for point, final in zip(points, finals, strict=True):
        assert final.status == "ok", (point.label, final.error, log[-3000:])
        assert final.steps_done == 6  # run_one's steps
    assert worker.started == 1  # one worker: no run failed and retired it
    checks = [f.info.check for f in finals]
    assert checks[0] is None and checks[3] is None  # fp32 is the reference
    for k in (1, 2, 4):
        assert checks[k] is not None and checks[k].passed, checks[k]
    # the same point twice in one worker: the same initial weights (`extra` as the first forward made it), the same
    # reference, the same losses; nothing of the run before carried over
    assert checks[4].losses == checks[1].losses and checks[4].baseline_losses == checks[1].baseline_losses
    assert finals[3].final_loss == finals[0].final_loss
