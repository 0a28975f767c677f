"""A watched run's stream with damaged lines (issue 41 row 5): each is skipped and named on stderr (its file and
line number), `attach --json` prints valid JSON only and gives no traceback, and one damaged run never breaks the
table of runs beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import apextui
from apextui.core.watch import reader, rows, stream
from apextui.core.watch.replay import Replay
from helpers import ROOT, cli_env

DAMAGED = {
    "nested 200,000 deep": "[" * 200_000,
    "nested 500 deep": '{"event": "note", "step": 3, "message": ' + "[" * 500 + "]" * 500 + "}",
    "a 4,000-digit integer": '{"event": "step", "step": 5, "steps": 1, "ms": ' + "9" * 4000 + "}",
    "a 5,000-digit integer": '{"event": "step", "step": 5, "steps": 1, "ms": ' + "9" * 5000 + "}",
    "1e999": '{"event": "step", "step": 6, "steps": 1, "ms": 1e999}',
    "NaN": '{"event": "metric", "step": 7, "values": {"lr": NaN}}',
    "-Infinity": '{"event": "step", "step": 8, "steps": 1, "ms": 1.0, "loss": -Infinity}',
    "not JSON": '{"event": "step", "ste',
    "a list": "[1, 2]",
}


def finished_run(where: Path, name: str) -> Path:
    with apextui.watch(name=name, where=where, warmup=2) as mon:
        for i in range(40):
            mon.step(loss=1.0 / (i + 1), lr=0.1)
    assert mon.path is not None
    return mon.path


def damage(folder: Path, lines: list[str]) -> int:
    """Put `lines` before the run's last line (its `end`); the line number of the first."""
    path = stream.segments(folder)[-1][1]
    kept = path.read_text().splitlines(keepends=True)
    path.write_text("".join(kept[:-1]) + "".join(line + "\n" for line in lines) + kept[-1])
    return len(kept)


def strict(line: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


@pytest.mark.slow
def test_attach_json_skips_damaged_lines_names_them_and_prints_valid_json(tmp_path):
    folder = finished_run(tmp_path, "damaged")
    first = damage(folder, list(DAMAGED.values()))
    proc = subprocess.run([sys.executable, "-m", "apextui", "attach", str(folder), "--json"], capture_output=True,
                          text=True, env=cli_env(), cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    printed = [strict(line) for line in proc.stdout.splitlines()]
    assert printed[0]["event"] == "start" and printed[-1]["event"] == "end" and printed[-1]["status"] == "ok"
    assert all(e["values"] == {"lr": 0.1} for e in printed if e["event"] == "metric")
    assert all(isinstance(e["message"], str) for e in printed if e["event"] == "note")
    assert all(isinstance(e.get("ms", 0.0), float) and e.get("ms", 0.0) < 1e6 for e in printed)
    named = [line for line in proc.stderr.splitlines() if "events-000001.jsonl" in line]
    assert len(named) == 1 and f"line {first} " in named[0], proc.stderr  # once a file: the first damaged line


def test_the_reader_skips_each_kind_of_damaged_line_and_names_it(tmp_path):
    for label, line in DAMAGED.items():
        folder = finished_run(tmp_path / label.replace(" ", "_"), "one")
        number = damage(folder, [line])
        follower = reader.Follower(folder)
        events = follower.poll()
        assert events[-1]["event"] == "end" and follower.bad_lines == 1, label
        assert any(f"line {number} of events-000001.jsonl" in note for note in follower.notes), (label, follower.notes)
        replay = Replay()
        replay.add(events)
        assert replay.snapshot().status == "ok"
        json.dumps(events, allow_nan=False)


def test_one_damaged_run_does_not_break_the_table_of_runs(tmp_path):
    """A run whose first line is nested 200,000 deep, and whose last line (with "end" in it) 5,000 deep, beside a
    good run: the table lists both, the damaged lines passed over."""
    good = finished_run(tmp_path, "good")
    bad = finished_run(tmp_path, "bad")
    path = stream.segments(bad)[-1][1]
    path.write_text("[" * 200_000 + "\n" + path.read_text() + '{"event": "end", "x": ' + "[" * 5_000 + "\n")
    found = rows.Table(tmp_path).rows()
    assert [m.path for m, _ in found] == [str(good), str(bad)] and [r.status for _, r in found] == ["ok", "ok"]
    assert rows._head(bad)[0] == "cpu" and reader.last_end(bad) is not None


def test_the_replay_takes_numbers_too_large_for_a_float_as_missing():
    replay = Replay()
    replay.add([{"event": "start", "preset": "x", "warmup": 0}, {"event": "setup", "device": "cpu"},
                {"event": "step", "step": 2, "steps": 1, "ms": 10**400, "loss": 10**400},
                {"event": "metric", "step": 2, "values": {"lr": 10**400}},
                {"event": "step", "step": 3, "steps": 1, "ms": 2.0, "loss": 0.5}])
    snap = replay.snapshot()
    assert snap.steps_done == 3 and snap.final_loss == 0.5 and replay.metrics == {}
