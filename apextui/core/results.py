"""Finished runs as rows of the comparison table; saving and loading them as JSON.

A row's numbers are `apextui.core.run.events.summary(snapshot)`, a `Summary`: its `to_dict()` is the
object the headless `end` event carries, so saved results and `--json` output agree.
`load_results` reads both this module's files and headless JSON-lines output.
Speed-ups and their verdicts come from `core.measure.compare` (the one noise rule), against
a baseline that `compare.baseline_problem` allows: a stopped, failed or short run
is never used as one silently (`baseline_note` says which was passed over and why).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from apextui.core.atomic import write_atomic, write_new_numbered
from apextui.core import files
from apextui.core.errors import UsageProblem
from apextui.core.run import events
from apextui.core.measure.compare import SINGLE_RUNS_NOTE, Comparison, Drift, Timing, baseline_problem, compare, \
    fields, kept_runs, positive
from apextui.core.monitor.contention import competing
from apextui.core.config.point import Config
from apextui.core.presets import BASELINE_NAMES, Preset, recorded
from apextui.core.workloads.spec import FORMER_NORM, WORKLOADS
from apextui.core.measure.details import CorrectnessCheck
from apextui.core.measure.summary import Summary
from apextui.core.run.snapshot import Snapshot

RESULTS_KIND = "apextui-results"
RESULTS_SCHEMA = 2  # 2 (2026-12-06): a run's `label` for its `variant`; a workload a norm; 1 still loads
MAX_RESULTS_BYTES = files.DATA_LIMIT  # 64 MiB; a saved run is about 2.5 KB with its step times: 25,000 runs
SESSION = "session"


class ResultsError(UsageProblem, ValueError):
    """A results file cannot be read; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ResultRow:
    """One finished (or stopped / failed) run."""

    preset: str
    workload: str
    device: str
    size: str  # "default" | "cpu"
    status: str  # "ok" | "stopped" | "failed"
    summary: Summary  # events.summary(), or a file's (`Summary.from_dict`)
    error: str | None = None
    source: str = SESSION  # "session", or the file it was loaded from
    env: Mapping[str, Any] | None = None
    model: str | None = None  # workload "model": the user's FILE.py:FUNC (runs of two models never compare)
    config: Config | None = None  # the point it ran (None: a watched run, or a saved one whose point cannot be read)
    # the runs numbered together (`RunIndex.number`): a preset's runs (None), or a watched run's name, whose rows
    # each name their start too
    series: str | None = None
    amp_saved: str = "none"  # a saved row's own "amp", kept where its point cannot be read back (`autocast`)
    # a watched run the user picked as its group's baseline (watched runs have no point to be their workload's
    # baseline by)
    picked_baseline: bool = False

    @property
    def autocast(self) -> str:
        """Its point's autocast dtype (a file's "amp", where the point cannot be read back)."""
        return self.config.autocast if self.config is not None else self.amp_saved

    @property
    def baseline(self) -> str:
        """The name of the named point its workload's runs are compared with ("" for a watched run)."""
        return BASELINE_NAMES.get(self.workload, "")

    @property
    def is_baseline(self) -> bool:
        """It ran its workload's baseline point (`WorkloadSpec.baseline_point`), or it is the watched run picked as
        its group's baseline."""
        spec = WORKLOADS.get(self.workload)
        return self.picked_baseline or (spec is not None and self.config == spec.baseline_point)

    @property
    def label(self) -> str:
        """What its point is called (`WorkloadSpec.label`: `fused_rmsnorm`, `bf16+fused+compile`), or its preset's name
        where it has no point."""
        spec = WORKLOADS.get(self.workload)
        if self.config is None or spec is None:
            return self.preset
        return spec.label(self.config)

    @property
    def median_ms(self) -> float | None:
        return self.summary.median_ms

    @property
    def p10_ms(self) -> float | None:
        return self.summary.p10_ms

    @property
    def p90_ms(self) -> float | None:
        return self.summary.p90_ms

    @property
    def final_loss(self) -> float | None:
        return self.summary.final_loss

    @property
    def loss_floor(self) -> float | None:
        return self.summary.loss_floor

    @property
    def check(self) -> CorrectnessCheck | None:
        return self.summary.check

    @property
    def max_error(self) -> float | None:
        return _float(self.check.max_abs_err) if self.check else None

    @property
    def comparable_key(self) -> tuple[str, str, str, str, str]:
        """Rows are compared only within one workload (and model), device, size and source (same machine)."""
        return (self.workload, self.device, self.size, self.source, self.model or "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset, "workload": self.workload, "label": self.label,
            "baseline": self.baseline, "device": self.device, "size": self.size, "amp": self.autocast,
            "status": self.status, "error": self.error, "summary": self.summary.to_dict(),
            **({"model": self.model} if self.model else {}),
            **({"config": self.config.as_dict()} if self.config is not None else {}),
        }


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def row_from_snapshot(snap: Snapshot, preset: Preset, device: str, env: Mapping[str, Any] | None = None) -> ResultRow:
    """The comparison row for a run's final snapshot."""
    info = snap.info
    return ResultRow(
        preset=preset.name, workload=preset.workload, device=device,
        size=info.size_name if info else ("cpu" if device == "cpu" else "default"),
        status=snap.status, summary=events.summary(snap), error=snap.error, env=env, model=preset.model,
        config=preset.config,
    )


# Which of several baseline runs the speed-ups are against. The latest run was, even an outlier (a layernorm run at
# 24.0 ms against runs of 0.13 ms gave "≈189.55× (0.45–49452)"): the host only ever slows a run down.
BASELINE_CHOICE = ("of several runs that may be the baseline, the fastest (the lowest median) of those no other work "
                   "competed with and not far noisier than the others (compare.DISTURBED_RULE; of them all where "
                   "every one was)")
MAX_NOTED = 5  # passed-over baseline runs a note names; more are counted ("and 12 more"), so notes stay short


class RunIndex:
    """Run numbers, baselines, passed-over baselines and the drift between runs of `rows`, found in one pass: every
    question about one row is then a dictionary look-up. Why: the table, the saved file and the export ask them of
    every row, and answering each by scanning `rows` made a history of a few thousand runs take minutes
    (quadratic)."""

    def __init__(self, rows: Iterable[ResultRow]) -> None:
        self.rows = list(rows)
        counts: dict[tuple[str, tuple[str, ...]], int] = {}
        self._numbers: dict[int, int] = {}  # by id(): equal rows are still different runs
        self._baselines: dict[tuple[str, ...], ResultRow] = {}  # each group's baseline run (BASELINE_CHOICE)
        usable: dict[tuple[str, ...], list[ResultRow]] = {}
        self._skipped: dict[tuple[str, ...], list[tuple[ResultRow, str]]] = {}
        self._notes: dict[tuple[str, ...], str | None] = {}
        self._timings: dict[int, Timing | None] = {}  # made when asked (a page of the table asks for 200 of 10,000)
        repeats: dict[tuple[str, ...], dict[str, list[Timing]]] = {}  # group -> preset -> its ok runs' medians
        for r in self.rows:
            key = r.comparable_key
            series = (r.series or r.preset, key)
            n = counts[series] = counts.get(series, 0) + 1
            self._numbers[id(r)] = n
            median = positive(r.summary.median_ms)  # a usable median by the rule `Summary.timing` reads
            if r.status == "ok" and median is not None:
                repeats.setdefault(key, {}).setdefault(r.preset, []).append(Timing(median))
            if r.is_baseline:
                problem = baseline_problem(r.status, r.summary)
                if problem is None:
                    usable.setdefault(key, []).append(r)
                else:
                    self._skipped.setdefault(key, []).append((r, problem))
        self._drift = {key: Drift.of(by_preset.values()) for key, by_preset in repeats.items()}
        self._baselines = {key: _chosen(runs) for key, runs in usable.items()}

    def number(self, row: ResultRow) -> int:
        """The row's rank among that preset's comparable runs (a watched run's: among the runs of its name, in the
        table's order: the finished ones as they started, then the live ones), from 1: the run column, and N in
        'fp32 run N'."""
        return self._numbers[id(row)]

    def label(self, row: ResultRow) -> str:
        """'fp32 run 2': the row's preset and its run number (`number`): how a run is named everywhere."""
        return run_name(row.preset, self.number(row))

    def baseline(self, row: ResultRow) -> ResultRow | None:
        """The baseline run comparable with `row`: of the runs that may be one (`baseline_problem`), the one
        `BASELINE_CHOICE` picks."""
        return self._baselines.get(row.comparable_key)

    def is_base(self, row: ResultRow) -> bool:
        """Whether `row` is the run its group's speed-ups are against (shown as `base`, with no speed-up)."""
        return self.baseline(row) is row

    def drift(self, row: ResultRow) -> Drift:
        """The drift between runs seen in `row`'s group (`compare.Drift`: unknown when no preset ran twice)."""
        return self._drift.get(row.comparable_key, Drift())

    def comparison(self, row: ResultRow) -> Comparison | None:
        """This run against its baseline (`core.measure.compare`: speed-up, interval, verdict, with the group's drift
        between runs in the interval: every row is a single run, made before or after its baseline); None without
        one, None for the baseline itself, and None for a failed run: the steps it timed before it failed measure
        nothing one should act on."""
        if row.status == "failed" or self.is_base(row):
            return None
        base = self.baseline(row)
        mine = self._timing(row)
        theirs = self._timing(base) if base is not None else None
        return compare(mine, theirs, drift=self.drift(row)) if mine is not None and theirs is not None else None

    def competed(self, row: ResultRow) -> bool:
        """Whether other work competed with `row` or with the baseline run it is compared with (its contention
        record, `monitor.contention`): its speed-up says so."""
        base = self.baseline(row)
        return competing(row.summary.contention) or (base is not None and competing(base.summary.contention))

    def _timing(self, row: ResultRow) -> Timing | None:
        if id(row) not in self._timings:
            self._timings[id(row)] = row.summary.timing
        return self._timings[id(row)]

    def drift_notes(self) -> list[str]:
        """One line for each group whose speed-ups are between single runs: the drift seen and where, or
        `SINGLE_RUNS_NOTE` (for the table's subtitle and the export)."""
        out: dict[tuple[str, ...], str] = {}
        for r in self.rows:
            key = r.comparable_key
            if key in out or self.baseline(r) is None or r.is_baseline:
                continue
            d = self.drift(r)
            where = f"{r.workload} on {r.device}"
            out[key] = (f"{where}: drift between runs up to {d.ratio:.0%} (from {d.configurations} preset(s) run "
                        "more than once), in every interval" if d.ratio is not None else f"{where}: {SINGLE_RUNS_NOTE}")
        return list(dict.fromkeys(out.values()))  # groups that read alike (two models on one device) said once

    def note(self, row: ResultRow) -> str | None:
        """Which run `row`'s speed-up is against, when another baseline run was passed over, and why:
        'vs fp32 run 2; fp32 run 1 stopped after 43 steps: not a baseline'. None when nothing was passed over.
        The same for every row of a group, so made once per group."""
        key = row.comparable_key
        if key not in self._notes:
            skipped = self._skipped.get(key, [])
            note = None
            if skipped:
                why = "; ".join(f"{self.label(r)} {problem}: not a baseline" for r, problem in skipped[:MAX_NOTED])
                if len(skipped) > MAX_NOTED:
                    why += f"; and {len(skipped) - MAX_NOTED:,} more passed over"
                base = self._baselines.get(key)
                note = f"vs {self.label(base)}; {why}" if base is not None else f"no speed-up: {why}"
            self._notes[key] = note
        return self._notes[key]

    def notes(self) -> list[str]:
        """`note` once per group of comparable runs that has one (for the table's subtitle)."""
        notes: dict[tuple[str, ...], str] = {}
        for r in self.rows:
            if not r.is_baseline and r.comparable_key not in notes:
                note = self.note(r)
                if note is not None:
                    notes[r.comparable_key] = note
        return list(notes.values())


def _chosen(runs: list[ResultRow]) -> ResultRow:
    """BASELINE_CHOICE: the fastest of the undisturbed runs (the latest of equals); `runs` may each be a baseline."""
    timed = [(r, t) for r in runs if (t := r.summary.timing) is not None]
    if not timed:
        return runs[-1]
    kept, _ = kept_runs([(t, competing(r.summary.contention)) for r, t in timed])
    return min(reversed([timed[i] for i in kept]), key=lambda rt: rt[1].median_ms)[0]


def comparison(row: ResultRow, rows: Sequence[ResultRow]) -> Comparison | None:
    """`RunIndex.comparison` for one row (a scan of `rows`: for many rows, make one RunIndex)."""
    return RunIndex(rows).comparison(row)


def run_name(preset: str, number: int) -> str:
    """How a run is named on every screen, in the output log and in files: 'fp32 run 2'."""
    return f"{preset} run {number}"


def run_label(row: ResultRow, rows: Sequence[ResultRow]) -> str:
    """`RunIndex.label` for one row (a scan of `rows`: for many rows, make one RunIndex)."""
    return RunIndex(rows).label(row)


def baseline_note(row: ResultRow, rows: Sequence[ResultRow]) -> str | None:
    """`RunIndex.note` for one row (a scan of `rows`: for many rows, make one RunIndex)."""
    return RunIndex(rows).note(row)


# ---- files ------------------------------------------------------------------------------------


def results_document(rows: Iterable[ResultRow], env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document a results file holds (session rows only carry the session env)."""
    index = RunIndex(rows)
    return {
        "kind": RESULTS_KIND,
        "schema": RESULTS_SCHEMA,
        "events_schema": events.SCHEMA_VERSION,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "env": dict(env) if env else None,
        "runs": [run_entry(r, index) for r in index.rows],
    }


def run_entry(row: ResultRow, index: RunIndex) -> dict[str, Any]:
    """`row`'s entry in the results document, its speed-up and baseline read from `index` (of every row shown)."""
    base = index.baseline(row)
    return dict(row.to_dict(), source=row.source, run=index.label(row), **fields(index.comparison(row), basis=True),
                speedup_competed=index.competed(row),
                baseline_run=index.label(base) if base is not None else None, baseline_note=index.note(row))


def default_results_path(directory: str | Path = ".") -> Path:
    return Path(directory) / f"apextui-results-{time.strftime('%Y%m%d-%H%M%S')}.json"


# a list of numbers as `json.dumps(indent=2)` writes it, a number a line; a string never holds a raw line break
_NUMBER_LIST = re.compile(r"\[\n\s+(-?[0-9][-+0-9.eE]*(?:,\n\s+-?[0-9][-+0-9.eE]*)*)\n\s*\]")


def results_text(rows: Iterable[ResultRow], env: Mapping[str, Any] | None = None) -> str:
    """The text of a results file: `results_document`, indented, with each list of numbers on one line (a run's
    step times: `samples.ms`, one number a line, made a saved run eight times as long). TypeError for a row that
    cannot be JSON."""
    text = json.dumps(results_document(rows, env), indent=2)
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def save_results(rows: Sequence[ResultRow], path: str | Path, env: Mapping[str, Any] | None = None) -> Path:
    """Write the rows to the file `path` names (tools/tui_screenshot.py's `--results FILE`), atomically
    (`core.atomic.write_atomic`): whatever fails, the file at `path` is left as it was and no temporary file
    remains; the exception propagates. The TUI saves to a new file instead (`save_session`)."""
    return write_atomic(path, results_text(rows, env))


def fallback_dir() -> Path:
    """Where results go when the chosen folder cannot be written: the user's data folder
    (platformdirs: $XDG_DATA_HOME/apextui, else ~/.local/share/apextui on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("apextui"))


@dataclass(frozen=True)
class Saved:
    """Where `save_session` put the results, and why not in the folder asked for ("" when it did)."""

    path: Path
    fallback_reason: str = ""


def save_session(rows: Sequence[ResultRow], directory: str | Path, env: Mapping[str, Any] | None = None,
                 make: bool = False) -> Saved:
    """Save to a new results file in `directory` (made first where `make`); when that folder cannot be written
    (read-only, gone, full, a file in its way), to the next of `fallback_dir()` and the system's temporary
    folder, so a hang-up in a read-only folder still keeps the runs. The file name is new: a file already
    there (another apextui's, saved in the same second) is never replaced; the name gets -2, -3... Raises
    OSError only when no place can be written (its message names each)."""
    return save_first(rows, [(Path(directory), make), (fallback_dir(), True), (Path(tempfile.gettempdir()), False)],
                      env)


def save_first(rows: Sequence[ResultRow], places: Sequence[tuple[Path, bool]],
               env: Mapping[str, Any] | None = None) -> Saved:
    """A new results file in the first of `places` (folder, whether to make it) that can be written; `Saved`
    says why the ones before it could not."""
    text = results_text(rows, env)
    failed: list[str] = []
    tried: set[Path] = set()
    for folder, make in places:
        try:
            key = folder.resolve()
        except (OSError, RuntimeError):
            key = folder
        if key in tried:
            continue
        tried.add(key)
        try:
            if make:
                folder.mkdir(parents=True, exist_ok=True)
            path = write_new_numbered(default_results_path(folder), text)
        except OSError as exc:
            failed.append(f"{'cannot write to' if not failed else 'nor to'} {key}: {exc.strerror or exc}")
            continue
        return Saved(path, "; ".join(failed))
    raise OSError("; ".join(failed))


def load_results(path: str | Path) -> list[ResultRow]:
    """Rows from a results file (`save_session`), or from headless `--json` output.

    Anything wrong with the file (missing, not a regular file, over `MAX_RESULTS_BYTES`, unreadable,
    empty, not UTF-8, not JSON, truncated, the wrong shape, no runs) raises `ResultsError`, and nothing
    else: whatever the parser trips over is the file's fault. The message is one line that starts with
    the path and says what is wrong."""
    try:
        path = Path(path).expanduser()
    except RuntimeError:  # ~ with no home directory known: the path as given
        path = Path(path)
    try:
        rows = _load(path)
    except ResultsError:
        raise
    except Exception as exc:  # noqa: BLE001 - a loader is total
        why = f"{type(exc).__name__}: {files.one_line(exc)}"
        raise ResultsError(f"{path}: not an apextui results file ({why})") from None
    if not rows:
        raise ResultsError(f"{path}: no finished runs in this file: nothing to load")
    return rows


def _load(path: Path) -> list[ResultRow]:
    try:
        text = files.read_text(path, MAX_RESULTS_BYTES, "results file")
    except files.UnreadableFile as exc:
        raise ResultsError(str(exc)) from None
    source = str(path)
    stripped = text.lstrip()
    if not stripped:
        raise ResultsError(f"{path}: empty file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        first = stripped.splitlines()[0]
        if not _is_json(first):  # neither a whole JSON document nor JSON lines
            raise ResultsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                               "truncated or corrupt, or not an apextui results file") from None
        return _rows_from_json_lines(text, source, path)  # headless output: one object a line
    except RecursionError:
        raise ResultsError(f"{path}: not an apextui results file: JSON nested too deeply") from None
    except ValueError as exc:  # valid JSON that Python will not turn into values, e.g. a 5000-digit integer
        raise ResultsError(f"{path}: not an apextui results file: {_unreadable_value(exc)}") from None
    if isinstance(doc, dict) and doc.get("kind") == RESULTS_KIND:
        return _rows_from_document(doc, source, path)
    if isinstance(doc, dict) and "event" in doc:  # headless output of a single line
        return _rows_from_json_lines(text, source, path)
    shapes: dict[type, str] = {dict: "an object without \"kind\": \"apextui-results\"", list: "a list"}
    what = shapes.get(type(doc), "a single value")
    raise ResultsError(f"{path}: JSON of the wrong shape ({what}): neither an apextui results file "
                       "(saved with w) nor `apextui --json` output")


def _unreadable_value(exc: ValueError) -> str:
    """'a JSON value Python cannot read (Exceeds the limit (4300 digits) ...)', without Python's advice."""
    return f"a JSON value Python cannot read ({files.one_line(exc).split('; use sys.')[0]})"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _rows_from_document(doc: Mapping[str, Any], source: str, path: Path) -> list[ResultRow]:
    schema = doc.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        got = "missing" if "schema" not in doc else f"got {_show(schema)}"
        raise ResultsError(f"{path}: field 'schema': {got}; must be an integer from 1 to {RESULTS_SCHEMA}")
    if schema > RESULTS_SCHEMA:
        raise ResultsError(f"{path}: field 'schema': {schema} is newer than this apextui reads "
                           f"({RESULTS_SCHEMA}); update apextui")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise ResultsError(f"{path}: field 'runs' must be a list")
    env = doc.get("env") if isinstance(doc.get("env"), dict) else None
    rows = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ResultsError(f"{path}: runs[{i}]: must be an object, got {type(run).__name__}")
        try:
            rows.append(_row(run, source, env))
        except KeyError as exc:
            raise ResultsError(f"{path}: runs[{i}]: missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise ResultsError(f"{path}: runs[{i}]: {exc}") from None
    return rows


def _model_spec(value: Any) -> str | None:
    """A run's model: the spec string (results files) or the `start` line's {"spec", "name"} (--json output)."""
    if isinstance(value, dict):
        value = value.get("spec")
    return value if isinstance(value, str) else None


def _row(run: Mapping[str, Any], source: str, env: Mapping[str, Any] | None) -> ResultRow:
    run["workload"]  # noqa: B018 - a KeyError where the field is missing: "missing field 'workload'"
    workload, point = recorded(run)
    # "norm" stays where its named point is none of either norm's (a file edited by hand): the run loads all the same
    if not isinstance(workload, str) or (workload not in WORKLOADS and workload != FORMER_NORM):
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
    summary = run.get("summary") or {}
    if not isinstance(summary, dict):
        raise ValueError("'summary' must be an object")
    return ResultRow(
        preset=str(run["preset"]), workload=workload, device=str(run["device"]),
        size=str(run.get("size") or ("cpu" if run["device"] == "cpu" else "default")),
        status=str(run.get("status") or "ok"), summary=Summary.from_dict(summary),
        error=None if run.get("error") is None else str(run["error"]), source=source,
        env=run["env"] if isinstance(run.get("env"), dict) else env,
        model=_model_spec(run.get("model")), config=point,
        amp_saved=str(run.get("amp") or "none"),
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
            raise ResultsError(f"{path}: line {n} is not JSON (cut short?): neither an apextui results file "
                               "(saved with w) nor `apextui --json` output") from None
        except RecursionError:
            raise ResultsError(f"{path}: line {n}: JSON nested too deeply") from None
        except ValueError as exc:
            raise ResultsError(f"{path}: line {n}: {_unreadable_value(exc)}") from None
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
    if not rows:
        raise ResultsError(f"{path}: no finished runs: `apextui --json` output with no `start` line followed by "
                           "an `end` line (a run cut short before it ended?)")
    return rows
