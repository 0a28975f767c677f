"""How a headless command's run ended, and the one decision of its exit code (docs/cli.md).

Why one place: a preset's run (`json_run`), a data-parallel rank (`torchrun`) and `advise` each decided their exit
code with a ladder of their own, in different orders (a rank that failed after a Ctrl-C gave 1, a single run 130).
Each now says what happened (`Outcome`) and this ladder reads it, in one order: stdout that could not be written, a
signal (or a stop it asked for), a failed run, a failed check, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.exits import EXIT_CHECK_FAILED, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from .refusals import log

if TYPE_CHECKING:
    from .output import OutputFailed
    from .signals import StopOnSignals


@dataclass(frozen=True)
class Outcome:
    """What a run's front end saw at its end. `status`: the run's (None: it never ended: no result); `failed_because`:
    the words for stderr where it failed; `check_failed`: a finished run's failed correctness check, in words;
    `stdout_failure` / `stdout_broken`: stdout could not take its lines (the failure says its own line and code);
    `signals`: the front end's signal handlers (a signal's code ends the run, whatever it measured)."""

    status: str | None
    signals: StopOnSignals | None = None
    failed_because: str = ""
    check_failed: str = ""
    stdout_failure: OutputFailed | None = None
    stdout_broken: bool = False
    quiet: bool = False  # say nothing on stderr (a data-parallel rank other than 0: rank 0 speaks for the run)


def exit_code(outcome: Outcome) -> int:
    """The exit code, decided once for every headless front end; what it says on stderr is said here."""
    if outcome.stdout_failure is not None:
        return outcome.stdout_failure.report()
    if outcome.stdout_broken:
        return EXIT_FAILED
    signals = outcome.signals
    if (signals is not None and signals.count) or outcome.status == "stopped":
        return signals.exit_code if signals is not None else EXIT_INTERRUPTED
    if outcome.status != "ok":
        if not outcome.quiet:
            log(outcome.failed_because or "run failed: no result")
        return EXIT_FAILED
    if outcome.check_failed:
        if not outcome.quiet:
            log(f"error: {outcome.check_failed}")
        return EXIT_CHECK_FAILED
    return EXIT_OK


__all__ = ["Outcome", "exit_code"]
