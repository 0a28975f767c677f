"""What does apextui's monitoring cost, with the machine's drift taken out? Bare and monitored steps in
alternating blocks on one model, in one process.

    python benchmarks/overhead_blocks.py [--preset fused_amp] [--modes aa,json,tui] [--block 50]
                                         [--rounds 24] [--device cuda] [--out-dir DIR]
    python benchmarks/overhead_blocks.py --from-json DIR/overhead_blocks.json   # its table again
    python benchmarks/overhead_blocks.py --from-json RUN1.json RUN2.json ...    # runs pooled, mode by mode

Why: `overhead.py` starts a fresh process per mode. On the H200 a host-bound preset (fused_amp) ran
24-35 ms/step from one process to the next, so two identical bare processes differed by up to 13.5 %:
far more than the targets (1 % for --json, 2 % for the TUI). Here the workload is built and warmed up
once; then, round after round, a block of `--block` steps runs bare and a block runs through apextui,
in alternating order (AB, BA, AB, ...). Drift slower than a block hits both alike, and each round gives
its own ratio.

  bare block:      a plain loop over the workload's step (no apextui code); one CUDA event before the
                   block and one after (perf_counter on CPU); ms/step = elapsed / steps.
  monitored block: `Runner` on the same workload: per-step CUDA events, async loss copies, the NVML
                   sampler thread, the delivery thread and the front end's consumer; ms/step = the
                   summary's mean (back-to-back step intervals: the same quantity).
Modes (each in a process of its own):
  aa:   an A/A control: both blocks bare. Its ratios show the method's own noise.
  json: the consumer is the JSON-lines printer of `apextui --json`, writing to a file.
  tui:  the blocks run in the TUI's worker process while the Textual app (driven headless, screen
        updating) shows the monitored blocks live, exactly as in a run started from the TUI.
Writes DIR/overhead_blocks.json and DIR/overhead_blocks.md. Presets that compile or capture (their
warm-up would run again in every block) are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner
from apextui.core.run.snapshot import Snapshot
from benchlib.measure import TimedClock, geomean_ci  # noqa: F401 - geomean_ci: this script's summary
from benchlib import bare as bare_loop

ROOT = Path(__file__).resolve().parents[1]

MODES = ("aa", "json", "tui")


class SharedWorkloadRunner(Runner):
    """A Runner whose run trains an already built, warmed-up workload (one monitored block), timing its
    clock's per-step calls."""

    def __init__(self, workload: Any, *args: Any, **kwargs: Any) -> None:
        self._shared = workload
        self.timed: TimedClock | None = None
        super().__init__(*args, **kwargs)

    def _build_workload(self, size: Any) -> Any:
        return self._shared

    def _setup(self) -> tuple[Any, Any, Any]:
        info, workload, clock = super()._setup()
        self.timed = TimedClock(clock)
        return info, workload, self.timed


class CpuMeter:
    """Over a block: wall time, the CPU seconds of the training (this) thread, and those of the process's
    other threads, running or ended (the monitor's delivery and sampler threads, beside the CUDA driver's)."""

    def __enter__(self) -> "CpuMeter":
        self.wall, self.proc, self.main = time.perf_counter(), time.process_time(), time.thread_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.wall
        self.main = time.thread_time() - self.main
        self.other_cpu = (time.process_time() - self.proc) - self.main


def build(preset_name: str, device: str, steps: int) -> tuple[Any, Any]:
    """(preset with no warm-up steps, its workload built and warmed up) for the blocks."""
    preset, workload = bare_loop.build(preset_name, device, steps, warm_up=False)
    if getattr(workload, "compiles", False):
        raise SystemExit(f"overhead_blocks: preset {preset_name!r} compiles or captures CUDA graphs in its "
                         "warm-up, which every block would repeat; use an eager preset (fp32, fused_amp, torch_amp)")
    bare_loop.plain_steps(workload.step, preset.warmup)
    return dataclasses.replace(preset, warmup=0), workload


Block = dict[str, float]  # ms and main_cpu_ms (per step), other_cpu_s, wall_s, hook_s
# main_cpu_ms: the training thread's CPU time a step, from the first step's start to the end of the last
# (its final wait for the GPU included, alike in both kinds of block); never a monitored block's Runner
# setup (sampler start, pinned ring, threads), which would add about 4 % to 10-step blocks on the H200.


def bare_block(workload: Any, steps: int, device: str) -> Block:
    """`steps` plain steps (`benchlib.bare`): ms/step, and the CPU time of the process's other threads
    meanwhile."""
    with CpuMeter() as meter:
        bare_loop.synchronize(device)  # before the training thread's CPU clock starts, as a monitored block's
        cpu0 = time.thread_time()
        ms, _ = bare_loop.event_timed_steps(workload, steps, device)
        cpu = time.thread_time() - cpu0
    return {"ms": ms, "main_cpu_ms": cpu * 1000 / steps, "other_cpu_s": meter.other_cpu,
            "wall_s": meter.wall, "hook_s": 0.0}


def monitored_block(workload: Any, preset: Any, steps: int, device: str,
                    callback: Callable[[Snapshot], None]) -> Block:
    """`steps` steps through apextui's Runner (trained on this thread, as both front ends do): ms/step,
    the other threads' CPU time, and the time of the clock's per-step calls on this thread."""
    runner = SharedWorkloadRunner(workload, RunRequest(preset, device, steps), callback, analyse=False)
    with CpuMeter() as meter:
        snap = runner.run()
    if snap is None or snap.status != "ok" or snap.stats is None or runner.timed is None:
        raise RuntimeError(f"monitored block did not finish: {snap.error if snap else 'no result'}")
    return {"ms": snap.stats.mean_ms, "main_cpu_ms": runner.timed.steps_cpu_s * 1000 / steps,
            "other_cpu_s": meter.other_cpu,
            "wall_s": meter.wall,
            "hook_s": runner.timed.seconds}


def run_blocks(workload: Any, preset: Any, device: str, block: int, rounds: int, monitored: bool,
               callback: Callable[[Snapshot], None]) -> list[dict[str, float]]:
    """`rounds` rounds of (bare, other) in alternating order; other = monitored, or bare again (A/A)."""
    out = []
    for r in range(rounds):
        b: dict[str, Block] = {}
        for which in (("bare", "other") if r % 2 == 0 else ("other", "bare")):
            if which == "other" and monitored:
                b[which] = monitored_block(workload, preset, block, device, callback)
            else:
                b[which] = bare_block(workload, block, device)
        bare, other = b["bare"], b["other"]
        out.append({"round": r + 1, "bare_ms": bare["ms"], "other_ms": other["ms"], "ratio": other["ms"] / bare["ms"],
                    # per step: the monitor's calls on the training thread, and its threads' extra CPU
                    "hook_us": other["hook_s"] / block * 1e6,
                    # the training thread's own CPU a step: blind to time the host's other tenants take
                    "cpu_ratio": other["main_cpu_ms"] / bare["main_cpu_ms"],
                    "extra_thread_cpu_frac": (other["other_cpu_s"] / other["wall_s"]
                                              - bare["other_cpu_s"] / bare["wall_s"])})
    return out


# ---- the modes, each in its own process ------------------------------------------------------------
def mode_aa(preset_name: str, device: str, block: int, rounds: int) -> dict[str, Any]:
    preset, workload = build(preset_name, device, block * rounds * 2)
    return {"rounds": run_blocks(workload, preset, device, block, rounds, False, lambda s: None)}


def mode_json(preset_name: str, device: str, block: int, rounds: int) -> dict[str, Any]:
    from apextui.cli.json_lines import JsonLinePrinter

    preset, workload = build(preset_name, device, block * rounds * 2)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as fh:
        printers: list[JsonLinePrinter] = []  # one per block: each prints its own setup and end lines

        def printer(snap: Snapshot) -> None:
            if not printers or printers[-1].ended:
                printers.append(JsonLinePrinter(fh))
            printers[-1](snap)

        rows = run_blocks(workload, preset, device, block, rounds, True, printer)
        fh.flush()
        lines = sum(1 for _ in open(fh.name, encoding="utf-8"))
    return {"rounds": rows, "json_lines": lines}


def blocks_worker(request: Any, conn: Any, stop: Any, log_path: str, *, block: int, rounds: int,
                  out_path: str) -> None:
    """The TUI's worker process, running the blocks: the app sees each monitored block's snapshots (a
    block's final one relabelled "running", the last block's sent at the very end), and the per-round
    times go to `out_path`."""
    import signal

    from apextui.core.run.worker import redirect_output

    preset, device = request.preset, request.device

    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    redirect_output(log_path)
    final: list[Snapshot] = []

    def send(snap: Snapshot) -> None:
        if snap.finished:
            final[:] = [snap]
            snap = dataclasses.replace(snap, status="running")
        conn.send(snap)

    try:
        shared_preset, workload = build(preset.name, device, block * rounds * 2)
        rows = run_blocks(workload, shared_preset, device, block, rounds, True, send)
        Path(out_path).write_text(json.dumps({"rounds": rows}))
    finally:
        if final:
            conn.send(final[0])
        conn.close()


def mode_tui(preset_name: str, device: str, block: int, rounds: int) -> dict[str, Any]:
    from apextui.core.presets import resolve
    from apextui.core.run.worker import ProcessRunner
    from apextui.ui.app import make_app

    with tempfile.TemporaryDirectory() as tmp:
        out_path = str(Path(tmp) / "rounds.json")

        def factory(request: Any, callback: Any) -> ProcessRunner:
            target = functools.partial(blocks_worker, block=block, rounds=rounds, out_path=out_path)
            return ProcessRunner(request, callback, target=target)

        app = make_app(preset=resolve(preset_name), device=device, steps=block * rounds * 2, autostart=True,
                       runner_factory=factory, save_dir=tmp)

        async def drive() -> tuple[float, dict[str, Any]]:
            async with app.run_test(size=(120, 40)):
                while app.active is None:
                    await asyncio.sleep(0.05)
                wall, cpu = time.perf_counter(), time.process_time()
                while (result := app.last_result()) is None:
                    await asyncio.sleep(0.2)  # not pilot.pause(): that waits for the app to go idle
                return (time.process_time() - cpu) / (time.perf_counter() - wall), result

        ui_cpu, result = asyncio.run(drive())
        if not Path(out_path).exists():
            raise RuntimeError(f"the blocks worker wrote no results; the app's last run: {result}")
        return json.loads(Path(out_path).read_text()) | {"ui_cpu_frac": ui_cpu}


# ---- the parent: run the modes, summarise --------------------------------------------------------
def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    ratios = [r["ratio"] for r in rows]
    geo, lo, hi = geomean_ci(ratios)
    accounted = all("hook_us" in r for r in rows)  # runs from before the accounting have only the times
    hook_frac = statistics.fmean(r["hook_us"] / 1000 / r["other_ms"] for r in rows) if accounted else math.nan
    thread_frac = statistics.fmean(r["extra_thread_cpu_frac"] for r in rows) if accounted else math.nan
    cpu = geomean_ci([r["cpu_ratio"] for r in rows]) if all("cpu_ratio" in r for r in rows) else (math.nan,) * 3
    return {"rounds": len(rows), "median_ratio": statistics.median(ratios), "geomean_ratio": geo,
            "cpu_geomean_ratio": cpu[0], "cpu_ci95_low": cpu[1], "cpu_ci95_high": cpu[2],
            "ci95_low": lo, "ci95_high": hi, "min_ratio": min(ratios), "max_ratio": max(ratios),
            "sd_ratio": statistics.stdev(ratios) if len(ratios) > 1 else math.nan,
            "bare_median_ms": statistics.median(r["bare_ms"] for r in rows),
            "other_median_ms": statistics.median(r["other_ms"] for r in rows),
            "hook_us_per_step": statistics.fmean(r["hook_us"] for r in rows) if accounted else math.nan,
            "hook_frac": hook_frac,
            "extra_thread_cpu_frac": thread_frac,
            # what the monitor costs the training thread at most: its own calls, plus every CPU second of
            # its threads taken from the training thread (the GIL), none of it overlapping
            "accounted_bound": 1 + hook_frac + max(0.0, thread_frac) if accounted else math.nan}


def pool(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Earlier runs' results as one: each mode's rounds, from every run that has them, summarised together
    (rounds of one run are as comparable as those of several: each round is its own bare/monitored pair).
    Runs must share preset, device and block size."""
    first = runs[0]
    for run in runs[1:]:
        for key in ("preset", "device", "block"):
            if run[key] != first[key]:
                raise ValueError(f"runs differ in {key}: {first[key]!r} and {run[key]!r}; pool runs of one "
                                 "preset, device and block size")
    modes: dict[str, Any] = {}
    for run in runs:
        for mode, res in run["modes"].items():
            if "rounds" not in res:
                continue  # a failed mode: nothing to pool
            into = modes.setdefault(mode, {"rounds": []})
            into["rounds"] += res["rounds"]
            if res.get("ui_cpu_frac") is not None:
                into.setdefault("ui_cpu_fracs", []).append(res["ui_cpu_frac"])
    for res in modes.values():
        res["summary"] = summarise(res["rounds"])
        if "ui_cpu_fracs" in res:
            res["ui_cpu_frac"] = statistics.fmean(res.pop("ui_cpu_fracs"))
    rounds = ", ".join(str(run["rounds"]) for run in runs)
    return {"preset": first["preset"], "device": first["device"], "block": first["block"],
            "rounds": rounds if len(runs) > 1 else first["rounds"], "modes": modes}


def child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--preset", args.preset, "--device", args.device,
           "--block", str(args.block), "--rounds", str(args.rounds)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:] or f"exit code {proc.returncode}"}
    out = json.loads(proc.stdout.splitlines()[-1])
    return out | {"wall_s": round(time.perf_counter() - t0, 1)}


def table(results: dict[str, Any]) -> str:
    lines = [f"preset {results['preset']} on {results['device']}: {results['rounds']} rounds of "
             f"{results['block']} bare + {results['block']} monitored steps, alternating order", "",
             "| mode | rounds | bare median ms | monitored median ms | median ratio | geomean ratio | its 95 % CI "
             "| min | max | sd | training-thread CPU ratio (95 % CI) | monitor calls µs/step | monitor threads' CPU "
             "| accounted bound |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode, res in results["modes"].items():
        if "error" in res:
            lines.append(f"| {mode} | failed: {res['error'].splitlines()[-1] if res['error'] else ''} |")
            continue
        s = res["summary"]
        lines.append(f"| {mode} | {s['rounds']} | {s['bare_median_ms']:.3f} | {s['other_median_ms']:.3f} | "
                     f"{s['median_ratio']:.4f} | {s['geomean_ratio']:.4f} | {s['ci95_low']:.4f}-{s['ci95_high']:.4f} | "
                     f"{s['min_ratio']:.4f} | {s['max_ratio']:.4f} | {s['sd_ratio']:.4f} | "
                     + (f"{s['cpu_geomean_ratio']:.4f} ({s['cpu_ci95_low']:.4f}-{s['cpu_ci95_high']:.4f}) | "
                        if math.isfinite(s["cpu_geomean_ratio"]) else "— | ")
                     + (f"{s['hook_us_per_step']:.1f} | {s['extra_thread_cpu_frac']:.2%} | {s['accounted_bound']:.4f} |"
                        if math.isfinite(s["accounted_bound"]) else "— | — | — |"))
    lines.append("")
    lines.append("aa: both blocks bare (the method's noise); json: `apextui --json`'s path; tui: the TUI's worker "
                 "process with the app showing the run. Ratio = monitored / bare ms/step within a round. Monitor "
                 "calls: the clock's per-step work on the training thread. Training-thread CPU ratio: that "
                 "thread's CPU time a step, monitored / bare (time the host gives other tenants does not count). "
                 "Monitor threads' CPU: CPU time of the "
                 "process's other threads per second, monitored minus bare block. Accounted bound: 1 + both, as if "
                 "every such CPU second were taken from the training thread.")
    for mode, res in results["modes"].items():
        if res.get("ui_cpu_frac") is not None:
            lines.append(f"{mode}: the UI process used {res['ui_cpu_frac']:.1%} of one core "
                         "(a process of its own: no GIL shared).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="fused_amp")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--block", type=int, default=50, help="steps per block (default 50)")
    parser.add_argument("--rounds", type=int, default=24, help="rounds of (bare, monitored) blocks (default 24)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    parser.add_argument("--from-json", type=Path, nargs="+", metavar="FILE",
                        help="summarise earlier runs' overhead_blocks.json again (prints the table) instead of "
                             "running; several runs of one preset, device and block size are pooled mode by mode")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.from_json:
        try:
            results = pool([json.loads(path.read_text()) for path in args.from_json])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            names = ", ".join(str(p) for p in args.from_json)
            print(f"overhead_blocks: cannot read or pool {names}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        print(table(results))
        return 0
    if args.block < 2 or args.rounds < 2:
        parser.error("--block and --rounds must be at least 2")
    if args.child:
        fn = {"aa": mode_aa, "json": mode_json, "tui": mode_tui}[args.child]
        print(json.dumps(fn(args.preset, args.device, args.block, args.rounds)))
        return 0
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; allowed: {', '.join(MODES)}")
    results: dict[str, Any] = {"preset": args.preset, "device": args.device, "block": args.block,
                               "rounds": args.rounds, "modes": {}}
    for mode in modes:
        res = child(mode, args)
        if "rounds" in res:
            res["summary"] = summarise(res["rounds"])
            s = res["summary"]
            print(f"{mode}: median ratio {s['median_ratio']:.4f}, geomean {s['geomean_ratio']:.4f} "
                  f"(95 % CI {s['ci95_low']:.4f}-{s['ci95_high']:.4f}), bare {s['bare_median_ms']:.3f} ms "
                  f"[{res.get('wall_s')} s]", file=sys.stderr, flush=True)
        else:
            print(f"{mode}: failed: {res.get('error')}", file=sys.stderr, flush=True)
        results["modes"][mode] = res
        args.out_dir.mkdir(parents=True, exist_ok=True)  # after every mode: a later one may not finish
        (args.out_dir / "overhead_blocks.json").write_text(json.dumps(results, indent=1))
        md = table(results)
        (args.out_dir / "overhead_blocks.md").write_text(md + "\n")
    print(md)
    return 1 if any("error" in r for r in results["modes"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
