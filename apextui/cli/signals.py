"""Ctrl-C, SIGTERM and SIGHUP while the headless front ends train: the first signal asks the work to stop after its
current step; another one reports what was measured and exits at once (130, 143, 129). A handler rather than
KeyboardInterrupt, so nothing is interrupted half-way.

SIGHUP (the terminal went away) is taken like the others, except where the process inherited it ignored (`nohup`:
it stays ignored) and in the TUIs, which take it themselves (`release_hangup`)."""

from __future__ import annotations

import _thread
import atexit
import os
import sys
import signal

from ..core.exits import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED, exit_now

TYPE_CHECKING = False  # not `typing`: cli.main imports this module before its handlers are in
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

SIGNAL_EXIT: dict[int, int] = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED,
                               signal.SIGHUP: EXIT_HANGUP}
SIGNAL_WORD: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)",
                               signal.SIGHUP: "hung up (SIGHUP)"}
_inherited: dict[int, Any] = {}  # the dispositions the process started with (early_signals records them)
_settled = False  # the outcome is out (`settle`): signals change nothing from then on
_early: early_signals | None = None  # the handlers in before the work's own (`StopOnSignals` takes what they kept)


def settle() -> None:
    """The outcome is printed (a headless run's `end` line): from now on SIGINT/SIGTERM/SIGHUP change neither the
    exit status nor how the process ends; they are ignored while it finishes. Why: a signal just after `end ok`
    gave 130/143 (counted as a stop request) or ended the process by the signal (landing in its shutdown), against
    what the end line said. From any thread."""
    global _settled
    _settled = True



def taken() -> list[int]:
    """The signals of SIGNAL_EXIT that apextui handles now: all, but a SIGHUP that is ignored stays so (`nohup`)."""
    return [sig for sig in SIGNAL_EXIT if sig != signal.SIGHUP or signal.getsignal(sig) != signal.SIG_IGN]


def release_hangup() -> None:
    """The TUIs, before they start: SIGHUP as the process inherited it (the TUI puts its own handler in once it is
    up; until then a hang-up ends it at once, which no terminal left to draw on can hang), not `early_signals`'."""
    if signal.SIGHUP in _inherited:
        signal.signal(signal.SIGHUP, _inherited[signal.SIGHUP])


class StopOnSignals:
    """Within `with`: SIGINT/SIGTERM/SIGHUP calls `first(signum)` once, then `again(signum)` and exits with 130
    (SIGINT), 143 (SIGTERM) or 129 (SIGHUP; not where it is ignored: `taken`). `count`, `received` (the signals,
    in order) and `exit_code` (of the latest signal) are kept for the caller; `twice()` words the second signal's
    error.

    Every delivery counts, and the second quits at once: Python runs its handlers only on the main thread,
    between bytecodes, and two signals of one kind that come while that thread is inside a long C call (importing
    torch, building a model) run the handler once, seconds later. So each delivery is read from the signal
    wakeup fd (one byte per signal, written by the C-level handler) on a thread of its own, which calls
    `first`/`again`; the Python handler then does nothing. Where no wakeup fd can be set (not the main thread),
    the Python handler does the work."""

    def __init__(self, first: Callable[[int], None], again: Callable[[int], None]) -> None:
        self.first, self.again = first, again
        self.count = 0
        self.received: list[int] = []
        self.exit_code = EXIT_INTERRUPTED
        import threading  # here, not at the top: this module loads before cli.main's first handlers are in

        self._previous: dict[int, Any] = {}
        self._signals: list[int] = []
        self._lock = threading.Lock()
        self._via_fd = False
        self._old_wakeup = -1
        self._wake_w = -1

    def twice(self) -> str:
        """'interrupted twice', or 'interrupted, then terminated (SIGTERM)': the signals received, by name."""
        return two_signals(self.received)

    def _deliver(self, signum: int) -> None:
        if _settled:  # after the end line: not a stop request, nor a quit (`settle`)
            return
        with self._lock:
            self.received.append(signum)
            self.count = len(self.received)
            self.exit_code = SIGNAL_EXIT.get(signum, EXIT_INTERRUPTED)
            n = self.count
        if n == 1:
            self.first(signum)
            return
        try:
            self.again(signum)
        finally:
            os._exit(self.exit_code)

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._via_fd:
            self._deliver(signum)

    def _read(self, fd: int) -> None:
        try:
            while data := os.read(fd, 64):
                for signum in data:
                    if signum in self._signals:
                        self._deliver(signum)
        except OSError:
            pass
        finally:
            os.close(fd)

    def __enter__(self) -> "StopOnSignals":
        global _settled
        _settled = False  # new work: its outcome is not out yet
        self._signals = taken()
        block = getattr(signal, "pthread_sigmask", None)
        later: list[int] = []
        try:
            if block is not None:  # signals that come meanwhile wait, then find both the handler and the fd in
                block(signal.SIG_BLOCK, self._signals)  # (in the `try`: an early signal run here unblocks them)
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self._signals}
            r = w = -1
            try:
                r, w = os.pipe()
                os.set_blocking(w, False)
                self._old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            except (OSError, ValueError):  # not the main thread (or no file descriptor left)
                for fd in (r, w):
                    if fd >= 0:
                        os.close(fd)
            else:
                import threading

                self._wake_w, self._via_fd = w, True
                threading.Thread(target=self._read, args=(r,), name="apextui-signals", daemon=True).start()
            early = _take_early_signals(self._signals)
            if early and self._via_fd:  # in the order they came, by the path every later delivery takes
                os.write(self._wake_w, bytes(early))
            else:
                later = early
        finally:
            if block is not None:
                block(signal.SIG_UNBLOCK, self._signals)
        for signum in later:  # no wakeup fd (not the main thread): delivered here, once the `with` is set up
            self._deliver(signum)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self._wake_w >= 0:
            signal.set_wakeup_fd(self._old_wakeup)
            self._via_fd = False
            os.close(self._wake_w)  # the reader sees the end of the pipe and stops
            self._wake_w = -1


def _take_early_signals(signals: Sequence[int]) -> list[int]:
    """The signals `early_signals` received that never ended the program, taken from it: its EarlySignal was
    swallowed on the way to `main` (by code that catches BaseException, or C code that clears whatever a Python call
    it made raised). The second was then only recorded, as named by the first's clean-up, so without this both
    were lost and the run trained on, deaf to two Ctrl-Cs; `StopOnSignals` acts on them as soon as it is in."""
    if _early is None:
        return []
    taken_now = [signum for signum in _early.received if signum in signals]
    _early.received.clear()
    return taken_now


def two_signals(received: Sequence[int]) -> str:
    """'interrupted twice', or 'interrupted, then terminated (SIGTERM)': the first two of `received`, by name."""
    words = [SIGNAL_WORD.get(s, "interrupted") for s in received[:2]] or ["interrupted"]
    return f"{words[0]} twice" if len(words) < 2 or words[0] == words[1] else f"{words[0]}, then {words[1]}"


def stop_notice(signum: int, doing: str) -> str:
    """The one line a front end logs on the first signal: what the signal was, what happens now, and how to quit
    at once (the same wording for every front end)."""
    again = "Ctrl-C again" if signum == signal.SIGINT else "another signal"
    return f"{SIGNAL_WORD.get(signum, 'interrupted')}: {doing} ({again} to quit at once)"


def twice_error(signum: int, error: str | None = None) -> str:
    """The `end` line's error of a run quit by a second signal: `error`, the signals received by name
    (`StopOnSignals.twice`), else the second one's word, twice."""
    return error or f"{SIGNAL_WORD.get(signum, 'interrupted')} twice"


class EarlySignal(BaseException):
    """Raised by the handler `early_signals` installs: a signal came before a front end installed its own."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.exit_code = SIGNAL_EXIT.get(signum, EXIT_INTERRUPTED)


class early_signals:
    """From the first line of `cli.main()`: SIGINT/SIGTERM/SIGHUP (`taken`) raise EarlySignal (a
    BaseException, so no `except Exception` swallows it), which main turns into 130/143 with one line on stderr
    instead of a KeyboardInterrupt traceback from inside an import. StopOnSignals replaces it while work runs.

    Installed whatever the inherited disposition: a process started with SIGINT ignored (a background job of a
    non-interactive shell) keeps it ignored in Python, and the kernel drops every Ctrl-C until a handler is in.
    Not KeyboardInterrupt either: one raised inside `exec` of a string (dataclasses' generated methods) makes
    `python -m` end by SIGINT (-2) even after it was caught. `restore=False` leaves them in on exit (the
    program, which ends next)."""

    def __init__(self, restore: bool = True) -> None:
        self.restore = restore
        self.received: list[int] = []  # kept until `finish`, or taken by `StopOnSignals` (`_take_early_signals`)
        self._outer: early_signals | None = None

    def _handle(self, signum: int, frame: Any) -> None:
        if _settled:  # the work's outcome is out (`settle`): the program only ends now
            return
        self.received.append(signum)
        if len(self.received) == 1:
            raise EarlySignal(signum)
        # a second signal while the first unwinds (INT then TERM 10 ms apart; both pending at once run their
        # handlers one after the other): named by finish(), never raised inside the first's clean-up; where the
        # first never reaches main, StopOnSignals takes both (`_take_early_signals`)

    def _unraisable(self, unraisable: Any) -> None:
        """Raised inside a weakref callback or `__del__` (importlib runs one after every import), EarlySignal
        would only be printed, and the run would go on: the signal is sent again from another thread, so that
        it lands once the callback has returned. Where a later signal is already recorded (both were pending at
        once), nothing is sent again: sent again, the first would come after it, in the wrong order; both are
        kept for `StopOnSignals`, in the order they came (`_take_early_signals`)."""
        if isinstance(unraisable.exc_value, EarlySignal):
            if self.received == [unraisable.exc_value.signum]:
                self.received.pop(0)  # swallowed: the signal sent again raises again
                _thread.start_new_thread(os.kill, (os.getpid(), unraisable.exc_value.signum))
        else:
            self._hook(unraisable)

    def __enter__(self) -> "early_signals":
        global _settled, _early
        _settled = False
        self._outer, _early = _early, self
        self._previous = {sig: signal.signal(sig, self._handle) for sig in taken()}
        for sig, handler in self._previous.items():
            _inherited.setdefault(sig, handler)
        self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc: Any) -> None:
        global _early
        _early = self._outer
        if self.restore:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            sys.unraisablehook = self._hook

    def finish(self, exc: EarlySignal) -> int:
        """The one line and the exit code: the signal's, or with two the second one's, both named (a signal during
        the line itself is recorded, not raised, and changes neither)."""
        received = list(self.received) or [exc.signum]
        words = SIGNAL_WORD.get(received[0], "interrupted") if len(received) < 2 else two_signals(received)
        try:
            print(f"apextui: {words}", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass
        return SIGNAL_EXIT.get(received[-1], EXIT_INTERRUPTED) if len(received) > 1 else exc.exit_code


def exit_on_late_signals() -> None:
    """After main() returned, while the interpreter shuts down (atexit, joining threads): a signal exits with
    its code at once, instead of "Exception ignored in atexit callback ... KeyboardInterrupt"; after `settle` it is
    ignored (the outcome is out, and the exit status is the one it implies)."""

    def _handle(signum: int, frame: Any) -> None:
        exit_now(SIGNAL_EXIT.get(signum, EXIT_INTERRUPTED))

    for sig in SIGNAL_EXIT:
        if sig == signal.SIGHUP and not callable(signal.getsignal(sig)):  # ignored (nohup), or a TUI's default
            continue
        signal.signal(sig, signal.SIG_IGN if _settled else _handle)
    # the last thing Python does before its C-level finalization is run the atexit callbacks (this one first:
    # they run last-registered first, and those left are quick); the finalization then puts the default handlers
    # back, and a signal landing in it (tens of ms with torch loaded) would end the process by that signal (-15)
    # instead of with the code main returned. Ignored, it does nothing, on whichever thread it lands (blocking it
    # covered this thread only).
    atexit.register(_ignore_from_now)


def _ignore_from_now() -> None:
    for sig in SIGNAL_EXIT:
        signal.signal(sig, signal.SIG_IGN)
