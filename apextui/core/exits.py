"""A child process's exit status in words. The worker (a run's process) and the doctor's probe child both report
how a process ended; one function names the signal that killed it, so the two never word it differently."""

from __future__ import annotations

import signal


def signal_name(signum: int) -> str:
    """`SIGKILL` for 9; `signal 99` for a number this platform has no name for."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_exit(code: int | None, who: str) -> str:
    """How `who` ended, from a `Popen.returncode` / `Process.exitcode` (negative: killed by that signal; None:
    still running)."""
    if code is None:
        return f"{who} did not exit"
    if code < 0:
        return f"{who} was killed by {signal_name(-code)}"
    return f"{who} exited with code {code}"
