"""Finished runs as rows of the comparison table; saving and loading them as JSON.

A row's numbers are `apextui.core.events.summary(snapshot)`, the same dict the
headless `end` event carries, so saved results and `--json` output agree.
`load_results` reads both this module's files and headless JSON-lines output.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from apextui.core import events
from apextui.core.presets import BASELINES, Preset
from apextui.core.runner import Snapshot

RESULTS_KIND = "apextui-results"
RESULTS_SCHEMA = 1
SESSION = "session"


class ResultsError(ValueError):
    """A results file cannot be read; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ResultRow:
    """One finished (or stopped / failed) run."""

    preset: str
    workload: str
    variant: str
    device: str
    size: str  # "default" | "cpu"
    amp: str
    status: str  # "ok" | "stopped" | "failed"
    summary: Mapping[str, Any]  # events.summary()
    error: str | None = None
    source: str = SESSION  # "session", or the file it was loaded from
    env: Mapping[str, Any] | None = None

    @property
    def baseline(self) -> str:
        return BASELINES.get(self.workload, "")

    @property
    def is_baseline(self) -> bool:
        return self.variant == self.baseline

    @property
    def median_ms(self) -> float | None:
        return _float(self.summary.get("median_ms"))

    @property
    def p10_ms(self) -> float | None:
        return _float(self.summary.get("p10_ms"))

    @property
    def p90_ms(self) -> float | None:
        return _float(self.summary.get("p90_ms"))

    @property
    def final_loss(self) -> float | None:
        return _float(self.summary.get("final_loss"))

    @property
    def loss_floor(self) -> float | None:
        return _float(self.summary.get("loss_floor"))

    @property
    def check(self) -> Mapping[str, Any] | None:
        check = self.summary.get("check")
        return check if isinstance(check, Mapping) else None

    @property
    def max_error(self) -> float | None:
        return _float(self.check.get("max_abs_err")) if self.check else None

    @property
    def comparable_key(self) -> tuple[str, str, str, str]:
        """Rows are compared only within one workload, device, size and source (same machine)."""
        return (self.workload, self.device, self.size, self.source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset, "workload": self.workload, "variant": self.variant,
            "baseline": self.baseline, "device": self.device, "size": self.size, "amp": self.amp,
            "status": self.status, "error": self.error, "summary": dict(self.summary),
        }


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def row_from_snapshot(snap: Snapshot, preset: Preset, device: str, env: Mapping[str, Any] | None = None) -> ResultRow:
    """The comparison row for a run's final snapshot."""
    info = snap.info
    return ResultRow(
        preset=preset.name, workload=preset.workload, variant=preset.variant, device=device,
        size=info.size_name if info else ("cpu" if device == "cpu" else "default"), amp=preset.amp,
        status=snap.status, summary=events.summary(snap), error=snap.error, env=env,
    )


def baseline_row(row: ResultRow, rows: Sequence[ResultRow]) -> ResultRow | None:
    """The most recent baseline run comparable with `row` (one that finished 'ok' first)."""
    candidates = [r for r in rows if r.is_baseline and r.comparable_key == row.comparable_key
                  and r.median_ms is not None]
    ok = [r for r in candidates if r.status == "ok"]
    pick = ok or candidates
    return pick[-1] if pick else None


def speedup(row: ResultRow, rows: Sequence[ResultRow]) -> float | None:
    """Baseline median / this median (>1 means faster than the baseline); None without a baseline."""
    base = baseline_row(row, rows)
    if base is None or row.median_ms is None or row.median_ms <= 0 or base.median_ms is None:
        return None
    return base.median_ms / row.median_ms


# ---- files ------------------------------------------------------------------------------------


def results_document(rows: Iterable[ResultRow], env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document `save_results` writes (session rows only carry the session env)."""
    rows = list(rows)
    return {
        "kind": RESULTS_KIND,
        "schema": RESULTS_SCHEMA,
        "events_schema": events.SCHEMA_VERSION,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "env": dict(env) if env else None,
        "runs": [dict(r.to_dict(), source=r.source, speedup=_round(speedup(r, rows))) for r in rows],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def default_results_path(directory: str | Path = ".") -> Path:
    return Path(directory) / f"apextui-results-{time.strftime('%Y%m%d-%H%M%S')}.json"


def save_results(rows: Sequence[ResultRow], path: str | Path, env: Mapping[str, Any] | None = None) -> Path:
    path = Path(path)
    doc = results_document(rows, env)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def load_results(path: str | Path) -> list[ResultRow]:
    """Rows from a file saved with `save_results`, or from headless `--json` output."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read: {exc}") from None
    source = str(path)
    stripped = text.lstrip()
    if not stripped:
        raise ResultsError(f"{path}: empty file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == RESULTS_KIND:
        return _rows_from_document(doc, source, path)
    return _rows_from_json_lines(text, source, path)


def _rows_from_document(doc: Mapping[str, Any], source: str, path: Path) -> list[ResultRow]:
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise ResultsError(f"{path}: field 'runs' must be a list")
    env = doc.get("env") if isinstance(doc.get("env"), dict) else None
    rows = []
    for i, run in enumerate(runs):
        try:
            rows.append(_row(run, source, env))
        except KeyError as exc:
            raise ResultsError(f"{path}: runs[{i}]: missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise ResultsError(f"{path}: runs[{i}]: {exc}") from None
    return rows


def _row(run: Mapping[str, Any], source: str, env: Mapping[str, Any] | None) -> ResultRow:
    workload = run["workload"]
    if workload not in BASELINES:
        raise ValueError(f"unknown workload {workload!r}")
    summary = run.get("summary") or {}
    if not isinstance(summary, dict):
        raise ValueError("'summary' must be an object")
    return ResultRow(
        preset=str(run["preset"]), workload=workload, variant=str(run["variant"]), device=str(run["device"]),
        size=str(run.get("size") or ("cpu" if run["device"] == "cpu" else "default")),
        amp=str(run.get("amp") or "none"), status=str(run.get("status") or "ok"), summary=summary,
        error=run.get("error"), source=source, env=run.get("env") or env,
    )


def _rows_from_json_lines(text: str, source: str, path: Path) -> list[ResultRow]:
    """Headless output: each `start` event paired with the `end` event that follows it."""
    rows: list[ResultRow] = []
    start: dict[str, Any] | None = None
    seen_event = False
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise ResultsError(f"{path}: line {n} is not JSON: neither an apextui results file "
                               "(saved with w) nor `apextui --json` output") from None
        if not isinstance(obj, dict) or "event" not in obj:
            raise ResultsError(f"{path}: line {n}: not an apextui event")
        seen_event = True
        if obj["event"] == "start":
            start = obj
        elif obj["event"] == "end" and start is not None:
            try:
                rows.append(_row({**start, "status": obj.get("status"), "error": obj.get("error"),
                                  "summary": obj.get("summary")}, source, start.get("env")))
            except KeyError as exc:
                raise ResultsError(f"{path}: line {n}: missing field {exc}") from None
            except (TypeError, ValueError) as exc:
                raise ResultsError(f"{path}: line {n}: {exc}") from None
            start = None
    if not seen_event:
        raise ResultsError(f"{path}: no apextui results in this file")
    return rows
