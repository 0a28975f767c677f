"""The lock of the index of live runs (`live.lock`), taken so that it never holds up the training that takes it.

`register` and `unregister` (`store.py`) rewrite the index whole under an fcntl lock, from `apextui.watch()` and
`close()`: inside the user's training. Whatever is at the lock's path, the wait is bounded: another process that
holds the lock (a hung run, `flock live.lock sleep 600`) is waited for `WAIT_S` at most, tried without blocking;
a path that is not a regular file (a FIFO would block `open` until a reader came; a device) is never opened. On
failure the index is updated without the lock (the write is atomic: at worst a concurrent run's entry is lost,
and it is written again at its own next update), and the failure is logged once a process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from .. import files

WAIT_S = 2.0  # how long another process's hold on the lock is waited for
POLL_S = 0.02  # between two tries

log = logging.getLogger("apextui.watch")
_warned = False


@contextlib.contextmanager
def held(path: Path, wait_s: float = WAIT_S) -> Iterator[bool]:
    """Hold the lock at `path` for the block; yields whether it is held (False: the block runs without it)."""
    fd = _take(path, wait_s)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _take(path: Path, wait_s: float) -> int | None:
    """The locked descriptor, or None (logged once) when the lock cannot be had within `wait_s`."""
    try:
        return _lock(path, wait_s)
    except _Refused as why:
        _failed(path, str(why))
        return None


def _lock(path: Path, wait_s: float) -> int:
    import fcntl

    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _Refused(f"cannot read it ({exc.strerror or exc})") from None
    if mode is not None and not stat.S_ISREG(mode):  # checked before the open: a device is never opened
        raise _Refused(f"it is {files.kind_of(mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise _Refused(f"cannot open it ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else since the look above
            raise _Refused(f"it is {files.kind_of(mode)}, not a regular file")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _Refused(f"another process has held it for {wait_s:g} s") from None
                time.sleep(POLL_S)
    except OSError as exc:
        os.close(fd)
        raise _Refused(f"cannot lock it ({exc.strerror or exc})") from None
    except _Refused:
        os.close(fd)
        raise


class _Refused(Exception):
    """Why the lock cannot be had."""


def _failed(path: Path, why: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("apextui: watch: could not lock %s: %s; the index of live runs is updated without the lock "
                    "(training goes on)", path, why)
