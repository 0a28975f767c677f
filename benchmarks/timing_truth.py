"""Does apextui's ms/step tell the truth? Compare it with independent timings of the same steps.

    python benchmarks/timing_truth.py [--presets adamw,fused_adam,layernorm,fused_layernorm,fp32,fused_amp]

For each preset, in one process, apextui's Runner trains while a wrapper around the workload records
its OWN CUDA events (one before each step, one after the last) — a second, independent clock on the
very same steps. Reported: apextui's median, the independent median of back-to-back step intervals, and
their ratio. For the kernel presets (optimizer and norms) `triton.testing.do_bench` times the same step
function separately (its own warm-up, a 256 MB L2 flush before each call, median): once a step a call
(its usual use: each step alone, after a flush) and once with k back-to-back steps a call (at least
10 ms of them, time / k: the flush and the call's events spread over k steps, as a training loop runs).
Writes DIR/timing_truth.json and DIR/timing_truth.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any



BATCH_MS = 10.0  # do_bench's batched calls hold at least this many ms of steps


def batch_steps(step_ms: float) -> int:
    """Steps a batched do_bench call holds: enough for BATCH_MS, at least 1, at most 200."""
    return max(1, min(200, math.ceil(BATCH_MS / step_ms)))


def check(name: str, steps: int | None) -> dict[str, Any]:
    import torch

    from apextui.core.workloads import builders
    from apextui.core.workloads.spec import WORKLOADS
    from benchlib import bare as bare_loop
    from apextui.core.measure.marker import NoMark
    from apextui.core.presets import resolve
    from apextui.core.run.request import RunRequest
    from apextui.core.run.runner import Runner

    preset = resolve(name)
    events: list[Any] = []
    built: list[Any] = []
    original_build = builders.build

    def build_wrapped(p, device, size, n):
        w = original_build(p, device, size, n)
        inner = w.step

        def step(clock):
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            events.append(ev)
            return inner(clock)

        w.step = step
        warm_up = w.warm_up

        def warm_up_unrecorded():  # compile / capture steps (compile presets) are not the run's steps
            seconds = warm_up()
            events.clear()
            return seconds

        w.warm_up = warm_up_unrecorded
        built.append(inner)  # the unwrapped step, for do_bench
        return w

    builders.build = build_wrapped
    try:
        # analyse=False: no profiled steps after the run (they would add events)
        runner = Runner(RunRequest(preset, "cuda", steps), lambda s: None, analyse=False).start()
        runner.join()
    finally:
        builders.build = original_build
    result = runner.result
    torch.cuda.synchronize()
    tail = torch.cuda.Event(enable_timing=True)
    tail.record()
    tail.synchronize()
    events.append(tail)
    intervals = [events[i].elapsed_time(events[i + 1]) for i in range(len(events) - 1)]
    measured = intervals[runner.warmup:]
    out: dict[str, Any] = {
        "preset": name, "steps": result.steps_done, "warmup": runner.warmup,
        "apextui_median_ms": result.stats.median_ms,
        "independent_median_ms": statistics.median(measured),
        "apextui_mean_ms": result.stats.mean_ms,
        "independent_mean_ms": statistics.mean(measured),
    }
    out["ratio_median"] = out["apextui_median_ms"] / out["independent_median_ms"]
    if preset.workload == "optimizer" or WORKLOADS[preset.workload].kernel_only:
        from triton.testing import do_bench

        inner_step, mark = built[0], NoMark()
        out["do_bench_median_ms"] = do_bench(lambda: inner_step(mark), warmup=100, rep=500, return_mode="median")
        out["ratio_do_bench"] = out["apextui_median_ms"] / out["do_bench_median_ms"]
        # do_bench times each call alone, after a 256 MB L2 flush; a call of k back-to-back steps (at least
        # BATCH_MS of them) puts that flush and its events on k steps: the rate a training loop runs at
        k = batch_steps(out["apextui_median_ms"])

        out["do_bench_batch_steps"] = k
        out["do_bench_batch_ms"] = do_bench(lambda: bare_loop.plain_steps(inner_step, k, mark), warmup=200, rep=2000,
                                            return_mode="median") / k
        out["ratio_do_bench_batch"] = out["apextui_median_ms"] / out["do_bench_batch_ms"]
    built.clear()  # the workload's step and what it holds, before empty_cache
    torch.cuda.empty_cache()
    return out


def render(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of `rows` (a preset's error in its row)."""
    lines = ["| preset | apextui median ms | independent events median ms | ratio | do_bench, 1 step a call | ratio "
             "| do_bench, k steps a call (k) | ratio |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['preset']} | error: {r['error']} | | | | | | |")
            continue
        db, dbk = r.get("do_bench_median_ms"), r.get("do_bench_batch_ms")
        batched = "—" if dbk is None else f"{dbk:.4f} ({r['do_bench_batch_steps']})"
        lines.append(f"| {r['preset']} | {r['apextui_median_ms']:.4f} | {r['independent_median_ms']:.4f} | "
                     f"{r['ratio_median']:.4f} | {'—' if db is None else f'{db:.4f}'} | "
                     f"{'—' if db is None else format(r['ratio_do_bench'], '.3f')} | "
                     f"{batched} | "
                     f"{'—' if dbk is None else format(r['ratio_do_bench_batch'], '.3f')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="adamw,fused_adam,layernorm,fused_layernorm,fp32,fused_amp")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("timing_truth: needs a CUDA GPU (it compares CUDA-event timings)", file=sys.stderr)
        return 3
    rows = []
    for name in args.presets.split(","):
        try:
            rows.append(check(name, args.steps))
        except Exception as exc:  # noqa: BLE001 - one preset's failure must not lose the others
            rows.append({"preset": name, "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "timing_truth.json").write_text(json.dumps(rows, indent=1))
    table = render(rows)
    (args.out_dir / "timing_truth.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
