"""Two signals of different kinds are named as they came, the same way by every headless front end
(`signals.two_signals`): SIGHUP then SIGINT is "hung up (SIGHUP), then interrupted", never "interrupted twice", in
`advise` as in the headless run, and the exit status is the latest signal's (130: docs/cli.md, core/exits.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from apextui.cli.signals import two_signals
from apextui.core.exits import EXIT_INTERRUPTED
from helpers import ROOT, cli_env, gone_within, kill_all

pytestmark = pytest.mark.slow  # advise and its worker import torch

# its third forward in a process hangs, after saying so in a file: the probe's one forward in advise's own process
# never does; the fp32 run's (its FLOP count, step 1, step 2) does, in its worker, and a stop never reaches it
HANGS = '''
import os
import time
import torch
from torch import nn
from apextui import ModelSetup


class Hangs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls >= 3:
            open(os.environ["HANGS_MARK"], "w").close()
            while True:
                time.sleep(0.05)
        return self.lin(x)


def build(small=False):
    return ModelSetup(model=Hangs(), loss_fn=nn.functional.mse_loss,
                      make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                               torch.randn(2, 1, device=d, generator=g)))
'''

BOTH = "hung up (SIGHUP), then interrupted"


def wait_for(condition, what: str, proc: subprocess.Popen, err: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"advise ended (status {proc.returncode}) before {what}: {err.read_text()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def test_the_words_name_each_signal_in_order():
    assert two_signals([signal.SIGHUP, signal.SIGINT]) == BOTH
    assert two_signals([signal.SIGINT, signal.SIGINT]) == "interrupted twice"


def attempt(tmp_path: Path, mode: str) -> tuple[int, str, str] | None:
    """advise on the model that hangs; once its step hangs, SIGHUP, and once advise has said so, SIGINT. Its exit
    status, stderr and stdout; None where the stop's grace ended the hung run (5 s after the first signal, advise then
    ends by itself) before the SIGINT came: the machine stalled the test that long, nothing was shown either way.

    SIGINT waits for the first signal's line: sent back to back, the two land on two threads of advise at once, and
    which one reaches its handler first is the scheduler's choice."""
    model = tmp_path / "hangs.py"
    model.write_text(HANGS)
    mark = tmp_path / "hanging"
    mark.unlink(missing_ok=True)
    how = ["--config", "optimizer=foreach"] if mode == "config" else ["--budget", "600"]
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "apextui", "advise", "--json", "--device", "cpu", "--model",
                                 f"{model}:build", "--steps", "20", "--repeats", "1", *how],
                                cwd=ROOT, env={**cli_env(), "HANGS_MARK": str(mark)}, stdout=out, stderr=err,
                                start_new_session=True)
    kids: list[psutil.Process] = []
    try:
        wait_for(mark.exists, "hung step", proc, err_path)
        kids = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "apextui: hung up (SIGHUP): stopping" in err_path.read_text(), "first signal's line", proc,
                 err_path)
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        left = gone_within(kids, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        kill_all(kids)
    assert not left, left
    err_text = err_path.read_text()
    if BOTH not in err_text and "did not end within 5 s of the stop" in err_text:
        return None
    return proc.returncode, err_text, out_path.read_text()


@pytest.mark.parametrize("mode", ["config", "search"])
def test_a_hang_up_then_ctrl_c_in_advise_names_both_and_exits_130(tmp_path: Path, mode: str):
    """While a run's step hangs (the first signal's stop never reaches it), SIGHUP then SIGINT: advise quits at once
    with the partial advice, one line on stderr naming both signals in order, the latest signal's status (130), and
    its worker ended."""
    got = None
    for _ in range(3):
        got = attempt(tmp_path, mode)
        if got is not None:
            break
    assert got is not None, "the stop's grace ended the run before the second signal, three times"
    code, err_text, out_text = got
    assert code == EXIT_INTERRUPTED, err_text
    assert f"apextui: {BOTH}: quitting at once with the partial advice" in err_text, err_text
    assert "twice" not in err_text, err_text
    doc = json.loads(out_text)
    assert doc["kind"] == "apextui-advice" and doc["status"] == "partial"
    assert "Traceback" not in err_text, err_text


def test_the_advice_is_printed_once_whoever_prints_it_first(capsys):
    """The run's end and a second signal's handler both print the advice; on a loaded machine they came together and
    stdout held two documents. The first prints; the other, on any thread, the printing one included, prints none."""
    import threading

    from apextui.cli.advise import OutputOnce

    output = OutputOnce(as_json=True)
    inner: list[bool] = []

    def doc() -> dict:
        inner.append(output(lambda: {"kind": "inner"}))  # a handler on the printing thread itself
        return {"kind": "apextui-advice", "status": "partial"}

    other = threading.Thread(target=output, args=(lambda: {"kind": "other"},))
    assert output(doc)
    other.start()
    other.join(30)
    assert inner == [True]
    out = capsys.readouterr().out
    assert json.loads(out) == {"kind": "apextui-advice", "status": "partial"}
