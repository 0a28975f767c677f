"""Files saved before runs carried their point still load, each as the point it ran.

`fixtures/saved-2026-12-06/` holds what apextui wrote on 2026-12-06, before a run's identity became its point: the
`--json` lines of a norm preset (`rmsnorm`), a Transformer preset at bf16 (`torch_amp`) and a `--model --config` run,
and the results document `w` saves from the three. Their shipped runs name a variant and an `amp`, the model run its
label; loading reads each once into its point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apextui.core.config.point import BASELINE, Config, parse
from apextui.core.results import load_results, save_results

SAVED = Path(__file__).parent / "fixtures" / "saved-2026-12-06"
POINTS = {"rmsnorm": BASELINE, "torch_amp": Config(precision="bf16", optimizer="fused"),
          "gpt:build/bf16+foreach": parse("precision=bf16,optimizer=foreach")}


@pytest.mark.parametrize("name", ["rmsnorm.jsonl", "torch_amp.jsonl", "model_point.jsonl", "results.json"])
def test_a_file_saved_before_runs_carried_their_point_loads_with_it(name):
    rows = load_results(SAVED / name)
    assert rows and all(r.status == "ok" and r.summary.median_ms for r in rows)
    for row in rows:
        assert row.config == POINTS[row.preset], row.preset
        assert row.autocast == row.config.autocast


def test_the_old_files_lines_have_no_point_and_name_the_variant_and_amp_instead():
    """The fixtures are what they say: written before the `start` line carried a shipped preset's point."""
    start = json.loads((SAVED / "torch_amp.jsonl").read_text().splitlines()[0])
    assert start["config"] is None and (start["variant"], start["amp"]) == ("torch_amp", "bf16")
    saved = json.loads((SAVED / "results.json").read_text())
    assert all("config" not in run for run in saved["runs"])


def test_a_row_saved_now_carries_its_point_and_reads_back_the_same(tmp_path):
    rows = load_results(SAVED / "results.json")
    path = save_results(rows, tmp_path / "again.json")
    runs = json.loads(path.read_text())["runs"]
    assert [parse(run["config"]) for run in runs] == [r.config for r in rows]
    assert [r.config for r in load_results(path)] == [r.config for r in rows]


def test_a_saved_run_whose_point_cannot_be_read_still_loads(tmp_path):
    doc = json.loads((SAVED / "results.json").read_text())
    doc["runs"][0]["variant"] = "no_such_variant"
    doc["runs"][2]["variant"] = "bf16+not_a_value"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    rows = load_results(path)
    assert [r.config for r in rows] == [None, POINTS["torch_amp"], None]
    # the norm run's named point is neither norm's: it keeps the workload its file names, and its preset's name
    assert (rows[0].workload, rows[0].label, rows[0].median_ms) == ("norm", "rmsnorm", pytest.approx(0.516))


def test_a_saved_runs_amp_is_kept_where_its_point_cannot_be_read_back(tmp_path):
    doc = json.loads((SAVED / "results.json").read_text())
    doc["runs"][1]["variant"] = "no_such_variant"  # torch_amp's row: amp bf16
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    row = load_results(path)[1]
    assert row.config is None and row.autocast == "bf16"
    again = json.loads(save_results([row], tmp_path / "again.json").read_text())["runs"][0]
    assert again["amp"] == "bf16" and "config" not in again


def test_runs_saved_before_they_kept_their_step_times_load_and_pool_as_the_median_of_their_medians():
    from apextui.core.measure.compare import timing_from_runs

    rows = load_results(SAVED / "results.json") + load_results(SAVED / "torch_amp.jsonl")
    assert all(r.summary.samples is None and r.summary.timing is not None for r in rows)
    runs = [r.summary.timing for r in rows[:2]]
    pooled = timing_from_runs(runs)
    assert pooled.samples is None and pooled.median_ms == pytest.approx((runs[0].median_ms + runs[1].median_ms) / 2)


BEFORE_PARALLEL = Path(__file__).parent / "fixtures" / "saved-2026-12-06-before-the-parallel-axis"


@pytest.mark.parametrize("name", ["ddp_adamw_fused.jsonl", "fsdp2_adamw_fused.jsonl", "results.json"])
def test_runs_saved_before_the_parallel_axis_read_back_as_their_own_points(name):
    """dc1d6fb saved DDP's and FSDP2's runs with one point (bf16 + fused AdamW, their way of training not on it): each
    reads back as its named point, so two different runs are never one configuration."""
    saved = [json.loads(line) for line in (BEFORE_PARALLEL / "ddp_adamw_fused.jsonl").read_text().splitlines()]
    assert "parallel" not in saved[0]["config"]  # the fixture is what it says
    expected = {"ddp_adamw_fused": Config(precision="bf16", optimizer="fused", parallel="ddp"),
                "fsdp2_adamw_fused": Config(precision="bf16", optimizer="fused", parallel="fsdp2")}
    rows = load_results(BEFORE_PARALLEL / name)
    assert rows and {r.preset: r.config for r in rows} == {p: c for p, c in expected.items() if p in {
        r.preset for r in rows}}
    assert all(not r.is_baseline for r in rows)


def test_the_norm_run_saved_before_each_norm_had_its_workload_is_its_own_workloads_baseline():
    """The `rmsnorm` run saved as workload "norm" (compared then with `layernorm`) reads back as the rms_norm workload's
    baseline: RMSNorm is compared with RMSNorm."""
    (row,) = load_results(SAVED / "rmsnorm.jsonl")
    assert (row.workload, row.is_baseline, row.baseline) == ("rms_norm", True, "rmsnorm")


def test_a_run_is_called_by_its_own_workloads_named_point():
    """`fused_rmsnorm` and `fused_layernorm` are one point on the axes (Apex's norms swapped in), of two workloads:
    each row says its own workload's name for it, never the model workload's (`fused_norms`)."""
    from apextui.core.presets import load_builtin
    from apextui.core.results import ResultRow
    from apextui.core.measure.summary import Summary

    shipped = {p.name: p for p in load_builtin()}
    rows = [ResultRow(preset=n, workload=shipped[n].workload, device="cpu", size="cpu", status="ok",
                      summary=Summary.from_dict({}), config=shipped[n].config)
            for n in ("fused_rmsnorm", "fused_layernorm", "rmsnorm", "torch_compile")]
    assert [r.label for r in rows] == ["fused_rmsnorm", "fused_layernorm", "rmsnorm", "torch_compile"]
    assert shipped["fused_rmsnorm"].config == shipped["fused_layernorm"].config  # one point, two workloads


def test_a_stream_whose_workload_is_not_a_name_replays_without_a_crash():
    from apextui.core.run.replay import info_from

    info = info_from({"event": "start", "preset": "p", "workload": ["x"]}, {})
    assert (info.workload, info.config) == ("['x']", None)
