"""The writer thread's side of a watched run: what waits for it (`Backlog`) and what it writes (`LineWriter`).

Why apart from the hook: the training thread and the writer thread share only the backlog (its queue and counts,
bounded so a slow disk never grows the training's memory); everything the writer keeps of what it wrote (the start
line once, a setup line when the units change, where a stopped stream stopped) is the writer's alone, and the hook
(`hook.py`) stays the training thread's: its clock, its blocks and the values held until a block is read.
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Any, Callable

from ..run import events
from ..run.snapshot import Snapshot
from . import lines
from .stream import Stream

MAX_EXTRAS = 4096  # metric and note lines waiting for the writer thread; beyond, dropped and counted

Warn = Callable[[str, str], None]  # (the kind of problem, once a kind; the message)


class Backlog:
    """What waits for the writer thread: metric and note lines (`extras`, bounded: a line past `MAX_EXTRAS` is
    dropped and counted), the step records handed to it (counted by the training thread) and written (counted by
    the writer thread), and the lines dropped while it was behind."""

    def __init__(self) -> None:
        self.extras: queue.Queue[dict[str, Any]] = queue.Queue(MAX_EXTRAS)
        self.dropped = 0
        self._lock = threading.Lock()
        self.handed = 0
        self.taken = 0

    def put_line(self, line: dict[str, Any]) -> None:
        try:
            self.extras.put_nowait(line)
        except queue.Full:
            self.drop(1)

    def drop(self, lines_: int) -> None:
        with self._lock:
            self.dropped += lines_

    @property
    def behind(self) -> int:
        """Step records handed over and not written yet."""
        return self.handed - self.taken

    def drain(self) -> list[dict[str, Any]]:
        """The extra lines there now (other threads may go on putting)."""
        out = []
        for _ in range(self.extras.qsize()):
            try:
                out.append(self.extras.get_nowait())
            except queue.Empty:
                break
        return out


class LineWriter:
    """The delivery's callback (`run/delivery.py`): each snapshot's lines to the run's stream. A failure here stops
    the stream (one warning), never the training; a stopped stream's last words (where it stopped, then the run's own
    end) are set aside (`stream.py`)."""

    def __init__(self, stream: Stream | None, backlog: Backlog, warn: Warn) -> None:
        self.stream, self.backlog, self._warn = stream, backlog, warn
        self.start_line: dict[str, Any] | None = None  # set by the hook at the first step
        self._written_start = False
        self._written_step = 0  # the last step whose line the stream took
        # where a stopped stream stopped: the last step of the batch whose write failed (a full disk takes part of a
        # batch: the stream may hold its lines up to there, the last one cut off), else `_written_step`
        self._stopped_step: int | None = None
        self._setup_key: tuple[Any, ...] | None = None
        self._header = ""

    def __call__(self, snap: Snapshot) -> None:
        stream = self.stream
        if stream is None:
            return
        if stream.failed is None:
            try:
                self._write_lines(snap, stream)
            except Exception as exc:  # noqa: BLE001
                stream.failed = stream.reason = f"{type(exc).__name__}: {exc}"
                self._warn("write", f"stopped writing the stream: {stream.failed} (training goes on)")
                stream.close()
            if stream.failed is None:
                return
            self._set_aside(stream, snap)
        elif snap.finished:
            self._set_aside(stream, snap)

    def _set_aside(self, stream: Stream, snap: Snapshot) -> None:
        n = self._stopped_step if self._stopped_step is not None else self._written_step
        out = [lines.note_event(n, f"stream stopped: {stream.reason} at step {n}; the training went on (its "
                                   "lines after that step are not in the stream, the last before it may be cut off)")]
        if snap.finished:
            end = self._end_line(snap)
            end["watch"] = {**end.get("watch", {}), "stream_stopped": {"step": n, "reason": stream.reason}}
            if isinstance(end.get("error"), str):
                end["error"] = end["error"][:1000]  # the room set aside is 4 KB
            out.append(end)
        stream.set_aside([json.dumps(o) + "\n" for o in out])

    def _end_line(self, snap: Snapshot) -> dict[str, Any]:
        end = events.end_event(snap)
        if self.backlog.dropped:
            end["watch"] = {"dropped_lines": self.backlog.dropped}
        return end

    def _write_lines(self, snap: Snapshot, stream: Stream) -> None:
        out: list[dict[str, Any]] = []
        if not self._written_start and self.start_line is not None:
            self._written_start = True
            out.append(self.start_line)
        info = snap.info
        if info is not None and (info.units, info.units_per_step, info.device) != self._setup_key:
            self._setup_key = (info.units, info.units_per_step, info.device)
            setup = lines.setup_event(info)
            out.append(setup)
            self._header = "".join(json.dumps(o) + "\n" for o in (self.start_line or {}, setup))
        if snap.new_steps:
            self.backlog.taken += len(snap.new_steps)
            monitor = events.monitor_fields(snap.monitor)
            out.extend(events.step_event(rec, monitor) for rec in snap.new_steps)
        out += self.backlog.drain()
        if snap.finished:
            out.append(self._end_line(snap))
        if out:
            stream.header = self._header
            written = stream.write([json.dumps(o) + "\n" for o in out])
            if snap.new_steps:
                if written:
                    self._written_step = snap.new_steps[-1].step
                elif self._stopped_step is None:
                    self._stopped_step = snap.new_steps[-1].step

__all__ = ["Backlog", "LineWriter", "MAX_EXTRAS"]
