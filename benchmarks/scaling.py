"""Scaling efficiency of data-parallel presets, measured side by side in one invocation.

    python benchmarks/scaling.py [--presets ddp_adamw_fused,fp32,...] [--nproc 2] [--steps N] [--repeats R]
                                 [--out DIR]

For each repeat and preset, in turn: the preset alone on one GPU (`apextui --preset P --json`), then on --nproc GPUs
(`apextui --nproc N --preset P --json --baseline-json` that run), so the two are measured minutes apart on the same
machine. Every run's raw JSON lines go to --out (one file a run); the table gives each pair's scaling efficiency
(throughput on N GPUs / (N x one GPU) = one GPU's median ms / the merged median ms, per-GPU batch fixed) with its
95 % interval and verdict against perfect scaling (`apextui.core.measure.compare`'s one noise rule), the slowest rank's
share and the ranks' spread. Needs N GPUs (CUDA); on CPU it runs with gloo ranks, for a dry run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchlib.fresh_process import run_one

DEFAULT_PRESETS = "fp32,torch_amp,ddp_adamw_fused,ddp_fused_adam,distributed_fused_adam,fsdp2_adamw_fused"


def end_of(run: dict) -> dict | None:
    return next((e for e in run["events"] if e.get("event") == "end"), None)


def why_not(run: dict) -> str:
    unavailable = next((e for e in run["events"] if e.get("event") == "unavailable"), None)
    if unavailable:
        return f"unavailable: {unavailable['reason']}"
    end = end_of(run)
    return f"{end['status']}: {end.get('error')}" if end else f"rc {run['rc']}: {run['stderr_tail'][-300:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=DEFAULT_PRESETS)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="scaling-runs")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {}
    for repeat in range(1, args.repeats + 1):
        for preset in args.presets.split(","):
            single = run_one(preset, args.device, args.steps)
            one = out / f"{preset}-r{repeat}-1gpu.jsonl"
            one.write_text("".join(json.dumps(e) + "\n" for e in single["events"]))
            end1 = end_of(single)
            if single["rc"] != 0 or end1 is None or end1["status"] != "ok":
                rows.setdefault(preset, []).append({"error": "one GPU: " + why_not(single)})
                continue
            multi = run_one(preset, args.device, args.steps,
                            extra=("--nproc", str(args.nproc), "--baseline-json", str(one)))
            (out / f"{preset}-r{repeat}-{args.nproc}gpu.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in multi["events"]))
            endn = end_of(multi)
            if multi["rc"] != 0 or endn is None or endn["status"] != "ok":
                rows.setdefault(preset, []).append({"error": f"{args.nproc} GPUs: " + why_not(multi)})
                continue
            d = endn["summary"]["distributed"]
            rows.setdefault(preset, []).append({
                "one_ms": end1["summary"]["median_ms"], "n_ms": endn["summary"]["median_ms"],
                "eff": d["scaling_efficiency"], "low": d["scaling_efficiency_low"],
                "high": d["scaling_efficiency_high"], "verdict": d["scaling_efficiency_verdict"],
                "spread": d["spread_median_ms"], "slowest": d["slowest_rank_share"],
            })
            print(f"[{repeat}/{args.repeats}] {preset}: efficiency {d['scaling_efficiency']}", flush=True)
    print(f"\n| preset | 1 GPU median ms | {args.nproc} GPUs median ms (slowest rank) | scaling efficiency (95 % "
          "interval, verdict vs perfect) | ranks' spread ms | slowest rank's share |")
    print("|---|---|---|---|---|---|")
    for preset, runs in rows.items():
        for r in runs:
            if "error" in r:
                print(f"| {preset} | — | — | {r['error'][:160]} | — | — |")
                continue
            eff = f"{r['eff']:.3f} ({r['low']:.3f}–{r['high']:.3f}, {r['verdict']})" if r["low"] else f"{r['eff']}"
            print(f"| {preset} | {r['one_ms']} | {r['n_ms']} | {eff} | {r['spread']} | {r['slowest']} |")
        effs = [r["eff"] for r in runs if "eff" in r]
        if len(effs) > 1:
            print(f"| {preset} (median of {len(effs)}) | | | {statistics.median(effs):.3f} | | |")
    print(f"\nraw JSON lines: {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
