"""Where a user's error is rendered for the command line: one line on stderr, what is under it indented, and the exit
code it carries (`core/errors.py`); every command returns what `report` returns."""

from __future__ import annotations

import sys

from ..core.errors import ApextuiError


def report(exc: ApextuiError) -> int:
    """`apextui: error: <its line>` on stderr (and its detail, each line indented), then its exit code. Never raises:
    a stderr that is gone (a hung-up terminal) takes nothing, and the code is still returned."""
    try:
        print(f"apextui: error: {exc.line}", file=sys.stderr)
        for line in exc.detail.splitlines():
            print(f"  {line}", file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return exc.exit_code


__all__ = ["report"]
