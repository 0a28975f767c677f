"""The bound on a hang-up: whatever Textual's shutdown does, the process ends a few seconds after its save.

Why: two TUIs whose terminals went away (tmux killed, an SSH connection dropped, on a loaded machine) lived on
for good, the main thread blocked in `Queue.put` of Textual's bounded writer queue inside `App._shutdown`. Such
a blocked main thread cannot run the asyncio SIGHUP handler either, so the watchdog does not rely on it: a
daemon thread notices the terminal is gone by itself (POLLHUP on the tty) or is told (`trigger`, from the
SIGHUP handler). It then saves the session's runs (the app's `save_after_hangup`, idempotent, whichever
thread gets there first), gives the normal exit `EXIT_GRACE_S`, and then kills the run's worker and ends the
process with `os._exit(EXIT_HANGUP)`.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from typing import Any, Callable

from apextui.core.exits import EXIT_HANGUP

EXIT_GRACE_S = 3.0  # after the save: how long the normal shutdown may take before the process is ended
SAVE_LIMIT_S = 40.0  # the save waits for a stopped run (quitting.end_run: 30 s at most); past this, exit regardless
POLL_MS = 500
# held by a hang-up's save (the loop's SIGHUP handler or the watchdog's thread, whichever comes first) and by the
# loop while a finished run moves from "active" into the comparison table: the save sees it in one place or the
# other, never in neither (it was lost so, 2 hang-ups in 4) nor in both
HANGUP_SAVE_LOCK = threading.Lock()


class HangupWatchdog:
    """Started once the TUI is up; `save` saves the unsaved runs (returns a line for stderr), `kill_runs` ends
    the worker at once. `tty_fd`: the terminal watched for a hang-up (None: only `trigger`)."""

    def __init__(self, save: Callable[[], str], kill_runs: Callable[[], None], tty_fd: int | None) -> None:
        self.save, self.kill_runs, self.tty_fd = save, kill_runs, tty_fd
        self._lock = threading.Lock()
        self.fired = False  # a hang-up is being handled: the save, then the bounded exit
        self._wake = threading.Event()
        self.stopped = threading.Event()  # the app ended without a hang-up: nothing to do
        self.saved = threading.Event()
        self.reported = False  # run_app printed the save's line itself
        self._thread = threading.Thread(target=self._watch, name="apextui-hangup-watchdog", daemon=True)

    def start(self) -> "HangupWatchdog":
        self._thread.start()
        return self

    def trigger(self) -> None:
        """A hang-up (SIGHUP): handle it now."""
        self._wake.set()

    def stop(self) -> None:
        """The app has ended. Without a hang-up the watchdog ends doing nothing. After one, this waits for its
        save (the process must not end mid-save); the forced exit stays armed: the rest of the shutdown gets
        `EXIT_GRACE_S` from the save on, as Textual's own shutdown did."""
        with self._lock:
            fired = self.fired
            if not fired:
                self.stopped.set()
        self._wake.set()
        if fired:
            self.saved.wait(SAVE_LIMIT_S)
        elif self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(1.0)  # it returns at once: an app that ended leaves no thread behind

    def _terminal_gone(self) -> bool:
        if self.tty_fd is None:
            return False
        try:
            poller = select.poll()
            poller.register(self.tty_fd, select.POLLHUP | select.POLLERR)
            return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in poller.poll(0))
        except (OSError, ValueError):
            return False

    def _watch(self) -> None:
        while not self._wake.wait(POLL_MS / 1000):
            if self._terminal_gone():
                break
        with self._lock:
            if self.stopped.is_set():
                return
            self.fired = True
        message: list[str] = []

        def save() -> None:
            try:
                message.append(self.save())
            finally:
                self.saved.set()

        threading.Thread(target=save, name="apextui-hangup-save", daemon=True).start()
        self.saved.wait(SAVE_LIMIT_S)
        time.sleep(EXIT_GRACE_S)  # the normal exit has this long, then it is forced
        try:
            self.kill_runs()
        finally:
            if message and message[0] and not self.reported:
                try:  # a terminal that is gone takes nothing; a log or a pipe may
                    os.write(2, f"apextui: {message[0]}\n".encode())
                except OSError:
                    pass
            os._exit(EXIT_HANGUP)


def resume_only_after_suspend() -> Callable[[], None]:
    """Let Textual's SIGCONT handler (which restarts application mode: a new writer thread, new key thread) run
    only after its own SIGTSTP suspended the app (ctrl+z). Why: when a terminal goes away the kernel sends the
    foreground process group SIGHUP *and* SIGCONT; the restart's new writer thread died on its first write to
    the gone terminal, its bounded queue filled, and the main thread blocked for good in `Queue.put`
    (`App._shutdown -> disable_input`, the old writer idle in `Queue.get`): the hang of issue 28, every time a
    pty's master closed. Call on the main thread once the driver is up; returns the function that puts
    Textual's handlers back."""
    tstp, cont = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    if not callable(tstp) or not callable(cont):  # no driver handlers (headless, tests): nothing to guard
        return lambda: None
    suspended = threading.Event()

    def on_tstp(signum: int, frame: Any) -> None:
        suspended.set()
        tstp(signum, frame)

    def on_cont(signum: int, frame: Any) -> None:
        if suspended.is_set():  # back from our own ctrl+z: Textual restores the screen
            suspended.clear()
            cont(signum, frame)

    signal.signal(signal.SIGTSTP, on_tstp)
    signal.signal(signal.SIGCONT, on_cont)

    def restore() -> None:
        signal.signal(signal.SIGTSTP, tstp)
        signal.signal(signal.SIGCONT, cont)

    return restore


def terminal_fd() -> int | None:
    """The terminal the TUI draws on (stdin, as Textual's driver reads it), or None when it is not a tty."""
    for stream in (sys.__stdin__, sys.__stdout__):
        try:
            if stream is not None and os.isatty(stream.fileno()):
                return stream.fileno()
        except (OSError, ValueError):
            continue
    return None
