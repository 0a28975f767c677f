"""`apextui doctor [--json]`: print the Apex doctor report (human or JSON)."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from typing import Any, TextIO

from apextui.core.apex.doctor import DoctorReport, run_doctor
from apextui.core.errors import UsageProblem
from apextui.core.exits import EXIT_HANGUP, EXIT_OK
from apextui.core.apex.doctor_lines import Segment, render_lines  # noqa: F401 - Segment: re-exported for callers

def use_color(stream: TextIO, color: bool | None = None) -> bool:
    """Colour when asked, else only on a terminal without NO_COLOR (https://no-color.org) or TERM=dumb."""
    if color is not None:
        return color
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def print_human(report: DoctorReport, stream: TextIO, color: bool) -> None:
    lines = render_lines(report)
    if not color:
        stream.write("".join("".join(t for t, _ in line) + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True)
    for line in lines:
        console.print(Text.assemble(*[(t, s or "") for t, s in line]))


def _hung_up(signum: int, frame: Any) -> None:
    """SIGHUP (the terminal went away) while the probe runs: unwind, so that the probe's `finally` ends its child
    (SIGHUP's default action ended this process at once, and the child, a session of its own, ran on)."""
    raise SystemExit(EXIT_HANGUP)


def run(as_json: bool, color: bool | None = None) -> int:
    """Run the probe and print it; 0 when the probe ran (whatever it found), 2 if it could not run; 129 after a
    hang-up."""
    try:
        previous = signal.signal(signal.SIGHUP, _hung_up)
    except ValueError:  # not the main thread: its caller handles hang-ups
        previous = None
    try:
        report = run_doctor()
    except Exception as exc:  # noqa: BLE001 - the probe itself failed
        raise ProbeNotRun(f"the Apex probe could not run: {type(exc).__name__}: {exc}") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGHUP, previous)
    from . import output

    if as_json:
        output.write(report.to_json() + "\n")
    else:  # rendered whole, then written through apextui.cli.output (a full disk or gone reader: a clean exit)
        buffer = io.StringIO()
        print_human(report, buffer, sys.stdout is not None and use_color(sys.stdout, color))
        output.write(buffer.getvalue())
    return EXIT_OK


class ProbeNotRun(UsageProblem):
    """The doctor's probe itself failed (not what it found): exit 2."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="apextui doctor",
                                     description="Which NVIDIA Apex fused kernels work here, and why not.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    from .session import guarded

    return guarded(lambda: run(as_json=args.json))


if __name__ == "__main__":
    sys.exit(main())
