"""Helpers for the CLI tests: run `python -m apextui` in a subprocess, parse JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from apextui.core.config.axes import Scope

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def benchmarks_on_path() -> None:
    """benchmarks/ on the import path, as a script run from there has it: its shared `benchlib` importable."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m apextui ARGS`, capturing stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "apextui", *args], capture_output=True, text=True,
                          timeout=timeout, env=cli_env(), cwd=ROOT)


def cli_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`apextui ARGS` in this process, as `run_cli` reports it (exit code, stdout, stderr): usage errors and headless
    runs through the same code path without a fresh interpreter and torch's import (~2.5 s of CPU a call). Where the
    process is the subject (signals, exit statuses at start-up, closed pipes, torchrun, advise's workers, the TUI),
    `run_cli`."""
    import contextlib
    import io

    from apextui import cli

    out, err = io.StringIO(), io.StringIO()
    # what a process keeps for its life and a test's process must not: a `--model` file's folder goes first on
    # sys.path (as `python FILE.py` has it), which other tests' child processes would not have (an Apex cache key
    # covers sys.path: test_doctor's differed from its child's)
    path, environ, cwd = list(sys.path), dict(os.environ), os.getcwd()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse's errors
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.path[:] = path
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        os.chdir(cwd)
    return subprocess.CompletedProcess(["apextui", *args], code, out.getvalue(), err.getvalue())


def json_lines(stdout: str) -> list[dict]:
    """Every stdout line must be one JSON object."""
    lines = [line for line in stdout.splitlines()]
    assert lines, "no output on stdout"
    return [json.loads(line) for line in lines]


# the smallest model of the model workload's tests: a Linear, a LayerNorm, a Linear on random batches
TINY_MODEL = '''
import torch
from torch import nn
from apextui import ModelSetup

def build(small=False):
    return ModelSetup(model=nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 1)),
                      make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                               torch.randn(2, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


KILLED_LOOP = """
import sys, torch, apextui
mon = apextui.watch(name="killed")
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
print(mon.path, flush=True)
while True:
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    mon.step(loss=loss)
"""


def killed_watched_run(timeout: float = 60) -> tuple[Path, int]:
    """A watched training loop in a child process, SIGKILLed once its stream has step lines: (its run folder,
    its pid). The run folder is under the caller's data dir (XDG_DATA_HOME, as the tests' conftest sets it)."""
    import signal
    import time

    from apextui.core.watch import stream

    proc = subprocess.Popen([sys.executable, "-c", KILLED_LOOP], stdout=subprocess.PIPE, text=True, env=cli_env(),
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        folder = Path(proc.stdout.readline().strip())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and b'"step"' not in b"".join(
                p.read_bytes() for _, p in stream.segments(folder)):
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return folder, proc.pid


# ---- process trees: apextui's children, and whether any is left ----
def alive(p: psutil.Process) -> bool:
    """Still running (a zombie waiting to be reaped by whoever adopted it counts as gone)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for_worker(root: psutil.Process, timeout: float = 120) -> list[psutil.Process]:
    """The descendants of `root` once one of them is a grandchild (the worker, forked by the forkserver)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = root.children(recursive=True)
        if any(k.ppid() != root.pid for k in kids if alive(k)):
            return kids
        time.sleep(0.2)
    raise AssertionError(f"no worker process after {timeout} s: {kids}")


def gone_within(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """The processes of `procs` still alive after waiting up to `timeout` s for all of them to end."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in procs if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            if p.is_running():
                p.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread in this process: on a small shared CPU, two threads' spin-waits made tiny steps 30x
    slower. A module takes it for every test with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


WATCHED_TOKENS = 64 * 16  # the tokens a step of `train_watched`


def train_watched(mon, steps: int = 40, **count) -> None:
    """A small real training loop with `mon.step` in it: `count` is what each step gives (`tokens=` by default)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(loss=loss.detach(), **(count or {"tokens": WATCHED_TOKENS}))


def watched_on_a_fake_gpu(monkeypatch, name: str, flops_per_token: float = 100.0):
    """A finished watched run whose peak is a GPU's (a FAKE: a peak is GPU-only; 1e-3 TFLOP/s and 100 FLOPs a token,
    so that a CPU step is of the order of it); its monitor."""
    import apextui
    from apextui.core.measure.mfu import Peak
    from apextui.core.watch import mfu_inputs

    fake = Peak(1e-3, "bf16", gpu="Fake GPU", source="https://example.invalid/spec")
    monkeypatch.setattr(mfu_inputs, "peak_of", lambda device, precision, torch: fake)
    with apextui.watch(name=name, flops_per_token=flops_per_token) as mon:
        train_watched(mon)
    return mon


def search_on_a_model_with_norms(measure, budget_s, **kw):
    """`advise.search.Search` as the search's tests were written for it: on a model whose one trait is its norms (no
    convolution, no SDPA call, not a causal LM: the memory format, attention and loss axes do not apply to it,
    `axes.Scope`), on a machine without Liger-Kernel or Triton's CUDA kernels (Liger's norms and coordinate-descent
    tuning are unavailable there, as `available` says before the tests' own `available`)."""
    import types

    from apextui.core.advise.search import Search

    given = kw.pop("available", None)

    def available(c):
        if c.norms == "liger" or c.compile == "coordinate-descent":
            return types.SimpleNamespace(ok=False, reason="needs liger-kernel / Triton", fix="")
        return given(c) if given is not None else types.SimpleNamespace(ok=True, reason="", fix="")

    kw.setdefault("workload", Scope("model", NORMS_ONLY.traits, kw.get("device", "")))
    return Search(measure, budget_s, available=available, **kw)


NORMS_ONLY = Scope("model", frozenset({"norms"}))  # a model whose one trait is its norms


def named(workload: str, name: str):
    """A workload's named point of this name (a test's row of a shipped preset; "norm" as its norm's workload), None
    for a name that names none."""
    from apextui.core.workloads.spec import WORKLOADS, current_workload

    spec = WORKLOADS.get(current_workload(workload, name))
    found = spec.find(name) if spec is not None else None
    return found.config if found is not None else None
