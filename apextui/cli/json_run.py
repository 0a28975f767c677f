"""`apextui --preset NAME --json`: run a preset headless, JSON lines on stdout, logs on stderr."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, TextIO

from . import output
from ..core.exits import EXIT_CHECK_FAILED, EXIT_FAILED, EXIT_OK
from ..core.run.request import RunRequest
from ..core.run import events
from ..core.run.runner import Runner
from ..core.run.snapshot import Snapshot
from .refusals import log, refusal
from .signals import StopOnSignals, settle, stop_notice, twice_error

if TYPE_CHECKING:
    from ..core.availability import Availability



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


def start_contention(device: str) -> Any:
    """Was other work competing as the run starts (the `start` line's `contention`); None if it cannot be read."""
    from ..core.env import pci_bus_id
    from ..core.monitor.contention import sample_now
    from ..core.monitor.nvml import Nvml

    try:
        return sample_now(Nvml(pci_bus_id=pci_bus_id()) if device == "cuda" else None)
    except Exception:  # noqa: BLE001 - the run goes on without it
        return None


def run(request: RunRequest, avail: Availability | None = None) -> int:
    """Run `request` (its device already resolved); return the process exit code. Unless `request.force`, a
    preset whose memory estimate does not fit in what is free is refused (exit 2) before anything is built.
    `avail`: its availability where the caller knows more than `availability` (the user's model)."""
    from ..core.availability import availability

    preset = request.preset
    printer = JsonLinePrinter()
    refused = refusal(request, avail if avail is not None else availability(preset, request.device), printer)
    if refused is not None:
        return refused

    compiling = threading.Event()  # set before the "compiling" line is logged: a signal after it sees it

    def consume(snap: Snapshot) -> None:
        entering = snap.status == "compiling" and (printer.last is None or printer.last.status != "compiling")
        if snap.status == "compiling":
            compiling.set()
        else:
            compiling.clear()
        if entering:  # seconds to minutes with no JSON line
            log(f"compiling {preset.name} (torch.compile / CUDA-graph capture; not part of the measured steps)…")
        printer(snap)

    runner: Runner | None = None
    stop_early = threading.Event()  # a signal before the Runner exists

    def stop() -> None:
        stop_early.set()
        if runner is not None:
            runner.stop()

    printer.on_broken = stop

    def first(signum: int) -> None:
        log(stop_notice(signum, "stopping once compilation ends, before the first measured step"
                        if compiling.is_set() else "stopping after the current step"))  # compiling: no cut short
        stop()

    def again(signum: int) -> None:
        error = twice_error(signum, signals.twice())
        before_start = printer.close_unstarted()
        if before_start is None:  # held by a stuck write: quit without the end line
            return
        if before_start:
            log(f"{error} before the run started: nothing measured")
            return
        if printer.last is not None:  # what was measured so far is still reported
            printer.emit(events.end_event(replace(printer.last, status="stopped", new_steps=(), error=error)))
        else:  # before the first snapshot (e.g. while the workload is built): an end line, no figures
            printer.emit(events.end_line("stopped", error))

    # handlers first: from the `start` line on, every signal leads to an `end` line; none before it
    signals = StopOnSignals(first, again)
    from ..core.analysis.torch_messages import diverted

    with signals, diverted():  # torch's notes on apextui's own profiler and imports: to the log, not the user
        runner = Runner(request, consume)
        if stop_early.is_set():
            runner.stop()
        _start(printer, runner)
        if not printer.broken:
            runner.run()  # trains in this (main) thread; the first signal stops it after the current step
    return _exit_code(printer, signals, runner.result, preset.name)


def _start(printer: JsonLinePrinter, runner: Runner) -> None:
    """The `start` line, with whether other work competes as the run starts, and what stderr says of it."""
    from ..core.env import describe

    preset, device = runner.preset, runner.device
    busy = start_contention(device)
    printer.emit(events.start_event(preset, device, runner.steps, runner.warmup, describe(device), busy))
    if busy is not None and busy.competing:
        log(f"warning: the machine is {busy.level} ({'; '.join(busy.reasons)}): timings may not compare")
    if device == "cpu" and preset.model is not None:
        log(f"running {preset.name} on CPU at your function's small size (small=True, where it takes it)")
    elif device == "cpu":
        log(f"running {preset.name} on CPU with its small size {dict(preset.cpu_size)}")


def _exit_code(printer: JsonLinePrinter, signals: StopOnSignals, result: Snapshot | None, name: str) -> int:
    """The run's exit code (docs/cli.md): stdout's failure first, then a signal, the run's status, its check."""
    if printer.failure is not None:
        return printer.failure.report()
    if printer.broken:
        return EXIT_FAILED
    if signals.count or (result is not None and result.status == "stopped"):
        return signals.exit_code
    if result is None or result.status != "ok":
        log(f"run failed: {result.error if result else 'no result'}")
        return EXIT_FAILED
    failed_check = events.check_error(result.info.check if result.info else None)
    if failed_check:
        log(f"error: {name} {failed_check}")
        return EXIT_CHECK_FAILED
    return EXIT_OK
