"""What a run's worker process prints (compile messages, warnings, errors), kept for the log screen.

The worker writes its stdout and stderr to a log file (`core.run.worker.ProcessRunner.log_path`) and removes it
when a run ends well. `RunLog` opens that file once, at the run's start, and reads what was appended since
its last read; the open descriptor still reads a file that has since been deleted, so nothing printed
is lost. A missing or unreadable file gives a note instead of an error. Only the last `MAX_CHARS` are kept.
`log_text` / `poll_logs`: what the log screen (o) and the log pane (wide terminals) show. No Textual here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Any

from rich.text import Text

MAX_CHARS = 256 * 1024  # kept per run
READ_CHUNK = 64 * 1024  # read per poll, so a flood of output cannot stall the UI thread


class RunLog:
    """The output of one run's worker, read incrementally from its log file."""

    def __init__(self, title: str, path: str | None) -> None:
        self.title = title
        self.path = path
        self.text = ""
        self.note = ""
        self.truncated = False
        self._fd: int | None = None
        if path is None:
            self.note = "this run trains in the app's own process (APEXTUI_WORKER=thread): its output is not captured"
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            self.note = f"no log: cannot open {path}: {exc.strerror or exc}"
            return
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self.note = f"no log: {path} is not a regular file"
            return
        self._fd = fd

    @classmethod
    def of_runner(cls, title: str, runner: Any) -> RunLog:
        return cls(title, getattr(runner, "log_path", None))

    def poll(self) -> bool:
        """Read what was appended since the last poll (at most READ_CHUNK bytes a call); True if any."""
        if self._fd is None:
            return False
        try:
            size, pos = os.fstat(self._fd).st_size, os.lseek(self._fd, 0, os.SEEK_CUR)
            if size - pos > MAX_CHARS:  # more than is kept: skip to the part that would be kept
                os.lseek(self._fd, size - MAX_CHARS, os.SEEK_SET)
                self.text, self.truncated = "", True
            data = os.read(self._fd, READ_CHUNK)
        except OSError as exc:
            self.note = f"log unreadable: {exc.strerror or exc}"
            self.close()
            return False
        if not data:
            return False
        self.text += data.decode("utf-8", errors="replace")
        if len(self.text) > MAX_CHARS:
            self.text = self.text[-MAX_CHARS:]
            self.truncated = True
        return True

    def drain(self) -> None:
        """Read everything left (the run has ended), then close the file."""
        for _ in range(MAX_CHARS // READ_CHUNK + 1):
            if not self.poll():
                break
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def open(self) -> bool:
        return self._fd is not None


def log_text(logs: Sequence[RunLog]) -> Text:
    """One section per run: a title line, then its output (or why there is none)."""
    if not logs:
        return Text("no run yet: the output of each run's worker appears here", style="dim")
    out = Text()
    for n, log in enumerate(logs):
        if n:
            out.append("\n")
        state = "running" if log.open else "ended"
        out.append(f"── {log.title} · {state} ──\n", style="bold")
        if log.truncated:
            out.append("(earlier output dropped: only the last part is kept)\n", style="dim")
        if log.text:
            out.append(log.text if log.text.endswith("\n") else log.text + "\n")
        elif log.note:
            out.append(log.note + "\n", style="dim")
        else:
            out.append("(no output)\n", style="dim")
    return out


LogState = tuple[tuple[int, int, bool, str], ...]


def poll_logs(logs: Sequence[RunLog], drawn: LogState | None) -> tuple[LogState, Text | None]:
    """Read the logs' new output; their state, and the text to show when it changed since `drawn` (else None).
    The log screen and the log pane (widgets/log_pane.py) both follow the logs with it."""
    for log in logs:
        log.poll()
    state = tuple((id(log), len(log.text), log.open, log.note) for log in logs)
    return state, (None if state == drawn else log_text(logs))
