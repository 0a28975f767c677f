"""The measurement scripts in benchmarks/ that the results document rests on: they run (on CPU here, with
the small sizes), their arithmetic, and their refusals."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest

from apextui.core.config.point import Config

from helpers import ROOT, benchmarks_on_path, cli_env

pytest.importorskip("torch")
benchmarks_on_path()  # the scripts import `benchlib`, beside them


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True,
                          text=True, timeout=timeout, env=cli_env(), cwd=ROOT)


# ---- bare_loop.py and monitor_cost.py ------------------------------------------------------------------
@pytest.mark.slow
def test_bare_loop_prints_the_rate_of_a_plain_loop():
    proc = bench("bare_loop.py", "--preset", "adamw", "--device", "cpu", "--warmup", "2", "--steps", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["preset"] == "adamw" and out["steps"] == 3 and out["warmup"] == 2 and out["ms_per_step"] > 0


@pytest.mark.slow
def test_monitor_cost_runs_bare_json_and_tui_blocks_and_separate_processes_on_cpu(tmp_path):
    """One preset, 2 rounds: each round a bare, a json and a tui block (a real worker process under the
    Textual app), in rotating order; one separate-process pair; the table; --from-json again."""
    proc = bench("monitor_cost.py", "--presets", "layernorm", "--device", "cpu", "--rounds", "2", "--block-ms", "5",
                 "--warmup", "4", "--separate", "1", "--out-dir", str(tmp_path), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "monitor_cost.json").read_text())
    res = results["presets"]["layernorm"]
    assert [r["order"] for r in res["rounds"]] == ["bare/json/tui", "json/tui/bare"]
    for r in res["rounds"]:
        assert r["bare_ms"] > 0 and r["bare_cpu_ms"] > 0
        for kind in ("json", "tui"):
            assert r[f"{kind}_reported_ms"] > 0 and r[f"{kind}_wall_ms"] > 0 and r[f"{kind}_cpu_ms"] > 0
        for kind in ("bare", "json", "tui"):  # cyclic-GC collections during each block, and their time
            assert r[f"{kind}_gc_collections"] >= 0 and r[f"{kind}_gc_ms"] >= 0
        for kind in ("json", "tui"):  # the monitor budget: its parts add up, over the block's own time
            assert r[f"{kind}_budget_total"] == pytest.approx(r[f"{kind}_budget_clock"] + r[f"{kind}_budget_gil"])
            assert r[f"{kind}_budget_clock"] > 0 and r[f"{kind}_use_wall_s"] > 0
    assert set(res["summary"]["gc_ms_a_block"]) == {"bare", "json", "tui"}
    # measured (per hop: its arithmetic is tested on a fake clock in test_bench_measure); its size is the machine's
    assert 0 < res["gil_handoff_s"] < 1 and "json_budget" in res["summary"]
    s = res["summary"]
    ratios = [r["json_wall_ms"] / r["bare_ms"] for r in res["rounds"]]
    assert s["json_wall"]["geomean"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 2))
    assert len(res["separate"]) == 1 and res["separate"][0]["ratio"] > 0
    assert "| layernorm |" in (tmp_path / "monitor_cost.md").read_text()
    assert "GC ms a block" in (tmp_path / "monitor_cost.md").read_text()
    assert "Monitor budget" in (tmp_path / "monitor_cost.md").read_text()
    again = bench("monitor_cost.py", "--from-json", str(tmp_path / "monitor_cost.json"))
    assert again.returncode == 0 and "| layernorm |" in again.stdout


@pytest.mark.slow
def test_monitor_parts_runs_every_variant_against_the_bare_loop_on_cpu(tmp_path):
    """benchmarks/monitor_parts.py: one round of bare and each variant on one workload, ratios and switches."""
    proc = bench("monitor_parts.py", "--device", "cpu", "--presets", "layernorm", "--rounds", "1", "--block-ms", "5",
                 "--out-dir", str(tmp_path), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mod = load("monitor_parts")
    res = json.loads((tmp_path / "monitor_parts.json").read_text())
    row = res["presets"]["layernorm"]["rounds"][0]
    assert set(res["variants"]) == set(mod.VARIANTS)
    for kind in ("bare", *mod.VARIANTS):
        assert row[kind] > 0 and row[f"{kind}_switches"] >= 0 and row[f"{kind}_cpu_s"] > 0
    for kind in mod.VARIANTS:
        assert row[f"{kind}_budget_total"] >= row[f"{kind}_budget_clock"] >= 0
    assert row["loop_budget_clock"] > 0 and row["again_budget_clock"] == 0  # a bare block has no clock
    s = res["presets"]["layernorm"]["summary"]
    assert s["json_wall"]["geomean"] == pytest.approx(row["json"] / row["bare"])
    assert "| layernorm |" in proc.stdout
    bad = bench("monitor_parts.py", "--device", "cpu", "--variants", "json,nope")
    assert bad.returncode == 2 and "unknown: nope" in bad.stderr and "Traceback" not in bad.stderr


def test_monitor_cost_pools_runs_preset_by_preset_and_refuses_mixed_devices(tmp_path):
    mc = load("monitor_cost")

    def run(device, ratio, n):
        rows = [{"bare_ms": 1.0, "json_reported_ms": ratio, "tui_reported_ms": ratio, "json_wall_ms": ratio,
                 "tui_wall_ms": ratio, "json_block_steps": 4} for _ in range(n)]
        return {"device": device, "rounds": n, "warmup": 10, "presets": {
            "layernorm": {"preset": "layernorm", "steps": 100, "rounds": rows},
            "fused_layernorm": {"error": "unavailable: needs Apex"}}}

    pooled = mc.pool([run("cuda", 1.0, 3), run("cuda", 1.21, 3)])
    res = pooled["presets"]["layernorm"]
    assert len(res["rounds"]) == 6 and pooled["rounds"] == "3 + 3"
    assert res["summary"]["json_wall"]["geomean"] == pytest.approx(1.1)  # sqrt(1.21)
    assert "error" in pooled["presets"]["fused_layernorm"]
    with pytest.raises(ValueError, match="different devices"):
        mc.pool([run("cuda", 1.0, 2), run("cpu", 1.0, 2)])
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    proc = bench("monitor_cost.py", "--from-json", str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith("monitor_cost: cannot read or pool") and not proc.stdout


# ---- overhead_blocks.py ------------------------------------------------------------------------------
@pytest.mark.slow
def test_overhead_blocks_runs_every_mode_on_cpu(tmp_path):
    """aa, json and tui (a real worker process under the Textual app) with 2 rounds of 3-step blocks."""
    proc = bench("overhead_blocks.py", "--preset", "fp32", "--device", "cpu", "--block", "3", "--rounds", "2",
                 "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "overhead_blocks.json").read_text())
    assert set(results["modes"]) == {"aa", "json", "tui"}
    for mode, res in results["modes"].items():
        rows = res["rounds"]
        assert [r["round"] for r in rows] == [1, 2]
        for r in rows:
            assert r["bare_ms"] > 0 and r["other_ms"] > 0
            assert r["ratio"] == pytest.approx(r["other_ms"] / r["bare_ms"])
            assert r["cpu_ratio"] > 0  # the training thread's CPU a step, monitored / bare
            # the A/A control runs no apextui code; the monitored modes go through the clock every step
            assert (r["hook_us"] == 0) == (mode == "aa")
        assert res["summary"]["rounds"] == 2
    # the JSON printer really printed: per block a setup line, 3 steps and an end line
    assert results["modes"]["json"]["json_lines"] == 2 * (1 + 3 + 1)
    assert 0 <= results["modes"]["tui"]["ui_cpu_frac"] < 2
    md = (tmp_path / "overhead_blocks.md").read_text()
    assert "| aa | 2 |" in md and "| json | 2 |" in md and "| tui | 2 |" in md and "UI process used" in md
    again = bench("overhead_blocks.py", "--from-json", str(tmp_path / "overhead_blocks.json"))
    assert again.returncode == 0 and "| json | 2 |" in again.stdout


@pytest.mark.slow
def test_overhead_blocks_training_cpu_counts_the_steps_not_the_runner_setup(monkeypatch):
    """A monitored block's training-thread CPU a step covers its steps only: 0.6 s of CPU burnt in the
    Runner's setup must not show (on the H200, 2026-11-30, the setup added 4 % to 10-step blocks)."""
    import time

    ob = load("overhead_blocks")
    preset, workload = ob.build("fp32", "cpu", 8)
    setup = ob.SharedWorkloadRunner._build_workload

    def slow_setup(self, size):
        end = time.thread_time() + 0.6
        while time.thread_time() < end:
            pass
        return setup(self, size)

    monkeypatch.setattr(ob.SharedWorkloadRunner, "_build_workload", slow_setup)
    bare = ob.bare_block(workload, 2, "cpu")
    monitored = ob.monitored_block(workload, preset, 2, "cpu", lambda snap: None)
    assert 0 < bare["main_cpu_ms"] and 0 < monitored["main_cpu_ms"]
    assert monitored["main_cpu_ms"] * 2 < 600, (bare, monitored)  # the setup's burn is not in it
    assert monitored["wall_s"] > 0.6  # ... though the block itself did burn it


@pytest.mark.slow
def test_overhead_blocks_refuses_presets_that_compile_and_bad_arguments(tmp_path):
    proc = bench("overhead_blocks.py", "--preset", "torch_compile", "--device", "cpu", "--block", "2",
                 "--rounds", "2", "--modes", "aa", "--out-dir", str(tmp_path))
    assert proc.returncode == 1
    assert "compiles or captures CUDA graphs" in proc.stderr and "fp32, fused_amp, torch_amp" in proc.stderr
    assert "failed" in (tmp_path / "overhead_blocks.md").read_text()
    bad = bench("overhead_blocks.py", "--modes", "aa,nope")
    assert bad.returncode == 2 and "unknown mode(s) nope; allowed: aa, json, tui" in bad.stderr
    assert bench("overhead_blocks.py", "--rounds", "1").returncode == 2
    missing = bench("overhead_blocks.py", "--from-json", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.slow
def test_overhead_blocks_pools_runs_mode_by_mode(tmp_path):
    ob = load("overhead_blocks")

    def run(preset, ratios, ui=None):
        rows = [{"round": i + 1, "ratio": r, "bare_ms": 10.0, "other_ms": 10.0 * r, "hook_us": 100.0,
                 "extra_thread_cpu_frac": 0.0, "cpu_ratio": r} for i, r in enumerate(ratios)]
        modes = {"json": {"rounds": rows}, "aa": {"error": "exit code 1"}}
        if ui is not None:
            modes["tui"] = {"rounds": rows, "ui_cpu_frac": ui}
        return {"preset": preset, "device": "cuda", "block": 10, "rounds": len(ratios), "modes": modes}

    pooled = ob.pool([run("fused_amp", [0.5, 2.0], ui=0.02), run("fused_amp", [1.0, 1.0, 1.0], ui=0.04)])
    assert pooled["rounds"] == "2, 3" and set(pooled["modes"]) == {"json", "tui"}  # the failed mode has no rounds
    assert pooled["modes"]["json"]["summary"]["rounds"] == 5
    assert pooled["modes"]["json"]["summary"]["geomean_ratio"] == pytest.approx(1.0)
    assert pooled["modes"]["tui"]["ui_cpu_frac"] == pytest.approx(0.03)
    assert "| json | 5 |" in ob.table(pooled) and "2, 3 rounds" in ob.table(pooled)
    files = []
    for i, r in enumerate([run("fused_amp", [1.1, 1.2]), run("fp32", [1.0, 1.0])]):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps(r))
    both = bench("overhead_blocks.py", "--from-json", str(files[0]), str(files[0]))
    assert both.returncode == 0 and "| json | 4 |" in both.stdout
    mixed = bench("overhead_blocks.py", "--from-json", *map(str, files))
    assert mixed.returncode == 2 and "runs differ in preset: 'fused_amp' and 'fp32'" in mixed.stderr
    assert "Traceback" not in mixed.stderr


def test_overhead_blocks_summary_arithmetic():
    ob = load("overhead_blocks")
    rows = [{"ratio": 0.5, "bare_ms": 20.0, "other_ms": 10.0, "hook_us": 100.0, "extra_thread_cpu_frac": 0.01},
            {"ratio": 2.0, "bare_ms": 10.0, "other_ms": 20.0, "hook_us": 300.0, "extra_thread_cpu_frac": -0.03}]
    s = ob.summarise(rows)
    assert s["geomean_ratio"] == pytest.approx(1.0)  # the arithmetic mean (1.25) would read a 25 % cost
    assert s["median_ratio"] == pytest.approx(1.25) and s["ci95_low"] <= 1.0 <= s["ci95_high"]
    assert s["hook_us_per_step"] == pytest.approx(200.0)
    assert s["hook_frac"] == pytest.approx((0.1 / 10 + 0.3 / 20) / 2)
    assert s["extra_thread_cpu_frac"] == pytest.approx(-0.01)
    assert s["accounted_bound"] == pytest.approx(1 + s["hook_frac"])  # threads that used less count as 0
    assert math.isnan(s["cpu_geomean_ratio"])  # rows without the training thread's CPU
    timed = ob.summarise([dict(rows[0], cpu_ratio=1.1), dict(rows[1], cpu_ratio=1.1)])
    assert timed["cpu_geomean_ratio"] == pytest.approx(1.1)
    old = ob.summarise([{k: v for k, v in r.items() if k not in ("hook_us", "extra_thread_cpu_frac")} for r in rows])
    assert math.isnan(old["accounted_bound"]) and old["geomean_ratio"] == pytest.approx(1.0)
    same = ob.summarise([dict(rows[0], ratio=1.0), dict(rows[1], ratio=1.0)])
    assert (same["ci95_low"], same["geomean_ratio"], same["ci95_high"]) == pytest.approx((1.0, 1.0, 1.0))


# ---- timing_truth.py ---------------------------------------------------------------------------------
def test_timing_truth_batches_do_bench_calls_to_at_least_10_ms():
    tt = load("timing_truth")
    assert tt.batch_steps(0.24) == 42 and tt.batch_steps(0.24) * 0.24 >= tt.BATCH_MS
    assert tt.batch_steps(10.7) == 1 and tt.batch_steps(33.8) == 1  # a step of 10 ms or more: one a call
    assert tt.batch_steps(0.001) == 200  # bounded


def test_timing_truth_table_shows_both_do_bench_timings_and_errors():
    tt = load("timing_truth")
    rows = [{"preset": "layernorm", "apextui_median_ms": 0.25, "independent_median_ms": 0.25, "ratio_median": 1.0,
             "do_bench_median_ms": 0.2, "ratio_do_bench": 1.25, "do_bench_batch_steps": 40,
             "do_bench_batch_ms": 0.245, "ratio_do_bench_batch": 0.25 / 0.245},
            {"preset": "fp32", "apextui_median_ms": 33.8, "independent_median_ms": 33.7, "ratio_median": 33.8 / 33.7},
            {"preset": "fused_adam", "error": "ImportError: no apex"}]
    lines = tt.render(rows).splitlines()
    assert "k steps a call" in lines[0] and len(lines) == 5
    assert lines[2] == "| layernorm | 0.2500 | 0.2500 | 1.0000 | 0.2000 | 1.250 | 0.2450 (40) | 1.020 |"
    assert lines[3].startswith("| fp32 | 33.8000 | 33.7000 | 1.0030 | — | — | — | — |")
    assert "error: ImportError: no apex" in lines[4]


@pytest.mark.slow
def test_timing_truth_needs_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script runs instead of refusing")
    proc = bench("timing_truth.py", "--presets", "layernorm")
    assert proc.returncode == 3 and "needs a CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr


# ---- kernel_breakdown.py -----------------------------------------------------------------------------
def test_kernel_breakdown_sorts_kernels_by_kind():
    kb = load("kernel_breakdown")
    assert kb.kind("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT") == "gemm"
    assert kb.kind("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16") == "attention"
    assert kb.kind("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>") == "attention"
    assert kb.kind("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>") == "optimizer"
    assert kb.kind("triton_tem_fused__to_copy_addmm_gelu_t_view_14") == "gemm"  # inductor's GEMM templates
    assert kb.kind("triton_poi_fused_gelu_gelu_backward_view_8") == "triton"
    assert kb.kind("Memcpy DtoD (Device -> Device)") == "other"


@pytest.mark.slow
def test_kernel_breakdown_needs_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script runs instead of refusing")
    proc = bench("kernel_breakdown.py", "fp32")
    assert proc.returncode == 3 and "needs a CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr


# ---- bench.py ------------------------------------------------------------------------------------
def _bench_run(median: float, low: float, high: float, measured: int = 80) -> dict:
    summary = {"median_ms": median, "median_low_ms": low, "median_high_ms": high, "p10_ms": median * 0.9,
               "p90_ms": median * 1.1, "opt_median_ms": None, "final_loss": None, "loss_floor": None, "check": None,
               "measured_steps": measured, "timed_intervals": measured}
    return {"events": [{"event": "setup", "params": 1000}, {"event": "end", "status": "ok", "summary": summary}],
            "stderr_tail": ""}


def test_bench_speedups_carry_their_interval_and_the_one_noise_rule():
    """bench.py's speed-up table: the hull of the repeats' intervals, compare()'s verdict, ≈ within noise."""
    from apextui.core.presets import load_builtin

    b = load("bench")
    presets = {p.name: p for p in load_builtin()}
    rows = b.add_speedups([
        b.summarise("adamw", [_bench_run(3.0, 2.9, 3.1), _bench_run(3.2, 3.1, 3.3)], presets["adamw"]),
        b.summarise("adamw_fused", [_bench_run(1.3, 1.28, 1.32), _bench_run(1.32, 1.3, 1.34)], presets["adamw_fused"]),
        b.summarise("fused_adam", [_bench_run(2.0, 0.9, 9.0), _bench_run(2.1, 1.0, 8.0)], presets["fused_adam"]),
        b.summarise("layernorm", [_bench_run(1.0, 0.99, 1.01, measured=8)], presets["layernorm"]),
        b.summarise("fused_layernorm", [_bench_run(0.5, 0.49, 0.51)], presets["fused_layernorm"]),
        b.summarise("rmsnorm", [_bench_run(0.5, 0.49, 0.51)], presets["rmsnorm"]),
        b.summarise("fused_rmsnorm", [_bench_run(0.25, 0.24, 0.26)], presets["fused_rmsnorm"]),
    ])
    by = {r["preset"]: r for r in rows}
    assert (by["adamw"]["median_low_ms"], by["adamw"]["median_high_ms"]) == (2.9, 3.3)
    fused = by["adamw_fused"]
    assert fused["speedup_verdict"] == "faster" and fused["speedup"] == round(3.1 / 1.31, 4)
    assert fused["speedup_low"] == round(2.9 / 1.34, 4) and fused["speedup_high"] == round(3.3 / 1.28, 4)
    assert by["fused_adam"]["speedup_verdict"] == "within_noise"  # 1.5× on the medians, but 0.32–3.67
    assert by["fused_layernorm"]["speedup"] is None  # the baseline's 8 measured steps are too few to be one
    assert by["fused_rmsnorm"]["speedup"] == 2.0  # against rmsnorm, its own norm's baseline, never layernorm
    assert "only 8 measured steps" in by["layernorm"]["baseline_problem"]
    md = b.markdown({"rows": rows})
    assert "| 2.37× (2.16–2.58) |" in md and "vs baseline (95 %)" in md
    assert "| unmeasurable (spread >10×) |" in md  # 0.32–3.67: no figures


def test_handwritten_writes_the_advices_answer_the_hand_written_way_and_refuses_what_it_cannot(tmp_path):
    """`benchmarks/handwritten.py --advice`: the answer's axis values as the loop's parts, so that the verdict runs
    beside the hand-written combinations in one process; a value with no hand-written form is one clear line."""
    hw = load("handwritten")

    def advice(config: dict) -> str:
        path = tmp_path / "advice.json"
        path.write_text(json.dumps({"answer": {"config": config}}))
        return str(path)

    point = {"precision": "bf16", "optimizer": "fused", "norms": "apex", "compile": "default"}
    assert hw.advice_config(advice(point)) == "bf16+fused+apexnorm+compile"
    assert hw.advice_config(advice({**point, "optimizer": "apex", "norms": "torch",
                                    "compile": "max-autotune-no-cudagraphs"})) == "bf16+apexadam+autotune"
    assert hw.advice_config(advice({"precision": "fp32", "optimizer": "adamw", "norms": "torch",
                                    "compile": "none"})) == "fp32"
    every_default = Config(precision="bf16").as_dict()  # as an answer names it: every axis apextui has
    assert hw.advice_config(advice(every_default)) == "bf16"
    assert hw.advice_config(advice({**every_default, "norms": "liger", "loss": "liger_flce", "attention": "cudnn",
                                    "memory_format": "channels_last", "compile": "coordinate-descent"})) == \
        "bf16+ligernorm+cd+channelslast+cudnn+ligerflce"
    # torch AdamW is foreach by default on CUDA only: on CPU (the answer on HF GPT-2 here) it must be asked for
    assert hw.advice_config(advice({**point, "precision": "fp32", "optimizer": "foreach", "norms": "torch"})) == \
        "fp32+foreach+compile"
    with pytest.raises(SystemExit, match="precision 'fp8' has no hand-written form"):
        hw.advice_config(advice({**point, "precision": "fp8"}))
    with pytest.raises(SystemExit, match="not an advice document"):
        hw.advice_config(str(tmp_path / "missing.json"))


def test_handwritten_gives_dynamo_room_for_every_configurations_graphs():
    """The loop's configurations live in one process and compile the same code objects: with dynamo's default limit
    (8 graphs a code object) HF GPT-2's third compiled configuration sent the first back to eager on an H100."""
    import torch

    hw = load("handwritten")
    config = torch._dynamo.config
    names = [n for n in ("recompile_limit", "cache_size_limit") if hasattr(config, n)]
    before = {n: getattr(config, n) for n in names}
    try:
        hw.raise_recompile_limit(3)
        assert names and all(getattr(config, n) >= 24 for n in names)
        hw.raise_recompile_limit(1)  # never lowered
        assert all(getattr(config, n) >= 24 for n in names)
    finally:
        for n, v in before.items():
            setattr(config, n, v)
