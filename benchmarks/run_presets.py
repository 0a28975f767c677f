"""Run presets through apextui's headless mode, one process each, and tabulate the results.

    python benchmarks/run_presets.py [--presets a,b,...] [--device auto|cpu|cuda] [--steps N] [--out runs.jsonl]

Writes one JSON object per preset to --out ({"preset", "rc", "events": [...]}) and prints a
Markdown table with speed-ups against each workload's baseline measured in the same invocation, with
their 95 % interval and `≈` within noise (`apextui.core.measure.compare`, the rule apextui uses everywhere).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


from apextui.core.measure.compare import baseline_problem, compare, format_speedup
from apextui.core.measure.summary import Summary
from apextui.core.presets import load_builtin, recorded
from apextui.core.workloads.spec import WORKLOADS
from benchlib.fresh_process import run_one


def fmt(value, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def table(results: list[dict]) -> str:
    baselines: dict[str, dict] = {}  # workload -> its baseline point's summary
    rows = []
    for r in results:
        start = next((e for e in r["events"] if e["event"] == "start"), {})
        end = next((e for e in r["events"] if e["event"] == "end"), None)
        if end and end["summary"] and baseline_problem(end["status"], Summary.from_dict(end["summary"])) is None:
            workload, point = recorded(start)
            if workload in WORKLOADS and point == WORKLOADS[workload].baseline_point:
                baselines[workload] = end["summary"]
        rows.append((r, start, end))
    lines = ["| preset | rc | status | steps | median ms | p10 ms | p90 ms | throughput | vs baseline "
             "| final loss | loss floor | max err |", "|" + "---|" * 12]
    for r, start, end in rows:
        if end is None:
            why = next((e.get("reason") for e in r["events"] if e["event"] == "unavailable"), r["stderr_tail"][-200:])
            lines.append(f"| {r['preset']} | {r['rc']} | unavailable: {why} |" + " |" * 9)
            continue
        s = end["summary"]
        base = baselines.get(recorded(start)[0])
        mine, theirs = Summary.from_dict(s).timing, Summary.from_dict(base).timing if base else None
        speedup = format_speedup(compare(mine, theirs) if mine and theirs else None)
        err = (s["check"] or {}).get("max_abs_err")
        lines.append(
            f"| {r['preset']} | {r['rc']} | {end['status']} | {s['steps']} | {fmt(s['median_ms'])} | "
            f"{fmt(s['p10_ms'])} | {fmt(s['p90_ms'])} | {fmt(s['throughput'], ',.0f')} {s['throughput_unit']} | "
            f"{speedup} | {fmt(s['final_loss'], '.4f')} | {fmt(s['loss_floor'], '.4f')} | "
            f"{fmt(err, '.2e')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", help="comma-separated names (default: all shipped presets)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--steps", type=int)
    parser.add_argument("--out", type=Path, default=Path("runs.jsonl"))
    args = parser.parse_args()
    names = args.presets.split(",") if args.presets else [p.name for p in load_builtin()]
    results = []
    with args.out.open("w") as fh:
        for name in names:
            r = run_one(name, args.device, args.steps)
            results.append(r)
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            print(f"{name}: rc={r['rc']} in {r['wall_s']} s", file=sys.stderr, flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
