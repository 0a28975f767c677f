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
    """One line per feature: ✓ name, or ✗ name and the reason."""
    lines = []
    for f in report.get("features") or ():
        name = str(f.get("name", "?"))
        if f.get("ok"):
            lines.append(Text.assemble(("✓ ", "bold green"), (name, "")))
        else:
            mark_style = "yellow" if f.get("removed") else "bold red"
            line = Text.assemble(("✗ ", mark_style), (name, ""))
            if f.get("reason"):
                line.append(f"  {f['reason']}", style="dim")
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
