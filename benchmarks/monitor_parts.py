"""Which part of the monitor costs a host-bound step its time? The runner taken apart, part by part, in one process.

    python benchmarks/monitor_parts.py --presets adamw,fused_layernorm [--rounds 14] [--block-ms 400]
                                       [--variants again,loop,quiet,sampler,json,json_si,inline] [--device cuda]
                                       [--out-dir DIR]

Per preset the workload is built once; then, round after round, one block of each variant runs on it in rotating
order (the same warm-up and measured steps each), and each variant's ms/step is divided by the round's bare block:

  bare     `benchlib.bare.bare_block`: the user's loop, nothing of apextui in it.
  again    a second bare block (an A/A control): what the design alone shows where nothing differs, e.g. an
           effect of a block's place in the round (the order rotates, so each variant follows the same one
           in most rounds).
  loop     the runner's training loop body (stop flag, clock, hand-over every HARVEST_INTERVAL_S) in this thread,
           with no other thread: what the clock alone costs.
  quiet    a real `Runner.run()` (delivery thread) with no sampler and a consumer that does nothing.
  sampler  the same with a real NVML/psutil sampler.
  json     a real run as `apextui --json` makes it: sampler and the JSON-lines printer (to a file).
  json_si  `json` under `sys.setswitchinterval(0.0002)` (default 0.005): how much of the cost is other threads
           waiting for the GIL.
  inline   the loop with everything in the training thread: the JSON lines and the sampler's reading written at
           hand-over time, no other thread at all.
  burn     `json` plus a thread that holds the GIL for `--burn` of every 10 ms (pure Python): a known cost, the
           check of the monitor budget below (its budget must rise by about `--burn`, and its time with it).

Also per block: the training thread's voluntary context switches (each a wait: for the GPU, or for the GIL held
by another thread), its CPU time, and the monitor budget (`benchlib.measure.monitor_budget`: the clock's
calls, the other threads' CPU time and the extra waits, a share of the block, against the round's bare block).
Summaries: geometric mean over rounds of variant / bare, with 95 % bootstrap intervals, beside the mean budget.
Writes DIR/monitor_parts.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchlib import bare as bare_loop
from benchlib.measure import HostUse, TimedClock, geomean_ci, gil_handoff_s, monitor_budget

HERE = Path(__file__).resolve().parent

VARIANTS = ("again", "loop", "quiet", "sampler", "json", "json_si", "inline", "burn")


class NoSampler:
    """A sampler that reads nothing (the `quiet` variant)."""

    latest = None

    def start(self) -> "NoSampler":
        return self

    def stop(self) -> None:
        pass


class GilBurner:
    """A thread that runs pure Python (holding the GIL) for `share` of every `period` seconds while entered."""

    def __init__(self, share: float, period: float = 0.01) -> None:
        import threading

        self.share, self.period = share, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gil-burner")

    def _run(self) -> None:
        busy = self.share * self.period
        while not self._stop.is_set():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < busy:
                pass
            self._stop.wait(self.period - busy)

    def __enter__(self) -> "GilBurner":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def new_clock(device: str, warmup: int, steps: int) -> Any:
    from apextui.core.run.timing import CpuClock, CudaClock

    if device == "cuda":
        import torch

        return CudaClock(torch, warmup=warmup, steps=warmup + steps)
    return CpuClock(warmup=warmup, steps=warmup + steps)


def new_sampler(device: str) -> Any:
    from apextui.core.env import pci_bus_id
    from apextui.core.monitor.sampler import Sampler

    gpu = device == "cuda"
    return Sampler(1.0, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None)


def mean_ms(records: list[Any], warmup: int) -> float:
    ms = [r.ms for r in records if r.step > warmup for _ in range(r.steps)]
    return statistics.fmean(ms)


def loop_block(workload: Any, warmup: int, steps: int, device: str, sink: Any = None) -> tuple[float, float]:
    """The runner's loop body in this thread alone; with `sink` (a file), the `inline` variant."""
    import threading

    from apextui.core.run import events
    from apextui.core.run.runner import HARVEST_INTERVAL_S

    stop = threading.Event()
    clock = TimedClock(new_clock(device, warmup, steps))
    sampler = new_sampler(device) if sink is not None else None
    reading = sampler.sample() if sampler is not None else None
    bare_loop.synchronize(device)
    clock.start()
    next_harvest = time.perf_counter() + HARVEST_INTERVAL_S
    next_reading = time.perf_counter() + 1.0
    records: list[Any] = []
    for step in range(1, warmup + steps + 1):
        if stop.is_set():
            break
        loss, scale = workload.step(clock)
        clock.end_step(step, loss, scale)
        now = time.perf_counter()
        if now >= next_harvest:
            next_harvest = now + HARVEST_INTERVAL_S
            new = clock.harvest()
            records += new
            if sink is not None:
                if sampler is not None and now >= next_reading:
                    next_reading, reading = now + 1.0, sampler.sample()
                monitor = events.monitor_fields(reading)
                sink.write("".join(json.dumps(events.step_event(r, monitor)) + "\n" for r in new))
                sink.flush()
    records += clock.harvest(wait=True)
    return mean_ms(records, warmup), clock.seconds


def runner_block(workload: Any, preset: Any, warmup: int, steps: int, device: str,
                 callback: Callable[[Any], None], sampler: Any) -> tuple[float, float, HostUse]:
    """A real Runner run of warmup + steps on the already built workload: its measured steps' mean ms, the
    time its clock's calls took, and the host use from the clock's start to the final harvest."""
    from apextui.core.run.request import RunRequest
    from apextui.core.run.runner import Runner

    class OnBuilt(Runner):
        timed: TimedClock

        def _build_workload(self, size: Any) -> Any:
            return workload

        def _setup(self) -> Any:
            info, work, clock = super()._setup()
            self.timed = TimedClock(clock)
            return info, work, self.timed

    request = RunRequest(dataclasses.replace(preset, warmup=warmup), device, steps=warmup + steps)
    run = OnBuilt(request, callback, analyse=False, sampler=sampler)
    snap = run.run()
    if snap is None or snap.status != "ok" or snap.stats is None or run.timed.use is None:
        raise RuntimeError(f"block did not finish: {snap.error if snap else 'no result'}")
    return snap.stats.mean_ms, run.timed.seconds, run.timed.use


def with_switch_interval(fn: Callable[[], Any], interval: float = 0.0002) -> Any:
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        return fn()
    finally:
        sys.setswitchinterval(old)


Block = tuple[float, float, "HostUse | None"]  # ms/step, the clock's calls' seconds, host use (None: the caller's)


def bare(fn: Callable[[], float]) -> Block:
    return fn(), 0.0, None


def loop(fn: Callable[[], tuple[float, float]]) -> Block:
    ms, clock_s = fn()
    return ms, clock_s, None


def measure(name: str, device: str, rounds: int, block_ms: float, variants: list[str],
            warmup: int = 10, burn: float = 0.1) -> dict[str, Any]:
    from apextui.cli.json_lines import JsonLinePrinter

    preset, workload = bare_loop.build(name, device, 10**9)
    workload.compiles = False  # compiled or captured once above
    steps = max(20, math.ceil(block_ms / bare_loop.bare_block(workload, warmup, 20, device)))
    handoff = gil_handoff_s()

    def json_run() -> Block:
        return runner_block(workload, preset, warmup, steps, device, JsonLinePrinter(fh), new_sampler(device))

    def burnt() -> Block:
        with GilBurner(burn):
            return json_run()

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as fh:
        run: dict[str, Callable[[], Block]] = {
            "bare": lambda: bare(lambda: bare_loop.bare_block(workload, warmup, steps, device)),
            "again": lambda: bare(lambda: bare_loop.bare_block(workload, warmup, steps, device)),
            "loop": lambda: loop(lambda: loop_block(workload, warmup, steps, device)),
            "quiet": lambda: runner_block(workload, preset, warmup, steps, device, lambda s: None, NoSampler()),
            "sampler": lambda: runner_block(workload, preset, warmup, steps, device, lambda s: None,
                                            new_sampler(device)),
            "json": json_run,
            "json_si": lambda: with_switch_interval(json_run),
            "inline": lambda: loop(lambda: loop_block(workload, warmup, steps, device, sink=fh)),
            "burn": burnt,
        }
        kinds = ["bare", *variants]
        rows = []
        for r in range(rounds):
            row: dict[str, float] = {}
            uses: dict[str, tuple[HostUse, float]] = {}
            for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                use0 = HostUse.now()
                row[kind], clock_s, use = run[kind]()
                use = use or HostUse.now() - use0
                uses[kind] = use, clock_s
                row[f"{kind}_switches"] = use.switches
                row[f"{kind}_cpu_s"] = use.thread_cpu_s
            for kind in variants:
                budget = monitor_budget(uses[kind][0], uses["bare"][0], uses[kind][1], handoff)
                row.update({f"{kind}_budget_{k}": v for k, v in budget.items()})
            rows.append(row)
    summary: dict[str, Any] = {"bare_median_ms": statistics.median(r["bare"] for r in rows)}
    for kind in variants:
        for what, key in (("wall", kind), ("cpu", f"{kind}_cpu_s")):
            base = "bare" if what == "wall" else "bare_cpu_s"
            g, lo, hi = geomean_ci([r[key] / r[base] for r in rows])
            summary[f"{kind}_{what}"] = {"geomean": g, "ci95_low": lo, "ci95_high": hi}
        summary[f"{kind}_budget"] = statistics.fmean(r[f"{kind}_budget_total"] for r in rows)
    summary["switches_a_block"] = {k: statistics.median(r[f"{k}_switches"] for r in rows) for k in kinds}
    return {"preset": name, "steps": steps, "warmup": warmup, "burn": burn, "gil_handoff_s": handoff,
            "summary": summary, "rounds": rows}


def _budget(summary: dict[str, Any], variant: str) -> str:
    budget = summary.get(f"{variant}_budget")
    return "" if budget is None else f"; budget {100 * budget:.2f} %"


def table(results: dict[str, Any]) -> str:
    variants = results["variants"]
    lines = ["| preset | bare ms | " + " | ".join(f"{v} / bare" for v in variants)
             + " | voluntary switches a block: bare / " + " / ".join(variants) + " |",
             "|---|---|" + "---|" * len(variants) + "---|"]
    for name, res in results["presets"].items():
        s = res["summary"]
        cells = [f"{s[f'{v}_wall']['geomean']:.4f} ({s[f'{v}_wall']['ci95_low']:.3f}–"
                 f"{s[f'{v}_wall']['ci95_high']:.3f})" + _budget(s, v) for v in variants]
        sw = " / ".join(f"{s['switches_a_block'][k]:g}" for k in ["bare", *variants])
        lines.append(f"| {name} | {s['bare_median_ms']:.4g} | " + " | ".join(cells) + f" | {sw} |")
    return "\n".join(lines + ["", "Each cell: variant / bare, geometric mean over rounds (95 % bootstrap interval); "
                              "budget: the most the monitor can have taken, a share of the block (mean over rounds; "
                              "`benchlib.measure.monitor_budget`)."])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="adamw,fused_layernorm")
    parser.add_argument("--rounds", type=int, default=14)
    parser.add_argument("--block-ms", type=float, default=400.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--burn", type=float, default=0.1,
                        help="the burn variant's GIL share, above 0 and below 1 (default 0.1)")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or args.rounds < 1 or args.block_ms <= 0 or not 0 < args.burn < 1:
        parser.error(f"variants must be among {', '.join(VARIANTS)}; --rounds >= 1; --block-ms > 0; 0 < --burn < 1"
                     + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    results: dict[str, Any] = {"device": args.device, "rounds": args.rounds, "block_ms": args.block_ms,
                               "variants": variants, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "presets": {}}
    for name in args.presets.split(","):
        results["presets"][name] = measure(name, args.device, args.rounds, args.block_ms, variants, burn=args.burn)
        print(table({**results, "presets": {name: results["presets"][name]}}).splitlines()[2], flush=True)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    out = Path(args.out_dir) / "monitor_parts.json"
    out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
