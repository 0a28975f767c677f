#!/usr/bin/env python3
"""Drive the apextui TUI headless, run a preset for real, save an SVG screenshot mid-run.

Meant for a GPU machine without a terminal (e.g. over a non-interactive SSH command):

    python tools/tui_screenshot.py --out docs/tui-fused_amp-h200.svg

It builds the app with `make_app` (the real doctor, device probe and runner),
runs the workload's baseline first so the comparison table has a speed-up
(unless --no-baseline), then highlights the preset with the arrow keys, presses
enter, waits until --at-step steps are done with GPU metrics on screen (or the
run ends, or --timeout), saves the screenshot, stops the run and prints a short
summary. Exit code 0 on success, 1 if a run failed or timed out, 3 if the preset
cannot run here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from apextui.core.presets import BASELINES, PresetError, resolve  # noqa: E402
from apextui.ui import fmt  # noqa: E402
from apextui.ui.app import make_app  # noqa: E402
from apextui.ui.keys import highlight_preset  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="fused_amp", help="preset to run (default fused_amp)")
    p.add_argument("--out", default="docs/tui-screenshot.svg", help="where to write the SVG")
    p.add_argument("--at-step", type=int, default=300, help="take the screenshot once this many steps are done")
    p.add_argument("--steps", type=int, default=None, help="run length (default: the preset's)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--size", default="120x40", help="terminal size COLSxROWS (default 120x40)")
    p.add_argument("--sample-interval", type=float, default=0.25, help="NVML/psutil sampling period in s")
    p.add_argument("--no-baseline", action="store_true", help="do not run the workload's baseline first")
    p.add_argument("--timeout", type=float, default=600, help="give up after this many seconds")
    p.add_argument("--results", default=None, help="also save the comparison table as JSON here")
    return p.parse_args(argv)


async def wait_until(pilot, condition, deadline: float, what: str) -> None:
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


async def choose(pilot, app, name: str) -> None:
    """Highlight `name` in the preset picker with the arrow keys and press enter, as a user would."""
    if not await highlight_preset(pilot, app, name):
        raise RuntimeError(f"preset {name} is not in the picker")
    await pilot.press("enter")


async def drive(args: argparse.Namespace) -> int:
    try:
        preset = resolve(args.preset)
    except PresetError as exc:
        print(f"tui_screenshot: {exc}", file=sys.stderr)
        return 2
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    baseline = BASELINES[preset.workload]
    app = make_app(device=args.device, steps=args.steps, sample_interval=args.sample_interval,
                   preset=preset, autostart=False)
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    util_seen: list[float] = []
    async with app.run_test(size=(cols, rows)) as pilot:
        await wait_until(pilot, lambda: app.probe is not None or app.return_code is not None, deadline,
                         "the device probe")
        if app.probe is None:
            print("tui_screenshot: the device probe failed (see above)", file=sys.stderr)
            return 3
        probe = app.probe
        print(f"device: {probe.device} ({probe.env.get('gpu') or 'no GPU'}), torch {probe.env.get('torch')}")
        avail = probe.availability.get(preset.name)
        if avail is None or not avail.ok:
            print(f"tui_screenshot: {preset.name} cannot run here: {avail.reason if avail else '?'}"
                  f"\n  fix: {avail.fix if avail else ''}", file=sys.stderr)
            return 3
        table = app.table
        if not args.no_baseline and baseline != preset.variant and probe.availability.get(baseline, None) \
                and probe.availability[baseline].ok:
            print(f"running the baseline {baseline} first …")
            await choose(pilot, app, baseline)
            await wait_until(pilot, lambda: app.active is None and table.rows_data, deadline, f"{baseline} to finish")
            r = table.rows_data[-1]
            print(f"  {baseline}: {r.status}, median {fmt.ms(r.median_ms)} ms/step")
        print(f"running {preset.name} …")
        n_rows = len(table.rows_data)
        await choose(pilot, app, preset.name)
        await wait_until(pilot, lambda: started_run_id(app, preset.name, n_rows) is not None, deadline,
                         f"{preset.name} to start")
        run_id = started_run_id(app, preset.name, n_rows)

        def ready() -> bool:
            view = app._drawn_view  # what is on screen
            if view is not None and view.run_id == run_id:
                util = view.monitor.get("gpu_util_pct", ())
                if util:
                    util_seen[:] = util
            return screenshot_ready(view, run_id, preset.name, args.at_step, probe.device == "cuda",
                                    app._spark_stale)

        try:
            await wait_until(pilot, ready, deadline, f"{args.at_step} steps with GPU metrics")
        except TimeoutError as exc:
            print(f"tui_screenshot: {exc}", file=sys.stderr)
        # the doctor report should be on screen too (it usually arrived long ago)
        try:
            await wait_until(pilot, lambda: app.report is not None or app.report_error is not None,
                             min(deadline, time.monotonic() + 120), "the doctor report")
        except TimeoutError:
            print("tui_screenshot: the doctor report had not arrived", file=sys.stderr)
        app.clear_notifications()
        await pilot.pause(0.3)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent.resolve()))
        view = app._drawn_view
        if view is not None and view.run_id != run_id:  # timed out before this run drew: report nothing of it
            view = None
        snap = view.snapshot if view else None
        # stop the run (if it is still going) the way a user would, and wait for it
        if app.active is not None:
            await pilot.press("s")
            await wait_until(pilot, lambda: app.active is None, time.monotonic() + 60, "the run to stop")
        if args.results:
            from apextui.core.results import save_results

            save_results(table.rows_data, args.results, env=probe.env)

        print(f"screenshot: {out} ({cols}x{rows}), after {time.monotonic() - t0:.1f} s")
        if snap is not None and snap.info is not None:
            st = snap.stats
            print(f"{preset.name} at the screenshot: {snap.status}, step {snap.steps_done}/{snap.info.steps}, "
                  f"median {fmt.ms(st.median_ms if st else None)} ms/step "
                  f"(p10 {fmt.ms(st.p10_ms if st else None)}, p90 {fmt.ms(st.p90_ms if st else None)}), "
                  f"{fmt.si(snap.throughput, snap.info.units + '/s')}")
            if view.losses:
                floor = f", entropy floor {snap.info.loss_floor:.4f}" if snap.info.loss_floor else ""
                print(f"loss {view.first_loss:.4f} -> {view.last_loss:.4f}{floor}")
            if snap.info.uses_grad_scaler:
                print(f"GradScaler: scale {view.loss_scale}, skipped steps {snap.skipped_steps}")
            m = snap.monitor
            if m is not None:
                if util_seen:
                    print(f"GPU util seen: {', '.join(f'{u:.0f}' for u in util_seen[-12:])} % "
                          f"(max {max(util_seen):.0f} %)")
                else:
                    print(f"GPU util: n/a ({m.na.get('gpu_util_pct', 'no reading')})")
                print(f"GPU memory {fmt.mib(m.gpu_mem_used_mb)} of {fmt.mib(m.gpu_mem_total_mb)}, "
                      f"power {m.gpu_power_w} W, temp {m.gpu_temp_c} °C, SM {m.gpu_sm_clock_mhz} MHz; "
                      f"process CPU {m.cpu_pct} %, RSS {fmt.mib(m.rss_mb)}")
        print("comparison table:")
        from apextui.core.compare import format_speedup
        from apextui.core.results import comparison

        for r in table.rows_data:
            up = format_speedup(comparison(r, table.rows_data), compact=True)
            print(f"  {r.preset:<16} {r.device:<5} {r.status:<8} median {fmt.ms(r.median_ms):>6} ms  "
                  f"speed-up {up:>6}  final loss {fmt.loss(r.final_loss)}")
        if app.report is not None:
            apex = app.report.to_dict()["apex"] if hasattr(app.report, "to_dict") else app.report.get("apex", {})
            print(f"doctor: Apex {apex.get('status')} {apex.get('version') or ''}".rstrip())
        print(json.dumps({"screenshot": str(out), "steps": snap.steps_done if snap else 0,
                          "median_ms": snap.stats.median_ms if snap and snap.stats else None,
                          "gpu_util_max": max(util_seen) if util_seen else None}))
        failed = snap is None or snap.status == "failed"
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(drive(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
