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
