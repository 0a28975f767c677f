"""Reading a file whose path the user controls (presets, the preset folder, results, caches).

Every such read goes through `read_text`: the path must name a regular file (a FIFO would block the
open or the read forever, a device can be endless) of at most `limit` bytes, holding UTF-8 text (a BOM
is allowed). Anything else raises `UnreadableFile`, one line naming the path, what is wrong and what is
allowed; callers wrap it in their own error type. A file read in chunks from an offset (a watched run's
stream, which grows while it is read) is opened by `open_regular`, with the same checks. No Textual import
here (`apextui/core` never has one).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

PRESET_LIMIT = 1 << 20  # a preset file is a few hundred bytes
DATA_LIMIT = 64 << 20  # results files and caches: thousands of runs fit in a few MiB

_KINDS = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
)
_CHUNK = 1 << 20


class UnreadableFile(ValueError):
    """The path is missing, not a regular file, too large, unreadable or not UTF-8; the message says which."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing  # callers for which a missing file is no error (caches) test this


def kind_of(mode: int) -> str:
    """'a FIFO', 'a directory', ...: what a non-regular file is, for messages."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def one_line(exc: BaseException, most: int = 200) -> str:
    """An exception's message on one line, cut to `most` characters (for notifications and stderr)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= most else text[: most - 3] + "..."


def read_text(path: str | Path, limit: int, what: str) -> str:
    """The file's text, decoded as UTF-8 (a leading BOM dropped). `what` names the file in messages
    ('preset file', 'results file'); raises `UnreadableFile` and nothing else."""
    raw = read_bytes(path, limit, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path}: not UTF-8 text (byte {exc.start}); a {what} is UTF-8 text") from None


def read_bytes(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; raises `UnreadableFile` and nothing else."""
    fd = open_regular(path, what, limit)
    try:
        return _read_at_most(fd, path, limit, what)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read: {_reason(exc)}") from None
    finally:
        os.close(fd)


def open_regular(path: str | Path, what: str, limit: int | None = None) -> int:
    """A descriptor open for reading on a regular file (of at most `limit` bytes, where given), for a reader that
    reads it in its own way (from an offset, in chunks); raises `UnreadableFile` and nothing else.

    The path is checked with stat before it is opened (a device is never opened), then opened
    non-blocking (a FIFO swapped in meanwhile cannot block) and checked again on the open descriptor."""
    before = _os_call(path, what, os.stat, path)
    _check(path, before.st_mode, before.st_size, limit, what)
    fd = _os_call(path, what, os.open, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        _check(path, info.st_mode, info.st_size, limit, what)
    except OSError as exc:
        os.close(fd)
        raise UnreadableFile(f"{path}: cannot read: {_reason(exc)}") from None
    except UnreadableFile:
        os.close(fd)
        raise
    return fd


def _os_call(path: str | Path, what: str, call: Callable[..., T], *args: object) -> T:
    """`os.stat` / `os.open` with their errors as `UnreadableFile`."""
    try:
        return call(*args)
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such {what}", missing=True) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise UnreadableFile(f"{path}: cannot read: {_reason(exc)}") from None


def _check(path: str | Path, mode: int, size: int, limit: int | None, what: str) -> None:
    if stat.S_ISDIR(mode):
        raise UnreadableFile(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise UnreadableFile(f"{path}: not a regular file ({kind_of(mode)}); a {what} must be a regular file")
    if limit is not None and size > limit:
        raise UnreadableFile(_too_large(path, f"{size} bytes", limit, what))


def _too_large(path: str | Path, size: str, limit: int, what: str) -> str:
    return f"{path}: too large for a {what} ({size}; at most {limit} bytes allowed)"


def _read_at_most(fd: int, path: str | Path, limit: int, what: str) -> bytes:
    """Read to the end, refusing a file that grew past `limit` after it was checked."""
    parts: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UnreadableFile(_too_large(path, "it grew while being read", limit, what))
    return b"".join(parts)


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
