"""A user's own training loop for a preset's workload, with nothing of apextui's runner in it: the reference
that apextui's reported ms/step is checked against.

    python benchmarks/bare_loop.py --preset layernorm [--warmup 30] [--steps 1000] [--device cuda]

It builds the preset's model, data and optimizer with apextui's workload code (the training step itself,
which is what is being measured), compiles or captures once where the preset does, runs `--warmup` steps,
synchronises, runs `--steps` steps with no clock, no events, no loss read and no printing, synchronises
once, and prints one JSON line: {"preset", "device", "warmup", "steps", "ms_per_step"}.
"""

from __future__ import annotations

import argparse
import json

from benchlib.bare import bare_block, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: the preset's)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: the preset's minus warm-up)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args(argv)
    from apextui.core.presets import resolve

    preset = resolve(args.preset)
    warmup = preset.warmup if args.warmup is None else args.warmup
    steps = max(1, preset.steps - warmup) if args.steps is None else args.steps
    if warmup < 0 or steps < 1:
        parser.error("--warmup must be >= 0 and --steps >= 1")
    _, workload = build(args.preset, args.device, warmup + steps)
    ms = bare_block(workload, warmup, steps, args.device)
    print(json.dumps({"preset": args.preset, "device": args.device, "warmup": warmup, "steps": steps,
                      "ms_per_step": ms}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
