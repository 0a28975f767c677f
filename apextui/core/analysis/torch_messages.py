"""torch's messages about apextui's own use of it, kept off the user's terminal and in a log file.

A headless run or `apextui advise` trains in the user's process, so what torch prints about the profiler window
after the measured steps ("Profiler clears events at the end of each cycle", "Profiler record function … will
be ignored", the profiler's own C++ start/stop lines) and about importing `torch.utils.cpp_extension` ("No CUDA
runtime is found, using CUDA_HOME=…") reached the user's stderr once a run, though nothing the user did caused
it. These go to `log_path()` instead (docs/cli.md says where); every other warning, from the user's model code
included, is shown as before. (The TUI trains in worker processes whose output is their log already: the `o`
screen.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from .ceilings import cache_dir

LOG_FILE = "torch-messages.log"
# Messages torch gives about apextui's own calls into it (the profile window, the import of cpp_extension);
# matched against the start of the message, so the user's own warnings never match
OWN_MESSAGES = re.compile(
    r"(Warning: )?Profiler clears events at the end of each cycle"
    r"|Profiler record function .* will be ignored"
    r"|No CUDA runtime is found, using CUDA_HOME"
)
TORCH_LOGGERS = ("torch.utils.cpp_extension", "torch.profiler", "torch.autograd.profiler")


def log_path() -> Path:
    """Where the messages go: `torch-messages.log` in apextui's cache folder (beside `ceilings.json`)."""
    return cache_dir() / LOG_FILE


def is_own(message: str) -> bool:
    """A message torch gives about apextui's own use of it (`OWN_MESSAGES`)."""
    return OWN_MESSAGES.match(message.strip()) is not None


def _append(line: str, path: Path | None = None) -> None:
    """One line, dated, at the end of the log (best effort: a log that cannot be written drops it)."""
    path = path or log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line.rstrip()}\n")
    except OSError:
        pass


class _OwnRecords(logging.Filter):
    """On torch's loggers: a record of `OWN_MESSAGES` goes to the log, not to torch's stderr handler."""

    def __init__(self, path: Path | None) -> None:
        super().__init__()
        self.path = path

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if is_own(message):
            _append(f"{record.name} {record.levelname}: {message}", self.path)
            return False
        return True


@contextlib.contextmanager
def diverted(path: Path | None = None) -> Iterator[None]:
    """While it holds, Python warnings and torch log records of `OWN_MESSAGES` go to the log (`path`, default
    `log_path()`); any other warning is shown by the `warnings.showwarning` that was in place."""
    shown = warnings.showwarning
    records = _OwnRecords(path)

    def showwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    file: TextIO | None = None, line: str | None = None) -> None:
        if is_own(str(message)):
            _append(f"{category.__name__}: {message} ({filename}:{lineno})", path)
            return
        shown(message, category, filename, lineno, file, line)

    global _diverting
    loggers = [logging.getLogger(name) for name in TORCH_LOGGERS]
    warnings.showwarning = showwarning
    for logger in loggers:
        logger.addFilter(records)
    before, _diverting = _diverting, path or log_path()
    try:
        yield
    finally:
        _diverting = before
        if warnings.showwarning is showwarning:
            warnings.showwarning = shown
        for logger in loggers:
            logger.removeFilter(records)


_diverting: Path | None = None  # the log while `diverted` holds (the headless front ends), else None


def profile_window() -> contextlib.AbstractContextManager[None]:
    """Around the profiler window (analysis/profile.py): its C++ output to the log while `diverted` holds
    (`stderr_to_log`); elsewhere (the TUI: its own terminal drawing, a worker's log) nothing changes."""
    return stderr_to_log(_diverting) if _diverting is not None else contextlib.nullcontext()


@contextlib.contextmanager
def stderr_to_log(path: Path | None = None) -> Iterator[None]:
    """While it holds, file descriptor 2 (C++ output included: the profiler's start/stop lines) writes to the
    log, when it is a terminal; a stderr that is a file or a pipe (a worker's log, a script's capture) is left
    as it is, so its reader still sees everything."""
    try:
        terminal = os.isatty(2)
    except OSError:
        terminal = False
    if not terminal:
        yield
        return
    path = path or log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    _flush(sys.stderr)
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        _flush(sys.stderr)
        os.dup2(saved, 2)
        os.close(saved)


def _flush(stream: Any) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):
        stream.flush()
