"""The one base of the errors a user sees: one line, what is under it, and the exit code the command ends with.

Why: each domain error (a bad preset file, an unknown axis value, a `--model` that names no function, a run
`attach` cannot find, a device that is not here) used to be its own class under ValueError or RuntimeError, and
each front end mapped it to an exit code and worded it by hand, twenty times over. Every one is an `ApextuiError`
now, carrying its exit code (docs/cli.md); `cli/errors.py` renders one, and the TUI says its `line`.
"""

from __future__ import annotations

from .exits import EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_USAGE


class ApextuiError(Exception):
    """An error a user sees. `line`: its message's first line (the one line on stderr); `detail`: what goes under
    it (the tail of the user's traceback, where their code is the cause); `exit_code`: what the command ends with."""

    exit_code: int = EXIT_FAILED
    detail: str = ""

    @property
    def line(self) -> str:
        text = str(self).strip()
        return text.splitlines()[0] if text else type(self).__name__


class UsageProblem(ApextuiError):
    """What was asked cannot be done as asked (a bad option, file or name): exit 2."""

    exit_code = EXIT_USAGE


class NotHere(ApextuiError):
    """What was asked needs what this machine has not got (a GPU): exit 3."""

    exit_code = EXIT_UNAVAILABLE


__all__ = ["ApextuiError", "NotHere", "UsageProblem"]
