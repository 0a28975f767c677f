"""A recorded timing table replayed on a fake clock: the search's `measure`, `available` and clock, for testing the
real search on CPU against what a GPU measured (`benchmarks/record_table.py` records a table).

Why: a search's strategy cannot be proven on a GPU run or two (device time is scarce, and one run says nothing of how
often it lands well); tuners are tested on recorded tables (NAS-Bench, HPOBench). Here each replay draws a run's
median from the table's runs of that point with their measured spread (the spread between its runs, and the
median's own interval), charges the fake clock what the run cost on the GPU (a first compile cold, a new graph
through warm caches, a recompile, the steps), honours the search's deadline for the run as the advice's runner
does (`run.Advisor.run_deadline`), and may inject contention bursts (a run slowed by other work, marked as competed
where the monitor would see it).

A point the table does not hold is composed: the nearest recorded point (fewest axes apart), times, for each axis
that differs, the ratio the table measured for that change between two points that differ in it alone (1 where it
measured none), its cost that of the nearest point's kind of run. A value unavailable in the table is unavailable.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..config.axes import axis_names
from ..config.point import Config
from ..measure.compare import Timing
from .costs import graph_of
from ..config.needs import Availability
from .run import STOP_GRACE_S, budget_grace
from .search_record import BUDGET_ENDED, Outcome, SearchResult

SCHEMA = 1  # the table format's version (`benchmarks/record_table.py` and `table_from_advice.py` write it)



@dataclass(frozen=True)
class RunRow:
    median_ms: float
    low_ms: float
    high_ms: float
    wall_s: float
    compile_s: float


@dataclass(frozen=True)
class Point:
    config: Config
    status: str  # ok | failed | check_failed | unavailable
    reason: str
    runs: tuple[RunRow, ...]
    failed_wall_s: float  # what a failed run cost
    first_order: int  # when its first run ran in the recording (its compile was cold where it was the first)

    @property
    def median_ms(self) -> float:
        return statistics.median(r.median_ms for r in self.runs)


def load(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _points(table: Mapping[str, Any]) -> dict[Config, Point]:
    out = {}
    for entry in table["points"].values():
        config = Config(**entry["config"])
        runs = tuple(RunRow(r["median_ms"], r.get("low_ms") or r["median_ms"], r.get("high_ms") or r["median_ms"],
                            float(r["wall_s"]), float(r.get("compile_s") or 0.0))
                     for r in entry.get("runs", ()) if r["status"] == "ok" and r.get("median_ms"))
        status = entry.get("status", "ok")
        if status == "ok" and not runs:
            status = "failed"
        failed = [r for r in entry.get("runs", ()) if r["status"] != "ok"]
        reason = entry.get("reason") or next((r.get("reason") or "" for r in failed), "")
        orders = [r["order"] for r in entry.get("runs", ()) if "order" in r]
        out[config] = Point(config, status, reason or "", runs, float(failed[0]["wall_s"]) if failed else 0.0,
                            min(orders) if orders else 0)
    return out


class TableReplay:
    """One replay of `table` (seeded): `measure`, `available` and `clock` for `search.Search`; set `search` to the
    search before it runs (its deadline for each run is read from it). `contention`: the chance that a run is slowed
    by other work (by a factor drawn from `burst`), marked as competed with chance `seen`."""

    def __init__(self, table: Mapping[str, Any], seed: int, *, contention: float = 0.0,
                 burst: tuple[float, float] = (1.2, 3.0), seen: float = 0.7) -> None:
        self.table, self.rng = table, random.Random(seed)
        self.points = _points(table)
        self.contention, self.burst, self.seen = contention, burst, seen
        self.now = 0.0
        self.search: Any = None
        self.calls: list[Config] = []
        self._graphs: set[tuple[str, ...]] = set()
        self._compiled = False  # a compile ran in this replay (the next new graph's is through warm caches)
        compiled = sorted((p for p in self.points.values() if p.config.compile != "none" and p.runs),
                          key=lambda p: p.first_order)
        self._first_recorded = compiled[0].config if compiled else None
        warm = [p.runs[0].compile_s / p.config.compile.setup_cost for p in compiled[1:] if p.runs[0].compile_s]
        cold = compiled[0].runs[0].compile_s / compiled[0].config.compile.setup_cost if compiled else 0.0
        self._cold_over_warm = cold / statistics.median(warm) if warm and cold else 1.0
        rec = [p.runs[1].compile_s / p.config.compile.setup_cost for p in compiled if len(p.runs) > 1
               and p.runs[1].compile_s]
        self._recompile_s = statistics.median(rec) if rec else 1.0

    def run_search(self, budget_s: float, workload: str, device: str, **kw: Any) -> SearchResult:
        """The real search (`search.Search`) driven by this replay: its measure, availability and clock."""
        from .search import Search

        self.search = Search(self.measure, budget_s, available=self.available, clock=self.clock, workload=workload,
                             device=device, **kw)
        return self.search.run()

    @property
    def longest_run_s(self) -> float:
        """The longest run the table recorded (a replay's wall time may pass the budget by one run)."""
        return max((row.wall_s for p in self.points.values() for row in p.runs), default=0.0)

    # ---- the search's hooks ------------------------------------------------------------------------
    def clock(self) -> float:
        return self.now

    def available(self, config: Config) -> Any:
        for axis_name in axis_names():
            value = getattr(config, axis_name)
            gone = next((p for p in self.points.values() if p.status == "unavailable"
                         and getattr(p.config, axis_name) == value and value.label), None)
            if gone is not None and (config == gone.config or self._only(gone.config, axis_name)):
                return Availability(False, gone.reason)
        return Availability(True)

    def _only(self, config: Config, axis_name: str) -> bool:
        """`config` is unavailable for its value on `axis_name` alone: no recorded point with that value ran."""
        value = getattr(config, axis_name)
        return not any(p.status != "unavailable" and getattr(p.config, axis_name) == value
                       for p in self.points.values())

    def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
        self.calls.append(config)
        point = self.points.get(config)
        status, reason = (point.status, point.reason) if point is not None else self._composed_status(config)
        compile_s = self._compile_now(config) if config.compile != "none" else None
        cost = self._cost(config, point, compile_s or 0.0)
        allowed = self._allowed()
        if status != "ok":
            cost = point.failed_wall_s if point is not None and point.failed_wall_s else cost
            if cost > allowed:
                return self._cut(allowed)
            self.now += cost
            self._graphs.add(graph_of(config))
            self._compiled = self._compiled or config.compile != "none"
            return Outcome("check_failed" if status == "check_failed" else "failed", reason=reason or status)
        if cost > allowed:
            return self._cut(allowed)
        self.now += cost
        self._graphs.add(graph_of(config))
        self._compiled = self._compiled or compile_s is not None
        ms, low, high = self._draw(config, point)
        competed = False
        if self.contention and self.rng.random() < self.contention:
            factor = self.rng.uniform(*self.burst)
            ms, low, high = ms * factor, low * factor, high * factor * self.rng.uniform(1.0, 1.5)
            competed = self.rng.random() < self.seen
        return Outcome("ok", Timing(ms, low, high, n=40), competed=competed, compile_s=compile_s)

    # ---- what a run costs and measures -------------------------------------------------------------
    def _allowed(self) -> float:
        """Seconds the run in flight may take before the runner ends it (`Advisor.run_deadline`)."""
        s = self.search
        if s is None:
            return math.inf
        left = s.budget_s - s.spent
        if s.run_until < s.budget_s - 1e-9:
            return max(0.0, min(left, s.run_until - s.spent)) + STOP_GRACE_S
        return max(0.0, left) + budget_grace(s.budget_s) + STOP_GRACE_S

    def _cut(self, allowed: float) -> Outcome:
        self.now += allowed
        return Outcome("failed", reason=f"no step finished in {allowed - STOP_GRACE_S:.0f} s: {BUDGET_ENDED}")

    def _compile_now(self, config: Config) -> float:
        point = self.points.get(config) or self._nearest(config)
        recorded = point.runs[0].compile_s / max(point.config.compile.setup_cost, 1e-9) * config.compile.setup_cost \
            if point is not None and point.runs and point.config.compile != "none" else 0.0
        if graph_of(config) in self._graphs:
            return self._recompile_s * config.compile.setup_cost
        was_cold = point is not None and point.config == self._first_recorded
        if not self._compiled:  # the replay's first compile
            return recorded if was_cold else recorded * self._cold_over_warm
        return recorded / self._cold_over_warm if was_cold else recorded

    def _cost(self, config: Config, point: Point | None, compile_s: float) -> float:
        """A run's wall time: its point's steps (the nearest recorded point's where the table holds none) and the
        compile it pays now."""
        near = point if point is not None and point.runs else self._nearest(config)
        rows = near.runs if near is not None and near.runs else ()
        steps = statistics.median(r.wall_s - r.compile_s for r in rows) if rows else 5.0
        return steps * self.rng.uniform(0.95, 1.1) + compile_s

    def _draw(self, config: Config, point: Point | None) -> tuple[float, float, float]:
        if point is not None and point.runs:
            rows, scale = point.runs, 1.0
        else:
            near = self._nearest(config)
            assert near is not None, "a table without an ok point"
            rows, scale = near.runs, self._ratio(near.config, config) or 1.0
        row = self.rng.choice(rows)
        medians = [r.median_ms for r in rows]
        between = (max(medians) / min(medians) - 1) / 2 if len(medians) > 1 else 0.0
        drift = math.exp(self.rng.gauss(0.0, max(0.002, between)))
        ms = row.median_ms * scale * drift
        return ms, min(ms, ms * row.low_ms / row.median_ms), max(ms, ms * row.high_ms / row.median_ms)

    # ---- points the table does not hold ------------------------------------------------------------
    def _nearest(self, config: Config) -> Point | None:
        ok = [p for p in self.points.values() if p.runs]
        if not ok:
            return None
        compiled = config.compile != "none"
        return min(ok, key=lambda p: (_apart(p.config, config), (p.config.compile != "none") != compiled,
                                      p.first_order))

    def _ratio(self, start: Config, goal: Config) -> float | None:
        """What the table measured for the changes from `start` to `goal`, multiplied; None where it measured one
        of them nowhere."""
        ratio = 1.0
        for axis_name in axis_names():
            a, b = getattr(start, axis_name), getattr(goal, axis_name)
            if a != b:
                change = self._change(axis_name, a, b, goal.compile != "none")
                if change is None:
                    return None
                ratio *= change
        return ratio

    def _change(self, axis_name: str, a: str, b: str, compiled: bool) -> float | None:
        """What the table measured for `axis_name` going from `a` to `b` in points alike otherwise (compiled ones
        first where `compiled`), as a ratio of medians; None where it measured none."""
        pairs = []
        for p in self.points.values():
            if not p.runs or getattr(p.config, axis_name) != a:
                continue
            q = self.points.get(p.config.with_(axis_name, b))
            if q is not None and q.runs:
                pairs.append(((p.config.compile != "none") == compiled, q.median_ms / p.median_ms))
        if not pairs:
            return None
        alike = [r for same, r in pairs if same]
        return statistics.median(alike or [r for _, r in pairs])

    def _composed_status(self, config: Config) -> tuple[str, str]:
        """A point the table does not hold fails where one of its values failed in every recorded point of its kind
        (compiled or eager) that held it, or where the table measured one of its changes nowhere; else it runs."""
        near = self._nearest(config)
        if near is None or self._ratio(near.config, config) is None:
            return "failed", "not in the recorded table, nor composed from it"
        for axis_name in axis_names():
            value = getattr(config, axis_name)
            if not value.label:
                continue
            kin = [p for p in self.points.values() if getattr(p.config, axis_name) == value
                   and (p.config.compile != "none") == (config.compile != "none") and p.status != "unavailable"]
            if kin and all(p.status != "ok" for p in kin):
                return kin[0].status, kin[0].reason
        return "ok", ""

    # ---- what the table says is best ---------------------------------------------------------------
    def best(self) -> tuple[Config, float]:
        ok = [p for p in self.points.values() if p.status == "ok" and p.runs]
        p = min(ok, key=lambda p: p.median_ms)
        return p.config, p.median_ms

    def median_of(self, config: Config) -> float:
        """The table's median of a point (composed where it holds none)."""
        point = self.points.get(config)
        if point is not None and point.runs:
            return point.median_ms
        near = self._nearest(config)
        assert near is not None
        return near.median_ms * (self._ratio(near.config, config) or math.inf)


def _apart(a: Config, b: Config) -> int:
    return sum(getattr(a, n) != getattr(b, n) for n in axis_names())
