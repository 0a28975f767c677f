"""Issue 15, section 2: a preset path or a preset folder entry that is not a regular file (a FIFO would block
the open forever) or is too big ends with one line on stderr and the documented exit code, promptly
(subprocess tests: `python -m apextui`, each with a timeout so a hang fails instead of blocking the suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, cli_env

from apextui.core.presets import MAX_FILE_BYTES

GOOD = (ROOT / "presets" / "layernorm.toml").read_text()


def _run(args: list[str], preset_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    if preset_dir is not None:
        env["APEXTUI_PRESET_DIR"] = str(preset_dir)
    return subprocess.run([sys.executable, "-m", "apextui", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


def _one_error_line(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("apextui: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr, proc.stderr


@pytest.fixture
def preset_dir(tmp_path: Path) -> Path:
    """A user preset folder with one good preset and a FIFO named like a preset."""
    d = tmp_path / "presets"
    d.mkdir()
    (d / "mine.toml").write_text(GOOD)
    os.mkfifo(d / "pipe.toml")
    return d


@pytest.mark.parametrize("json_flag", [["--json"], []])  # headless, and the TUI (refused before the app)
def test_a_fifo_given_as_the_preset_exits_2_with_one_line(tmp_path: Path, json_flag):
    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)
    proc = _run(["--preset", str(fifo), *json_flag])
    _one_error_line(proc, f"{fifo}: not a regular file (a FIFO); a preset file must be a regular file")


def test_a_preset_file_over_the_size_limit_exits_2_with_one_line(tmp_path: Path):
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written
    proc = _run(["--preset", str(huge), "--json"])
    _one_error_line(proc, f"{huge}: too large for a preset file ({MAX_FILE_BYTES + 1} bytes; at most {MAX_FILE_BYTES}")


def test_list_skips_a_fifo_in_the_preset_folder_and_says_so(preset_dir: Path):
    proc = _run(["list", "--json", "--device", "cpu"], preset_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["name"] for p in doc["presets"] if p["source"] == "user"] == ["mine"]
    message = f"{preset_dir / 'pipe.toml'}: not a regular file (a FIFO); a preset file must be a regular file"
    assert doc["errors"] == [{"path": str(preset_dir / "pipe.toml"), "message": message}]
    assert proc.stderr == f"apextui: warning: skipped a user preset: {message}\n"


@pytest.mark.parametrize("name, needle", [
    ("nope", "unknown preset 'nope'; choose one of: "),  # the message lists the folder's presets: no hang
    ("pipe", "pipe.toml: not a regular file (a FIFO)"),  # the FIFO by name: its own error
])
def test_a_fifo_in_the_preset_folder_never_hangs_a_preset_by_name(preset_dir: Path, name, needle):
    proc = _run(["--preset", name, "--json"], preset_dir)
    _one_error_line(proc, needle)
    if name == "nope":
        assert ", mine, or give a path" in proc.stderr
