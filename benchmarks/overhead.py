"""What does apextui's monitoring cost the training it watches?

    python benchmarks/overhead.py [--presets fp32,fused_amp] [--steps 300] [--repeats 3] [--out-dir DIR]

The same preset, the same number of steps, each mode in a fresh process, modes interleaved per repeat:
  (a) bare: the workload's own step in a plain loop — no runner, no per-step events, no sampler,
      no snapshots; one CUDA event after warm-up and one at the end;
  (b) json: `apextui --preset P --json`;
  (c) tui:  the Textual app driven headless (App.run_test) running the preset with live updates; it
      trains in a worker process (as `apextui` does); tui_thread: the same app training in a thread
      of its own process (APEXTUI_WORKER=thread, the design before the worker process).
Compared: mean ms/step over the post-warm-up steps (a: total GPU-timeline time / steps; b and c: the
summary's mean_ms, the mean of back-to-back step intervals, i.e. the same quantity). Ratios b/a and
c/a are computed within each repeat. Writes DIR/overhead.json and DIR/overhead.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def bare(preset_name: str, steps: int, device: str) -> dict[str, Any]:
    """(a): a plain loop over the workload's step function (`benchlib.bare`), compiled or captured first
    as the runner does before its clock starts; the measured steps timed by CUDA events (wall time on CPU)."""
    from benchlib import bare as bare_loop

    preset, w = bare_loop.build(preset_name, device, steps)
    warmup = preset.warmup if preset.warmup < steps else steps // 5
    bare_loop.plain_steps(w.step, warmup)
    ms, _ = bare_loop.event_timed_steps(w, steps - warmup, device)
    return {"mean_ms": ms, "measured_steps": steps - warmup}


def bare_thread(preset_name: str, steps: int, device: str) -> dict[str, Any]:
    """(a') the bare loop, but in a background thread while the main thread waits: isolates what running
    the training off the main thread costs, with none of apextui's monitoring."""
    import threading

    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(bare(preset_name, steps, device)))
    t.start()
    t.join()
    return out


def tui(preset_name: str, steps: int, device: str) -> dict[str, Any]:
    """(c): the TUI running the preset, driven headless, screen updating live."""
    from apextui.core.presets import resolve
    from apextui.ui.app import make_app

    app = make_app(preset=resolve(preset_name), device=device, steps=steps, autostart=True)

    async def drive() -> dict[str, Any]:
        async with app.run_test(size=(120, 40)):
            while app.active is None:
                await asyncio.sleep(0.05)
            wall, cpu = time.perf_counter(), time.process_time()
            while True:
                await asyncio.sleep(0.2)  # not pilot.pause(): that waits for the app to go idle
                result = app.last_result()
                if result is not None:  # the UI process's own CPU use while the run trained
                    return result | {"ui_cpu_frac": (time.process_time() - cpu) / (time.perf_counter() - wall)}

    return asyncio.run(drive())


def worker(preset_name: str, steps: int, device: str) -> dict[str, Any]:
    """(c') the TUI's worker process alone: ProcessRunner from a plain script, no Textual, a callback
    that keeps only the last snapshot. Separates what the worker process costs from what the UI costs."""
    from apextui.core.run import events
    from apextui.core.presets import resolve
    from apextui.core.run.request import RunRequest
    from apextui.core.run.worker import ProcessRunner, prestart

    prestart()
    runner = ProcessRunner(RunRequest(resolve(preset_name), device, steps), lambda snap: None).start()
    runner.join()
    assert runner.result is not None
    return events.summary(runner.result).to_dict() | {"status": runner.result.status}


def json_mode(preset_name: str, steps: int, device: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """(b): `apextui --preset P --json`."""
    proc = subprocess.run([sys.executable, "-m", "apextui", "--preset", preset_name, "--json", "--steps",
                           str(steps), "--device", device, *extra], capture_output=True, text=True, cwd=ROOT)
    end = json.loads(proc.stdout.splitlines()[-1])
    return end["summary"] | {"status": end["status"]}


def child(mode: str, preset: str, steps: int, device: str) -> dict[str, Any]:
    if mode == "json":
        return json_mode(preset, steps, device)
    if mode == "json_nosampler":  # the NVML/psutil sampler effectively off (one reading an hour)
        return json_mode(preset, steps, device, ("--sample-interval", "3600"))
    env = dict(os.environ)
    if mode == "tui_thread":
        env["APEXTUI_WORKER"] = "thread"
    if mode == "worker_spawn":  # a freshly spawned interpreter instead of a fork of the torch-loaded server
        env["APEXTUI_WORKER_START"] = "spawn"
    base = {"tui_thread": "tui", "worker_spawn": "worker", "bare_again": "bare"}.get(mode, mode)
    proc = subprocess.run([sys.executable, __file__, "--child", base,
                           "--presets", preset, "--steps", str(steps), "--device", device],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:]}
    return json.loads(proc.stdout.splitlines()[-1])


def _ms_cell(row: dict[str, Any], mode: str) -> str:
    v = row.get(mode, {}).get("mean_ms") if isinstance(row.get(mode), dict) else None
    return "—" if v is None else f"{v:.3f}"


def _ratio_cell(row: dict[str, Any], key: str) -> str:
    return "—" if row.get(key) is None else f"{row[key]:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="fp32,fused_amp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--modes", default="bare,json,tui",
                        help="first is the reference; also: bare_thread, json_nosampler, tui_thread, worker, "
                        "worker_spawn, bare_again (an A/A control: the bare loop again, to show the noise)")
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    parser.add_argument("--child", choices=("bare", "bare_thread", "tui", "worker"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fn = {"bare": bare, "bare_thread": bare_thread, "tui": tui, "worker": worker}[args.child]
        out = fn(args.presets, args.steps, args.device)
        print(json.dumps({k: out.get(k) for k in ("mean_ms", "median_ms", "measured_steps", "status", "ui_cpu_frac")}))
        return 0
    modes = args.modes.split(",")
    results: dict[str, Any] = {"steps": args.steps, "device": args.device, "repeats": []}
    for rep in range(args.repeats):
        for preset in args.presets.split(","):
            row = {"repeat": rep + 1, "preset": preset}
            for mode in modes:  # interleaved: a, b, c back to back in every repeat
                row[mode] = child(mode, preset, args.steps, args.device)
                print(f"repeat {rep + 1} {preset} {mode}: {row[mode].get('mean_ms')}"
                      + (f" (UI process CPU {row[mode]['ui_cpu_frac']:.1%})" if row[mode].get("ui_cpu_frac") else ""),
                      file=sys.stderr, flush=True)
            for mode in modes[1:]:
                a, x = row["bare"].get("mean_ms"), row[mode].get("mean_ms")
                row[f"{mode}_ratio"] = x / a if a and x else None
            results["repeats"].append(row)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "overhead.json").write_text(json.dumps(results, indent=1))
    lines = ["| preset | repeat | " + " | ".join(f"{m} ms" for m in modes) + " | "
             + " | ".join(f"{m}/bare" for m in modes[1:]) + " |", "|---|---|" + "---|" * (2 * len(modes) - 1)]
    for r in results["repeats"]:
        lines.append(f"| {r['preset']} | {r['repeat']} | " + " | ".join(_ms_cell(r, m) for m in modes) + " | "
                     + " | ".join(_ratio_cell(r, f"{m}_ratio") for m in modes[1:]) + " |")
    for preset in args.presets.split(","):
        for mode in modes[1:]:
            ratios = [r[f"{mode}_ratio"] for r in results["repeats"]
                      if r["preset"] == preset and r.get(f"{mode}_ratio")]
            if ratios:
                lines.append(f"\n{preset}: median {mode}/bare ratio {statistics.median(ratios):.3f} "
                             f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} repeats)")
    table = "\n".join(lines)
    (args.out_dir / "overhead.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
