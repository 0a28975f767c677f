"""apextui's exit codes, and a child process's exit status in words.

The codes are documented in docs/cli.md (a run, `list`, `advise`) and docs/watch.md (`attach`); every front end
(the CLI's commands, the TUI, a data-parallel rank that ends itself) returns these names, so a code is defined
once. The worker (a run's process) and the doctor's probe child both report how a process ended; one function
names the signal that killed it, so the two never word it differently."""

from __future__ import annotations

import os
import signal
import sys

EXIT_OK = 0
EXIT_FAILED = 1  # the run failed (`end` status `failed`), stdout could not be written, every advice run failed
EXIT_USAGE = 2  # a usage error, an invalid preset file, a preset whose memory estimate does not fit, a watched
# run `attach` cannot read (no such run, a damaged run.json, a stream segment that is not a regular file)
EXIT_UNAVAILABLE = 3  # the preset or the device is unavailable here (an `unavailable` line says why)
EXIT_CHECK_FAILED = 4  # the run finished, but its result failed the correctness check (`end.check_error`)
EXIT_HANGUP = 128 + signal.SIGHUP  # 129: the terminal went away
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141: stdout's reader went away (`| head`)
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143


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


def exit_now(code: int) -> None:
    """Flush stdout and stderr, then end the process with `code` at once (`os._exit`): no thread is joined, no other
    exit handler runs. For a process whose outcome is out: a finished worker, a command past its answer, a signal
    during shutdown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
