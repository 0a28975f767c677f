"""Watched runs as rows of the comparison table, compared by the one noise rule (`core/compare.py`).

A watched run is compared only with runs of the same work on its device: an HF GPT-2 Trainer run against an MLP loop
said nothing (`≈0.62×`). Runs whose start lines record their model and batch are grouped by those, whatever their
names; a run that records less (an older stream records neither) with the runs of its name that record the same
(`workload.Workload.group`). The group is the row's `model`, which `ResultRow.comparable_key` groups by (runs of two
models never compare). A group has no shipped baseline: the user picks one (the oldest finished run by default).
The table's `RunIndex` takes as a group's baseline the row that is its baseline (`ResultRow.is_baseline`): a watched
run has no point, so the chosen run's row is marked `picked_baseline`. A run alone in its group has no baseline and
no speed-up.

Live runs join the table with their figures so far (`Table`: each followed incrementally, marked ● in its name);
a live run is never the baseline: its median still moves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..measure.compare import baseline_problem
from ..results import SESSION, ResultRow
from ..run import events
from ..measure.summary import Summary
from . import jsonline
from .lines import WORKLOAD
from .reader import LINE_BYTES, BadSegment, Follower, last_end, open_segment
from .replay import Replay
from .store import RunMeta, all_runs, alive
from .stream import segments
from .workload import Workload

LIVE_MARK = "●"
HEAD_LINES = 64  # `_head` reads this many lines


def row(meta: RunMeta, end: dict[str, Any], device: str = "cpu", baseline: bool = False,
        work: Workload | None = None) -> ResultRow:
    """A watched run's row from its `end` line; `baseline`: the row the others of its group (`_group`) are compared
    with."""
    summary = end.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    status = end.get("status") if end.get("status") in ("ok", "stopped", "failed") else "failed"
    error = end.get("error")
    return ResultRow(preset=f"{meta.name} {meta.started[5:16]}", workload=WORKLOAD, picked_baseline=baseline,
                     device=device, size="default",
                     status=str(status), summary=Summary.from_dict(summary),
                     error=error if isinstance(error, str) else None, source=SESSION,
                     model=(work or Workload()).group(meta.name), series=meta.name)


def _group(meta: RunMeta, device: str, work: Workload) -> tuple[str, str]:
    """The runs a watched run is compared with: those of its model and batch (else of its name), on its device."""
    return work.group(meta.name), device


def _head(folder: Path) -> tuple[str, Workload]:
    """The run's device and what it trains, from the start and setup lines at the top of its last segment (each
    segment begins with them): a run whose clock moved to CUDA says so in a setup line soon after its first. A
    damaged line is passed over, a line longer than `LINE_BYTES` read in pieces (each damaged)."""
    found = segments(folder)
    device, work = "cpu", Workload()
    try:
        f = open_segment(found[-1][1]) if found else None
        if f is None:
            return device, work
        with f:
            head = [f.readline(LINE_BYTES) for _ in range(HEAD_LINES)]
    except (OSError, BadSegment):
        return device, work
    for line in head:
        try:
            e = jsonline.loads(line or b"{}")
        except jsonline.Damaged:
            continue
        if not isinstance(e, dict):
            continue
        if e.get("event") == "start":
            work = Workload.of(e)
        if e.get("event") in ("start", "setup") and isinstance(e.get("device"), str):
            device = e["device"]
    return device, work


class Table:
    """The watched runs of a folder of runs as table rows, kept between calls: a finished run's `end` line is read
    once; a live run is followed from where the last call left it."""

    def __init__(self, where: Path | None = None) -> None:
        self.where = where
        self._ended: dict[str, tuple[dict[str, Any], str, Workload]] = {}  # path -> (end line, device, work)
        self._live: dict[str, tuple[Follower, Replay]] = {}

    def rows(self, baseline: str | None = None) -> list[tuple[RunMeta, ResultRow]]:
        """Every finished run (with its `end` line), oldest first, then every live run with its figures so far;
        `baseline`: the finished run folder whose row is its group's baseline (`_group`: its model and batch, else its
        name, and its device; in the other groups, and by default in every group, the oldest finished run that may
        be one, `compare.baseline_problem`; none in a group of one run: nothing to compare it with)."""
        metas = list(reversed(all_runs(self.where)))
        found: list[tuple[RunMeta, dict[str, Any], str, Workload]] = []
        live: list[RunMeta] = []
        for m in metas:
            if m.path not in self._ended:
                end = last_end(Path(m.path))
                if end is None:
                    if alive(m):
                        live.append(m)
                    continue
                self._ended[m.path] = (end, *_head(Path(m.path)))
                self._live.pop(m.path, None)
            found.append((m, *self._ended[m.path]))
        live_rows = [r for r in (self._live_row(m) for m in live) if r is not None]
        sizes: dict[tuple[str, str], int] = {}
        for key in [_group(m, d, w) for m, _, d, w in found] + [(r.model or "", r.device) for _, r in live_rows]:
            sizes[key] = sizes.get(key, 0) + 1
        chosen: dict[tuple[str, str], str] = {}
        for m, e, device, work in found:
            raw = e.get("summary")
            summary = Summary.from_dict(raw if isinstance(raw, dict) else {})
            key = _group(m, device, work)
            if key not in chosen and sizes[key] > 1 and baseline_problem(str(e.get("status")), summary) is None:
                chosen[key] = m.path
        picked = next((_group(m, d, w) for m, _, d, w in found if m.path == baseline), None)
        if picked is not None and baseline is not None:
            chosen[picked] = baseline
        out = [(m, row(m, e, device, chosen.get(_group(m, device, work)) == m.path, work))
               for m, e, device, work in found]
        return out + live_rows

    def _live_row(self, meta: RunMeta) -> tuple[RunMeta, ResultRow] | None:
        follower, replay = self._live.setdefault(meta.path, (Follower(Path(meta.path)), Replay()))
        try:
            replay.add(follower.poll())
        except BadSegment:  # a stream the table cannot read has no row (`attach` on it says why)
            return None
        snap = replay.snapshot()
        if snap.stats is None or snap.info is None:
            return None
        return meta, ResultRow(preset=f"{meta.name} {meta.started[5:16]} {LIVE_MARK}", workload=WORKLOAD,
                               device=snap.info.device, size="default", status="ok",
                               summary=events.summary(snap), source=SESSION,
                               model=Workload.of(replay.start).group(meta.name), series=meta.name)
