"""`python -m apextui.cli.roofline [--device cpu|cuda] [--remeasure]`: print this device's ceilings (the
roofline's cache entry), measuring them when there are none yet."""

from __future__ import annotations

import json
import sys

from ..core.analysis import CeilingsUnavailable, cache_file, get_ceilings


def _main(argv: list[str] | None = None) -> int:
    """`python -m apextui.cli.roofline [--device cpu|cuda] [--remeasure]`: print this device's ceilings."""
    import argparse

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--device", default=None, choices=("cpu", "cuda"))
    parser.add_argument("--remeasure", action="store_true")
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        c = get_ceilings(device, remeasure=args.remeasure)
    except CeilingsUnavailable as exc:
        print(f"ceilings unavailable: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**c.to_dict(), "cached": c.cached, "note": c.note, "cache_file": str(cache_file())}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
