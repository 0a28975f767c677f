#!/usr/bin/env python3
"""An SVG screenshot of `apextui attach` following a live training loop of examples/gpt.py, headless.

    python tools/attach_screenshot.py --out docs/attach-gpt-h200-120x40.svg            # GPU: full size
    python tools/attach_screenshot.py --device cpu --small --out /tmp/attach.svg        # CPU: the tiny GPT

It starts the loop in a child process (`apextui.watch(name=...)`, `mon.step(loss=..., tokens=..., lr=...,
grad_norm=...)` each step: AdamW, a warm-up-then-cosine learning rate, gradient clipping), waits until its
stream has `--at-step` steps, opens the attach TUI on it in this process (Textual's headless driver, at
`--size`), waits until the run pane shows those steps and the metrics pane the learning rate, saves the SVG,
then stops the loop with SIGINT (its run then ends `stopped`, as a Ctrl-C would). Prints what it saw as JSON.
Exit 0, 1 if the loop or the screen did not get there within --timeout, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source checkout

LOOP = """
import math, sys, torch, apextui
sys.path.insert(0, {examples!r})
from gpt import build
device, small, name = {device!r}, {small!r}, {name!r}
setup = build(small=small)
model = setup.model.to(device).train()
opt = torch.optim.AdamW(model.parameters(), lr=setup.lr)
warm, total = 50, 5000
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
gen = torch.Generator(device).manual_seed(0)
with apextui.watch(name=name, steps=total) as mon:
    print(mon.path, flush=True)
    for step in range(total):
        x, y = setup.make_batch(torch.device(device), gen)
        loss = setup.loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        mon.step(loss=loss.detach(), tokens=setup.units_per_step, lr=sched.get_last_lr()[0], grad_norm=norm)
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--small", action="store_true", help="the GPT example's tiny size (CPU)")
    p.add_argument("--name", default="gpt-example", help="the watched run's name (default gpt-example)")
    p.add_argument("--size", default="120x40", help="terminal COLSxROWS (default 120x40)")
    p.add_argument("--at-step", type=int, default=200, help="take the screenshot once this many steps are shown")
    p.add_argument("--out", default="attach.svg", help="the SVG's path")
    p.add_argument("--timeout", type=float, default=600, help="give up after this many seconds")
    return p.parse_args(argv)


async def shoot(meta: object, size: tuple[int, int], at_step: int, out: Path, deadline: float) -> dict[str, object]:
    from apextui.ui.attach_app import AttachApp
    from apextui.ui.widgets.metric_plots import MetricPlots

    app = AttachApp(meta)  # type: ignore[arg-type]

    def shown() -> int:
        text = str(getattr(app.query_one("#run-steps").render(), "plain", ""))
        head = text.strip().split("/")[0].split("·")[0].strip()
        return int(head) if head.isdigit() else 0

    async with app.run_test(size=size) as pilot:
        while not (shown() >= at_step and "lr" in app.query_one(MetricPlots).names):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the screen showed {shown()} steps")
            await pilot.pause(0.2)
        await pilot.pause(1.2)  # one more redraw of the charts
        app.save_screenshot(filename=out.name, path=str(out.parent))
        return {"steps_shown": shown(), "title": str(getattr(app.query_one("#run-title").render(), "plain", "")),
                "timing": str(getattr(app.query_one("#run-timing").render(), "plain", ""))}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cols, _, rows = args.size.lower().partition("x")
    if not (cols.isdigit() and rows.isdigit()) or int(cols) < 60 or int(rows) < 20 or args.at_step < 1:
        print(f"attach_screenshot: --size {args.size!r} must be COLSxROWS of at least 60x20; --at-step >= 1",
              file=sys.stderr)
        return 2
    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    small = args.small or device == "cpu"
    code = LOOP.format(examples=str(ROOT / "examples"), device=device, small=small, name=args.name)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + args.timeout
    try:
        from apextui.core.watch import store

        assert child.stdout is not None
        folder = Path(child.stdout.readline().strip())
        meta = store.read_meta(folder)
        if meta is None:
            print("attach_screenshot: the training loop did not start", file=sys.stderr)
            return 1
        out = Path(args.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            seen = asyncio.run(shoot(meta, (int(cols), int(rows)), args.at_step, out, deadline))
        except TimeoutError as exc:
            print(f"attach_screenshot: timed out after {args.timeout:.0f} s: {exc}", file=sys.stderr)
            return 1
        print(json.dumps({"svg": str(out), "device": device, "small": small, "run": str(folder), **seen}))
        return 0
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()


if __name__ == "__main__":
    raise SystemExit(main())
