"""The typed run summary (core/measure/summary.py) and its typed records (core/measure/details.py): a real run's
`end` line is written back byte for byte from the typed value, an old or odd file's summary loads without raising
(its odd nested values None, its unknown keys kept), and the optional keys appear only when set."""

from __future__ import annotations

import json

import pytest

from apextui.core import presets
from apextui.core.analysis.ceilings import Ceilings, device_key, save_cache
from apextui.core.measure.details import CorrectnessCheck, Distributed
from apextui.core.measure.summary import Summary
from apextui.core.run import events
from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner
from helpers import TINY_MODEL, cli_in_process, run_cli


def test_a_runs_summary_round_trips_through_its_dict():
    final = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 4), lambda s: None, analyse=False).run()
    s = events.summary(final)
    d = s.to_dict()
    # held unrounded, rounded at the edge (the JSON line, the files) only
    assert d["steps"] == 4 and d["median_ms"] == round(s.median_ms, 4) and d["median_ms"] > 0
    assert "distributed" not in d and d["peak_memory_bytes"] is None  # a single CPU run: no ranks, no GPU peak
    # the four measured steps' times are kept, and the statistics are theirs
    assert d["samples"]["count"] == 4 and len(d["samples"]["ms"]) == 4 and s.samples.median == s.median_ms
    assert Summary.from_dict(d).to_dict() == d and Summary.from_dict(d).samples.count == 4
    assert list(d)[:3] == ["steps", "warmup", "measured_steps"]


def test_an_old_or_odd_summary_loads_and_keeps_what_it_does_not_know():
    s = Summary.from_dict({"median_ms": "fast", "steps": True, "p10_ms": float("nan"), "check": [1],
                           "timed_intervals": 7, "source": "old.json"})
    assert s.median_ms is None and s.steps is None and s.p10_ms is None and s.check is None
    assert s.timed_intervals == 7 and s.measured_steps is None
    assert s.to_dict()["source"] == "old.json"


def test_optional_keys_appear_when_set():
    d = Summary(median_ms=1.0, peak_memory_bytes=123, distributed=Distributed(world_size=2)).to_dict()
    assert d["peak_memory_bytes"] == 123 and d["distributed"]["world_size"] == 2


# the real runs whose `end` lines hold each record: a shipped norm preset (roofline, bottleneck, contention), the user's
# model in bf16 (its loss-parity check, with how it called the model), two data-parallel ranks (their `distributed`)
REAL_RUNS = {
    "norm": ("--preset", "layernorm"),
    "model": ("--model", "MODEL", "--variant", "bf16"),
    "ranks": ("--nproc", "2", "--preset", "fp32"),
}


@pytest.mark.slow
@pytest.mark.parametrize("which", sorted(REAL_RUNS))
def test_a_real_cpu_runs_end_line_is_written_back_byte_for_byte_from_its_typed_summary(tmp_path, which):
    """The JSON a run writes is what the typed records write: the `end` line read into a Summary (every nested
    object a record) and written again by the one function that writes it is the same line, byte for byte."""
    key, name = device_key("cpu")  # ceilings for the roofline, so that the run does not spend ~15 s measuring them
    save_cache({key: Ceilings(key, "cpu", name, 5.0, {"fp32": 0.05, "bf16": 0.01}, measured_at=1.7e9).to_dict()})
    model = tmp_path / "m.py"
    model.write_text(TINY_MODEL)
    args = [f"{model}:build" if a == "MODEL" else a for a in REAL_RUNS[which]]
    if which == "ranks":  # torchrun's ranks: processes of their own
        proc = run_cli(*args, "--json", "--device", "cpu", "--steps", "6", timeout=300)
    else:  # `cli.main` in this process, as `python -m apextui` runs it
        proc = cli_in_process(*args, "--json", "--device", "cpu", "--steps", "6")
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.splitlines()[-1]
    end = json.loads(line)
    summary = Summary.from_dict(end["summary"])
    assert summary.contention is not None and summary.contention.samples
    if which == "norm":
        assert summary.roofline is not None and summary.roofline.ceilings is not None and summary.bottleneck
    if which == "model":
        assert summary.check is not None and summary.check.kind == "loss_parity" and summary.check.calling
    if which == "ranks":
        assert summary.distributed is not None and [r.rank for r in summary.distributed.ranks] == [0, 1]
    again = events.end_line(end["status"], end["error"], summary, events.check_error(summary.check))
    assert json.dumps(again) == line


def test_a_nested_objects_odd_values_are_none_and_its_unknown_keys_are_kept():
    s = Summary.from_dict({
        "check": {"passed": "yes", "max_abs_err": "big", "kind": "other", "losses": [1, "x"], "old_key": 3,
                  "calling": {"inputs": "nope"}, "norm_swap": [1]},
        "roofline": {"ceilings": [], "tflops": True, "scope": "step", "seen": 1},
        "bottleneck": {"label": "slow", "reason": 4, "figures": {"a": [1], "b": 0.5}},
        "distributed": {"ranks": [{"rank": "0", "status": "weird", "steps": 3}, 4], "slowest_rank_share": {"0": "x"},
                        "scaling_efficiency": 0.9, "scaling_efficiency_verdict": "slower"},
        "contention": {"level": "busy", "gpu_processes": [{"pid": 7, "name": "x", "mem_mb": 1.5}, 4], "samples": 2.5}})
    c = s.check
    assert c is not None and c.passed is None and c.max_abs_err is None and c.kind is None and c.losses == (1,)
    assert c.calling is None and c.norm_swap is None and not c.failed and c.error_line is None
    assert c.to_dict()["old_key"] == 3 and "kind" not in c.to_dict()  # no loss parity: its keys are not written
    r = s.roofline
    assert r is not None and r.ceilings is None and r.tflops is None and r.scope == "step" and r.to_dict()["seen"] == 1
    b = s.bottleneck
    assert b is not None and b.label is None and b.reason is None and dict(b.figures) == {"b": 0.5}
    d = s.distributed
    assert d is not None and d.ranks[0].rank is None and d.ranks[0].status is None and d.ranks[0].steps == 3
    assert len(d.ranks) == 1 and d.slowest_rank_share == {}
    assert d.scaling_efficiency is not None and d.scaling_efficiency.verdict == "slower"
    k = s.contention
    assert k is not None and k.competing and k.samples is None and [p.pid for p in k.gpu_processes] == [7]
    assert Summary.from_dict(s.to_dict()) == s  # what it wrote reads back the same


def test_a_failed_check_says_where_in_one_line():
    failed = CorrectnessCheck(against="fp32", passed=False, max_abs_err=0.3, tolerance=0.1)
    assert failed.error_line == "failed the correctness check against fp32: max_abs_err 0.3 over tolerance 0.1"
    told = CorrectnessCheck(passed=False, message="the loss differs at step 2")
    assert told.error_line == "failed the correctness check against the baseline: the loss differs at step 2"
    assert events.check_error(CorrectnessCheck(passed=True)) is None and events.check_error(None) is None
