"""No process of apextui outlives the one the user started, however that one ends (SIGKILL included): a worker
spinning in a hung user step, the forkserver it was forked from and multiprocessing's resource tracker all go."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from helpers import ROOT, cli_env, gone_within, kill_all, wait_for_worker

# a model whose forward never returns in a run, in pure Python (the worker's main thread holds the GIL in turns);
# advise's own probe of the model (one forward on its thread "apextui-probe-forward") gets an answer, or advise would
# spin 15 s in it (model_presets.PROBE_FORWARD_S) before it starts the worker
HANG_MODEL = '''
import threading
import torch
from torch import nn
from apextui import ModelSetup

class Hang(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        if threading.current_thread().name == "apextui-probe-forward":
            return self.lin(x)
        while True:
            pass

def build(small=False):
    return ModelSetup(model=Hang(), make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                                             torch.randn(2, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


@pytest.mark.slow
def test_sigkill_of_advise_leaves_no_process_behind(tmp_path: Path):
    """advise searching a model whose forward hangs is SIGKILLed: its worker (at 100 % CPU), the forkserver and
    the resource tracker all end within seconds (they used to stay, the worker spinning for minutes)."""
    (tmp_path / "hang.py").write_text(HANG_MODEL)
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "advise", "--model", f"{tmp_path / 'hang.py'}:build",
                             "--device", "cpu", "--budget", "300"], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: list[psutil.Process] = []
    try:
        kids = wait_for_worker(psutil.Process(proc.pid))
        assert len(kids) >= 3, kids  # the resource tracker, the forkserver, the worker
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        left = gone_within(kids, 30)
        assert not left, f"left behind: {[(p.pid, p.cmdline()[-1][:60]) for p in left]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        kill_all(kids)


ORPHAN_CHAIN = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", '''
import os
from apextui.core.run.lifeline import exit_with_parent
exit_with_parent(os.getppid())
print("ready", flush=True)
while True:
    pass
'''], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
print(child.pid, flush=True)
while True:
    pass
"""


def test_a_process_that_exits_with_its_parent_ends_when_the_parent_is_killed():
    """`lifeline.exit_with_parent`: a child spinning in pure Python ends once its parent is SIGKILLed."""
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_CHAIN], stdout=subprocess.PIPE, text=True, env=cli_env(),
                              cwd=ROOT)
    child = None
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait(30)
        assert not gone_within([child], 30)
    finally:
        parent.kill()
        parent.wait(30)
        kill_all([child] if child is not None else [])


def test_the_forkserver_guard_does_nothing_outside_the_forkserver():
    import apextui.core.run.forkserver_guard  # noqa: F401
    from apextui.core.run import lifeline

    assert lifeline.SERVER_PID is None
