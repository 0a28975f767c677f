"""User code that prints must not corrupt the JSON on stdout: what a model prints, from Python or from C (fd 1),
goes to stderr, for `--json`, `advise --json` and `list --json` (docs/json.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import json_lines, run_cli

FAKE_END = '{"event": "end", "status": "ok", "fake": true}'

PRINTING = f'''
import os
import torch
from torch import nn
from apextui import ModelSetup


class Loud(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        print({FAKE_END!r})                        # Python's print
        os.write(1, b"from C: not JSON\\n")         # what a C extension's printf does: fd 1 itself
        return self.lin(x)


def build(small=False):
    print("building the model")
    os.write(1, b"build: not JSON either\\n")
    return ModelSetup(model=Loud(),
                      make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                               torch.randn(2, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture
def loud(tmp_path: Path) -> str:
    path = tmp_path / "loud.py"
    path.write_text(PRINTING)
    return f"{path}:build"


def test_json_run_keeps_user_prints_off_stdout(loud):
    proc = run_cli("--model", loud, "--variant", "fp32", "--json", "--device", "cpu", "--steps", "3")
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)  # every line parses
    assert [e["event"] for e in events].count("end") == 1 and events[-1]["event"] == "end"
    assert not any(e.get("fake") for e in events)
    assert "from C: not JSON" in proc.stderr and '"fake": true' in proc.stderr  # not lost: on stderr


def test_list_model_json_keeps_user_prints_off_stdout(loud):
    proc = run_cli("list", "--model", loud, "--json", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["model"]["name"] == "loud:build"
    assert "build: not JSON either" in proc.stderr


@pytest.mark.slow
def test_advise_json_keeps_user_prints_off_stdout(loud):
    proc = run_cli("advise", "--model", loud, "--device", "cpu", "--steps", "3", "--repeats", "1", "--json",
                   timeout=600)
    doc = json.loads(proc.stdout)  # one JSON document, nothing else
    assert doc["kind"] == "apextui-advice" and doc["model"]["name"] == "loud:build", proc.stderr[-2000:]
    assert "from C: not JSON" in proc.stderr


def test_in_process_prints_go_to_stderr(capsys):
    """Where sys.stdout is not fd 1 (a caller's capture), the JSON still goes there and prints do not."""
    from apextui.cli import output

    with output.json_stdout():
        print("user text")
        output.write('{"event": "x"}\n')
    out, err = capsys.readouterr()
    assert out == '{"event": "x"}\n' and "user text" in err
