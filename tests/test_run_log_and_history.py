"""The worker-output reader behind the log screen, and the run history folder (no Textual)."""

from __future__ import annotations

import os
from pathlib import Path

from apextui.core.measure.summary import Summary
from apextui.ui import history, run_log
from apextui.core.results import ResultRow, load_results
from apextui.ui.run_log import RunLog
from helpers import named


def test_run_log_reads_appended_output_and_survives_deletion(tmp_path: Path):
    path = tmp_path / "worker.log"
    path.write_text("compiling...\n")
    log = RunLog("fp32 run 1", str(path))
    assert log.poll() and log.text == "compiling...\n"
    assert not log.poll()  # nothing new
    with open(path, "a") as fh:
        fh.write("FutureWarning: apex.amp is deprecated\n")
    os.unlink(path)  # the worker removes its log when a run ends well: what was written is still read
    log.drain()
    assert log.text == "compiling...\nFutureWarning: apex.amp is deprecated\n"
    assert not log.open and not log.poll()


def test_run_log_missing_file_and_thread_runner(tmp_path: Path):
    missing = RunLog("x", str(tmp_path / "gone.log"))
    assert not missing.poll() and missing.text == "" and "cannot open" in missing.note
    thread = RunLog.of_runner("x", object())
    assert "own process" in thread.note and not thread.poll()
    directory = RunLog("x", str(tmp_path))
    assert not directory.open and ("cannot open" in directory.note or "not a regular file" in directory.note)


def test_run_log_keeps_only_the_tail(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(run_log, "MAX_CHARS", 100)
    monkeypatch.setattr(run_log, "READ_CHUNK", 30)
    path = tmp_path / "w.log"
    path.write_text("".join(f"line {i:03d}\n" for i in range(100)))  # 900 bytes
    log = RunLog("x", str(path))
    log.drain()
    assert log.truncated and log.text.endswith("line 099\n") and len(log.text) <= 100


def row(median: float = 10.0) -> ResultRow:
    return ResultRow(preset="fp32", workload="transformer", config=named("transformer", "fp32"), device="cpu",
                     size="cpu", status="ok",
                     summary=Summary.from_dict({"steps": 50, "median_ms": median}))


def test_history_saves_to_the_user_data_folder_and_lists_newest_first(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert history.recent_results() == []  # no folder yet: nothing, no error
    saved = history.save_to_history([row()])
    assert saved.path.parent == tmp_path / "data" / "apextui" and saved.fallback_reason == ""
    assert [r.median_ms for r in load_results(saved.path)] == [10.0]
    older = saved.path.with_name("apextui-results-20200101-000000.json")
    older.write_text(saved.path.read_text())
    os.utime(older, (1_000_000, 1_000_000))
    (saved.path.parent / "notes.json").write_text("{}")  # not a results file name: not offered
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    here = elsewhere / "apextui-results-20990101-000000.json"
    here.write_text(saved.path.read_text())
    os.utime(here, (saved.path.stat().st_mtime + 60,) * 2)
    recent = history.recent_results([elsewhere, history.history_dir(), elsewhere, tmp_path / "missing"])
    assert [f.path for f in recent] == [here, saved.path, older]
    assert [f.path for f in history.recent_results(limit=1)] == [saved.path]
