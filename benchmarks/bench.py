"""The article's experiments on this machine, through apextui's headless mode.

    python benchmarks/bench.py [--presets a,b] [--repeats 2] [--steps N] [--device cuda] [--out-dir DIR]

For every preset, `apextui --preset P --json` runs in a fresh process, `--repeats` times, the presets
interleaved round-robin so that drift (clocks, temperature) cannot decide a comparison; the spread over
repeats is reported, and each preset's median carries the hull of its repeats' 95 % median intervals, so
its speed-up over the baseline carries an interval and the verdict of `apextui.core.measure.compare` (the one noise
rule apextui uses everywhere: `≈` marks a speed-up within noise). In the same invocation it measures the ceilings
(a large device-to-device copy and large bf16/fp16/fp32 matmuls; `apextui.core.analysis`, which also caches them
for apextui's runs; `--cached-ceilings` reuses the cached ones), what fraction of each step the GPU was busy
(kernel time from torch.profiler over wall time per step), achieved bandwidth (optimizer, norms) or model TFLOP/s
(transformer) against the ceiling of the run's precision, and the bottleneck label (`roofline.classify`).
Writes DIR/bench.json and DIR/bench.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from apextui.core import analysis as roofline
from apextui.core.measure.compare import (
    baseline_problem, compare, fields, format_speedup, from_fields, timing_from_runs)
from apextui.core.measure.summary import Summary
from apextui.core.presets import Preset, load_builtin
from apextui.core.workloads import spec as registry
from benchlib.fresh_process import run_one

ROOT = Path(__file__).resolve().parents[1]

# The figures of the article "Come accelerare l'addestramento Transformer con NVIDIA Apex (FusedAdam,
# FusedLayerNorm) e torch.amp", ms/step, for the table only.
ARTICLE = {
    "adamw": 12.3, "fused_adam": 6.8, "layernorm": 1.25, "fused_layernorm": 0.72,
}
ARTICLE_NOTE = "article: fused kernels + torch.amp 2.4x faster than fp32 vanilla on a small Transformer"


def ceilings(remeasure: bool = True) -> dict[str, Any]:
    """Device-to-device copy bandwidth (bytes read + written) and matmul rates per precision
    (apextui.core.analysis: measured now, or the cached ones with remeasure=False)."""
    c = roofline.get_ceilings("cuda", remeasure=remeasure)
    return {"copy_gb_s": c.copy_gb_s, "bf16_tflops": c.matmul_tflops.get("bf16"),
            "fp16_tflops": c.matmul_tflops.get("fp16"), "fp32_tflops": c.matmul_tflops.get("fp32"),
            "key": c.key, "cached": c.cached, "details": dict(c.details)}


def work_per_step(preset: Preset, size: dict[str, int], params: int | None) -> roofline.Work:
    """The fewest bytes and the FLOPs of one step (the registry's work_per_step; `primary` is the headline)."""
    return registry.work_per_step(preset.workload, preset.config, size, params)


def gpu_busy_ms(preset: Preset, size: dict[str, int], steps: int = 20, warmup: int = 5) -> float:
    """Kernel time per step (torch.profiler, CUPTI), with the workload built exactly as apextui does
    (compiled / captured points warmed up as the runner does)."""
    import torch

    from apextui.core.workloads import builders
    from apextui.core.measure.marker import NoMark

    w = builders.build(preset, "cuda", size, warmup + steps)
    w.warm_up()
    skip = roofline.profile_skip_reason(w, "cuda", steps)
    if skip:
        raise RuntimeError(skip)
    kernel_ms = roofline.profile_kernel_ms(functools.partial(w.step, NoMark()), steps=steps, warmup=warmup)
    del w
    torch.cuda.empty_cache()
    return kernel_ms


def summarise(name: str, runs: list[dict], preset: Preset) -> dict[str, Any]:
    ends = [next((e for e in r["events"] if e["event"] == "end"), None) for r in runs]
    ok = [e["summary"] for e in ends if e and e["status"] == "ok" and e["summary"]["median_ms"]]
    row: dict[str, Any] = {"preset": name, "workload": preset.workload, "label": preset.label,
                           "is_baseline": preset.is_baseline,
                           "baseline": preset.baseline, "runs": len(runs), "ok_runs": len(ok)}
    if not ok:
        unavailable = next((e for r in runs for e in r["events"] if e["event"] == "unavailable"), None)
        failure = (ends[0] or {}).get("error") or runs[0]["stderr_tail"][-300:]
        row["error"] = unavailable["reason"] if unavailable else failure
        return row
    medians = [s["median_ms"] for s in ok]
    timing = timing_from_runs(t for s in ok if (t := Summary.from_dict(s).timing) is not None)
    row.update({
        "median_ms": statistics.median(medians),
        "median_low_ms": timing.low_ms if timing else None,
        "median_high_ms": timing.high_ms if timing else None,
        # e.g. too few steps
        "baseline_problem": next((p for s in ok if (p := baseline_problem("ok", Summary.from_dict(s)))), None),
        "median_ms_per_run": medians,
        "spread_pct": 100 * (max(medians) - min(medians)) / statistics.median(medians),
        "p10_ms": statistics.median(s["p10_ms"] for s in ok),
        "p90_ms": statistics.median(s["p90_ms"] for s in ok),
        "opt_median_ms": statistics.median(s["opt_median_ms"] for s in ok) if ok[0]["opt_median_ms"] else None,
        "final_loss": ok[-1]["final_loss"], "loss_floor": ok[-1]["loss_floor"],
        "max_abs_err": (ok[-1]["check"] or {}).get("max_abs_err"),
        "article_ms": ARTICLE.get(name),
    })
    setup = next((e for e in runs[0]["events"] if e["event"] == "setup"), {})
    row["params"] = setup.get("params")
    return row


def add_speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each measured row's speed-up over its workload's baseline row (`compare.fields`: speedup, its interval
    and verdict; null when the baseline was not measured or its runs were too short to be one)."""
    bases = {r["workload"]: r for r in rows if "median_ms" in r and r["is_baseline"]}  # its baseline point's run
    for row in rows:
        if "median_ms" not in row:
            continue
        base = bases.get(row["workload"])
        base = None if base is None or base["baseline_problem"] else base
        mine, theirs = Summary.from_dict(row).timing, Summary.from_dict(base).timing if base else None
        row.update(fields(compare(mine, theirs) if mine and theirs else None))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", help="comma-separated (default: all shipped presets)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, help="override each preset's steps")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--no-profile", action="store_true", help="skip the GPU-busy pass")
    parser.add_argument("--cached-ceilings", action="store_true",
                        help="reuse the ceilings apextui cached for this GPU instead of measuring them again")
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    args = parser.parse_args()
    presets = {p.name: p for p in load_builtin()}
    names = args.presets.split(",") if args.presets else list(presets)
    cuda = args.device == "cuda"
    result: dict[str, Any] = {"device": args.device, "repeats": args.repeats, "started": time.time()}
    if cuda:
        import torch

        result["env"] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                         "cuda": torch.version.cuda}
        result["ceilings"] = ceilings(remeasure=not args.cached_ceilings)
        print(f"ceilings: {result['ceilings']}", file=sys.stderr, flush=True)
    raw: dict[str, list[dict]] = {n: [] for n in names}
    for rep in range(args.repeats):  # interleaved: every preset once per round
        for name in names:
            r = run_one(name, args.device, args.steps)
            raw[name].append(r)
            print(f"round {rep + 1}: {name} rc={r['rc']} {r['wall_s']} s", file=sys.stderr, flush=True)
    rows = add_speedups([summarise(n, raw[n], presets[n]) for n in names])
    for row in rows:
        if "median_ms" not in row:
            continue
        if cuda:
            preset = presets[row["preset"]]
            size = dict(preset.size)
            work = work_per_step(preset, size, row.get("params"))
            c = result["ceilings"]
            ceil = roofline.Ceilings(key=c["key"], device="cuda", name=result["env"]["gpu"], copy_gb_s=c["copy_gb_s"],
                                     matmul_tflops={p: c[f"{p}_tflops"] for p in roofline.PRECISIONS
                                                    if c.get(f"{p}_tflops")})
            t = row["opt_median_ms"] if work.scope == "opt_step" else row["median_ms"]
            got = roofline.achieved(work, t, ceil)
            if work.primary == "bytes":
                row["bandwidth_gb_s"] = got.gb_s
                row["bandwidth_pct"] = 100 * got.bandwidth_fraction
            else:
                row["tflops"] = got.tflops
                row["tflops_pct"] = 100 * got.compute_fraction
                row["tflops_ceiling"] = got.precision
            busy = None
            if not args.no_profile:
                try:
                    row["gpu_busy_ms"] = gpu_busy_ms(preset, size)
                    row["gpu_busy_pct"] = 100 * row["gpu_busy_ms"] / row["median_ms"]
                    busy = min(1.0, row["gpu_busy_ms"] / row["median_ms"])
                except Exception as exc:  # noqa: BLE001
                    row["gpu_busy_error"] = f"{type(exc).__name__}: {exc}"
            row["bottleneck"] = roofline.classify(busy, got, ceil).to_dict()
    result["rows"] = rows
    result["raw"] = {n: [{k: v for k, v in r.items() if k != "events"}
                         | {"end": r["events"][-1] if r["events"] else None}
                         for r in raw[n]] for n in names}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "bench.json").write_text(json.dumps(result, indent=1))
    table = markdown(result)
    (args.out_dir / "bench.md").write_text(table + "\n")
    print(table)
    return 0


def f(v: Any, spec: str = ".3f") -> str:
    return "—" if v is None else format(v, spec)


def markdown(result: dict[str, Any]) -> str:
    lines = []
    if "ceilings" in result:
        c = result["ceilings"]
        when = "cached by apextui" if c.get("cached") else "measured in this run"
        n = (c.get("details") or {}).get("matmul_n", 8192)
        lines.append(f"Ceilings {when}: device-to-device copy {c['copy_gb_s']:,.0f} GB/s "
                     f"(read + write), matmul {n}³ bf16 {f(c.get('bf16_tflops'), ',.0f')}, "
                     f"fp16 {f(c.get('fp16_tflops'), ',.0f')}, fp32 {f(c.get('fp32_tflops'), ',.0f')} TFLOP/s.\n")
    lines += ["| preset | median ms | p10–p90 ms | runs (spread) | vs baseline (95 %) | article ms | achieved | "
              "GPU busy | bottleneck | final loss (floor) | max err |", "|" + "---|" * 11]
    for r in result["rows"]:
        if "median_ms" not in r:
            lines.append(f"| {r['preset']} | unavailable: {r.get('error', '')} |" + " |" * 9)
            continue
        if "bandwidth_gb_s" in r:
            achieved = f"{r['bandwidth_gb_s']:,.0f} GB/s ({r['bandwidth_pct']:.0f} %)"
            if r["workload"] == "optimizer":
                achieved = f"opt step {r['opt_median_ms']:.3f} ms: " + achieved
        elif "tflops" in r:
            achieved = f"{r['tflops']:.1f} TFLOP/s ({r['tflops_pct']:.1f} % of {r.get('tflops_ceiling') or 'bf16'})"
        else:
            achieved = "—"
        busy = f"{r['gpu_busy_pct']:.0f} %" if "gpu_busy_pct" in r else "—"
        bottleneck = (r.get("bottleneck") or {}).get("label", "—")
        loss = "—" if r["final_loss"] is None else f"{r['final_loss']:.3f} ({f(r['loss_floor'])})"
        lines.append(
            f"| {r['preset']} | {r['median_ms']:.3f} | {r['p10_ms']:.3f}–{r['p90_ms']:.3f} | "
            f"{r['ok_runs']} ({r['spread_pct']:.1f} %) | {format_speedup(from_fields(r))} | "
            f"{f(r['article_ms'], '.2f')} | "
            f"{achieved} | {busy} | {bottleneck} | {loss} | {f(r['max_abs_err'], '.1e')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
