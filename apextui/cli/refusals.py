"""What every front end checks before a run starts, and how it refuses one: the device resolved, the preset's
availability, its memory estimate against what is free, and the `unavailable` line (docs/json.md).

Why one module: a preset's run (`json_run`), a data-parallel rank (`torchrun`), a run of the user's model
(`model_option`) and `apextui advise` each did these checks themselves, and each wrote the `unavailable` line by
hand; a refusal now reads, exits and is worded the same whichever front end makes it (docs/cli.md, exit codes 2
and 3)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable, Protocol

from ..core.errors import NotHere, UsageProblem
from ..core.run import events

if TYPE_CHECKING:
    from ..core.availability import Availability
    from ..core.run.request import RunRequest
    from .output import OutputFailed


class LinePrinter(Protocol):
    """Where a refusal's `unavailable` line goes (`json_lines.JsonLinePrinter`)."""

    failure: OutputFailed | None

    def emit(self, *objs: dict[str, object]) -> None: ...


def log(message: str) -> None:
    """A line on stderr; none where stderr is gone (a hung-up terminal): the run goes on to its end line."""
    try:
        print(f"apextui: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def resolve(requested: str, refused: Callable[[str, str], int]) -> str | int:
    """The device `requested` names ("auto": CUDA when present, else CPU); where it is not here, the exit code
    `refused(reason, fix)` returns once it has written the refusal (`unavailable`, the advice's document, or one
    line on stderr)."""
    from ..core.env import DeviceUnavailable, resolve_device

    try:
        return resolve_device(requested)
    except DeviceUnavailable as exc:
        return refused(str(exc), events.DEVICE_FIX)


def unavailable(request: RunRequest, reason: str, fix: str, printer: LinePrinter | None = None,
                say: Callable[[str], None] = log) -> int:
    """Refuse `request`, which cannot run on its device: the reason and the fix on stderr, the `unavailable` line
    on stdout; exit 3 (`NotHere`), or the code of a stdout that could not take the line."""
    if printer is None:
        from .json_lines import JsonLinePrinter

        printer = JsonLinePrinter()
    say(f"preset {request.preset.name!r} is unavailable on {request.device}: {reason}")
    if fix:
        say(f"fix: {fix}")
    printer.emit(events.unavailable_event(request.preset, request.device, reason, fix))
    return printer.failure.report() if printer.failure is not None else NotHere.exit_code


def refusal(request: RunRequest, avail: Availability, printer: LinePrinter | None,
            say: Callable[[str], None] = log) -> int | None:
    """Whether `request` (its device resolved) may start: None, or the exit code of its refusal, written.
    Unavailable (`avail`): the `unavailable` line (through `printer`; None: a rank that prints nothing), exit 3.
    Its memory estimate over what is free (unless `request.force`): one line naming a size that fits, exit 2,
    before anything is built."""
    from ..core import memory

    if not avail.ok:
        return unavailable(request, avail.reason, avail.fix, printer, say) if printer is not None else NotHere.exit_code
    preset = request.preset
    too_big = None if request.force else memory.refusal(
        preset, request.device, request.steps if request.steps is not None else preset.steps)
    if too_big:
        say(f"error: {too_big}")
        return UsageProblem.exit_code
    return None
