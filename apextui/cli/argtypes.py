"""argparse value types shared by the commands: a bad value names what is allowed."""

from __future__ import annotations

import argparse
import re
from typing import Callable, NoReturn, TypeVar

N = TypeVar("N", int, float)


PLAIN_NUMBER = re.compile(r"\s*[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?\s*|\s*[+-]?\.[0-9]+([eE][+-]?[0-9]+)?\s*")
PLAIN_INT = re.compile(r"\s*[+-]?[0-9]+\s*")


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line, `PROG: error: MESSAGE (see PROG --help)`, and exit 2: argparse's own printed
    the whole usage block first (7 lines, 16 in a narrow terminal)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


def _number_in(convert: Callable[[str], N], lo: N, hi: N, allowed: str) -> Callable[[str], N]:
    plain = PLAIN_INT if convert is int else PLAIN_NUMBER

    def parse(text: str) -> N:
        try:
            if not plain.fullmatch(text):  # int() and float() take "１０" and "1_0" too; ASCII digits only
                raise ValueError(text)
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{allowed}, got {text[:40]!r}") from None
        if not lo <= value <= hi:  # also refuses nan and inf
            raise argparse.ArgumentTypeError(f"{allowed}, got {text.strip()[:40]}")
        return value

    return parse


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """A whole number from `lo` to `hi`."""
    return _number_in(int, lo, hi, f"must be a whole number from {lo} to {hi}")


def seconds_in(lo: float, hi: float) -> Callable[[str], float]:
    """A number of seconds from `lo` to `hi` (nan and inf refused)."""
    return _number_in(float, lo, hi, f"must be a number of seconds from {lo:g} to {hi:g}")


MAX_RANKS = 1024  # --nproc's upper bound


def add_shared_options(parser: argparse.ArgumentParser, *, device_help: str, steps_help: str, nproc_help: str,
                       model_help: str) -> None:
    """`--device`, `--steps`, `--model` and `--nproc` as `apextui` and `apextui advise` both take them: one
    definition of their values, each command its own help text."""
    from ..core.env import DEVICE_CHOICES
    from ..core.presets import MAX_STEPS

    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto", help=device_help)
    parser.add_argument("--steps", type=int_in(1, MAX_STEPS), metavar="N", help=steps_help)
    parser.add_argument("--model", metavar="FILE.py:FUNC", help=model_help)
    parser.add_argument("--nproc", type=int_in(1, MAX_RANKS), metavar="N", help=nproc_help)
