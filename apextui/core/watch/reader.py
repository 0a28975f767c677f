"""Reading a watched run's stream back: complete lines only, in order across segments, following a live run.

A line is taken once its newline is there: a writer killed mid-line (SIGKILL) leaves a partial last line, which
`Follower.finish` drops and names. The header lines a new segment repeats (`start`, `setup`) are dropped when
already seen. A segment removed by rotation while it was read is skipped with a note, as are segments rotated
away before the reader came (the run's oldest lines). A damaged line (not JSON, not an object, nested too deeply,
a non-finite or absurd number: `jsonline.loads`) is skipped, and the first of each segment named in a note with
its line number: no reader downstream ever meets a value it cannot print as JSON or turn into a float. A line
longer than `LINE_BYTES` is damaged too: it is skipped as it is read, in chunks, so what the reader holds stays
bounded whatever a file holds (a 300 MB line, a copy of /dev/zero).

A segment is opened non-blocking and checked to be a regular file (`files.open_regular`, as `run.json` is): a
FIFO would block the reader forever, a device (a link to /dev/zero) never ends. Such a segment, or one that cannot
be read, raises `BadSegment`, one line naming it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from .. import files
from ..errors import UsageProblem
from . import jsonline
from .store import RunMeta, alive
from .stream import segment_path, segments, set_aside_lines

READ_BYTES = 4 * 2**20  # read at most this much a call, so a big stream is shown while it loads
TAIL_BYTES = 64 * 2**10  # `last_end` reads this much of the last segment
LINE_BYTES = 2**20  # a longer line is damage: the writers' longest (a start line) is a few KB
SEGMENT = "stream segment"  # what the error lines call a segment


class BadSegment(UsageProblem, ValueError):
    """A segment that is not a regular file (a FIFO, a device, a directory) or cannot be read; the message is one
    line naming it and what is wrong."""


def open_segment(path: Path) -> BinaryIO | None:
    """The segment open for reading (non-blocking, a regular file: `files.open_regular`); None when it is not there
    (rotated away), `BadSegment` when it is not a regular file or cannot be opened."""
    try:
        fd = files.open_regular(path, SEGMENT)
    except files.UnreadableFile as exc:
        if exc.missing:
            return None
        raise BadSegment(str(exc)) from None
    return os.fdopen(fd, "rb")


class Follower:
    """Reads the new complete lines of a run folder at each `poll`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.number = 0  # the segment being read (0: none yet)
        self.offset = 0
        self.partial = b""
        self.notes: list[str] = []  # what the reader skipped, in words
        self._seen: dict[str, Any] = {}  # the last start and setup lines (a new segment repeats them)
        self.bad_lines = 0
        self.line = 0  # complete lines read of the current segment
        self._named: set[int] = set()  # the segments whose first damaged line has a note
        self._drained = False  # the current segment read to its end after a newer one was seen
        self._skipping = False  # in a line longer than LINE_BYTES (already noted): dropped up to its newline

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            if self.number == 0:
                found = segments(self.folder)
                if not found:
                    return out
                self.number = found[0][0]
                if self.number > 1:
                    self.notes.append(f"segments 1 to {self.number - 1} were rotated away (the run's oldest lines)")
            data = self._read()
            if data is None:
                newer = [n for n, _ in segments(self.folder) if n > self.number]
                if not newer:
                    return out
                self.notes.append(f"segment {self.number} was rotated away while it was read")
                self._next(newer[0])
                continue
            self.offset += len(data)
            out.extend(self._lines(data))
            if len(data) == READ_BYTES:
                continue
            newer = [n for n, _ in segments(self.folder) if n > self.number]
            if not newer:
                return out
            if not self._drained:  # once more: the writer's last lines to this one came before the next one was made
                self._drained = True
                continue
            if self.partial:
                self.notes.append(f"skipped a partial line at the end of segment {self.number}")
            self._next(newer[0])

    def _read(self) -> bytes | None:
        """The current segment's next bytes (at most `READ_BYTES`); None when it is gone (rotated away)."""
        path = segment_path(self.folder, self.number)
        f = open_segment(path)
        if f is None:
            return None
        try:
            with f:
                f.seek(self.offset)
                return f.read(READ_BYTES)
        except OSError as exc:
            raise BadSegment(f"{path}: cannot read: {exc.strerror or exc}") from None

    def _lines(self, data: bytes) -> list[dict[str, Any]]:
        """The events of the lines `data` completes; the rest waits in `partial`, which never passes `LINE_BYTES`: a
        line that would is skipped (with a note) to its newline, however many reads away."""
        if self._skipping:
            cut = data.find(b"\n")
            if cut < 0:
                return []
            data, self._skipping = data[cut + 1:], False
        *complete, self.partial = (self.partial + data).split(b"\n")
        events = [e for e in (self._parse(line) for line in complete) if e is not None]
        if len(self.partial) > LINE_BYTES:
            self.line += 1
            self._too_long()
            self.partial, self._skipping = b"", True
        return events

    def _next(self, number: int) -> None:
        self.number, self.offset, self.partial, self._drained, self.line = number, 0, b"", False, 0
        self._skipping = False

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        self.line += 1
        if len(line) > LINE_BYTES:
            self._too_long()
            return None
        if not line.strip():
            return None
        try:
            event = jsonline.loads(line)
            if not isinstance(event, dict):
                raise jsonline.Damaged(f"JSON {type(event).__name__}, not an object")
        except jsonline.Damaged as why:
            self._damaged(str(why))
            return None
        kind = event.get("event")
        if kind in ("start", "setup"):
            if self._seen.get(kind) == event:
                return None
            self._seen[kind] = event
        return event

    def _too_long(self) -> None:
        self._damaged(f"longer than {LINE_BYTES} bytes (a stream's lines are a few KB)")

    def _damaged(self, why: str) -> None:
        self.bad_lines += 1
        if self.number not in self._named:  # once a segment: a damaged file may hold thousands
            self._named.add(self.number)
            self.notes.append(f"skipped line {self.line} of {segment_path(self.folder, self.number).name}: {why} "
                              "(a damaged line; any others in this file are skipped without a note)")

    def finish(self) -> None:
        """The writer is gone: a line without its newline is a partial last line; drop it and say so."""
        if self.partial:
            self.notes.append(f"skipped a partial last line ({len(self.partial)} bytes): the training process "
                              "ended in the middle of writing it")
            self.partial = b""
        self._skipping = False


def last_write(folder: Path) -> float | None:
    """When the stream was last written (the newest segment's mtime)."""
    found = segments(folder)
    try:
        return found[-1][1].stat().st_mtime if found else None
    except OSError:
        return None


def last_end(folder: Path) -> dict[str, Any] | None:
    """The run's `end` line, read from the tail of its last segment; None when it has none (live, or killed)."""
    found = segments(folder)
    if not found:
        return None
    try:
        f = open_segment(found[-1][1])
        if f is None:
            return None
        with f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read(TAIL_BYTES)
    except (OSError, BadSegment):
        return None
    for line in reversed(tail.split(b"\n")):
        if b'"end"' in line:
            try:
                event = jsonline.loads(line)
            except jsonline.Damaged:
                continue
            if isinstance(event, dict) and event.get("event") == "end":
                return event
    return next((e for e in set_aside_lines(folder) if e.get("event") == "end"), None)  # a stream that stopped


Outcome = Literal["ended", "gone", "stopped"]


@dataclass(frozen=True)
class Ending:
    """How following a run ended: its `end` line came ("ended"), its process is gone without one ("gone", with
    the time of its last write), or the reader was asked to stop ("stopped")."""

    outcome: Outcome
    last_write: float | None = None

    def words(self, meta: RunMeta) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.last_write)) if self.last_write else "unknown"
        gone = "is gone" if not _pid_in_use(meta.pid) else "is gone (its pid now belongs to another process)"
        return f"ended without an end line: process {meta.pid} {gone}; its last line was written at {when}"


def _pid_in_use(pid: int) -> bool:
    """Some process has this pid now (the run's own is gone: `store.alive` said so, by its start time too)."""
    import os

    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OSError, OverflowError, ValueError):
        return False
    return True


def follow(folder: Path, meta: RunMeta, handle: Callable[[list[dict[str, Any]]], None],
           stop: threading.Event | None = None, poll_s: float = 0.25, once: bool = False,
           follower: Follower | None = None) -> Ending:
    """Hand every new event of the run to `handle` until its `end` line, until its process is gone, or until
    `stop` is set; `once`: what is there now, then return (a live run's ending is then "stopped")."""
    reader = follower or Follower(folder)
    stop = stop or threading.Event()
    while True:
        running = alive(meta)  # before reading: a line written after this look is read before "gone" is said
        events = reader.poll()
        if events:
            handle(events)
        if any(e.get("event") == "end" for e in events):
            return Ending("ended")
        aside = set_aside_lines(folder) if not running or not events else []  # the stream stopped (disk full)
        if aside and (not running or any(e.get("event") == "end" for e in aside)):
            reader.partial = b""  # the write the full disk cut short
            handle(aside)
            if any(e.get("event") == "end" for e in aside):
                return Ending("ended")
        if not running:
            reader.finish()
            return Ending("gone", last_write(folder))
        if once or stop.wait(poll_s):
            return Ending("stopped")
