"""Writing to stdout for every front end, and turning a stdout that cannot take it into a clean exit.

Why one helper: `apextui ... | head`, `> /dev/full` and `>&-` each broke a different printer with a
traceback. Here a reader that went away (EPIPE) becomes exit 141 (128 + SIGPIPE, as Unix tools do) with
nothing on stderr, and any other write failure (ENOSPC, a closed stdout) one line on stderr and exit 1.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator, TextIO

from ..core.exits import EXIT_BROKEN_PIPE, EXIT_FAILED

_private: TextIO | None = None  # while `json_stdout` holds: the real stdout, written by apextui alone


class OutputFailed(Exception):
    """stdout cannot be written; `exit_code` and, unless the reader simply went away, `message`."""

    def __init__(self, exit_code: int, message: str = "") -> None:
        super().__init__(message)
        self.exit_code, self.message = exit_code, message

    def report(self) -> int:
        """One line on stderr (none for a broken pipe); the exit code to return."""
        if self.message:
            try:
                print(f"apextui: error: {self.message}", file=sys.stderr, flush=True)
            except (OSError, ValueError, AttributeError):
                pass
        return self.exit_code


def silence_stdout() -> None:
    """Point fd 1 (and the private stdout of `json_stdout`) at /dev/null so Python's own final flush at exit
    cannot raise again (Python docs, SIGPIPE)."""
    fds = [1]
    if _private is not None:
        try:
            fds.append(_private.fileno())
        except (OSError, ValueError):
            pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in fds:
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


@contextmanager
def json_stdout() -> Iterator[None]:
    """While it holds, stdout carries apextui's JSON alone: the real stdout moves to a private file descriptor
    that `write` uses, and fd 1 and `sys.stdout` point at stderr, so that what the user's model prints (from
    Python or from C) lands on stderr instead of among the JSON lines (docs/json.md). Where `sys.stdout` is not
    fd 1 (it was replaced, as a test's capture does), only `sys.stdout` moves. A closed stdout stays closed:
    `write` then reports it as before."""
    global _private
    real = sys.stdout
    if real is None or _private is not None:
        yield
        return
    saved = -1
    try:
        on_fd1 = real.fileno() == 1
    except (AttributeError, OSError, ValueError):
        on_fd1 = False
    try:
        if on_fd1:
            real.flush()
            saved = os.dup(1)
            _private = open(saved, "w", encoding=real.encoding, errors=real.errors, closefd=False)
            os.dup2(2, 1)
        else:
            _private = real
    except (OSError, ValueError):  # fd 1 or 2 closed: leave stdout as it is
        if saved >= 0:
            os.close(saved)
        saved, _private = -1, None
        yield
        return
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        private, _private = _private, None
        sys.stdout = real
        if saved >= 0:
            try:
                private.flush()
            except (OSError, ValueError):
                pass
            try:
                os.dup2(saved, 1)
            except OSError:
                pass
            os.close(saved)


def write(text: str) -> None:
    """Write `text` to stdout and flush; raise OutputFailed when it cannot be written."""
    out = _private if _private is not None else sys.stdout
    if out is None:
        raise OutputFailed(EXIT_FAILED, "cannot write to stdout: it is closed")
    try:
        try:
            out.write(text)
        except UnicodeEncodeError:  # an ASCII-only stdout: write what it can take rather than nothing
            encoding = getattr(out, "encoding", None) or "ascii"
            out.write(text.encode(encoding, errors="replace").decode(encoding, errors="replace"))
        out.flush()
    except BrokenPipeError:
        silence_stdout()
        raise OutputFailed(EXIT_BROKEN_PIPE) from None
    except (OSError, ValueError) as exc:  # ENOSPC, EIO...; ValueError: I/O on a closed file
        silence_stdout()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputFailed(EXIT_FAILED, f"cannot write to stdout: {reason}") from None
