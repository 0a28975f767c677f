"""Does apextui change what it measures? Every preset: a bare loop, `apextui --json` and the TUI, side by side.

    python benchmarks/monitor_cost.py [--presets all|a,b] [--rounds 8] [--block-ms 300] [--warmup 10]
                                      [--separate 2] [--separate-presets all|a,b] [--device cuda]
                                      [--out-dir DIR]
    python benchmarks/monitor_cost.py --from-json DIR/monitor_cost.json      # the table again
    python benchmarks/monitor_cost.py --from-json RUN1.json RUN2.json ...    # runs pooled, preset by preset

**In one process, interleaved** (one worker process runs every preset in turn): per preset, the workload is built
(and compiled or captured) once; then, round after round, three blocks run on it in rotating order (bare, json, tui;
json, tui, bare; tui, bare, json; ...), so drift slower than a block hits all three alike:

  bare: `benchlib.bare.bare_block`: `--warmup` untimed steps, a synchronisation, S steps with nothing else in
        the loop, a synchronisation; ms/step = wall time / S. Nothing of apextui's runner runs.
  json: a real `Runner` run of warmup + S steps (its clock, block timing, sampler and delivery threads)
        whose snapshots go to the JSON-lines printer of `apextui --json`, writing to a file.
  tui:  the same, in the TUI's worker process, its snapshots going to the Textual app (driven headless,
        screen updating) exactly as in a run started from the TUI.
Both bare and json blocks run in that worker process too: the app is idle while they run.

Per round and preset two ratios, each against the round's bare block:
  reported / bare: the median ms/step apextui reports (what the user reads); target within 3 %.
  wall / bare:     the monitored loop's own rate (its measured steps' total time / steps): the monitor's
                   overhead; targets <= 1 % (json) and <= 2 % (tui).
Summaries are geometric means over rounds with 95 % bootstrap intervals (`benchlib.measure.geomean_ci`).

**In separate processes** (`--separate N`, N pairs a preset, alternating ABAB...): `bare_loop.py` as a
process of its own, then `apextui --preset P --json --steps W+S` as another: what a user does who
compares apextui's number with their own script. Process-to-process drift of the host is in these
ratios; the in-process ones are free of it.

S is chosen per preset so that S steps last about `--block-ms` (at least 20 steps), from a first bare
block. Writes DIR/monitor_cost.json and DIR/monitor_cost.md.

Controls for finding where a cost comes from (environment variables of the run): MONITOR_COST_GC=1 collects
garbage before every block; MONITOR_COST_SAMPLER=shared starts one NVML/psutil sampler for every monitored
block instead of one a block (a real run starts it once).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import gc
import os
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchlib import bare as bare_loop
from benchlib.measure import HostUse, TimedClock, geomean_ci, gil_handoff_s, monitor_budget

HERE = Path(__file__).resolve().parent

KINDS = ("bare", "json", "tui")
MIN_STEPS = 20


class SharedRunner:
    """Made lazily (imports apextui's runner only in the worker): a Runner on an already built workload,
    its clock wrapped to read the training thread's CPU time from the clock's start to the final harvest
    (warm-up and measured steps, not the Runner's set-up)."""

    @staticmethod
    def make(workload: Any, *args: Any, **kwargs: Any) -> Any:
        from apextui.core.run.runner import Runner

        class _Shared(Runner):
            timed: TimedClock | None = None

            def _build_workload(self, size: Any) -> Any:
                return workload

            def _setup(self) -> Any:
                info, work, clock = super()._setup()
                self.timed = TimedClock(clock)
                return info, work, self.timed

        return _Shared(*args, **kwargs)


class KeptSampler:
    """One sampler for every monitored block (`--sampler shared`): started once, its start and stop in a
    block do nothing. A real run starts its sampler (NVML set-up, first reading) once; a benchmark of many
    short blocks would otherwise pay that start-up once a block."""

    def __init__(self, sampler: Any) -> None:
        self._sampler = sampler
        sampler.start()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def latest(self) -> Any:
        return self._sampler.latest


class GcTimer:
    """Cyclic-GC collections and their time, in any thread, while it is installed (`gc.callbacks`): how
    much of a block went to collections its own allocations triggered."""

    def __init__(self) -> None:
        self.count, self.seconds, self._t0 = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._t0

    def __enter__(self) -> "GcTimer":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def monitored_block(workload: Any, preset: Any, warmup: int, steps: int, device: str,
                    callback: Callable[[Any], None], sampler: Any = None) -> dict[str, float]:
    """A real run of warmup + steps on the shared workload: what it reports, and its loop's own rate."""
    run_preset = dataclasses.replace(preset, warmup=warmup)
    from apextui.core.run.request import RunRequest

    runner = SharedRunner.make(workload, RunRequest(run_preset, device, steps=warmup + steps), callback,
                               analyse=False, sampler=sampler)
    snap = runner.run()
    if snap is None or snap.status != "ok" or snap.stats is None:
        raise RuntimeError(f"monitored block did not finish: {snap.error if snap else 'no result'}")
    st = snap.stats
    use = runner.timed.use
    return {"reported_ms": st.median_ms, "wall_ms": st.mean_ms, "block_steps": st.block_steps,
            "intervals": st.count, "cpu_ms": use.thread_cpu_s * 1000 / (warmup + steps),
            "clock_s": runner.timed.seconds, **use.as_dict("use")}


def bare_with_cpu(workload: Any, warmup: int, steps: int, device: str) -> dict[str, float]:
    """A bare block's ms/step, the training thread's CPU ms a step, and its host use (`HostUse`), over its
    warm-up and timed steps (the window a monitored block's use covers)."""
    use0 = HostUse.now()
    ms = bare_loop.bare_block(workload, warmup, steps, device)
    use = HostUse.now() - use0
    return {"bare_ms": ms, "bare_cpu_ms": use.thread_cpu_s * 1000 / (warmup + steps), **use.as_dict("bare_use")}


def use_of(row: dict[str, Any], prefix: str) -> HostUse:
    """A block's `HostUse` from its row (runs from before a field was read have NaN there)."""
    return HostUse(**{f.name: row.get(f"{prefix}_{f.name}", math.nan) for f in dataclasses.fields(HostUse)})


def add_budgets(row: dict[str, Any], handoff_s: float) -> None:
    """The round's monitor budget of its json and tui blocks (`measure.monitor_budget`), against its bare
    block: the most the monitor can have cost, a fraction of the block."""
    if "bare_use_wall_s" not in row:  # a run from before the host-use accounting
        return
    bare = use_of(row, "bare_use")
    for kind in ("json", "tui"):
        if f"{kind}_use_wall_s" in row:
            budget = monitor_budget(use_of(row, f"{kind}_use"), bare, row[f"{kind}_clock_s"], handoff_s)
            row.update({f"{kind}_budget_{k}": v for k, v in budget.items()})


def rounds_in_worker(preset_name: str, device: str, warmup: int, block_ms: float, rounds: int,
                     send: Callable[[Any], None], collect: bool = False,
                     shared_sampler: bool = False) -> dict[str, Any]:
    """The rounds, in this (the worker's) process: `send` takes the tui blocks' snapshots to the app.
    `collect`: garbage-collect before every block; `shared_sampler`: one sampler for every block."""
    from apextui.core.env import pci_bus_id
    from apextui.core.monitor.sampler import Sampler
    from apextui.cli.json_lines import JsonLinePrinter

    sampler = None
    if shared_sampler:
        gpu = device == "cuda"
        sampler = KeptSampler(Sampler(1.0, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None))

    preset, workload = bare_loop.build(preset_name, device, 10**9)
    workload.compiles = False  # compiled or captured once above; a monitored block must not do it again
    first = bare_loop.bare_block(workload, warmup, MIN_STEPS, device)
    steps = max(MIN_STEPS, math.ceil(block_ms / first))
    handoff = gil_handoff_s()
    rows = []
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as fh:
        for r in range(rounds):
            order = KINDS[r % 3:] + KINDS[:r % 3]
            row: dict[str, Any] = {"round": r + 1, "order": "/".join(order)}
            for kind in order:
                if collect:
                    gc.collect()
                with GcTimer() as collections:
                    if kind == "bare":
                        row.update(bare_with_cpu(workload, warmup, steps, device))
                    else:
                        sink = JsonLinePrinter(fh) if kind == "json" else send
                        got = monitored_block(workload, preset, warmup, steps, device, sink, sampler)
                        row.update({f"{kind}_{k}": v for k, v in got.items()})
                row[f"{kind}_gc_collections"] = collections.count
                row[f"{kind}_gc_ms"] = collections.seconds * 1000
            add_budgets(row, handoff)
            rows.append(row)
        fh.flush()
        json_lines = sum(1 for _ in open(fh.name, encoding="utf-8"))
    return {"preset": preset_name, "steps": steps, "warmup": warmup, "first_bare_ms": first, "rounds": rows,
            "json_lines": json_lines, "gil_handoff_s": handoff}


def worker_target(request: Any, conn: Any, stop: Any, log_path: str, *, names: list[str], warmup: int,
                  block_ms: float, rounds: int, out_path: str) -> None:
    """The TUI's worker process running every preset's rounds in turn (one process: torch is imported
    once); the app sees the tui blocks' snapshots (a block's final one relabelled "running"; the last
    block's sent at the very end). Each preset's result is appended to `out_path` as one JSON line."""
    import signal

    from apextui.core.run.worker import redirect_output

    device = request.device

    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    redirect_output(log_path)  # the terminal belongs to the app
    final: list[Any] = []

    def send(snap: Any) -> None:
        if snap.finished:
            final[:] = [snap]
            snap = dataclasses.replace(snap, status="running")
        conn.send(snap)

    from apextui.core.run.runner import release_memory

    try:
        for name in names:
            try:
                result = rounds_in_worker(name, device, warmup, block_ms, rounds, send,
                                          collect=os.environ.get("MONITOR_COST_GC") == "1",
                                          shared_sampler=os.environ.get("MONITOR_COST_SAMPLER") == "shared")
            except Exception as exc:  # noqa: BLE001 - one preset's failure is its row, not the end
                result = {"preset": name, "error": f"{type(exc).__name__}: {exc}"}
            with open(out_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")
            release_memory(device)
    finally:
        if final:
            conn.send(final[0])
        conn.close()


def child(names: list[str], device: str, warmup: int, block_ms: float, rounds: int, out_path: str) -> None:
    """The TUI app (headless) with one worker process running every preset's rounds; each preset's result
    is one JSON line appended to `out_path` as soon as it is measured."""
    from apextui.core.presets import resolve
    from apextui.core.run.worker import ProcessRunner
    from apextui.ui.app import make_app

    with tempfile.TemporaryDirectory() as tmp:
        def factory(request: Any, callback: Any) -> Any:
            target = functools.partial(worker_target, names=names, warmup=warmup, block_ms=block_ms,
                                       rounds=rounds, out_path=out_path)
            return ProcessRunner(request, callback, target=target)

        app = make_app(preset=resolve(names[0]), device=device, steps=10**6, autostart=True,
                       runner_factory=factory, save_dir=tmp)

        async def drive() -> Any:
            async with app.run_test(size=(120, 40)):
                while app.active is None:
                    await asyncio.sleep(0.05)
                while (result := app.last_result()) is None:
                    await asyncio.sleep(0.2)
                return result

        last = asyncio.run(drive())
        if not Path(out_path).exists():
            raise RuntimeError(f"the worker wrote no results; the app's last run: {last}")


def separate(preset_name: str, device: str, warmup: int, steps: int, pairs: int) -> list[dict[str, Any]]:
    """`pairs` x (bare_loop.py process, apextui --json process), alternating which goes first; both with the
    preset's own warm-up (`warmup`) and `steps` measured steps."""
    out = []
    for i in range(pairs):
        row: dict[str, Any] = {"pair": i + 1}
        for kind in (("bare", "apextui") if i % 2 == 0 else ("apextui", "bare")):
            if kind == "bare":
                cmd = [sys.executable, str(HERE / "bare_loop.py"), "--preset", preset_name, "--device", device,
                       "--warmup", str(warmup), "--steps", str(steps)]
            else:
                cmd = [sys.executable, "-m", "apextui", "--preset", preset_name, "--device", device, "--json",
                       "--steps", str(warmup + steps)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"{' '.join(cmd[1:4])}: exit {proc.returncode}: {proc.stderr[-500:]}")
            if kind == "bare":
                row["bare_ms"] = lines[-1]["ms_per_step"]
            else:
                summary = lines[-1]["summary"]
                row["apextui_ms"] = summary["median_ms"]
                row["apextui_warmup"] = next(x["warmup"] for x in lines if x.get("event") == "start")
        row["ratio"] = row["apextui_ms"] / row["bare_ms"]
        out.append(row)
    return out


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    rows = res["rounds"]
    out: dict[str, Any] = {"bare_median_ms": statistics.median(r["bare_ms"] for r in rows)}
    for kind in ("json", "tui"):
        for what in ("reported", "wall", "cpu"):
            bare = "bare_cpu_ms" if what == "cpu" else "bare_ms"
            if not all(bare in r for r in rows):
                continue
            g, lo, hi = geomean_ci([r[f"{kind}_{what}_ms"] / r[bare] for r in rows])
            out[f"{kind}_{what}"] = {"geomean": g, "ci95_low": lo, "ci95_high": hi}
        out[f"{kind}_median_ms"] = statistics.median(r[f"{kind}_reported_ms"] for r in rows)
    out["block_steps"] = max(r["json_block_steps"] for r in rows)
    for kind in ("json", "tui"):
        if all(f"{kind}_budget_total" in r for r in rows):  # runs before the host-use accounting have none
            out[f"{kind}_budget"] = {k: statistics.fmean(r[f"{kind}_budget_{k}"] for r in rows)
                                     for k in ("clock", "gil", "runq", "total", "extra_switches")}
            out[f"{kind}_budget"]["max_total"] = max(r[f"{kind}_budget_total"] for r in rows)
    if all("bare_gc_ms" in r for r in rows):  # runs before the GC accounting have none
        out["gc_ms_a_block"] = {k: statistics.fmean(r[f"{k}_gc_ms"] for r in rows) for k in KINDS}
    if res.get("separate"):
        ratios = [p["ratio"] for p in res["separate"]]
        g, lo, hi = geomean_ci(ratios)
        out["separate"] = {"geomean": g, "ci95_low": lo, "ci95_high": hi, "min": min(ratios), "max": max(ratios)}
    return out


def pool(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' results as one: each preset's rounds (and separate-process pairs) from every run that
    has them, summarised together (each round is its own bare/json/tui triple, so rounds of several runs
    are as comparable as those of one). Runs must be of one device."""
    devices = {run["device"] for run in runs}
    if len(devices) > 1:
        raise ValueError(f"runs of different devices ({', '.join(sorted(devices))}): pool runs of one device")
    presets: dict[str, Any] = {}
    for run in runs:
        for name, res in run["presets"].items():
            if "rounds" not in res:
                presets.setdefault(name, res)  # an unavailable or failed preset, unless another run has it
                continue
            into = presets.get(name)
            if into is None or "rounds" not in into:
                into = presets[name] = {"preset": name, "steps": res["steps"], "rounds": [], "separate": []}
            into["rounds"] += res["rounds"]
            into["separate"] += res.get("separate", [])
            into["steps"] = max(into["steps"], res["steps"])
    for res in presets.values():
        if "rounds" in res:
            res["summary"] = summarise(res)
    return {"device": runs[0]["device"], "rounds": " + ".join(str(run["rounds"]) for run in runs),
            "warmup": runs[0]["warmup"], "presets": presets}


def _ratio(d: dict[str, float] | None) -> str:
    return "—" if d is None else f"{d['geomean']:.4f} ({d['ci95_low']:.3f}–{d['ci95_high']:.3f})"


def _budget(b: dict[str, float] | None) -> str:
    if b is None:
        return "— | — | —"
    return (f"{100 * b['total']:.2f} % (max {100 * b['max_total']:.2f} %) | {100 * b['clock']:.3f} % + "
            f"{100 * b['gil']:.2f} % ({b['extra_switches']:.0f} waits) | {100 * b['runq']:.2f} %")


def budget_table(results: dict[str, Any]) -> list[str]:
    """The monitor's budget per preset: the most it can have taken from the training thread, by part."""
    rows = [(name, res) for name, res in results["presets"].items()
            if "summary" in res and "json_budget" in res["summary"]]
    if not rows:
        return []
    lines = ["", "Monitor budget: the work the monitor did beside the training, a share of the "
             "monitored block (mean over rounds)", "",
             "| preset | GIL hand-over µs | json: budget | json: clock + GIL (extra waits a block) "
             "| json: extra run-queue wait | tui: budget | tui: clock + GIL (extra waits a block) "
             "| tui: extra run-queue wait |", "|---|---|---|---|---|---|---|---|"]
    for name, res in rows:
        s = res["summary"]
        handoff = res.get("gil_handoff_s")
        hand = "—" if handoff is None else f"{handoff * 1e6:.1f}"
        lines.append(f"| {name} | {hand} | {_budget(s.get('json_budget'))} | {_budget(s.get('tui_budget'))} |")
    lines += ["", "budget = (the clock's calls on the training thread + the CPU time of the monitor's threads (the "
              "process's other Python threads) beyond the bare block's + the training thread's voluntary switches "
              "beyond the bare block's × one GIL hand-over) / the monitored block's time: an account of the "
              "monitor's work, not a bound of its cost (a thread holding the GIL slows a host-bound loop by more "
              "than its own time: the burn control of benchmarks/monitor_parts.py). The clock's calls include "
              "any wait for room in the GPU's launch queue. Run-queue wait: time "
              "the training thread was ready but its core was taken (by the TUI's app process, for example), "
              "not in the budget; shown on its own."]
    return lines


def _gc(summary: dict[str, Any]) -> str:
    gc_ms = summary.get("gc_ms_a_block")
    return "—" if gc_ms is None else " / ".join(f"{gc_ms[k]:.2f}" for k in KINDS)


def table(results: dict[str, Any]) -> str:
    lines = [f"{results['device']}: {results['rounds']} rounds a preset (at most); each round a bare, a json and a tui "
             f"block of the same steps (warm-up {results['warmup']}), in rotating order", "",
             "| preset | steps a block | block timing | bare ms | json reported / bare | tui reported / bare "
             "| json wall / bare | tui wall / bare | json CPU / bare | tui CPU / bare "
             "| separate processes: apextui / bare | GC ms a block: bare / json / tui |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results["presets"].items():
        if "error" in res:
            lines.append(f"| {name} | failed: {res['error'].strip().splitlines()[-1][:120]} ||||||||||")
            continue
        s = res["summary"]
        sep = s.get("separate")
        sep_text = (f"{sep['geomean']:.4f} ({sep['min']:.3f}–{sep['max']:.3f}, {len(res['separate'])} pairs)"
                    if sep else "—")
        block = f"{s['block_steps']} steps" if s["block_steps"] > 1 else "each step"
        lines.append(f"| {name} | {res['steps']} | {block} | {s['bare_median_ms']:.4g} | "
                     f"{_ratio(s['json_reported'])} | "
                     f"{_ratio(s['tui_reported'])} | {_ratio(s['json_wall'])} | {_ratio(s['tui_wall'])} | "
                     f"{_ratio(s.get('json_cpu'))} | {_ratio(s.get('tui_cpu'))} | {sep_text} | {_gc(s)} |")
    lines += ["", "Ratios: geometric mean over rounds (95 % bootstrap interval). reported: the median ms/step "
              "apextui reports; wall: the monitored loop's measured steps, total time / steps. Separate "
              "processes: apextui's reported median over bare_loop.py's ms/step, pairs alternating which runs "
              "first (min–max of the pairs). CPU: the training thread's CPU time a step over the block's warm-up "
              "and measured steps (its synchronisations included), monitored / bare: blind to time the host "
              "gives other processes, unlike wall time. GC: cyclic-garbage collections during a block, in any thread "
              "(mean ms a block)."]
    return "\n".join(lines + budget_table(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="all", help="comma-separated preset names, or all (default)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block-ms", type=float, default=300.0, help="measured time a block (default 300 ms)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up steps a block (default 10)")
    parser.add_argument("--separate", type=int, default=2, help="separate-process pairs a preset (0: none)")
    parser.add_argument("--separate-presets", default="all",
                        help="the presets compared in separate processes too (comma-separated, or all)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    parser.add_argument("--from-json", type=Path, nargs="+", metavar="FILE",
                        help="print an earlier run's table; several runs of one device are pooled preset by preset")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rounds-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.from_json:
        try:
            print(table(pool([json.loads(path.read_text()) for path in args.from_json])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            names = ", ".join(str(p) for p in args.from_json)
            print(f"monitor_cost: cannot read or pool {names}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.rounds < 2 or args.warmup < 2 or args.block_ms <= 0 or args.separate < 0:
        parser.error("--rounds and --warmup must be at least 2, --block-ms above 0, --separate at least 0")
    if args.child:
        child(args.child.split(","), args.device, args.warmup, args.block_ms, args.rounds, args.rounds_file)
        return 0
    from apextui.core.availability import availability
    from apextui.core.presets import builtin_names, resolve

    names = builtin_names() if args.presets == "all" else args.presets.split(",")
    results: dict[str, Any] = {"device": args.device, "rounds": args.rounds, "warmup": args.warmup,
                               "block_ms": args.block_ms, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "presets": {}}
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every step of the work: a later one may not finish
        (args.out_dir / "monitor_cost.json").write_text(json.dumps(results, indent=1))
        (args.out_dir / "monitor_cost.md").write_text(table(results) + "\n")

    runnable = []
    for name in names:
        avail = availability(resolve(name), args.device)
        if avail.ok:
            runnable.append(name)
        else:
            results["presets"][name] = {"error": f"unavailable: {avail.reason}"}
    t0 = time.perf_counter()
    rounds_file = args.out_dir / "monitor_cost_rounds.jsonl"  # the worker's, a preset a line, as measured
    rounds_file.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--child", ",".join(runnable), "--device", args.device, "--rounds",
           str(args.rounds), "--block-ms", str(args.block_ms), "--warmup", str(args.warmup),
           "--rounds-file", str(rounds_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    done = [json.loads(x) for x in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    if proc.returncode != 0:
        for name in runnable:
            results["presets"][name] = {"error": proc.stderr[-2000:] or f"exit code {proc.returncode}"}
    if done:
        for res in done:
            if "error" not in res:
                res["summary"] = summarise(res)
                s = res["summary"]
                print(f"{res['preset']}: bare {s['bare_median_ms']:.4g} ms, json reported "
                      f"{_ratio(s['json_reported'])}, tui reported {_ratio(s['tui_reported'])}, json wall "
                      f"{_ratio(s['json_wall'])}, tui wall {_ratio(s['tui_wall'])}", file=sys.stderr, flush=True)
            results["presets"][res["preset"]] = res
    results["in_process_s"] = round(time.perf_counter() - t0, 1)
    save()
    chosen = runnable if args.separate_presets == "all" else [
        n for n in args.separate_presets.split(",") if n in runnable]
    for name in chosen if args.separate else []:
        res = results["presets"].get(name, {})
        if "error" in res:
            continue
        try:
            res["separate"] = separate(name, args.device, resolve(name).warmup, res["steps"], args.separate)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            res["separate_error"] = str(exc)
        res["summary"] = summarise(res)
        print(f"{name}: separate processes {res['summary'].get('separate')}", file=sys.stderr, flush=True)
        save()
    print(table(results))
    return 1 if any("error" in r for r in results["presets"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
