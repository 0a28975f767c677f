"""Watched runs as rows of the comparison table, compared by the one noise rule (`core/compare.py`).

A watched run has no shipped baseline: the user picks one (the oldest finished run by default). The table's
`RunIndex` takes as a group's baseline the row whose variant is its workload's baseline name, which for
workload "watch" is "" (`presets.BASELINES` has no entry): so the chosen run's row gets variant "" and every
other row its name. Rows compare within one device, as preset runs do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..compare import baseline_problem
from ..results import SESSION, ResultRow
from ..run.summary import Summary
from .lines import WORKLOAD
from .reader import last_end
from .store import RunMeta, all_runs


def row(meta: RunMeta, end: dict[str, Any], device: str = "cpu", baseline: bool = False) -> ResultRow:
    """A watched run's row from its `end` line; `baseline`: the row the others of its device are compared with."""
    summary = end.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    status = end.get("status") if end.get("status") in ("ok", "stopped", "failed") else "failed"
    error = end.get("error")
    return ResultRow(preset=f"{meta.name} {meta.started[5:16]}", workload=WORKLOAD,
                     variant="" if baseline else meta.name, device=device, size="default", amp="none",
                     status=str(status), summary=Summary.from_dict(summary),
                     error=error if isinstance(error, str) else None, source=SESSION)


def _device(folder: Path) -> str:
    """The run's device, from its first segment's setup (or start) line."""
    import json

    from .stream import segments

    found = segments(folder)
    device = "cpu"
    if not found:
        return device
    try:
        with open(found[0][1], "rb") as f:
            for _ in range(4):
                e = json.loads(f.readline() or b"{}")
                device = str(e.get("device") or device)
    except (OSError, ValueError, AttributeError):
        pass
    return device


def finished_rows(where: Path | None = None, baseline: str | None = None) -> list[tuple[RunMeta, ResultRow]]:
    """Every finished watched run (with its `end` line) and its row, oldest first; `baseline`: the run folder whose
    row is its device's baseline (the other devices, and by default every device: the oldest run that may be one,
    `compare.baseline_problem`)."""
    found = [(m, e, _device(Path(m.path))) for m in reversed(all_runs(where))
             if (e := last_end(Path(m.path))) is not None]
    chosen: dict[str, str] = {}
    for m, e, device in found:
        if device not in chosen and baseline_problem(str(e.get("status")), e.get("summary") or {}) is None:
            chosen[device] = m.path
    picked = next((d for m, _, d in found if m.path == baseline), None)
    if picked is not None and baseline is not None:
        chosen[picked] = baseline
    return [(m, row(m, e, device, baseline=chosen.get(device) == m.path)) for m, e, device in found]
