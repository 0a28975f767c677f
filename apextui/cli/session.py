"""One front end's run, from its refusal to its exit code: the lifecycle every headless front end presents.

Why one object: a preset's run (`json_run`), a data-parallel rank (`torchrun`), `advise` on one machine and under
torchrun each wrote the lifecycle again (the first/again signal pair, what a signal before the work exists does, the
build and the run, an exit-code ladder), and their ladders checked in different orders (a rank that failed after a
Ctrl-C gave 1, a single run 130). A front end now says what the first signal's line is, what a second signal writes
and what it ended with (`Outcome`); the session stops whatever it was given to stop, and decides the exit code once,
by `exit_code`. Errors a user sees are `ApextuiError`s, raised where they are found and rendered in one place
(`guarded`, through `errors.report`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..core.errors import ApextuiError
from ..core.exits import EXIT_CHECK_FAILED, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from .errors import report
from .refusals import log
from .signals import StopOnSignals

if TYPE_CHECKING:
    from .output import OutputFailed


@dataclass(frozen=True)
class Outcome:
    """What a front end saw at its end. `status`: the run's (None: it never ended: no result); `failed_because`:
    the words for stderr where it failed; `check_failed`: a finished run's failed correctness check, in words;
    `stdout_failure` / `stdout_broken`: stdout could not take its lines (the failure says its own line and code)."""

    status: str | None
    failed_because: str = ""
    check_failed: str = ""
    stdout_failure: OutputFailed | None = None
    stdout_broken: bool = False


def exit_code(outcome: Outcome, signals: StopOnSignals | None = None, quiet: bool = False) -> int:
    """The exit code, decided once for every front end, in one order: stdout that could not be written, a signal (or
    a stop it asked for), a failed run, a failed check, else 0. What it says on stderr is said here, unless `quiet`
    (a data-parallel rank other than 0: rank 0 speaks for the run)."""
    if outcome.stdout_failure is not None:
        return outcome.stdout_failure.report()
    if outcome.stdout_broken:
        return EXIT_FAILED
    if (signals is not None and signals.count) or outcome.status == "stopped":
        return signals.exit_code if signals is not None else EXIT_INTERRUPTED
    if outcome.status != "ok":
        if not quiet:
            log(outcome.failed_because or "run failed: no result")
        return EXIT_FAILED
    if outcome.check_failed:
        if not quiet:
            log(f"error: {outcome.check_failed}")
        return EXIT_CHECK_FAILED
    return EXIT_OK


class RunSession:
    """A front end's run within `with`: SIGINT/SIGTERM/SIGHUP's first delivery logs `notice(signum)` (none where it
    returns "") and stops every target given to `stops`, a target given after it is stopped at once (a signal while
    the workload is still built); the second calls `again(signum, words)` (the signals by name) and the process exits
    with the signal's code (`StopOnSignals`). `exit_code(outcome)` is the one decision of the code.
    `say`: where the notice goes (a data-parallel rank's own prefix)."""

    def __init__(self, notice: Callable[[int], str], again: Callable[[int, str], None], quiet: bool = False,
                 say: Callable[[str], None] = log) -> None:
        self._notice, self._again, self.quiet, self._say = notice, again, quiet, say
        self._targets: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.signals = StopOnSignals(self._first, self._second)

    def stops(self, target: Callable[[], None]) -> None:
        """`target` is called on the first signal (or `stop`), or now where one already came."""
        with self._lock:
            self._targets.append(target)
            now = self.stopping.is_set()
        if now:
            target()

    def stop(self) -> None:
        """Stop every target, as the first signal does, without a signal (stdout went away)."""
        with self._lock:
            self.stopping.set()
            targets = list(self._targets)
        for target in targets:
            target()

    def _first(self, signum: int) -> None:
        words = self._notice(signum)
        if words:
            self._say(words)
        self.stop()

    def _second(self, signum: int) -> None:
        self._again(signum, self.signals.twice())

    def __enter__(self) -> RunSession:
        self.signals.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.signals.__exit__(*exc)

    def exit_code(self, outcome: Outcome) -> int:
        return exit_code(outcome, self.signals, self.quiet)


def guarded(body: Callable[[], int], speaks: bool = True) -> int:
    """`body`'s exit code, or the code of an error a user sees that it raised, rendered in the one place
    (`errors.report`), or of a stdout that could not be written (`OutputFailed.report`): never a traceback.
    `speaks` False: the code alone, nothing on stderr (a data-parallel rank other than 0: rank 0 says it)."""
    from .output import OutputFailed

    try:
        return body()
    except ApextuiError as exc:
        return report(exc) if speaks else exc.exit_code
    except OutputFailed as exc:
        return exc.report() if speaks else exc.exit_code


__all__ = ["Outcome", "RunSession", "exit_code", "guarded"]
