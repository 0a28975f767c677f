"""The stream's one reader (`core/run/replay.py`): the lines a run writes, read back, give the run's own snapshot;
the TUI's data-parallel run (`launched.py`) and `apextui attach` (`watch/replay.py`) both read through it."""

from __future__ import annotations

import json

import pytest

from apextui.core import presets
from apextui.core.run import events
from apextui.core.run.merge import MergedRecord
from apextui.core.run.replay import Replay, info_from, record_from
from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner
from apextui.core.run.timing import StepRecord


@pytest.fixture(scope="module")
def written() -> tuple[list[dict], object]:
    """A real CPU run of a small preset: the lines the `--json` printer writes (the events it writes, as JSON, not
    the printer itself: its end line settles this process's signal handling), and the run's final snapshot."""
    preset = presets.resolve("layernorm")
    lines: list[dict] = []

    def write(snap) -> None:
        if snap.info is not None and not any(e["event"] == "setup" for e in lines):
            lines.append(events.setup_event(snap.info))
        lines.extend(events.step_event(rec, events.monitor_fields(snap.monitor)) for rec in snap.new_steps)
        if snap.finished:
            lines.append(events.end_event(snap))

    runner = Runner(RunRequest(preset, "cpu", 12), write, analyse=False)
    lines.append(events.start_event(preset, "cpu", runner.steps, runner.warmup, {}))
    final = runner.run()
    return [json.loads(json.dumps(e)) for e in lines], final


def test_the_lines_read_back_are_the_run_as_its_runner_saw_it(written):
    lines, final = written
    replay = Replay()
    replay.add(lines)
    snap = replay.snapshot_at(1.0)
    assert snap.status == final.status == "ok" and snap.error is None
    assert snap.steps_done == final.steps_done == 12
    assert snap.info is not None and final.info is not None
    for field in ("preset", "workload", "config", "device", "size_name", "size", "steps", "warmup", "autocast",
                  "units", "units_per_step", "baseline", "params"):
        assert getattr(snap.info, field) == getattr(final.info, field), field
    assert snap.stats is not None and final.stats is not None
    assert snap.stats.steps == final.stats.steps and snap.stats.median_ms == pytest.approx(final.stats.median_ms,
                                                                                          rel=1e-3)
    assert snap.final_loss == pytest.approx(final.final_loss, rel=1e-5)
    # the finished run's step times, kept by the reader as by the runner (each step line's ms, to 0.1 µs)
    assert snap.stats.samples is not None and final.stats.samples is not None
    assert snap.stats.samples.count == final.stats.samples.count
    assert snap.stats.samples.values == pytest.approx(final.stats.samples.values, abs=1e-4)
    assert sum(r.steps for r in snap.new_steps) == final.steps_done  # every step line, each step once
    assert replay.snapshot_at(2.0).new_steps == ()  # new steps once: those since the last snapshot


def test_a_data_parallel_step_line_keeps_its_ranks_and_a_damaged_one_is_taken_as_missing():
    merged = record_from({"event": "step", "step": 8, "steps": 4, "ms": 2.5, "rank_ms": [2.0, 2.5], "slowest_rank": 1,
                          "throughput": 10.0})
    assert isinstance(merged, MergedRecord) and merged.rank_ms == (2.0, 2.5) and merged.slowest_rank == 1
    plain = record_from({"event": "step", "step": 3, "ms": 1.0, "loss": 10 ** 400})
    assert type(plain) is StepRecord and plain.loss is None and plain.steps == 1
    assert record_from({"event": "step", "step": "3", "ms": 1.0}) is None


def test_an_unavailable_line_ends_the_run_failed_with_its_reason():
    replay = Replay()
    replay.add([{"event": "unavailable", "preset": "fused_adam", "device": "cpu", "reason": "needs CUDA",
                 "fix": "run on a GPU"}])
    snap = replay.snapshot_at(0.0)
    assert snap.status == "failed" and snap.error == "unavailable: needs CUDA" and snap.info is None


def test_info_from_a_watched_runs_start_takes_the_setups_device():
    info = info_from({"preset": "mine", "workload": "watch", "variant": "mine", "device": "cpu", "steps": None},
                     {"device": "cuda", "units": "tokens", "units_per_step": 512})
    assert (info.device, info.workload, info.steps, info.units, info.units_per_step) == ("cuda", "watch", 0,
                                                                                         "tokens", 512)
