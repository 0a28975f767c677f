"""The JSON lines a headless run prints on stdout (docs/cli.md): one object a line, the `end` line exactly once, and a
stdout that goes away (`| head`) noted rather than raised. Its own module: the refusals print their `unavailable`
line through it, and the run that refuses is built on them."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, TextIO

from . import output
from ..core.run import events
from ..core.run.snapshot import Snapshot
from .signals import settle


class JsonLinePrinter:
    """Consumes snapshots in order and prints one JSON object a line; the `end` line exactly once."""

    def __init__(self, out: TextIO | None = None, on_broken: Callable[[], None] | None = None) -> None:
        self.out = out  # None: whatever sys.stdout is when printing (through apextui.cli.output)
        self.on_broken = on_broken  # called once when stdout fails: the run stops rather than train unread
        self.lock = threading.Lock()
        self.ended = False
        self.broken = False
        self.failure: output.OutputFailed | None = None
        self._setup_done = False
        self.started = False  # the `start` line is out (a second signal before it prints no JSON)
        self.last: Snapshot | None = None

    def emit(self, *objs: dict[str, Any]) -> None:
        """Print `objs`, one line each, in one write: a snapshot's step lines cost the delivery thread one
        system call (each call lets the training thread's next CUDA call wait on the GIL)."""
        if not objs:
            return
        with self.lock:
            if self.broken or self.ended:
                return
            if any(obj.get("event") == "end" for obj in objs):  # nothing after the end line
                objs = objs[:next(i for i, obj in enumerate(objs) if obj.get("event") == "end") + 1]
            if objs[-1].get("event") == "end":
                settle()  # before it is written: a signal once it can be read changes neither the status nor the end
            text = "".join(json.dumps(obj) + "\n" for obj in objs)
            self.started = self.started or any(obj.get("event") == "start" for obj in objs)
            try:
                if self.out is None:
                    output.write(text)
                else:
                    self.out.write(text)
                    self.out.flush()
            except output.OutputFailed as exc:  # reader went away (`| head`), disk full, stdout closed
                self.broken, self.failure = True, exc
            except (BrokenPipeError, ValueError):
                self.broken = True
            if objs[-1].get("event") == "end":
                self.ended = True
        if self.broken and self.on_broken is not None:
            self.on_broken()

    def close_unstarted(self) -> bool | None:
        """A second signal's question: is the `start` line still to come? True: then it never comes, nor any other
        line (no JSON at all rather than an `end` without a `start`); False: it is out, an `end` line may follow;
        None: a write stuck for a second holds the printer (the process quits without another line)."""
        if not self.lock.acquire(timeout=1.0):
            return None
        try:
            before_start = not self.started
            self.ended = self.ended or before_start
        finally:
            self.lock.release()
        return before_start

    def __call__(self, snap: Snapshot) -> None:
        self.last = snap
        lines: list[dict[str, Any]] = []
        if snap.info is not None and not self._setup_done:
            self._setup_done = True
            lines.append(events.setup_event(snap.info))
        if snap.new_steps:
            monitor = events.monitor_fields(snap.monitor)
            lines.extend(events.step_event(rec, monitor) for rec in snap.new_steps)
        if snap.finished:
            lines.append(events.end_event(snap))
        self.emit(*lines)
