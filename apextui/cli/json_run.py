"""`apextui --preset NAME --json`: run a preset headless, JSON lines on stdout, logs on stderr."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core.run.request import RunRequest
from ..core.run import events
from ..core.run.runner import Runner
from ..core.run.snapshot import Snapshot
from .json_lines import JsonLinePrinter
from .session import Outcome, RunSession
from .refusals import log, refusal
from .signals import stop_notice, twice_error

if TYPE_CHECKING:
    from ..core.availability import Availability



def start_contention(device: str) -> Any:
    """Was other work competing as the run starts (the `start` line's `contention`); None if it cannot be read."""
    from ..core.env import pci_bus_id
    from ..core.monitor.contention import sample_now
    from ..core.monitor.nvml import Nvml

    try:
        return sample_now(Nvml(pci_bus_id=pci_bus_id()) if device == "cuda" else None)
    except Exception:  # noqa: BLE001 - the run goes on without it
        return None


class _Stream:
    """What a headless run writes as it goes: each snapshot as its JSON line, a note as it starts compiling (seconds
    to minutes with no line), and what a second signal leaves on stdout (the last figures as a `stopped` end line)."""

    def __init__(self, name: str, printer: JsonLinePrinter) -> None:
        self.name, self.printer = name, printer
        self.compiling = threading.Event()  # set before the "compiling" line is logged: a signal after it sees it

    def consume(self, snap: Snapshot) -> None:
        printer = self.printer
        entering = snap.status == "compiling" and (printer.last is None or printer.last.status != "compiling")
        if snap.status == "compiling":
            self.compiling.set()
        else:
            self.compiling.clear()
        if entering:
            log(f"compiling {self.name} (torch.compile / CUDA-graph capture; not part of the measured steps)…")
        printer(snap)

    def notice(self, signum: int) -> str:
        return stop_notice(signum, "stopping once compilation ends, before the first measured step"
                           if self.compiling.is_set() else "stopping after the current step")  # no cut short

    def again(self, signum: int, words: str) -> None:
        error = twice_error(signum, words)
        printer = self.printer
        before_start = printer.close_unstarted()
        if before_start is None:  # held by a stuck write: quit without the end line
            return
        if before_start:
            log(f"{error} before the run started: nothing measured")
        elif printer.last is not None:  # what was measured so far is still reported
            printer.emit(events.end_event(replace(printer.last, status="stopped", new_steps=(), error=error)))
        else:  # before the first snapshot (e.g. while the workload is built): an end line, no figures
            printer.emit(events.end_line("stopped", error))

    def outcome(self, result: Snapshot | None) -> Outcome:
        """How the run ended, for the session's exit code (docs/cli.md)."""
        failed_check = events.check_error(result.info.check if result is not None and result.info else None)
        return Outcome(status=result.status if result is not None else None,
                       failed_because=f"run failed: {result.error if result else 'no result'}",
                       check_failed=f"{self.name} {failed_check}" if failed_check else "",
                       stdout_failure=self.printer.failure, stdout_broken=self.printer.broken)


def run(request: RunRequest, avail: Availability | None = None) -> int:
    """Run `request` (its device already resolved); return the process exit code. Unless `request.force`, a
    preset whose memory estimate does not fit in what is free is refused (exit 2) before anything is built.
    `avail`: its availability where the caller knows more than `availability` (the user's model)."""
    from ..core.analysis.torch_messages import diverted
    from ..core.availability import availability

    printer = JsonLinePrinter()
    refused = refusal(request, avail if avail is not None else availability(request.preset, request.device), printer)
    if refused is not None:
        return refused
    stream = _Stream(request.preset.name, printer)
    # handlers first: from the `start` line on, every signal leads to an `end` line; none before it
    session = RunSession(stream.notice, stream.again)
    printer.on_broken = session.stop
    with session, diverted():  # torch's notes on apextui's own profiler and imports: to the log, not the user
        runner = Runner(request, stream.consume)
        session.stops(runner.stop)
        _start(printer, runner)
        if not printer.broken:
            runner.run()  # trains in this (main) thread; the first signal stops it after the current step
    return session.exit_code(stream.outcome(runner.result))


def _start(printer: JsonLinePrinter, runner: Runner) -> None:
    """The `start` line, with whether other work competes as the run starts, and what stderr says of it."""
    from ..core.env import describe

    preset, device = runner.preset, runner.device
    busy = runner.start_contention = start_contention(device)
    printer.emit(events.start_event(preset, device, runner.steps, runner.warmup, describe(device), busy))
    if busy is not None and busy.competing:
        log(f"warning: the machine is {busy.level} ({'; '.join(busy.reasons)}): timings may not compare")
    if device == "cpu" and preset.model is not None:
        log(f"running {preset.name} on CPU at your function's small size (small=True, where it takes it)")
    elif device == "cpu":
        log(f"running {preset.name} on CPU with its small size {dict(preset.cpu_size)}")
