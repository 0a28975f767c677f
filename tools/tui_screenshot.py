#!/usr/bin/env python3
"""Drive the apextui TUI headless, run presets for real, save SVG screenshots mid-run at one or more sizes.

Meant for a GPU machine without a terminal (e.g. over a non-interactive SSH command):

    python tools/tui_screenshot.py --preset torch_compile --preset fused_amp --size 80x24,160x48 \\
        --out-dir docs --tag h200

writes docs/tui-torch_compile-h200-80x24.svg, docs/tui-torch_compile-h200-160x48.svg and the two of
fused_amp, in one process. It builds the app with `make_app` (the real doctor, device probe and runner),
runs each workload's baseline first so the comparison table has a speed-up (unless --no-baseline), then for
each preset highlights it with the arrow keys and presses enter, waits until *that* run (its own run id, not
the previous run's final state still on screen) is past compiling with --at-step steps done and GPU metrics
on screen (or it ends, or --timeout), saves a screenshot at each --size of that same run (resizing the
headless terminal in between), prints the figures it saw, and stops the run with s.

Exit code 0 on success, 1 if a run failed or timed out, 2 on bad arguments, 3 if a preset cannot run here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from apextui.core.exits import EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_USAGE
from apextui.core.presets import PresetError, resolve
from apextui.ui import widget_format as fmt
from apextui.ui.app import make_app
from apextui.ui.keys import highlight_preset

MIN_COLS, MIN_ROWS = 40, 12


class UsageError(ValueError):
    """A bad command line: one line saying what is wrong and what is allowed (exit 2)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--preset", action="append", default=None,
                   help="preset to run; repeat for several, run one after another (default fused_amp)")
    p.add_argument("--size", default="120x40",
                   help="terminal size COLSxROWS, or several comma-separated (80x24,160x48): one screenshot "
                        "of the same run at each (default 120x40)")
    p.add_argument("--out", default=None, help="the SVG's path (one preset at one size only)")
    p.add_argument("--out-dir", default=None,
                   help="write tui-PRESET[-TAG]-COLSxROWS.svg here, one per preset and size")
    p.add_argument("--tag", default="", help="a word in the names --out-dir writes (e.g. h200)")
    p.add_argument("--at-step", type=int, default=300, help="take the screenshots once this many steps are done")
    p.add_argument("--steps", type=int, default=None, help="run length (default: the preset's)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--sample-interval", type=float, default=0.25, help="NVML/psutil sampling period in s")
    p.add_argument("--no-baseline", action="store_true", help="do not run the workloads' baselines first")
    p.add_argument("--timeout", type=float, default=600,
                   help="give up on a run (its compile included) after this many seconds")
    p.add_argument("--results", default=None, help="also save the comparison table as JSON here")
    return p.parse_args(argv)


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """'80x24,160x48' -> [(80, 24), (160, 48)]; UsageError naming the bad part and what is allowed."""
    sizes = []
    for part in text.split(","):
        cols, sep, rows = part.strip().lower().partition("x")
        if not sep or not cols.isdigit() or not rows.isdigit():
            raise UsageError(f"--size {part.strip()!r} is not COLSxROWS (e.g. 80x24, or 80x24,160x48)")
        size = (int(cols), int(rows))
        if size[0] < MIN_COLS or size[1] < MIN_ROWS:
            raise UsageError(f"--size {part.strip()}: the TUI needs at least {MIN_COLS}x{MIN_ROWS}")
        if size not in sizes:
            sizes.append(size)
    return sizes


def output_paths(args: argparse.Namespace, presets: list[str],
                 sizes: list[tuple[int, int]]) -> dict[tuple[str, tuple[int, int]], Path]:
    """Where each (preset, size) screenshot goes: --out for one of each, else --out-dir's
    tui-PRESET[-TAG]-COLSxROWS.svg (docs/ by default)."""
    if args.out is not None:
        if args.out_dir is not None:
            raise UsageError("give --out (one file) or --out-dir (a folder), not both")
        if len(presets) * len(sizes) != 1:
            raise UsageError("--out names one file: with several presets or sizes, give --out-dir instead")
        return {(presets[0], sizes[0]): Path(args.out)}
    folder = Path(args.out_dir if args.out_dir is not None else "docs")
    tag = f"-{args.tag}" if args.tag else ""
    return {(p, s): folder / f"tui-{p}{tag}-{s[0]}x{s[1]}.svg" for p in presets for s in sizes}


async def wait_until(condition: Callable[[], Any], deadline: float, what: str) -> None:
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)  # not pilot.pause: it would add its own work to the measured run


def screenshot_ready(view: Any, run_id: int | None, preset: str, at_step: int, need_gpu: bool,
                     spark_stale: bool) -> bool:
    """Whether the screen shows *this* run far enough along: its own run id and preset (not the previous
    run's final state, still on screen while this one starts or compiles), past compiling, --at-step steps
    done (or finished), GPU readings when on CUDA, the sparklines drawn."""
    if view is None or run_id is None or view.run_id != run_id:
        return False
    snap = view.snapshot
    if snap.finished:  # this run ended (a failure while compiling has no RunInfo): show how
        return True
    if snap.info is None or snap.info.preset != preset or snap.status in ("starting", "compiling"):
        return False
    gpu_ok = not need_gpu or len(view.monitor.get("gpu_util_pct", ())) >= 2
    return snap.steps_done >= min(at_step, snap.info.steps) and gpu_ok and not spark_stale


def started_run_id(app: Any, preset: str, rows_before: int) -> int | None:
    """The run id of the run of `preset` that was just started (None while it has not started)."""
    if app.active is not None and app.active.preset.name == preset:
        return app.active.run_id
    rows = app.table.rows_data
    if len(rows) > rows_before and rows[-1].preset == preset:  # it ended already (failed at once)
        return app._run_id
    return None


async def choose(pilot: Any, app: Any, name: str) -> None:
    """Highlight `name` in the preset picker with the arrow keys and press enter, as a user would."""
    if not await highlight_preset(pilot, app, name):
        raise RuntimeError(f"preset {name} is not in the picker")
    await pilot.press("enter")


def num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def figures(name: str, view: Any, util_seen: list[float]) -> list[str]:
    """What the screen showed of the run at the screenshot, as lines to print."""
    snap = view.snapshot if view is not None else None
    if snap is None or snap.info is None:
        return [f"{name} at the screenshot: {snap.status if snap else 'not drawn'}"
                + (f" ({snap.error})" if snap is not None and snap.error else "")]
    st = snap.stats
    lines = [(f"{name} at the screenshot: {snap.status}, step {snap.steps_done}/{snap.info.steps}, "
              f"median {fmt.ms(st.median_ms if st else None)} ms/step "
              f"(p10 {fmt.ms(st.p10_ms if st else None)}, p90 {fmt.ms(st.p90_ms if st else None)}), "
              f"{fmt.si(snap.throughput, snap.info.units + '/s')}")]
    if view.losses:
        floor = f", entropy floor {snap.info.loss_floor:.4f}" if snap.info.loss_floor else ""
        lines.append(f"loss {view.first_loss:.4f} -> {view.last_loss:.4f}{floor}")
    if snap.info.uses_grad_scaler:
        lines.append(f"GradScaler: scale {view.loss_scale}, skipped steps {snap.skipped_steps}")
    m = snap.monitor
    if m is not None:
        if util_seen:
            lines.append(f"GPU util seen: {', '.join(f'{u:.0f}' for u in util_seen[-12:])} % "
                         f"(max {max(util_seen):.0f} %)")
        else:
            lines.append(f"GPU util: n/a ({m.na.get('gpu_util_pct', 'no reading')})")
        lines.append(f"GPU memory {fmt.mib(m.gpu_mem_used_mb)} of {fmt.mib(m.gpu_mem_total_mb)}, "
                     f"power {num(m.gpu_power_w)} W, temp {num(m.gpu_temp_c)} °C, SM {num(m.gpu_sm_clock_mhz)} MHz; "
                     f"process CPU {num(m.cpu_pct)} %, RSS {fmt.mib(m.rss_mb)}")
    return lines


async def run_baseline(pilot: Any, app: Any, baseline: str, timeout: float) -> None:
    """Run the workload's baseline to its end (once: later presets of that workload reuse its row)."""
    table = app.table
    if any(r.preset == baseline and r.status == "ok" for r in table.rows_data):
        return
    avail = app.probe.availability.get(baseline)
    if avail is None or not avail.ok:
        return
    print(f"running the baseline {baseline} first …", flush=True)
    n_rows = len(table.rows_data)
    await choose(pilot, app, baseline)
    await wait_until(lambda: app.active is None and len(table.rows_data) > n_rows, time.monotonic() + timeout,
                     f"{baseline} to finish")
    r = table.rows_data[-1]
    print(f"  {baseline}: {r.status}, median {fmt.ms(r.median_ms)} ms/step", flush=True)


async def shoot_preset(pilot: Any, app: Any, name: str, args: argparse.Namespace, sizes: list[tuple[int, int]],
                       paths: dict[tuple[str, tuple[int, int]], Path]) -> dict[str, Any]:
    """Start `name`, wait for its own run to be ready, screenshot it at every size, stop it; what was seen."""
    probe = app.probe
    table = app.table
    print(f"running {name} …", flush=True)
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    n_rows = len(table.rows_data)
    await choose(pilot, app, name)
    await wait_until(lambda: started_run_id(app, name, n_rows) is not None, deadline, f"{name} to start")
    run_id = started_run_id(app, name, n_rows)
    util_seen: list[float] = []

    def ready() -> bool:
        view = app._drawn_view  # what is on screen
        if view is not None and view.run_id == run_id:
            util = view.monitor.get("gpu_util_pct", ())
            if util:
                util_seen[:] = util
        return screenshot_ready(view, run_id, name, args.at_step, probe.device == "cuda", app._spark_stale)

    timed_out = False
    try:
        await wait_until(ready, deadline, f"{name}: {args.at_step} steps with GPU metrics")
    except TimeoutError as exc:
        print(f"tui_screenshot: {exc}", file=sys.stderr)
        timed_out = True
    shots = []
    view = None
    for cols, rows in sizes:
        if tuple(app.size) != (cols, rows):
            await pilot.resize_terminal(cols, rows)
        app.clear_notifications()
        await pilot.pause(0.3)  # the resized panes redrawn (charts at their new width, table columns)
        out = paths[(name, (cols, rows))]
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent.resolve()))
        view = app._drawn_view
        if view is not None and view.run_id != run_id:  # timed out before this run drew: report nothing of it
            view = None
        shots.append(str(out))
        print(f"screenshot: {out} ({cols}x{rows}), {time.monotonic() - t0:.1f} s after {name} started",
              flush=True)
        for line in figures(name, view, util_seen):
            print(f"  {line}", flush=True)
    snap = view.snapshot if view is not None else None
    if app.active is not None:  # stop the run the way a user would, and wait for it
        await pilot.press("s")
        await wait_until(lambda: app.active is None, time.monotonic() + 60, f"{name} to stop")
    return {"preset": name, "screenshots": shots, "steps": snap.steps_done if snap else 0,
            "median_ms": snap.stats.median_ms if snap and snap.stats else None,
            "gpu_util_max": max(util_seen) if util_seen else None,
            "failed": timed_out or snap is None or snap.status == "failed"}


def print_table(app: Any) -> None:
    from apextui.core.measure.compare import format_speedup
    from apextui.core.results import comparison

    rows = app.table.rows_data
    print("comparison table:")
    for r in rows:
        up = format_speedup(comparison(r, rows), compact=True)
        print(f"  {r.preset:<20} {r.device:<5} {r.status:<8} median {fmt.ms(r.median_ms):>6} ms  "
              f"speed-up {up:>6}  final loss {fmt.loss(r.final_loss)}")
    if app.report is not None:
        apex = app.report.to_dict()["apex"] if hasattr(app.report, "to_dict") else app.report.get("apex", {})
        print(f"doctor: Apex {apex.get('status')} {apex.get('version') or ''}".rstrip())


async def drive(args: argparse.Namespace, app_factory: Callable[..., Any] = make_app) -> int:
    """The whole run; `app_factory` is `make_app` (a test passes one that builds the app with fakes)."""
    names = args.preset or ["fused_amp"]
    try:
        presets = [resolve(n) for n in names]
        sizes = parse_sizes(args.size)
        paths = output_paths(args, [p.name for p in presets], sizes)
    except (PresetError, UsageError) as exc:
        print(f"tui_screenshot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    app = app_factory(device=args.device, steps=args.steps, sample_interval=args.sample_interval,
                      preset=presets[0], autostart=False)
    code = 0
    seen = []
    async with app.run_test(size=sizes[0]) as pilot:
        await wait_until(lambda: app.probe is not None or app.return_code is not None,
                         time.monotonic() + args.timeout, "the device probe")
        if app.probe is None:
            print("tui_screenshot: the device probe failed (see above)", file=sys.stderr)
            return EXIT_UNAVAILABLE
        probe = app.probe
        print(f"device: {probe.device} ({probe.env.get('gpu') or 'no GPU'}), torch {probe.env.get('torch')}")
        try:  # the doctor report should be on screen too, and runs start only once it is in
            await wait_until(lambda: app.doctor_done, time.monotonic() + 300, "the doctor report")
        except TimeoutError:
            print("tui_screenshot: the doctor report had not arrived", file=sys.stderr)
        for preset in presets:
            avail = probe.availability.get(preset.name)
            if avail is None or not avail.ok:
                print(f"tui_screenshot: {preset.name} cannot run here: {avail.reason if avail else '?'}"
                      f"\n  fix: {avail.fix if avail else ''}", file=sys.stderr)
                code = code or EXIT_UNAVAILABLE
                continue
            if not args.no_baseline and not preset.is_baseline:
                await run_baseline(pilot, app, preset.baseline, args.timeout)
            result = await shoot_preset(pilot, app, preset.name, args, sizes, paths)
            seen.append(result)
            if result["failed"]:
                code = code or EXIT_FAILED
        if args.results:
            from apextui.core.results import save_results

            save_results(app.table.rows_data, args.results, env=probe.env)
        print_table(app)
    print(json.dumps({"runs": [{k: v for k, v in r.items() if k != "failed"} for r in seen]}))
    return code


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(drive(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
