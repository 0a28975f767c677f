"""The command-line front ends: the `apextui` command (`command`), headless runs, doctor/advise/roofline, output and
signals.

`main` is the console-script entry point (`apextui.cli:main`); it imports the command only when called, so that
importing one front end (`apextui.cli.json_run`) does not load the others."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: this package loads before apextui's signal handlers are in (see main)
if TYPE_CHECKING:
    from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `apextui` command: see `apextui.cli.command.main`. SIGINT/SIGTERM are taken here, before the command's
    modules import, or a Ctrl-C then would be lost (SIGINT inherited ignored) or end as -2 (`early_signals` says
    why). The program (`argv` None) then puts in the handlers for shutdown and keeps them."""
    try:  # a Ctrl-C while `signal` itself loads (before any handler of apextui can be in): 130 and one line too
        from .signals import EXIT_INTERRUPTED, EarlySignal, early_signals, exit_on_late_signals
    except KeyboardInterrupt:
        import sys

        try:
            print("apextui: interrupted", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass
        return 130

    with early_signals(restore=argv is not None) as early:
        try:
            from .command import main as command_main

            code = command_main(argv)
            if argv is None:  # the program itself, not a test calling main([...]): shutdown comes next (in the
                exit_on_late_signals()  # `try`: a signal just before still ends with one line, no traceback)
        except EarlySignal as exc:
            code = early.finish(exc)
            if argv is None:
                exit_on_late_signals()
        except KeyboardInterrupt:  # a library put Python's default handler back
            code = EXIT_INTERRUPTED
            if argv is None:
                exit_on_late_signals()
    if argv is None:
        exit_past_stray_threads(code)
    return code


def exit_past_stray_threads(code: int) -> None:
    """Exit with `code` now where threads that are not daemons are still running once the command is done: Python
    joins every such thread before it exits, and one the user's code started (a forward that starts a thread that
    sleeps an hour) must not hold a command whose outcome is out. The exit handlers run, the output is flushed, the
    threads are named on stderr; nothing happens where none is left."""
    import threading

    stray = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not stray:
        return
    import atexit
    import sys

    from ..core.exits import exit_now

    names = ", ".join(t.name for t in stray[:3]) + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
    whose = "a run of apextui's that did not end" if all(t.name.startswith("apextui-") for t in stray) else \
        "threads your code started"
    try:
        print(f"apextui: exiting without waiting for {len(stray)} thread{'s' * (len(stray) != 1)} still running "
              f"({names}): {whose}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass
    atexit._run_exitfuncs()
    exit_now(code)
