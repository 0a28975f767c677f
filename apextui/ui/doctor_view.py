"""Condensing the Apex doctor report for the status pane (presentation only).

The pane works on the report's `to_dict()` shape (see
`apextui.core.apex.doctor_report.DoctorReport`), so a test can inject either a real
report or a plain dict of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.text import Text

from apextui.core.apex.doctor_report import DoctorReport
from apextui.core.apex.doctor_lines import STATUS_STYLE, render_lines

# The report as the UI receives it: the doctor's own `DoctorReport`, or a dict of its `to_dict()` shape (a
# test's injected report, or one read back from JSON). Everything here reads it through `as_dict`.
DoctorLike = DoctorReport | Mapping[str, Any]
ReportProvider = Callable[[], DoctorLike]


def default_report_provider() -> DoctorReport:
    """The real doctor (risky imports run in a child process; this may take a few seconds)."""
    from apextui.core.apex.doctor import run_doctor

    return run_doctor()


def as_dict(report: DoctorLike) -> Mapping[str, Any]:
    if isinstance(report, Mapping):
        return report
    to_dict = getattr(report, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"not a doctor report: {type(report).__name__}")


def apex_line(report: Mapping[str, Any]) -> Text:
    apex = report.get("apex") or {}
    status = str(apex.get("status") or "unknown")
    text = Text("Apex ", style="bold")
    text.append(status.upper().replace("_", " "), style=STATUS_STYLE.get(status, "bold"))
    if apex.get("version"):
        text.append(f" {apex['version']}", style="dim")
    detail = apex.get("detail")
    if detail and status != "complete":
        text.append(f"  {detail}", style="dim")
    return text


def feature_lines(report: Mapping[str, Any]) -> list[Text]:
    """✓ name for each working feature; the others grouped by their reason, the reason said once:
    "✗ FusedAdam, FusedLAMB, …: NVIDIA Apex is not installed". The pane wraps these at word boundaries: at 80
    columns the old one-line-per-feature "✗ FusedAdam  NVIDIA Apex is n…" cut every reason off."""
    lines = []
    failed: dict[tuple[str, bool], list[str]] = {}  # (reason, removed) -> names, in the report's order
    for f in report.get("features") or ():
        name = str(f.get("name", "?"))
        if f.get("ok"):
            lines.append(Text.assemble(("✓ ", "bold green"), (name, "")))
        else:
            failed.setdefault((str(f.get("reason") or ""), bool(f.get("removed"))), []).append(name)
    for (reason, removed), names in failed.items():
        line = Text.assemble(("✗ ", "yellow" if removed else "bold red"), (", ".join(names), ""))
        if reason:
            line.append(f": {reason}", style="dim")
        lines.append(line)
    return lines


def problems_line(report: Mapping[str, Any]) -> Text:
    problems = report.get("problems") or ()
    if not problems:
        return Text("no problems found · d: full report", style="green")
    n = len(problems)
    return Text(f"{n} problem{'s' if n != 1 else ''} · d: full report and fixes", style="yellow")


def full_report_lines(report: DoctorLike) -> list[Text]:
    """The doctor's own human rendering (`apextui.core.apex.doctor_lines`, as `apextui doctor` prints it), as Rich
    text lines."""
    if isinstance(report, DoctorReport):
        try:
            return [Text.assemble(*[(t, s or "") for t, s in line]) for line in render_lines(report)]
        except Exception:  # noqa: BLE001 - a report the renderer cannot read: shown as JSON below
            pass
    import json  # a dict-shaped or foreign report

    return [Text(line) for line in json.dumps(as_dict(report), indent=2, default=str).splitlines()]


def keeps_whole(line: Text) -> bool:
    """A fix line: a shell command, copied as it is; wrapped, each of its lines but the last ends in a shell's line
    continuation (` \\`), so the copy still runs as one command."""
    return line.plain.lstrip().startswith("fix:")


CONTINUED = " \\"  # a wrapped fix line's pieces end in this: the shell reads them as one line


def wrap_line(line: Text, width: int) -> list[Text]:
    """`line` broken at spaces into lines of at most `width` columns, the continuations indented under the
    line's own indent plus 4 (a hanging indent): never mid-word, as the report box's edge cut it ("git clone
    h"). A fix line (`keeps_whole`) is wrapped too (it scrolled sideways, 90 presses of → for its 170 columns at
    80), each piece but the last ending in `CONTINUED`; a word longer than the room stays whole and the box
    scrolls sideways."""
    plain = line.plain
    if width <= 0 or len(plain) <= width:
        return [line]
    tail = CONTINUED if keeps_whole(line) else ""
    indent = len(plain) - len(plain.lstrip(" "))
    hang = min(indent + 4, width // 2)
    out: list[Text] = []
    start = 0
    while True:
        room = (width if not out else width - hang) - len(tail)
        if len(plain) - start <= room + len(tail):
            break
        cut = plain.rfind(" ", start + 1, start + room + 1)
        if cut <= start:  # a word longer than the room: whole, up to the next space
            cut = plain.find(" ", start + room)
            if cut == -1:
                break
        piece = line[start:cut] + Text(tail, style="dim")
        out.append(piece if not out else Text(" " * hang) + piece)
        start = cut
        while start < len(plain) and plain[start] == " ":
            start += 1
    rest = line[start:]
    out.append(rest if not out else Text(" " * hang) + rest)
    return out


def wrap_report(lines: list[Text], width: int) -> tuple[Text, bool]:
    """The report's lines wrapped to `width` (`wrap_line`) as one text, and whether a line is still wider
    (a fix command): then the box scrolls sideways, and its border says so."""
    wrapped = [piece for line in lines for piece in wrap_line(line, width)]
    return Text("\n").join(wrapped), any(len(piece.plain) > width for piece in wrapped)
