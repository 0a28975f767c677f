"""argparse value types shared by the commands: a bad value names what is allowed."""

from __future__ import annotations

import argparse
from typing import Callable


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """A whole number from `lo` to `hi`."""

    def parse(text: str) -> int:
        allowed = f"must be a whole number from {lo} to {hi}"
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{allowed}, got {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{allowed}, got {text.strip()[:40]}")
        return value

    return parse


def seconds_in(lo: float, hi: float) -> Callable[[str], float]:
    """A number of seconds from `lo` to `hi` (nan and inf refused)."""

    def parse(text: str) -> float:
        allowed = f"must be a number of seconds from {lo:g} to {hi:g}"
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{allowed}, got {text[:40]!r}") from None
        if not lo <= value <= hi:  # also refuses nan and inf
            raise argparse.ArgumentTypeError(f"{allowed}, got {text.strip()[:40]}")
        return value

    return parse
