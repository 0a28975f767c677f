"""What does `apextui.watch` cost a training loop? The same loop with and without `mon.step`, in one process.

    python benchmarks/watch_overhead.py [--device cuda] [--loops gpt,small] [--rounds 12] [--block-s 3]
                                        [--control] [--out FILE.json]
    python benchmarks/watch_overhead.py --device cpu --quick        # a smoke run on CPU at tiny sizes

Two loops, each built once and warmed up:
  gpt:    examples/gpt.py at full size (124 M parameters, 8 x 1024 tokens a step): GPU-bound on a GPU
          (target: at most 1 % slower with the hook);
  small:  a stack of small Linear layers with AdamW: about 1 ms a step on an H200, host-bound (the Python and
          the kernel launches set the pace; target: at most 2 %); `--small-layers` and `--small-width` size it.
Then, round after round, a block of steps runs bare and a block runs with `mon.step(loss=loss, tokens=...)`
after each step, in alternating order (AB, BA, AB, ...), so drift slower than a block hits both alike; each
round gives one ratio (watched ms/step / bare ms/step) and the loop's overhead is their geometric mean with its
95 % bootstrap interval (`benchlib.measure.geomean_ci`). A block is timed from a synchronisation before it
to one after it (perf_counter; nothing inside the loop), its steps sized from the warm-up to last `--block-s`
seconds. One watched run lives through every round, as in real training: its sampler and writer threads also
run during the bare blocks (they are idle but for one sample a second), so what is measured is `mon.step` and
the work it hands over. `--control` adds an A/A row per loop (both blocks bare): the method's own noise.

Prints one JSON document on stdout (and writes it to --out): per loop the bare and watched ms/step (medians of
the blocks), the ratio with its interval, the target and whether the interval's upper end is within it, the
watched run's own median from its `end` line (what `apextui attach` reports) against the bare loop's, and the
raw per-round ratios. Exit 0, or 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import apextui
from benchlib.measure import geomean_ci
from apextui.core.watch import reader

TARGETS = {"gpt": 1.01, "small": 1.02}
GPT = Path(__file__).resolve().parents[1] / "examples" / "gpt.py"


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def gpt_loop(device: str, small: bool) -> tuple[Callable[[], Any], int]:
    """examples/gpt.py's model, one batch made once; a step: forward, loss, backward, AdamW."""
    spec = importlib.util.spec_from_file_location("watch_overhead_gpt", GPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    setup = module.build(small=small)
    model = setup.model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=setup.lr)
    x, y = setup.make_batch(torch.device(device), torch.Generator(device).manual_seed(0))

    def step() -> Any:
        loss = setup.loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, int(setup.units_per_step)


def small_loop(device: str, layers: int, width: int, batch: int) -> tuple[Callable[[], Any], int]:
    """A host-bound step: `layers` Linear+ReLU of `width`, MSE loss, AdamW (foreach)."""
    torch.manual_seed(0)
    mods: list[torch.nn.Module] = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, width, device=device), torch.randn(batch, width, device=device)

    def step() -> Any:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, batch


def block(step: Callable[[], Any], steps: int, device: str, mon: Any, units: int) -> float:
    """ms/step of `steps` steps, with `mon.step` after each when `mon` is given."""
    _sync(device)
    t0 = time.perf_counter()
    if mon is None:
        for _ in range(steps):
            step()
    else:
        for _ in range(steps):
            mon.step(loss=step(), tokens=units)
    _sync(device)
    return (time.perf_counter() - t0) * 1000.0 / steps


def measure(name: str, step: Callable[[], Any], units: int, device: str, rounds: int, block_s: float,
            control: bool) -> dict[str, Any]:
    for _ in range(3):  # allocations, autotuning
        step()
    probe = block(step, 5, device, None, units)
    steps = max(5, round(block_s * 1000.0 / probe))
    mon = None if control else apextui.watch(name=f"watch-overhead-{name}", warmup=10)
    block(step, steps, device, None, units)  # one of each before the rounds: the hook's warm-up and blocks
    if mon is not None:
        block(step, steps, device, mon, units)
    bare, watched, ratios = [], [], []
    for r in range(rounds):
        watched_first = r % 2 == 1  # AB, BA, AB, ...
        first, second = (block(step, steps, device, mon if i == watched_first else None, units) for i in (0, 1))
        a, b = (second, first) if watched_first else (first, second)
        bare.append(a)
        watched.append(b)
        ratios.append(b / a)
    g, lo, hi = geomean_ci(ratios)
    out: dict[str, Any] = {
        "loop": name if not control else f"{name}-aa", "steps_per_block": steps, "rounds": rounds,
        "bare_ms": round(statistics.median(bare), 4), "watched_ms": round(statistics.median(watched), 4),
        "ratio": round(g, 4), "ratio_low": round(lo, 4), "ratio_high": round(hi, 4),
        "target": TARGETS.get(name), "within_target": hi <= TARGETS.get(name, 1.0) if not control else None,
        "ratios": [round(x, 4) for x in ratios],
    }
    if mon is not None:
        mon.close()
        end = next((e for e in reversed(reader.Follower(mon.path).poll()) if e["event"] == "end"), None)
        median = end["summary"]["median_ms"] if end else None
        out["watch_median_ms"] = median
        out["watch_median_vs_bare"] = round(median / out["bare_ms"], 4) if median else None
        out["watch_block_steps"] = end["summary"]["block_steps"] if end else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--loops", default="gpt,small", help="comma-separated: gpt, small (default both)")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--block-s", type=float, default=3.0, help="seconds a block lasts (default 3)")
    p.add_argument("--small-layers", type=int, default=8)
    p.add_argument("--small-width", type=int, default=256)
    p.add_argument("--small-batch", type=int, default=64)
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 rounds of 0.1 s blocks (a smoke run)")
    p.add_argument("--control", action="store_true", help="also an A/A control per loop (both blocks bare)")
    p.add_argument("--out", help="also write the JSON document here")
    args = p.parse_args(argv)
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    unknown = [x for x in loops if x not in TARGETS]
    if unknown or not loops or args.rounds < 2 or args.block_s <= 0:
        print(f"watch_overhead: --loops takes gpt,small (got {args.loops!r}); --rounds >= 2; --block-s > 0",
              file=sys.stderr)
        return 2
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("watch_overhead: --device cuda: no CUDA device here", file=sys.stderr)
        return 2
    if args.quick:
        args.rounds, args.block_s = 2, 0.1
        args.small_layers, args.small_width, args.small_batch = 2, 16, 8
    results = []
    for name in loops:
        built = gpt_loop(device, small=args.quick or device == "cpu") if name == "gpt" else \
            small_loop(device, args.small_layers, args.small_width, args.small_batch)
        for control in ((False, True) if args.control else (False,)):
            results.append(measure(name, *built, device, args.rounds, args.block_s, control))
            r = results[-1]
            print(f"{r['loop']:>9}: bare {r['bare_ms']:.4f} ms, watched {r['watched_ms']:.4f} ms, ratio "
                  f"{r['ratio']:.4f} ({r['ratio_low']:.4f}-{r['ratio_high']:.4f})", file=sys.stderr)
    doc = {"benchmark": "watch_overhead", "device": device, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "quick": args.quick,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loops": results}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
