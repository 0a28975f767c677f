"""`apextui attach [NAME|PATH] [--json] [--once]`: follow a watched run (`apextui.watch`), in the TUI or headless.

`--json` prints the run's JSON lines as they come (the stream's own lines: the `--json` shapes plus `metric`
and `note`, docs/watch.md) until its `end` line. A run whose process is gone without one gets an `end` line
written here: status `failed`, the error saying so and when its last line was written, the summary of the steps
read, and `"watch": {"ended_without_end": true, ...}`. What the reader skipped (a partial last line, rotated
segments, a line over the cap) goes to stderr. Exit codes: 0 the run ended ok (or `--once` on a live run), 1 it
failed, stopped or ended without an end line, 2 no such run (the line names the live ones) or a stream segment
that is not a regular file (a FIFO, a device, a directory: the line names it), 130 Ctrl-C."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import output
from ..core.errors import UsageProblem
from .session import Outcome, exit_code
from .signals import release_hangup



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", metavar="NAME|PATH",
                        help="a watched run's name (the newest of that name, live first) or its folder; "
                             "none: pick one (TUI)")
    parser.add_argument("--json", action="store_true", help="follow headless: the run's JSON lines on stdout")
    parser.add_argument("--once", action="store_true", help="with --json: print what is there now, then exit")


def _log(message: str) -> None:
    print(f"apextui: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ..core.watch import store

    if args.run is None:
        if args.json:
            live = store.live_runs()
            listed = "; ".join(m.describe() for m in live) if live else "none"
            raise UsageProblem(f"attach --json needs a run's NAME or PATH; live runs: {listed}")
        from ..ui.attach_app import run_attach

        release_hangup()  # the viewer ends at once when its terminal goes away
        return run_attach(None)
    meta, others = store.find(args.run)  # NoSuchRun: a usage error, raised (exit 2)
    if others:
        _log(f"{len(others) + 1} runs are named {meta.name!r}: following {meta.describe()} at {meta.path}; "
             f"the others: " + "; ".join(f"{m.describe()} at {m.path}" for m in others))
    if args.json:
        return follow_json(meta, once=args.once)
    from ..ui.attach_app import run_attach

    release_hangup()
    return run_attach(meta, follow_name=None if store.is_run_folder(args.run) else args.run)


def follow_json(meta: Any, once: bool = False) -> int:
    from ..core.run import events
    from ..core.watch.reader import BadSegment, Ending, Follower, follow
    from ..core.watch.replay import Replay

    replay, follower = Replay(), Follower(Path(meta.path))

    def handle(lines: list[dict[str, Any]]) -> None:
        replay.add(lines)
        output.write("".join(json.dumps(e, allow_nan=False) + "\n" for e in lines))  # the reader let none through

    ending: Ending | BadSegment
    try:
        ending = follow(Path(meta.path), meta, handle, once=once, follower=follower)
    except BadSegment as exc:
        ending = exc
    finally:
        for note in follower.notes:
            _log(note)
    if isinstance(ending, BadSegment):
        raise ending
    if ending.outcome == "gone":
        why = ending.words(meta)
        replay.gone(why)
        _log(f"{meta.name}: {why}")
        end = {**events.end_event(replay.snapshot()),
               "watch": {"ended_without_end": True, "last_write": ending.last_write}}
        output.write(json.dumps(end, allow_nan=False) + "\n")
        return exit_code(Outcome("failed"), quiet=True)  # said above
    # `--once` left a live run (its following "stopped"): what was there is printed, nothing failed; a watched run
    # that stopped did not end ok (1, not a signal's code: no signal came here)
    ok = ending.outcome == "stopped" or replay.status == "ok"
    return exit_code(Outcome("ok" if ok else "failed"), quiet=True)
