"""Helpers for the CLI tests: run `python -m apextui` in a subprocess, parse JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m apextui ARGS`, capturing stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "apextui", *args], capture_output=True, text=True,
                          timeout=timeout, env=cli_env(), cwd=ROOT)


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
