"""The folder of watched runs (`core/watch/store.py`) against what a user's disk holds (issue 41): a moved or copied
folder of runs, a held or odd `live.lock`, a corrupted `live.json` or `run.json`, a pid that now belongs to
another process."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import apextui
from apextui.core.watch import lock, reader, store
from helpers import ROOT, cli_env


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(60)
    return proc.pid


def finished_run(where: Path, name: str, steps: int = 40) -> Path:
    """A real watched run in `where`, closed ok; its folder."""
    with apextui.watch(name=name, where=where, warmup=2) as mon:
        for i in range(steps):
            mon.step(loss=1.0 / (i + 1))
    assert mon.path is not None
    return mon.path


def as_old_run_json(folder: Path, **changes: object) -> None:
    """Rewrite `run.json` as an older apextui wrote it: `path` the folder's absolute path (plus `changes`)."""
    doc = json.loads((folder / store.META).read_text())
    doc.update({"path": str(folder.resolve()), **changes})
    doc.pop("created", None)
    (folder / store.META).write_text(json.dumps(doc) + "\n")


def folders(where: Path) -> set[str]:
    return {p.name for p in (where / "runs").iterdir()}


# ---- row 6: a run's folder is the folder it was found in ---------------------------------------------------------
def test_prune_in_a_copy_of_the_folder_of_runs_leaves_the_original_untouched(tmp_path):
    """A backup copy of the folder of runs, its run.json files naming the original's folders (as older versions
    wrote them): pruning the copy removes folders of the copy only."""
    original = tmp_path / "original"
    for i in range(4):
        folder = store.new_run(f"old{i}", where=original)
        as_old_run_json(Path(folder.path), pid=dead_pid(), start=1_700_000_000.0 + i)
    before = folders(original)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    assert store.prune(keep=1, where=copy) == 3
    assert folders(original) == before and len(folders(copy)) == 1
    newest = max(before, key=lambda n: json.loads((original / "runs" / n / store.META).read_text())["start"])
    assert folders(copy) == {newest}


def test_prune_never_removes_a_folder_outside_the_folder_of_runs(tmp_path):
    """A run folder that is a symbolic link to a folder elsewhere is not followed by prune."""
    where, outside = tmp_path / "watch", tmp_path / "elsewhere"
    target = Path(store.new_run("outside", where=outside).path)
    as_old_run_json(target, pid=dead_pid(), start=1_600_000_000.0)
    (where / "runs").mkdir(parents=True)
    (where / "runs" / "linked").symlink_to(target, target_is_directory=True)
    store.new_run("live", where=where)  # newer, and alive: never pruned
    store.prune(keep=0, where=where)
    assert (target / store.META).is_file()


def test_a_moved_folder_of_runs_reads_its_runs_as_they_ended(tmp_path):
    """`mv A B`: the runs in B (their run.json naming A's folders, as older versions wrote them) read ok with their
    steps, through `attach --json` in a child process."""
    first = tmp_path / "A"
    folder = finished_run(first, "moved")
    as_old_run_json(folder, pid=dead_pid())
    moved = tmp_path / "B"
    first.rename(moved)
    env = {**cli_env(), store.ROOT_ENV: str(moved)}
    proc = subprocess.run([sys.executable, "-m", "apextui", "attach", "moved", "--json"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    end = [json.loads(line) for line in proc.stdout.splitlines()][-1]
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["steps"] > 0
    (meta,) = store.all_runs(moved)
    assert Path(meta.path).parent == moved / "runs" and reader.last_end(Path(meta.path)) is not None


def test_run_json_and_the_index_name_run_folders_relative_to_the_folder_of_runs(tmp_path):
    mon = apextui.watch(name="relative", where=tmp_path)
    try:
        assert mon.path is not None
        doc = json.loads((mon.path / store.META).read_text())
        assert doc["path"] == f"runs/{mon.path.name}"
        index = json.loads((tmp_path / store.INDEX).read_text())
        assert [r["path"] for r in index["runs"]] == [f"runs/{mon.path.name}"]
        moved = tmp_path.parent / (tmp_path.name + "-moved")
        shutil.copytree(tmp_path, moved)
        assert [m.path for m in store.live_runs(moved)] == [str(moved / "runs" / mon.path.name)]
    finally:
        mon.close()


def test_an_index_entry_naming_a_folder_outside_the_runs_is_read_as_the_runs_folder_of_that_name(tmp_path):
    mon = apextui.watch(name="escape", where=tmp_path)
    try:
        index = json.loads((tmp_path / store.INDEX).read_text())
        index["runs"].append({**index["runs"][0], "path": "../../../etc"})
        (tmp_path / store.INDEX).write_text(json.dumps(index))
        assert [m.path for m in store.live_runs(tmp_path)] == [str(mon.path)]
    finally:
        mon.close()


# ---- row 20: a pid that now belongs to another process -----------------------------------------------------------
def test_a_dead_runs_pid_reused_by_another_process_is_not_alive(tmp_path):
    """run.json records its process's start time: the pid of a live unrelated process with another start time is
    not the run's process. A run.json without one (an older version's) keeps the pid check alone."""
    import psutil

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        folder = Path(store.new_run("reused", where=tmp_path).path)
        doc = json.loads((folder / store.META).read_text())
        assert abs(doc["created"] - psutil.Process().create_time()) < 1  # this process's
        started = psutil.Process(sleeper.pid).create_time()
        doc.update(pid=sleeper.pid, created=started - 3600)
        (folder / store.META).write_text(json.dumps(doc))
        meta = store.read_meta(folder)
        assert meta is not None and not store.alive(meta)
        from apextui.core.watch.reader import Ending

        assert "now belongs to another process" in Ending("gone").words(meta)  # not "is gone" alone: it runs
        doc["created"] = started
        (folder / store.META).write_text(json.dumps(doc))
        assert store.alive(store.read_meta(folder))
        del doc["created"]
        (folder / store.META).write_text(json.dumps(doc))
        assert store.alive(store.read_meta(folder))
    finally:
        sleeper.kill()
        sleeper.wait(30)


# ---- row 4: a corrupted live.json or run.json ----------------------------------------------------------------------
CORRUPT_META = {
    "pid 1e20": {"pid": 1e20}, "pid 2**80": {"pid": 2**80}, "pid 0": {"pid": 0}, "pid -1": {"pid": -1},
    "pid true": {"pid": True}, "pid a string": {"pid": "4242"}, "start NaN": {"start": float("nan")},
    "start 1e300": {"start": 1e300}, "start -1e300": {"start": -1e300}, "start a string": {"start": "nan"},
    "created Infinity": {"created": float("inf")}, "rank 1e20": {"rank": 1e20}, "rank -3": {"rank": -3},
    "name a list": {"name": ["x"]}, "host null": {"host": None},
}


def corrupt_run(where: Path, name: str, changes: dict) -> Path:
    folder = Path(store.new_run(name, where=where).path)
    doc = json.loads((folder / store.META).read_text())
    doc.update(changes)
    (folder / store.META).write_text(json.dumps(doc))
    return folder


def attach(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), store.ROOT_ENV: str(where)}
    return subprocess.run([sys.executable, "-m", "apextui", "attach", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_corrupted_run_json_files_are_skipped_and_later_runs_are_watched(tmp_path):
    """Other runs' run.json files holding values no run has (pid 1e20, start NaN or 1e300, ...) or nested 200,000
    deep: a new watch() in that folder (it prunes: it reads them all) starts and streams; the corrupted runs are
    not runs (no traceback from os.kill or time.localtime)."""
    for label, changes in CORRUPT_META.items():
        corrupt_run(tmp_path, label.replace(" ", "_"), changes)
    deep = Path(store.new_run("deep", where=tmp_path).path)
    (deep / store.META).write_text("[" * 200_000)
    assert store.all_runs(tmp_path) == [] and store.live_runs(tmp_path) == []
    finished_run(tmp_path, "after")
    (after,) = store.all_runs(tmp_path)
    end = reader.last_end(Path(after.path))
    assert after.name == "after" and end is not None and end["status"] == "ok"


@pytest.mark.slow
def test_attach_to_a_corrupted_run_folder_or_index_is_one_line_exit_2(tmp_path):
    folder = corrupt_run(tmp_path, "bad", {"start": 1e300})
    proc = attach(tmp_path, str(folder), "--json")
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "run.json" in proc.stderr and "start" in proc.stderr, proc.stderr
    (tmp_path / store.INDEX).write_text("[" * 200_000)
    for args in (("--json",), ("nothing-of-that-name", "--json")):
        proc = attach(tmp_path, *args)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "live runs: none" in proc.stderr


def test_a_corrupted_index_does_not_switch_the_monitor_off(tmp_path):
    for text in ("[" * 200_000, '{"runs": [{"name": "x", "pid": 1e20, "host": "h", "start": NaN, "path": "runs/x"}]}',
                 '{"runs": 7}', "\xff\xfe"):
        (tmp_path / store.INDEX).write_text(text, errors="surrogateescape")
        mon = apextui.watch(name="indexed", where=tmp_path)
        try:
            assert mon.live and mon.failure is None
            assert [m.path for m in store.live_runs(tmp_path)] == [str(mon.path)]
        finally:
            mon.close()


# ---- row 3: a held or odd live.lock ------------------------------------------------------------------------------
HOLD_LOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def watch_and_close(where: Path) -> dict:
    """watch(), a few steps and close() in a thread; what came of it (empty while it has not returned)."""
    done: dict = {}

    def body() -> None:
        mon = apextui.watch(name="locked-out", where=where, warmup=2)
        for i in range(30):
            mon.step(loss=1.0 / (i + 1))
        mon.close()
        done["mon"] = mon

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(60)  # a generous bound: the failure is never returning (a blocking flock, an open of a FIFO)
    return done


@pytest.mark.slow
def test_a_live_lock_held_by_another_process_delays_the_run_boundedly_and_is_logged_once(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(lock, "_warned", False)  # once a process: this test's
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "live.lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.WARNING, logger="apextui.watch"):
            done = watch_and_close(tmp_path)
        assert "mon" in done, "watch() or close() did not return while another process held live.lock"
        mon = done["mon"]
        assert mon.failure is None and reader.last_end(mon.path)["status"] == "ok"
        warnings = [r.getMessage() for r in caplog.records if "live.lock" in r.getMessage()]
        assert len(warnings) == 1 and "held" in warnings[0], warnings
    finally:
        holder.kill()
        holder.wait(30)


def test_a_fifo_named_live_lock_does_not_block_the_run(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(lock, "_warned", False)
    fifo = tmp_path / "live.lock"
    os.mkfifo(fifo)
    try:
        with caplog.at_level(logging.WARNING, logger="apextui.watch"):
            done = watch_and_close(tmp_path)
        assert "mon" in done, "watch() or close() did not return with a FIFO as live.lock"
        assert done["mon"].failure is None and reader.last_end(done["mon"].path)["status"] == "ok"
        assert any("live.lock" in r.getMessage() and "FIFO" in r.getMessage() for r in caplog.records)
    finally:
        reader_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer still blocked in open() is let through
        os.close(reader_fd)
