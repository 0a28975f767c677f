"""The options of `apextui.watch(...)`, checked before the run starts: a monitoring call must never raise into the
user's training program, nor lose its run, over a wrong argument.

Each bad value (a wrong type, NaN, a negative count, a number beyond any run's, an unknown keyword) is one warning
that names the option, what was given and what is allowed, and is replaced by the option's default; the run is
streamed as it would have been without it. `close(status=..., error=...)` is checked the same way (`end_status`):
its `end` line always has a status a reader knows."""

from __future__ import annotations

import math
import numbers
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

Warn = Callable[[str, str], None]

WARMUP = 10  # timed steps left out of the statistics, unless told
SAMPLE_INTERVAL = 1.0  # seconds between two readings of the GPU and the process, unless told
SAMPLE_INTERVAL_RANGE = (0.01, 86400.0)  # as `apextui --sample-interval`: finer is a busy loop beside the training
MAX_WHOLE = 2**53  # steps, warmup, max_bytes, rank: beyond, a JSON reader's float no longer holds them exactly
STATUSES = ("ok", "stopped", "failed")  # an `end` line's status (docs/json.md)


def shown(x: Any, limit: int = 80) -> str:
    """`x` as a warning shows it: its repr, cut to `limit` characters; an integer too long to print (Python refuses
    str() beyond 4,300 digits) as its order of magnitude."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**30:
        return f"{'-' if x < 0 else ''}~1e{int(math.log10(abs(x)))}"
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - a repr that raises: the type says enough
        text = f"<a {type(x).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def whole(x: Any) -> int | None:
    """`x` as an int when it is a whole number (an int, a NumPy integer, a finite float such as 1e5 with no
    fraction); None otherwise (a bool, a string, 1.5, NaN)."""
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        try:
            f = float(x)
        except (OverflowError, TypeError, ValueError):
            return None
        if math.isfinite(f) and f.is_integer():
            return int(f)
    return None


@dataclass(frozen=True)
class Options:
    """`apextui.watch`'s options as the monitor uses them: each one given, or its default where it was bad."""

    name: str
    steps: int | None
    warmup: int
    sample_interval: float
    max_bytes: int
    where: Path | None
    rank: int | None


def default_name() -> str:
    """The script's file name (an embedded interpreter may have no `sys.argv`)."""
    argv = getattr(sys, "argv", None) or [""]
    return Path(str(argv[0]) or "run").stem or "run"


def checked(warn: Warn, *, name: Any, steps: Any, warmup: Any, sample_interval: Any, max_bytes: Any, where: Any,
            rank: Any, default_max_bytes: int, unknown: Mapping[str, Any]) -> Options:
    """The options, each bad one warned about once (its key: the option's name) and replaced by its default."""

    def bad(option: str, given: Any, allowed: str, default: Any) -> None:
        warn(f"option:{option}", f"apextui.watch({option}={shown(given)}): {allowed}; {default} is used instead "
             "(the run is streamed as without it)")

    if name is None or (isinstance(name, str) and not name):
        name = default_name()
    elif not isinstance(name, str):
        fallback = default_name()
        bad("name", name, "the run's name is a string", f"the script's name {fallback!r}")
        name = fallback

    if steps is not None:
        n = whole(steps)
        if n is None or not 1 <= n < MAX_WHOLE:
            bad("steps", steps, "the run's total steps is a positive whole number, or None", "None (no total)")
            n = None
        steps = n

    w = whole(warmup)
    if w is None or not 0 <= w < MAX_WHOLE:
        bad("warmup", warmup, "the warm-up is a whole number of steps, 0 or more", f"the default {WARMUP}")
        w = WARMUP

    lo, hi = SAMPLE_INTERVAL_RANGE
    interval = _real(sample_interval)
    if interval is None or not lo <= interval <= hi:
        bad("sample_interval", sample_interval, f"the sampling interval is a number of seconds from {lo:g} to {hi:g}",
            f"the default {SAMPLE_INTERVAL:g} s")
        interval = SAMPLE_INTERVAL

    b = whole(max_bytes)
    if b is None or not 1 <= b < MAX_WHOLE:
        bad("max_bytes", max_bytes, "the stream's size on disk is a positive whole number of bytes",
            f"the default {default_max_bytes:,}")
        b = default_max_bytes

    folder: Path | None = None
    if where is not None:
        if isinstance(where, (str, os.PathLike)):
            try:
                folder = Path(where) if os.fspath(where) != "" else None
            except TypeError:  # a PathLike of bytes, or whose __fspath__ gives no path
                folder = None
        if folder is None:
            bad("where", where, "the folder of runs is a path (a non-empty str or a pathlib.Path), or None",
                "the default folder")

    if rank is not None:
        r = whole(rank)
        if r is None or not 0 <= r < MAX_WHOLE:
            bad("rank", rank, "the rank is a whole number, 0 or more, or None", "the environment's (RANK under "
                "torchrun, else none)")
            r = None
        rank = r

    for key, value in unknown.items():
        warn(f"option:{key}", f"apextui.watch({key}={shown(value)}): no such option (the options: name, steps, "
             "warmup, sample_interval, max_bytes, where, model, batch_size, rank, flops_per_token, precision); it "
             "is ignored")
    return Options(name, steps, w, interval, b, folder, rank)


def env_rank(warn: Warn) -> int | None:
    """This process's rank under torchrun (`WORLD_SIZE` > 1: `RANK`), else None; values that are not whole numbers
    are one warning and no rank (the run is then one process's)."""
    environ = {k: os.environ.get(k, "") for k in ("WORLD_SIZE", "RANK")}
    try:
        if int(environ["WORLD_SIZE"] or 1) <= 1:
            return None
        rank = int(environ["RANK"] or 0)
        if rank < 0:
            raise ValueError(f"negative rank {rank}")
        return rank
    except ValueError:
        warn("option:env-rank", f"WORLD_SIZE={environ['WORLD_SIZE']!r} and RANK={environ['RANK']!r} are not a "
             "world size and a rank (whole numbers): the run is written as one process's, without a rank")
        return None


def end_status(status: Any, error: Any, warn: Warn) -> tuple[str, str | None]:
    """`close(status, error)` as an `end` line takes them: a status of `STATUSES` and a string error or None. An
    unknown status ends the run `failed` (what the run was is not known: never `ok`), the status given kept at the
    head of the error; an error that is not a string is its text (an exception as `TypeError: message`)."""
    if error is not None and not isinstance(error, str):
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {_text(error)}"
        else:
            text = _text(error)
            warn("close:error", f"close(error={shown(error)}): the error is a string or None; its text {shown(text)} "
                 "is written")
            error = text
    if isinstance(status, str) and status in STATUSES:
        return status, error
    warn("close:status", f"close(status={shown(status)}): the status is one of {', '.join(STATUSES)}; the run ends "
         "failed, with the status given in its error")
    said = f"closed with status {shown(status)} (not one of {', '.join(STATUSES)})"
    return "failed", f"{said}: {error}" if error else said


def _text(x: Any) -> str:
    try:
        return str(x)
    except Exception:  # noqa: BLE001 - a __str__ that raises, an int of more than 4,300 digits
        return shown(x)


def _real(x: Any) -> float | None:
    """`x` as a finite float (an int, a float, a NumPy number; not a bool); None otherwise."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    try:
        f = float(x)
    except (OverflowError, TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
