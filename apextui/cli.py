"""Command line: `apextui` (TUI), `apextui --preset NAME --json` (headless), `apextui list`, `apextui doctor`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .core.env import DEVICE_CHOICES

EXIT_USAGE, EXIT_UNAVAILABLE = 2, 3


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="apextui",
        description="Measure NVIDIA Apex fused kernels against PyTorch on this machine, live. "
        "Without --json it opens the terminal UI.",
    )
    parser.add_argument("--preset", metavar="NAME|FILE.toml",
                        help="preset name (see `apextui list`) or a path to your own preset file")
    parser.add_argument("--json", action="store_true", help="run headless; JSON lines on stdout")
    parser.add_argument("--steps", type=_positive_int, metavar="N", help="override the preset's step count")
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto",
                        help="auto (default): CUDA when present, else CPU with the preset's small size")
    parser.add_argument("--sample-interval", type=_positive_float, default=1.0, metavar="SECONDS",
                        help="how often GPU/host metrics are sampled (default 1.0)")
    parser.add_argument("--load", action="append", default=[], metavar="RESULTS.json",
                        help="TUI: add runs saved with w (or --json output) to the comparison table")
    sub = parser.add_subparsers(dest="command", metavar="{list,doctor}")
    lister = sub.add_parser("list", help="every preset, and whether it can run here")
    lister.add_argument("--json", action="store_true", help="print JSON")
    lister.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    doctor = sub.add_parser("doctor", help="which Apex fused kernels work here, and why not")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _error(message: str, code: int) -> int:
    print(f"apextui: error: {message}", file=sys.stderr)
    return code


def cmd_list(as_json: bool, requested_device: str) -> int:
    from .core.availability import availability
    from .core.env import DeviceUnavailable, resolve_device
    from .core.presets import PresetError, load_builtin

    try:
        device = resolve_device(requested_device)
        presets = load_builtin()
    except (DeviceUnavailable, PresetError) as exc:
        return _error(str(exc), EXIT_USAGE if isinstance(exc, PresetError) else EXIT_UNAVAILABLE)
    rows = []
    for p in presets:
        a = availability(p, device)
        rows.append({"name": p.name, "workload": p.workload, "variant": p.variant, "amp": p.amp,
                     "needs_apex": list(p.needs_apex), "available": a.ok, "reason": a.reason or None,
                     "fix": a.fix or None, "description": p.description})
    if as_json:
        print(json.dumps({"device": device, "presets": rows}))
        return 0
    print(f"presets on {device}:")
    workload = None
    for r in rows:
        if r["workload"] != workload:
            workload = r["workload"]
            print(f"\n  {workload}")
        mark = "available" if r["available"] else f"unavailable: {r['reason']}"
        print(f"    {r['name']:<16} {mark}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "list":
        return cmd_list(args.json, args.device)
    if args.command == "doctor":
        from .doctor_cli import run as run_doctor

        return run_doctor(as_json=args.json)

    from .core.env import DeviceUnavailable, resolve_device
    from .core.presets import PresetError, resolve

    preset = None
    if args.preset is not None:
        try:
            preset = resolve(args.preset)
        except PresetError as exc:
            return _error(str(exc), EXIT_USAGE)
    if args.json:
        if preset is None:
            return _error("--json needs --preset NAME (see `apextui list`)", EXIT_USAGE)
        from . import headless

        try:
            device = resolve_device(args.device)
        except DeviceUnavailable as exc:
            headless.log(str(exc))
            print(json.dumps({"event": "unavailable", "preset": preset.name, "device": args.device,
                              "reason": str(exc), "fix": "use --device auto or --device cpu"}), flush=True)
            return EXIT_UNAVAILABLE
        return headless.run(preset, device, args.steps, args.sample_interval)
    from .ui.app import run_app

    return run_app(preset=preset, device=args.device, steps=args.steps, sample_interval=args.sample_interval,
                   load=args.load)
