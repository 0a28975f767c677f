"""`apextui attach` on a run folder it cannot read as a stream, and on a name no path can have (issue rows 5 and 6):
a segment that is a FIFO, a link to /dev/zero or /dev/urandom, or a directory; a line longer than the cap; a name
longer than a file name may be. Each is one line on stderr and a documented exit code, or a line skipped with a
note, never a hang, unbounded memory or a traceback. The processes that could hang run in a subprocess, with a
timeout that only bounds a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cli_env, cli_in_process

from apextui.core.exits import EXIT_OK, EXIT_USAGE
from apextui.core.watch import reader, store, stream

HANG_BOUND_S = 60  # only bounds a hang: never a duration asserted
START = {"event": "start", "preset": "bad-input", "watch": {"start": 1.0}}
NOTE = {"event": "note", "step": 1, "message": "after the long line"}


def run_folder(tmp_path: Path) -> Path:
    """A real run folder with its `run.json` (this process writes it: the run is live), and no segment yet."""
    return Path(store.new_run("bad-input", where=tmp_path).path)


def attach_once(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apextui", "attach", str(folder), "--json", "--once"],
                          capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=HANG_BOUND_S)


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def link_to(device: str):
    def make(path: Path) -> None:
        path.symlink_to(device)

    return make


def make_directory(path: Path) -> None:
    path.mkdir()


SEGMENTS = {
    "a FIFO": (make_fifo, "not a regular file (a FIFO)"),
    "a link to /dev/zero": (link_to("/dev/zero"), "not a regular file (a character device)"),
    "a link to /dev/urandom": (link_to("/dev/urandom"), "not a regular file (a character device)"),
    "a directory": (make_directory, "is a directory"),
}


@pytest.mark.parametrize("kind", SEGMENTS)
def test_a_segment_that_is_not_a_regular_file_is_one_line_and_exit_2(kind, tmp_path):
    """A FIFO hung `attach --json --once`, /dev/zero grew its memory without bound, /dev/urandom hung, and a
    directory raised IsADirectoryError: each is refused before it is read, in one line naming the segment."""
    folder = run_folder(tmp_path)
    make, why = SEGMENTS[kind]
    make(stream.segment_path(folder, 1))
    proc = attach_once(folder)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr  # one line
    line = proc.stderr.strip()
    assert line.startswith("apextui: error: ") and "events-000001.jsonl" in line and why in line, line
    assert proc.stdout == ""


def test_a_stopped_stream_file_that_is_a_device_is_not_read(tmp_path):
    """`stopped.jsonl` (a stopped stream's last lines, read when a poll finds no new line) linked to /dev/zero: read
    whole, it grew without bound; it is no stopped stream's file, and the run reads as it is (nothing written yet)."""
    folder = run_folder(tmp_path)
    stream.segment_path(folder, 1).write_text("")
    (folder / stream.ASIDE).symlink_to("/dev/zero")
    proc = attach_once(folder)
    assert (proc.returncode, proc.stdout, proc.stderr) == (EXIT_OK, "", "")


def long_line_segment(folder: Path, size: int, end: bytes = b"\n") -> Path:
    """A segment of a start line, a note line of `size` bytes (valid JSON: only its length is wrong), and a note."""
    path = stream.segment_path(folder, 1)
    pad = size - len(json.dumps({"event": "note", "message": ""}))
    long = json.dumps({"event": "note", "message": "x" * pad}).encode()
    assert len(long) == size
    path.write_bytes(json.dumps(START).encode() + b"\n" + long + end + (json.dumps(NOTE).encode() + b"\n"
                                                                        if end else b""))
    return path


@pytest.mark.parametrize("read_bytes", [1024, 1 << 20], ids=["read across chunks", "read in one chunk"])
def test_a_line_longer_than_the_cap_is_skipped_with_a_note_and_the_next_line_is_read(read_bytes, monkeypatch,
                                                                                     tmp_path):
    """A 300 MB line took 25.8 s and 954 MB: a line past `LINE_BYTES` (lowered here to 4 KB) is skipped, named
    on stderr with its line number, and the line after it is read."""
    monkeypatch.setattr(reader, "LINE_BYTES", 4096, raising=False)  # without a cap: fails on what is read
    monkeypatch.setattr(reader, "READ_BYTES", read_bytes)
    folder = run_folder(tmp_path)
    long_line_segment(folder, 20_000)
    proc = cli_in_process("attach", str(folder), "--json", "--once")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [START, NOTE]
    (note,) = proc.stderr.splitlines()
    assert note.startswith("apextui: skipped line 2 of events-000001.jsonl: longer than 4096 bytes"), note


def test_a_line_without_its_end_is_held_to_the_cap_while_it_grows(monkeypatch, tmp_path):
    """A segment of 1 MB without a newline (a run writing zeros, a copied device): what the reader holds of the line
    stays within the cap while it reads on, in chunks; the next line after its newline is read."""
    monkeypatch.setattr(reader, "LINE_BYTES", 4096, raising=False)  # without a cap: fails on what is read
    monkeypatch.setattr(reader, "READ_BYTES", 1024)
    folder = run_folder(tmp_path)
    path = long_line_segment(folder, 1 << 20, end=b"")
    follower = reader.Follower(folder)
    assert follower.poll() == [START]
    assert len(follower.partial) <= 4096 and follower.offset == path.stat().st_size
    with path.open("ab") as f:
        f.write(b"\n" + json.dumps(NOTE).encode() + b"\n")
    assert follower.poll() == [NOTE]
    assert [n for n in follower.notes if "line 2 of events-000001.jsonl: longer than 4096 bytes" in n]


NO_PATH = {
    "a name of 300 bytes": ("a" * 300, "File name too long"),
    "a path with a part of 300 bytes": ("/tmp/" + "a" * 300 + "/run", "File name too long"),
    "~ of no user": ("~apextui-no-such-user/run", "Could not determine home directory"),
}


@pytest.mark.parametrize("args", [["--json"], ["--json", "--once"]])
@pytest.mark.parametrize("case", NO_PATH)
def test_a_name_no_path_can_have_is_one_line_and_exit_2(case, args):
    """`OSError: File name too long` (and `RuntimeError` for `~` of no user) came out as a traceback: such a word is
    no run folder, and no run has it as its name; the line says why it is no path."""
    name, why = NO_PATH[case]
    proc = cli_in_process("attach", name, *args)
    assert proc.returncode == EXIT_USAGE
    (line,) = proc.stderr.splitlines()
    assert line.startswith("apextui: error: no watched run named ") and why in line, line
