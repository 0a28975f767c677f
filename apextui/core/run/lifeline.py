"""Worker processes and their forkserver die with their parent, however it ends (SIGKILL included).

Why: a worker spinning in a hung user step (`while True: pass` in a forward) never reads its pipe, so it never
learns that apextui is gone; it kept the forkserver's "alive" pipe open, so the forkserver stayed, and both kept
multiprocessing's resource tracker: three processes, one at 100 % CPU, for minutes after a SIGKILL of `advise`.

The chain: the forkserver (its parent: apextui's process) polls its parent pid on a thread and exits once it
changes (the kernel re-parents an orphan at once); a worker (its parent: the forkserver, or apextui's process
with the spawn start method) does the same, and on Linux also asks the kernel for SIGKILL when its parent dies
(PR_SET_PDEATHSIG), which works even while the worker's main thread holds the GIL in C code. Only the forkserver's
workers ask for it: the signal comes when the *thread* that forked the process exits, and only the forkserver is
known to fork from its main thread (apextui's own threads come and go). Once that parent dies the forkserver's
"alive" pipe and the tracker's pipe close, and both end by themselves.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

POLL_S = 0.5  # how often an orphan looks at its parent pid
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

SERVER_PID: int | None = None  # set in the forkserver (and so in every worker forked from it): its pid


def death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when the thread that forked it exits (Linux); False
    elsewhere or where prctl cannot be called."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _orphaned() -> None:
    """Parent gone: end now (nobody reads what this process would report; its children go through theirs)."""
    try:
        os.kill(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(1)


def exit_with_parent(parent: int, poll_s: float = POLL_S) -> None:
    """From now on, end this process once its parent is no longer `parent` (the pid it had when it started): at
    once if that is already so, else within `poll_s`, from a daemon thread."""
    if os.getppid() != parent:
        _orphaned()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        _orphaned()

    threading.Thread(target=watch, name="apextui-lifeline", daemon=True).start()


def guard_forkserver() -> None:
    """In the forkserver: exit once apextui's process is gone; mark this process as the server its workers came
    from (`SERVER_PID`, inherited by every fork)."""
    global SERVER_PID
    SERVER_PID = os.getpid()
    exit_with_parent(os.getppid())


def guard_worker() -> None:
    """In a worker, first thing: end with the parent. Forked by the forkserver (SERVER_PID is set), the parent
    is that server, and on Linux the kernel kills the worker the moment it dies; otherwise (spawn) the parent is
    apextui's process, which multiprocessing names."""
    if SERVER_PID is not None:
        death_signal()
        exit_with_parent(SERVER_PID)
        return
    import multiprocessing

    parent = multiprocessing.parent_process()
    exit_with_parent(parent.pid if parent is not None and parent.pid is not None else os.getppid())
