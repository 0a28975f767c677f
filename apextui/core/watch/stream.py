"""A watched run's JSON lines on disk: rotated segments, bounded in size, and a writer that never raises.

The lines go to `events-000001.jsonl`, `events-000002.jsonl`, ... in the run folder. A segment that would pass
`max_bytes / SEGMENTS` is closed and the next one begins with the run's header (its `start` and `setup` lines)
again, so every segment reads alone; the oldest segments beyond `SEGMENTS` are removed, so a run of any length
keeps at most about `max_bytes` on disk (its newest lines). Numbered segments are never renamed: a reader that
follows the highest number never loses its place.

Writing fails (disk full, a quota, the folder removed): the stream stops writing, warns once, and every later
write is a no-op. The training it watches goes on. Its last words (where it stopped, and the run's `end` line once
the run ends) go to `stopped.jsonl`, written in place over room kept for them when the run began (`reserve`): a
full disk has no room left for a new file, and a reader would otherwise take a run that finished for one that
died in the middle of a write.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .. import files

DEFAULT_MAX_BYTES = 256 * 2**20  # a run's stream on disk: its newest 256 MiB
SEGMENTS = 8
PATTERN = "events-*.jsonl"
ASIDE = "stopped.jsonl"  # a stopped stream's last lines
ASIDE_BYTES = 4096  # the room kept for them: a note and an end line (about 1 KB) with room to spare
FULL = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded"}

log = logging.getLogger("apextui.watch")


def segment_path(folder: Path, number: int) -> Path:
    return folder / f"events-{number:06d}.jsonl"


def segment_number(path: Path) -> int | None:
    stem = path.name.removeprefix("events-").removesuffix(".jsonl")
    return int(stem) if stem.isdigit() else None


def segments(folder: Path) -> list[tuple[int, Path]]:
    """The folder's segments in order: (number, path)."""
    try:
        found = [(segment_number(p), p) for p in folder.glob(PATTERN)]
    except OSError:
        return []
    return sorted((n, p) for n, p in found if n is not None)


Opener = Callable[[Path], IO[str]]


def append(path: Path) -> IO[str]:
    return open(path, "a", encoding="utf-8")


def set_aside_lines(folder: Path) -> list[dict[str, Any]]:
    """The lines a stream that stopped writing set aside (a `note` saying where, then the run's `end`); [] for a
    stream that never stopped, or a file of that name that is no regular file (a FIFO would block the reader, a link
    to /dev/zero never ends: `files.open_regular`)."""
    try:
        fd = files.open_regular(folder / ASIDE, "stopped stream's file")
    except files.UnreadableFile:
        return []
    try:
        data = os.read(fd, 4 * ASIDE_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    out = []
    for line in data.split(b"\n"):
        try:
            event = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


class Stream:
    """Appends text (whole lines) to the run folder's segments; thread-safe only from one writer thread."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES, opener: Opener = append,
                 name: str = "") -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.segment_bytes = max(1, max_bytes // SEGMENTS)
        self.opener = opener
        self.name = name or folder.name
        self.header = ""  # the start and setup lines, written again at the top of each new segment
        self.number = 0
        self.size = 0
        self.failed: str | None = None  # why writing stopped
        self.reason: str | None = None  # ... in a reader's words ("disk full")
        self._file: IO[str] | None = None

    def write(self, lines: list[str]) -> bool:
        """Append `lines` (each ending with a newline), a new segment wherever the next line would not fit; one
        write a segment. False once the stream has stopped (it then never writes again)."""
        if self.failed is not None:
            return False
        try:
            chunk: list[str] = []
            for line in lines:
                size = len(line.encode("utf-8"))
                if self._file is None or (self.size and self.size + size > self.segment_bytes):
                    self._flush(chunk)
                    self._rotate()
                chunk.append(line)
                self.size += size
            self._flush(chunk)
        except (OSError, ValueError) as exc:
            self._stop(exc)
        return self.failed is None

    def _flush(self, chunk: list[str]) -> None:
        f = self._file
        if chunk and f is not None:
            f.write("".join(chunk))
            f.flush()
        chunk.clear()

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        self.number += 1
        self._file = self.opener(segment_path(self.folder, self.number))
        self.size = 0
        if self.header and self.number > 1:  # the first segment's own lines begin with it
            self._file.write(self.header)
            self.size = len(self.header.encode("utf-8"))
        for number, path in segments(self.folder):
            if number <= self.number - SEGMENTS:
                path.unlink(missing_ok=True)

    def _stop(self, exc: BaseException) -> None:
        reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else str(exc)
        self.failed = reason
        self.reason = FULL.get(getattr(exc, "errno", None) or 0, reason)
        log.warning("apextui: stopped writing the stream of watched run %s: %s (training goes on)", self.name, reason)
        self.close()

    def reserve(self) -> None:
        """Keep room for the lines `set_aside` writes if the stream stops (spaces, overwritten in place later)."""
        try:
            with open(self.folder / ASIDE, "wb") as f:
                f.write(b" " * (ASIDE_BYTES - 1) + b"\n")
        except OSError:
            pass

    def set_aside(self, lines: list[str]) -> None:
        """The stopped stream's last lines, over the room `reserve` kept (a full disk gives no new block; best
        effort: nothing raises)."""
        data = "".join(lines).encode("utf-8")
        try:
            with open(self.folder / ASIDE, "r+b") as f:
                f.write(data.ljust(ASIDE_BYTES - 1) + b"\n" if len(data) < ASIDE_BYTES else data)
        except OSError:
            pass

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
