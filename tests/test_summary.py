"""The typed run summary (core/run/summary.py): the `end` line's object round-trips, an old or odd file's
summary loads without raising, and the optional keys appear only when set."""

from __future__ import annotations

from apextui.core import presets
from apextui.core.run import events
from apextui.core.run.runner import Runner
from apextui.core.measure.summary import Summary
from apextui.core.run.request import RunRequest


def test_a_runs_summary_round_trips_through_its_dict():
    final = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 4), lambda s: None, analyse=False).run()
    s = events.summary(final)
    d = s.to_dict()
    assert d["steps"] == 4 and d["median_ms"] == s.median_ms and d["median_ms"] > 0
    assert "distributed" not in d and d["peak_memory_bytes"] is None  # a single CPU run: no ranks, no GPU peak
    assert Summary.from_dict(d) == s and Summary.from_dict(d).to_dict() == d
    assert list(d)[:3] == ["steps", "warmup", "measured_steps"]


def test_an_old_or_odd_summary_loads_and_keeps_what_it_does_not_know():
    s = Summary.from_dict({"median_ms": "fast", "steps": True, "p10_ms": float("nan"), "check": [1],
                           "timed_intervals": 7, "source": "old.json"})
    assert s.median_ms is None and s.steps is None and s.p10_ms is None and s.check is None
    assert s.timed_intervals == 7 and s.measured_steps is None
    assert s.to_dict()["source"] == "old.json"


def test_optional_keys_appear_when_set():
    d = Summary(median_ms=1.0, peak_memory_bytes=123, distributed={"world_size": 2}).to_dict()
    assert d["peak_memory_bytes"] == 123 and d["distributed"] == {"world_size": 2}
