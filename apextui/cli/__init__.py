"""The command-line front ends: the `apextui` command (`command`), headless runs, doctor/advise/roofline, output and
signals.

`main` is the console-script entry point (`apextui.cli:main`); it imports the command only when called, so that
importing one front end (`apextui.cli.headless`) does not load the others."""

from __future__ import annotations

from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `apextui` command: see `apextui.cli.command.main`."""
    try:  # Ctrl-C while the command's modules import (presets, the registry...) or before its signal handlers
        from .command import main as command_main  # are in (they turn a signal into a stop): the documented 130

        return command_main(argv)
    except KeyboardInterrupt:
        return 130
