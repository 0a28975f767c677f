"""Writing to stdout for every front end, and turning a stdout that cannot take it into a clean exit.

Why one helper: `apextui ... | head`, `> /dev/full` and `>&-` each broke a different printer with a
traceback. Here a reader that went away (EPIPE) becomes exit 141 (128 + SIGPIPE, as Unix tools do) with
nothing on stderr, and any other write failure (ENOSPC, a closed stdout) one line on stderr and exit 1.
"""

from __future__ import annotations

import os
import sys

EXIT_WRITE_FAILED, EXIT_BROKEN_PIPE = 1, 141


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
    """Point fd 1 at /dev/null so Python's own final flush at exit cannot raise again (Python docs, SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def write(text: str) -> None:
    """Write `text` to stdout and flush; raise OutputFailed when it cannot be written."""
    out = sys.stdout
    if out is None:
        raise OutputFailed(EXIT_WRITE_FAILED, "cannot write to stdout: it is closed")
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
        raise OutputFailed(EXIT_WRITE_FAILED, f"cannot write to stdout: {reason}") from None
