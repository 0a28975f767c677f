"""Soak test: does the TUI's memory stay flat over a long session?

    python benchmarks/soak_tui.py [--minutes 30] [--warmup-minutes 2] [--preset fp32] [--device auto]
                                  [--run-seconds 60] [--steps N] [--interval 10] [--threshold 5] [--out FILE]

A child process runs the real Textual app headless (`App.run_test`, real doctor, real device probe,
the default runner factory: a worker process where the app uses one) and keeps it training: it starts
`--preset`, stops it after `--run-seconds` with the app's own stop action (0: let each run finish its
`--steps`), starts it again as soon as it has finished, and so on; every finished run lands in the
comparison table, as in a real session. This process samples, every `--interval` seconds, the resident
memory (RSS) of the app process plus all its descendants (psutil, recursive: worker processes and the
forkserver included; USS too, which does not double-count pages shared between forked processes).

After `--minutes` it writes JSON (stdout, and `--out` if given):
  start_rss_mb  median of the samples in the first `--window` seconds after `--warmup-minutes`
  end_rss_mb    median of the samples in the last `--window` seconds
  growth_pct    (end - start) / start * 100;  passed = growth_pct <= --threshold (5 %) and no run failed
plus the peak, a least-squares slope (MiB/hour) over the post-warm-up samples, every sample, and the runs'
statuses. Medians over a window, not single samples: the set of processes changes as runs start and stop.
Exit code 0 when passed, 1 when not, 2 when the soak itself could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# ---- child: the app, kept busy -------------------------------------------------------------------

def child_main(args: argparse.Namespace) -> int:
    """Run the app headless until a line `quit` arrives on stdin; one JSON line per finished run on stdout."""
    from apextui.core.presets import resolve
    from apextui.core import results
    from apextui.ui.app import make_app

    preset = resolve(args.preset)
    steps = args.steps if args.steps else (10**9 if args.run_seconds > 0 else None)
    app = make_app(preset=preset, device=args.device, steps=steps, autostart=True,
                   save_dir=args.save_dir or ".")
    quit_requested = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        quit_requested.set()  # "quit", or the parent went away (EOF)

    threading.Thread(target=read_stdin, name="soak-stdin", daemon=True).start()

    def emit(obj: dict[str, Any]) -> None:
        print(json.dumps(obj), flush=True)

    async def drive() -> None:
        async with app.run_test(size=(120, 40)):
            emit({"event": "app_started", "t": time.time()})
            seen = 0
            run_started: float | None = None

            def emit_finished_runs() -> None:
                nonlocal seen
                rows = [r for r in app.table.rows_data if r.source == results.SESSION]
                for r in rows[seen:]:
                    emit({"event": "run", "n": seen + 1, "status": r.status, "error": r.error,
                          "steps": r.summary.steps, "median_ms": r.summary.median_ms,
                          "t": time.time()})
                    seen += 1

            while not quit_requested.is_set():
                await asyncio.sleep(0.5)  # not pilot.pause(): that waits for the app to go idle
                if app.probe_error is not None:
                    emit({"event": "error", "error": app.probe_error})
                    return
                emit_finished_runs()
                if app.active is not None:
                    if run_started is None:
                        run_started = time.monotonic()
                    if (args.run_seconds > 0 and not app.active.stopping
                            and time.monotonic() - run_started >= args.run_seconds):
                        app.action_stop()
                elif seen >= 1:  # (the first run is autostarted) the last run has finished: start the next
                    run_started = None
                    if not app.start_preset(preset.name):
                        emit({"event": "error", "error": f"{preset.name} could not be started again"})
                        return
            # quitting: stop the active run the way the user would, then leave
            if app.active is not None:
                app.action_stop()
                deadline = time.monotonic() + 60
                while app.active is not None and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
            emit_finished_runs()  # the run stopped at the end counts too (one long run: the only one)

    try:
        asyncio.run(drive())
    finally:
        app.shutdown_runs(30)
    emit({"event": "child_done"})
    return 0


# ---- parent: sample the app's process tree -------------------------------------------------------

def tree_memory(pid: int) -> dict[str, Any] | None:
    """RSS and USS (MiB) of `pid` and all its descendants; None once it is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return None
    rss = uss = 0
    uss_ok = True
    names = []
    for p in procs:
        try:
            rss += p.memory_info().rss
            names.append(p.pid)
            try:
                uss += p.memory_full_info().uss
            except (psutil.AccessDenied, AttributeError):
                uss_ok = False
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker that exited between listing and reading
    return {"rss_mb": rss / 2**20, "uss_mb": uss / 2**20 if uss_ok else None, "processes": len(names)}


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MiB), in MiB per hour."""
    if len(points) < 2:
        return None
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return None if den == 0 else sum((t - mt) * (v - mv) for t, v in points) / den * 3600


def window_median(samples: list[dict[str, Any]], key: str, lo: float, hi: float) -> float | None:
    vals = [s[key] for s in samples if lo <= s["t_s"] <= hi and s.get(key) is not None]
    return statistics.median(vals) if vals else None


def parent_main(args: argparse.Namespace) -> int:
    duration = args.minutes * 60
    warmup = args.warmup_minutes * 60
    if warmup + 2 * args.interval > duration:
        print("soak: --minutes must leave at least two samples after --warmup-minutes", file=sys.stderr)
        return 2
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--preset", args.preset, "--device",
           args.device, "--run-seconds", str(args.run_seconds)]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    if args.save_dir:
        cmd += ["--save-dir", args.save_dir]
    child = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    events: list[dict[str, Any]] = []

    def read_events() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append(ev)
            if ev.get("event") == "run":
                print(f"soak: run {ev['n']} {ev['status']} ({ev['steps']} steps, median {ev['median_ms']} ms)"
                      + (f": {ev['error']}" if ev.get("error") else ""), file=sys.stderr, flush=True)
            elif ev.get("event") == "error":
                print(f"soak: the app cannot run: {ev['error']}", file=sys.stderr, flush=True)

    reader = threading.Thread(target=read_events, daemon=True)
    reader.start()
    t0 = time.monotonic()
    samples: list[dict[str, Any]] = []
    try:
        while True:
            elapsed = time.monotonic() - t0
            mem = tree_memory(child.pid)
            if mem is None or child.poll() is not None:
                break
            samples.append({"t_s": round(elapsed, 1), **mem})
            phase = "warm-up" if elapsed < warmup else "measure"
            print(f"soak: {elapsed / 60:5.1f} min  {phase:7s}  rss {mem['rss_mb']:8.1f} MiB  "
                  f"uss {mem['uss_mb'] if mem['uss_mb'] is None else round(mem['uss_mb'], 1)} MiB  "
                  f"{mem['processes']} processes", file=sys.stderr, flush=True)
            if elapsed >= duration:
                break
            time.sleep(max(0.0, min(args.interval, duration - elapsed) - (time.monotonic() - t0 - elapsed)))
    finally:
        try:
            assert child.stdin is not None
            child.stdin.write("quit\n")
            child.stdin.flush()
            child.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            child.wait(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        reader.join(timeout=5)

    runs = [e for e in events if e.get("event") == "run"]
    end_t = samples[-1]["t_s"] if samples else 0.0
    after = [s for s in samples if s["t_s"] >= warmup]
    start_rss = window_median(samples, "rss_mb", warmup, warmup + args.window)
    end_rss = window_median(samples, "rss_mb", max(warmup, end_t - args.window), end_t)
    start_uss = window_median(samples, "uss_mb", warmup, warmup + args.window)
    end_uss = window_median(samples, "uss_mb", max(warmup, end_t - args.window), end_t)
    growth = (end_rss - start_rss) / start_rss * 100 if start_rss and end_rss is not None else None
    failed_runs = [r for r in runs if r["status"] == "failed"]
    error = next((e["error"] for e in events if e.get("event") == "error"), None)
    if error is None and not samples:
        error = f"the app process exited at once (exit code {child.returncode})"
    elif error is None and not runs:
        error = "no run finished during the soak"
    result = {
        "preset": args.preset, "device": args.device, "minutes": args.minutes,
        "warmup_minutes": args.warmup_minutes, "interval_s": args.interval, "window_s": args.window,
        "run_seconds": args.run_seconds, "steps": args.steps,
        "start_rss_mb": start_rss, "end_rss_mb": end_rss,
        "growth_pct": growth, "threshold_pct": args.threshold,
        "start_uss_mb": start_uss, "end_uss_mb": end_uss,
        "uss_growth_pct": (end_uss - start_uss) / start_uss * 100 if start_uss and end_uss is not None else None,
        "peak_rss_mb": max((s["rss_mb"] for s in after), default=None),
        "slope_rss_mb_per_h": slope_per_hour([(s["t_s"], s["rss_mb"]) for s in after]),
        "runs": len(runs), "runs_by_status": {k: sum(r["status"] == k for r in runs) for k in
                                              sorted({r["status"] for r in runs})},
        "failed_runs": failed_runs[:5],
        "child_exit_code": child.returncode,
        "error": error,
        "passed": bool(error is None and growth is not None and growth <= args.threshold and not failed_runs),
        "samples": samples,
    }
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    print(f"soak: {'PASS' if result['passed'] else 'FAIL'}: rss {start_rss} -> {end_rss} MiB "
          f"({'n/a' if growth is None else f'{growth:+.2f} %'}, limit {args.threshold} %), {len(runs)} runs"
          + (f"; {error}" if error else ""), file=sys.stderr)
    if error is not None:
        return 2
    return 0 if result["passed"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to soak (default 30)")
    parser.add_argument("--warmup-minutes", type=float, default=2.0,
                        help="left out before the start RSS is taken (default 2)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    parser.add_argument("--window", type=float, default=60.0,
                        help="start/end RSS: median over this many seconds (default 60)")
    parser.add_argument("--preset", default="fp32")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--run-seconds", type=float, default=60.0,
                        help="stop each run after this long and start the next (0: runs end by themselves)")
    parser.add_argument("--steps", type=int, default=0,
                        help="steps per run (default: the preset's with --run-seconds 0, else unlimited)")
    parser.add_argument("--threshold", type=float, default=5.0, help="max RSS growth in %% (default 5)")
    parser.add_argument("--out", help="also write the JSON result here")
    parser.add_argument("--save-dir", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return child_main(args) if args.child else parent_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
