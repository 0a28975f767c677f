"""The search for the fastest configuration of the user's model that passes the correctness check.

Why a search: one change at a time missed the answer on real models (HF GPT-2 on an H200: bf16 alone 58 ms,
bf16 + fused AdamW + torch.compile 23.6 ms), and the full grid (5 x 4 x 2 x 4 = 160 points, each a compile)
does not fit in minutes. A compile costs many times an eager run (about a minute for a 124 M model on an
H200, autotuning several), so the search spends compiles only where they can win. The search:

1. measures the baseline (fp32) and every single change that needs no compile (one short run each);
2. adds each other axis's best single value (where its median beat the baseline's) to the fastest eager point,
   one at a time, the most helpful first, keeping each that lowers the median (a value neutral alone can hurt
   in company), by each point's fastest run; a value whose one run came out no better but within the drift between
   runs is run again beside the point it would join (`_confirm`), so that one noisy run does not leave it out (the
   point the search starts from, the two fastest single changes, is confirmed the same way);
3. tries each compile mode on the best point so far, the cheapest set-up first (`axes.Value.setup_cost`;
   a mode estimated not to fit the budget is skipped; one not faster by a single run, but within the drift, is
   confirmed as in 2);
4. coordinate ascent around the best point: every untried neighbour (values whose single change helped
   most first; values whose single change failed are not tried; a compile mode only where its estimated set-up
   fits, as in 3), moving only when faster by the one noise rule (`compare.compare`); a pass without a move ends it;
5. the answer's confirmation (`ablation`): the best point runs in interleaved rounds (A B C D, D C B A) beside
   itself without each of its values, fp32, the best single change and the point the Apex verdict weighs it
   against; a value stays only where taking it out makes the answer slower beyond noise (round by round), else
   the simpler point is the answer and is confirmed the same way, while the budget lasts. The answer's figures
   come from those rounds. Runs that other work disturbed (`compare.DISTURBED_RULE`) are run again in their
   round where the budget allows, and left out of the comparison.

A point that fails to run or fails the correctness check is excluded and reported with its reason. The
budget (seconds, on `clock`) is checked before each run: exploration keeps back, from the start, what the
confirmation rounds of its best point so far would cost (`_confirm_cost`), and each exploring run is told when it
must end (`run_until`); the rounds run while a round fits (where a whole one does not, its most important points that
do: the answer first). Where the rounds could not run, the answer is "unconfirmed" (`SearchResult.confirmed`).

No torch here: `measure` (a function from a `Config` to an `Outcome`) is the only contact with the model,
so the logic is tested on a fake timing table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol

from ..measure.details import CorrectnessCheck
from ..measure.compare import Comparison, Disturbance, Drift, Timing, compare, disturbances, fields, kept_runs, \
    timing_from_runs, unsure
from ..config.axes import AXES, AXIS_NAMES, axis
from ..config.point import BASELINE, Config, single_changes
from . import ablation
from .ablation import Part

TrialStatus = Literal["ok", "failed", "check_failed", "unavailable", "not_run"]
Phase = Literal["baseline", "single", "ascent", "repeat"]
NOT_RUN = "not run: the budget ended first"
BUDGET_ENDED = "ended by the budget"  # in the reason of a run the budget's deadline ended (`run.RunWatch`)
DEFAULT_BUDGET_S = {"cuda": 300.0, "cpu": 60.0}
# steps a search's run makes unless --steps says otherwise: fewer than a shipped preset's advice (100 on CUDA),
# so that more points fit the budget; a GPU-bound model's 40 measured steps give a tight median already
SEARCH_STEPS = {"cuda": 50, "cpu": 30}
METHOD = ("the baseline and every single change that needs no compile, their best values added one at a time, each "
          "compile mode on the best point (cheapest set-up first), coordinate ascent around it (a move only when "
          "faster by the noise rule), then the answer in interleaved rounds (ABBA) beside itself without each of its "
          "values, fp32 and the best single change: a value stays only where it makes the answer faster beyond noise")
StopReason = Literal["converged", "budget", "stopped", "baseline failed"]
# what ended the search, in words (`answer.answer_lines` says it in the search's header line)
STOP_WORDS: Mapping[str, str] = {
    "converged": "converged: no neighbour of the best point that it tried was faster (a compile mode whose "
                 "set-up would not fit the budget is not tried)",
    "budget": "ended by its budget before every step of the search ran",
    "stopped": "stopped before its end",
    "baseline failed": "the fp32 baseline failed: nothing to compare with",
}
FINAL_ROUNDS = 2  # rounds of interleaved repeats (ABBA) of the answer and the points it is confirmed against
RECOMPILE_SAVED = 0.75  # the share of a point's first compile that its later runs do not spend again (caches)
# before any compile ran, a compiled point's first run is estimated at this many times its own eager run (a
# 124 M model on an H200: about 4-6; on a 2-core CPU more: there the run's deadline, `run_until`, ends one that
# overstays)
COMPILE_PRIOR_RUNS = 4.0
# and at least this many seconds: inductor's first compile costs about the same whatever an eager run costs (the GPT
# example on an H200: 44.6 s with cold caches, its eager run 3.5-7 s in a reused worker; a tiny model on a 2-core CPU:
# 20-90 s by the machine's load, its eager run 2-4 s)
COMPILE_PRIOR_S = {"cuda": 45.0, "cpu": 30.0}
GRAPH_AXES = tuple(a.name for a in AXES if a.graph)  # what torch.compile sees: the optimizer's step is not compiled


@dataclass(frozen=True)
class Outcome:
    """One run of one point, as `measure` reports it."""

    status: TrialStatus
    timing: Timing | None = None
    reason: str = ""  # why it failed / was unavailable
    fix: str = ""
    check: CorrectnessCheck | None = None
    peak_memory_bytes: int | None = None  # torch.cuda.max_memory_allocated; None on CPU
    result: Any = None  # the run's RunResult (the advice keeps it)
    competed: bool = False  # other work competed with the run, or the GPU was throttled (`monitor.contention`)
    # of the run's wall time, what starting a worker took that the next runs in it do not pay (`run.reusable`): left
    # out of the run's cost, which estimates the points after it
    start_s: float = 0.0
    compile_s: float | None = None  # its compile's time (a compiled point's first run), apart from its steps

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.timing is not None


@dataclass(frozen=True)
class Trial:
    """One entry of the search record: which point, why it was run, what came of it."""

    index: int
    phase: Phase
    config: Config
    why: str
    outcome: Outcome
    elapsed_s: float  # on the search's clock
    round: int | None = None  # the round of interleaved repeats it ran in (phase "repeat"), else None

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        return {"index": self.index, "phase": self.phase, "config": self.config.as_dict(),
                "label": self.config.label, "why": self.why, "status": o.status,
                "median_ms": o.timing.median_ms if o.timing else None,
                "median_low_ms": o.timing.low_ms if o.timing else None,
                "median_high_ms": o.timing.high_ms if o.timing else None,
                "reason": o.reason or None, "fix": o.fix or None,
                "check": o.check.to_dict() if o.check else None, "peak_memory_bytes": o.peak_memory_bytes,
                "elapsed_s": round(self.elapsed_s, 3), "round": self.round, "competed": o.competed}


@dataclass
class SearchResult:
    trials: list[Trial] = field(default_factory=list)
    winner: Config | None = None
    best_single: Config | None = None
    runner_up: Config | None = None
    candidates: tuple[Config, ...] = ()
    budget_s: float = 0.0
    spent_s: float = 0.0
    stopped_by: StopReason | Literal[""] = ""  # "" until it ran
    # the answer's confirmation (`ablation`): its values against the answer without each, from the rounds; the values
    # taken out on the way (each against the answer it was part of); whether every part was measured so
    ablation: tuple[Part, ...] = ()
    dropped: tuple[Part, ...] = ()
    confirmed: bool = False
    unconfirmed_why: str = ""
    # the Apex verdict: the point with Apex and the point without it that it is weighed against (like with like)
    apex_point: Config | None = None
    apex_counterpart: Config | None = None
    # compiles left out because their estimated set-up (s) did not fit what was left of the budget
    not_tried: dict[Config, float] = field(default_factory=dict)

    def _runs(self, config: Config) -> list[Trial]:
        return [t for t in self.trials if t.config == config and t.outcome.ok]

    def _kept(self, config: Config) -> tuple[list[Trial], bool]:
        """`config`'s ok trials that comparisons read (`compare.DISTURBED_RULE`), and whether they rest on disturbed
        runs."""
        runs = self._runs(config)
        kept, rests = kept_runs([(t.outcome.timing, t.outcome.competed) for t in runs])  # type: ignore[misc]
        return [runs[i] for i in kept], rests

    def disturbed(self) -> list[tuple[Trial, Disturbance]]:
        """The runs left out of the comparisons, with why (none of a configuration whose every run was disturbed)."""
        out = []
        for c in dict.fromkeys(t.config for t in self.trials):
            marks = self.marks(c)
            if any(m is None for _, m in marks):
                out += [(t, m) for t, m in marks if m is not None]
        return sorted(out, key=lambda x: x[0].index)

    def marks(self, config: Config) -> list[tuple[Trial, Disturbance | None]]:
        """`config`'s ok runs, each with why it is disturbed (`compare.disturbances`), or None."""
        runs = self._runs(config)
        return list(zip(runs, disturbances([(t.outcome.timing, t.outcome.competed) for t in runs]),  # type: ignore[misc]
                        strict=True))

    def rests_on_disturbed(self, config: Config) -> bool:
        return self._kept(config)[1]

    @property
    def competed(self) -> bool:
        """Other work competed with a run of this search (kept or left out): the answer carries the busy caution."""
        return any(t.outcome.competed for t in self.trials)

    def timing(self, config: Config) -> Timing | None:
        return timing_from_runs(t.outcome.timing for t in self._kept(config)[0])  # type: ignore[misc]

    def peak_memory(self, config: Config) -> int | None:
        peaks = [t.outcome.peak_memory_bytes for t in self.trials
                 if t.config == config and t.outcome.peak_memory_bytes is not None]
        return max(peaks) if peaks else None

    def excluded(self) -> list[Trial]:
        """The points that failed or were unavailable, each once (its first trial; never one that also ran ok, nor
        one that did not run: `not_run`)."""
        seen: set[Config] = {t.config for t in self.trials if t.outcome.ok}
        out = []
        for t in self.trials:
            if not t.outcome.ok and t.outcome.status != "not_run" and t.config not in seen:
                seen.add(t.config)
                out.append(t)
        return out

    def not_run(self) -> list[Config]:
        """The points the search meant to run but the budget ended first (`NOT_RUN`)."""
        ran = {t.config for t in self.trials if t.outcome.status != "not_run"}
        return list(dict.fromkeys(t.config for t in self.trials
                                  if t.outcome.status == "not_run" and t.config not in ran))

    @property
    def drift(self) -> Drift:
        """The largest drift between two runs of one point in this search (`compare.Drift`)."""
        runs: dict[Config, list[Timing]] = {}
        for t in self.trials:
            if t.outcome.ok:
                runs.setdefault(t.config, []).append(t.outcome.timing)  # type: ignore[arg-type]
        return Drift.of(runs.values())

    def _by_round(self, config: Config) -> dict[int, Timing]:
        return {t.round: t.outcome.timing for t in self._kept(config)[0] if t.round is not None}  # type: ignore[misc]

    def versus(self, a: Config | None, b: Config | None, *, with_drift: bool = True) -> Comparison | None:
        """`a` against `b` by the noise rule: round by round where both ran in enough rounds of the interleaved
        repeats (`compare.compare`'s `rounds`), else their pooled timings, `with_drift` (what is reported): a single
        run's interval widened by the drift between runs seen here (`drift`). The search's own moves compare
        without it: a move is provisional, and the round of repeats at the end measures the candidates side by
        side."""
        ta, tb = (self.timing(a) if a else None), (self.timing(b) if b else None)
        if a is None or b is None or ta is None or tb is None:
            return None
        c = compare(ta, tb, drift=self.drift if with_drift else None, rounds=(self._by_round(a), self._by_round(b)))
        return unsure(c) if self.rests_on_disturbed(a) or self.rests_on_disturbed(b) else c

    def shown(self, a: Config | None, b: Config | None) -> Comparison | None:
        """`a` against `b` as the answer reports it: measured round by round, or never called faster or slower (its
        figures are then single runs made minutes apart: `unsure`)."""
        c = self.versus(a, b)
        return unsure(c) if c is not None and c.basis != "paired" else c

    def to_dict(self) -> dict[str, Any]:
        w = self.winner
        points: dict[str, Any] = {}
        for t in self.trials:
            if t.config.label in points:
                continue
            timing = self.timing(t.config)
            points[t.config.label] = {
                "config": t.config.as_dict(), "median_ms": timing.median_ms if timing else None,
                "runs": sum(1 for x in self.trials if x.config == t.config and x.outcome.ok),
                "peak_memory_bytes": self.peak_memory(t.config),
                "status": "ok" if timing else t.outcome.status}
        return {
            "method": METHOD,
            "budget_s": self.budget_s, "spent_s": round(self.spent_s, 3), "stopped_by": self.stopped_by,
            "trials": [t.to_dict() for t in self.trials],
            "points": points,
            "candidates": [c.label for c in self.candidates],
            "winner": w.as_dict() if w else None, "winner_label": w.label if w else None,
            "runner_up": self.runner_up.label if self.runner_up else None,
            "best_single": self.best_single.label if self.best_single else None,
            **fields(self.shown(w, BASELINE), "speedup_vs_fp32"),
            **fields(self.shown(w, self.best_single), "speedup_vs_best_single"),
            "excluded": [{"label": t.config.label, "status": t.outcome.status, "reason": t.outcome.reason}
                         for t in self.excluded()],
            "not_run": [{"label": c.label, "reason": NOT_RUN} for c in self.not_run()],
            "not_tried": [{"label": c.label, "setup_estimate_s": round(est, 1)} for c, est in self.not_tried.items()
                          if not any(t.config == c for t in self.trials)],
            "ablation": [p.to_dict() for p in self.ablation], "dropped": [p.to_dict() for p in self.dropped],
            "confirmed": self.confirmed, "unconfirmed_why": self.unconfirmed_why or None,
            "apex_point": self.apex_point.label if self.apex_point else None,
            "apex_counterpart": self.apex_counterpart.label if self.apex_counterpart else None,
            **fields(self.shown(self.apex_point, self.apex_counterpart), "apex_speedup"),
            "left_out": [{"index": t.index, "label": t.config.label, "round": t.round, "why": why}
                         for t, why in self.disturbed()],
            "competed": self.competed,
        }


class Measure(Protocol):
    """Runs one point once: `why` for the progress line, `round` the round of interleaved repeats it is part of
    (None outside one)."""

    def __call__(self, config: Config, why: str, round: int | None = None) -> Outcome: ...


Available = Callable[[Config], Any]  # -> an object with ok, reason, fix


class Search:
    """Runs the search (module docstring); `stop()` ends it after the current run."""

    def __init__(self, measure: Measure, budget_s: float, *, available: Available | None = None,
                 clock: Callable[[], float] = time.monotonic, on_progress: Callable[[str], None] | None = None,
                 final_rounds: int = FINAL_ROUNDS, workload: str = "model", device: str = "") -> None:
        self.device = device  # a value that is the axis's default on this device is not measured twice
        self.measure, self.budget_s, self.clock = measure, float(budget_s), clock
        self.workload = workload  # the values it tries are those this workload builds (`axes.Value.workloads`)
        self.available = available
        self.on_progress = on_progress
        self.final_rounds = final_rounds
        self.result = SearchResult(budget_s=float(budget_s))
        self._stopped = False
        self._t0 = 0.0
        self._cost: dict[Config, float] = {}  # each point's first run's cost (its compile included)
        self._reruns: dict[Config, float] = {}  # each point's last rerun's cost
        self._compile_s: dict[Config, float] = {}  # a compiled point's first compile time (its run's compile_s)
        self._compile_cost: float | None = None  # the first compile's run cost: later ones are scaled from it
        self._round = 0  # the last round of interleaved repeats started
        # when the run in flight must end, in seconds on the search's clock from its start: an exploring run leaves
        # the confirmation its time (`_confirm_cost`); the caller's `measure` may end a run that overstays it
        self.run_until: float = float(budget_s)

    def stop(self) -> None:
        self._stopped = True

    # ---- helpers -----------------------------------------------------------------------------------
    def _say(self, line: str) -> None:
        if self.on_progress is not None:
            self.on_progress(line)

    @property
    def spent(self) -> float:
        return self.clock() - self._t0

    def _tried(self, config: Config) -> bool:
        """It ran, or was found unavailable (a point the budget left unrun may still be tried later)."""
        return any(t.config == config and t.outcome.status != "not_run" for t in self.result.trials)

    def _run(self, phase: Phase, config: Config, why: str, avail: Any = None, round: int | None = None,
             reserve: float = 0.0) -> Outcome:
        """Run `config` (`avail`: its availability, where the caller has looked it up already; `round`: the round
        of interleaved repeats it is part of; `reserve`: the seconds of the budget it must leave (`run_until`))."""
        index = len(self.result.trials) + 1
        self.run_until = max(self.spent, self.budget_s - self._if_it_fits(reserve))  # as the gate that let it start
        a = avail if avail is not None else self.available(config) if self.available is not None else None
        if a is not None and not a.ok:
            outcome = Outcome("unavailable", reason=a.reason, fix=a.fix)
            self.result.trials.append(Trial(index, phase, config, why, outcome, self.spent))
            self._say(f"search [{index}] {config.label}: unavailable: {a.reason}")
            return outcome
        self._say(f"search [{index}] {config.label}: {why} ({self.spent:.0f}/{self.budget_s:.0f} s)")
        t = self.clock()
        outcome = self.measure(config, why, round=round)
        cost = max(0.0, self.clock() - t - outcome.start_s)
        if config in self._cost:
            self._reruns[config] = cost
        else:
            self._cost[config] = cost
        if outcome.compile_s is not None and config not in self._compile_s:
            self._compile_s[config] = outcome.compile_s
        self.result.trials.append(Trial(index, phase, config, why, outcome, self.spent, round))
        if outcome.ok:
            self._say(f"search [{index}] {config.label}: {outcome.timing.median_ms:.4g} ms/step")  # type: ignore[union-attr]
        else:
            self._say(f"search [{index}] {config.label}: excluded ({outcome.status}): {outcome.reason}")
        return outcome

    def _ok(self, config: Config) -> bool:
        return self.result.timing(config) is not None

    def _best_ms(self, config: Config) -> float | None:
        """The lowest median of `config`'s runs: what the search's own moves go by. Other work on the host only ever
        slows a run down, so of two runs the faster is the nearer to what the configuration does (on the H200, right
        after a build had loaded the host, bf16 ran 46.4 ms on the ViT example, where it runs 23-30)."""
        runs = [t.outcome.timing.median_ms for t in self.result.trials  # type: ignore[union-attr]
                if t.config == config and t.outcome.ok]
        return min(runs) if runs else None

    def _fastest(self, configs: list[Config]) -> Config | None:
        timed = [(self._best_ms(c), c) for c in configs]
        kept = [(ms, c) for ms, c in timed if ms is not None]
        return min(kept, key=lambda x: x[0])[1] if kept else None

    def _faster(self, a: Config, b: Config) -> bool:
        c = self.result.versus(a, b, with_drift=False)
        return c is not None and c.verdict == "faster"

    def _round_cost(self, configs: tuple[Config, ...]) -> float:
        return sum(self._estimate(c) for c in configs)

    def _rerun_cost(self, config: Config) -> float:
        """What running `config` again costs: its last run, less most of its compile, which torch's compile caches
        serve the second time (on the H200 the ViT example's compiled point ran 52 s the first time, 44.6 s of it
        compiling, and 10 s each repeat)."""
        if config in self._reruns:
            return self._reruns[config]
        return max(0.0, self._cost.get(config, 0.0) - RECOMPILE_SAVED * self._compile_s.get(config, 0.0))

    def _fitting(self, top: tuple[Config, ...]) -> tuple[Config, ...]:
        """The candidates a round of repeats holds: all of them where the budget has room, else the most important
        ones that fit (`top`'s order: the winner, the runner-up, the best single change, fp32), so that the winner
        is run twice and the drift between runs is seen (on the H200 a whole round missed the budget by a few seconds
        and the answer stood on single runs); none once the winner's own repeat does not fit."""
        if self._stopped:
            return ()
        fits: list[Config] = []
        for c in top:
            if self.spent + self._round_cost((*fits, c)) > self.budget_s:
                if not fits:
                    break  # not even the answer's own run fits
                continue  # a cheaper one after it may
            fits.append(c)
        return tuple(fits)

    def _room_for(self, estimate: float, current: Config, cand: Config | None = None) -> float:
        """What a new point `cand` needs left in the budget: its own run (`estimate`) and then the confirmation of the
        best point so far (`_confirm_cost`), so that the answer is never left on single runs made one after another
        (on the H200 a last compile took the rounds' time: the answer stood on one disturbed run). Should `cand`
        become the answer, its own confirmation runs what fits, its cheapest parts first (`_round_points`), and the
        answer says what was not measured (`SearchResult.confirmed`). The first compile and cheap moves (eager, or a
        graph compiled already) keep back the core of the confirmation; a later new compile (another mode, another
        precision) runs only where the whole confirmation still fits after it; another compile mode of a graph compiled
        already, or another norm, keeps back the core only (`_compiled_variant`)."""
        core = cand is None or self._compile_cost is None or not self._new_graph(cand) or self._compiled_variant(cand)
        mine = self._confirm_cost(cand, core=core) if cand is not None else 0.0  # should it become the answer
        return estimate + max(self._if_it_fits(self._confirm_cost(current, core=core)), mine)

    def _if_it_fits(self, reserve: float) -> float:
        """`reserve` where what is left of the budget holds it, else 0: a confirmation that cannot run anyway (a tiny
        budget) is not kept back; the search explores instead, and its answer says it is unconfirmed."""
        return reserve if self.spent + reserve <= self.budget_s else 0.0

    def _out_of_time(self, reserve: float = 0.0) -> bool:
        return self._stopped or self.spent + reserve >= self.budget_s

    # ---- the search --------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._t0 != 0.0

    def run(self) -> SearchResult:
        """Baseline; every eager single change; the best eager values combined; each compile mode on the best
        point so far (cheapest set-up first); coordinate ascent around the best point while the budget lasts;
        interleaved repeats of the top candidates (the module docstring says why in this order)."""
        self._t0 = self.clock()
        r = self.result
        base = self._run("baseline", BASELINE, "the baseline: your model as written")
        singles = single_changes(BASELINE, self.workload)
        if not base.ok:
            r.stopped_by = "baseline failed"
            if BUDGET_ENDED in base.reason:  # the budget ended it: what it had no time for is said, not left out
                for c in singles:
                    if c.compile == "none" and not self._same_as_default(c):
                        avail = self.available(c) if self.available is not None else None
                        outcome = Outcome("not_run", reason=NOT_RUN) if avail is None or avail.ok else \
                            Outcome("unavailable", reason=avail.reason, fix=avail.fix)
                        r.trials.append(Trial(len(r.trials) + 1, "single", c, "single change", outcome, self.spent))
            r.spent_s = self.spent
            return r
        eager = [c for c in singles if c.compile == "none" and not self._same_as_default(c)]
        stopped_by = self._singles(eager)
        r.best_single = self._fastest([c for c in singles if self._ok(c)])
        current = self._fastest([BASELINE, *eager]) or BASELINE
        if stopped_by == "converged":  # the point to start from: where the two fastest are unsure, run both again
            runner = self._fastest([c for c in [BASELINE, *eager] if c != current])
            if runner is not None:
                self._confirm(runner, current)
                current = self._fastest([BASELINE, *eager]) or BASELINE
            current, stopped_by = self._combine(current, eager)
        if stopped_by == "converged":
            current, stopped_by = self._compile(current)
        if stopped_by == "converged":
            current, stopped_by = self._ascent(current, eager)
        r.best_single = self._fastest([c for c in singles if self._ok(c)])
        r.stopped_by = stopped_by
        self._confirm_answer(current)
        if self._stopped:  # stopped during the final rounds: the record says so, not how the ascent had ended
            r.stopped_by = "stopped"
        ranked = sorted((c for c in r.candidates if self._ok(c)), key=lambda c: self.result.timing(c).median_ms)  # type: ignore[union-attr]
        r.runner_up = next((c for c in ranked if c not in (BASELINE, r.winner)), None)
        r.spent_s = self.spent
        return r

    # ---- the answer's confirmation ------------------------------------------------------------------
    def _rank(self, config: Config) -> float | None:
        """A single change's fastest run (what `ablation` ranks torch's values of an axis by)."""
        return self._best_ms(config)

    def _failed(self, config: Config) -> bool:
        """It failed or was unavailable, and never ran ok; a run the budget ended is no failure of the point."""
        return self._tried(config) and not self._ok(config) and any(
            t.config == config and t.outcome.status != "not_run" and BUDGET_ENDED not in t.outcome.reason
            for t in self.result.trials)

    def _apex_pair(self, answer: Config) -> tuple[Config | None, Config | None]:
        """The Apex verdict's pair, like with like: the answer against itself without its Apex values
        (`ablation.without_apex`: FusedAdam against torch's fused AdamW); where it holds none, the answer with the Apex
        value whose single change ran fastest (Apex's norms, or FusedAdam in place of its optimizer) against the answer
        itself (on HF GPT-2 on an H200 the probe was weighed against another point, and FusedAdam read "1.03x faster"
        than bf16's default AdamW, as fused AdamW is). (None, None) where no Apex value ran here."""
        if answer.needs_apex:
            return answer, ablation.without_apex(answer)
        probes = [(ms, answer.with_(ax.name, v.name)) for ax in AXES for v in ax.values_for(self.workload)
                  if v.apex and (ms := self._rank(BASELINE.with_(ax.name, v.name))) is not None]
        probes = [(ms, c) for ms, c in probes if not self._failed(c)]
        if not probes:
            return None, None
        # one that ran already first: the rounds can weigh it (the Llama example's answer with Apex's norms, the
        # fastest single change, was a compile of its own that did not fit; with FusedAdam it had run in the ascent)
        return min(probes, key=lambda x: (x[1] not in self._cost, x[0]))[1], answer

    def _round_points(self, answer: Config) -> tuple[Config, ...]:
        """What a round holds, the most important first: the answer, itself without each of its values, the Apex
        verdict's point (the question this tool exists for), fp32, the best single change. Points that failed are left
        out."""
        apex, counterpart = self._apex_pair(answer)
        # the Apex-free counterpart first (the Apex verdict weighs it), then the cheapest to measure
        parts = sorted(ablation.points(answer), key=lambda c: (c != counterpart, self._estimate(c)))
        pts = [answer, *parts, apex, counterpart, BASELINE, self.result.best_single]
        return tuple(c for c in dict.fromkeys(pts) if c is not None and not self._failed(c))

    def _estimate(self, config: Config) -> float:
        """What a run of `config` is expected to cost: a rerun where it ran (`_rerun_cost`) or where a point that
        compiles the same graph ran (only the optimizer differs: inductor's caches serve it), else a compile's first
        run (`_compile_estimate`; before any compile ran, COMPILE_PRIOR_RUNS of its own eager runs) or an eager run
        (`_eager_cost`)."""
        if config in self._cost:
            return self._rerun_cost(config)
        eager = self._eager_cost(config)
        if config.compile == "none":
            return eager
        twin = next((c for c in self._cost if all(getattr(c, a) == getattr(config, a) for a in GRAPH_AXES)), None)
        if twin is not None:
            return self._rerun_cost(twin)
        first = self._compile_estimate(config.compile) if self._compile_cost is not None else \
            max(COMPILE_PRIOR_RUNS * eager, COMPILE_PRIOR_S.get(self.device, 0.0))
        return max(first, eager)

    def _eager_cost(self, config: Config) -> float:
        """An eager run of `config` (of its eager twin, for a compiled point): its own where it ran, else the costliest
        rerun of an eager point of its precision, else the costliest eager run. Why by precision: a run's cost is its
        steps', which the precision sets (on an H200 the Llama example's fp32 runs cost 15 s, its bf16 ones 4-5 s:
        estimated from fp32's, bf16 + fused AdamW and bf16 + compile were left out of a search that ended with 100 s of
        its budget unspent)."""
        bare = config.with_("compile", "none")
        if bare in self._cost:
            return self._rerun_cost(bare)
        eager = [c for c in self._cost if c.compile == "none"]
        same = [self._rerun_cost(c) for c in eager if c.precision == config.precision]
        return max(same or [self._rerun_cost(c) for c in eager] or [0.0])

    def _new_graph(self, config: Config) -> bool:
        """A compiled point whose graph nothing that ran has compiled: a whole compile (the answer without bf16, for
        a compiled bf16 answer: a minute on an H200 for a 124 M model)."""
        return config.compile != "none" and config not in self._cost and not any(
            all(getattr(c, a) == getattr(config, a) for a in GRAPH_AXES) for c in self._cost)

    def _compiled_variant(self, config: Config) -> bool:
        """A compiled point whose precision ran compiled already, in another mode or with other norms: a variant to try
        on the best point, which keeps back only the core of its confirmation, as the first compile does (on an H200 the
        GPT example's whole confirmation after its first compile, an fp32 compile included, left reduce-overhead out:
        the hand-written loop with it ran 5 % faster than the answer; Apex's norms wait for the compiled point,
        `_combine`, and are weighed there the same way)."""
        return config.compile != "none" and any(c.compile != "none" and c.precision == config.precision
                                                for c in self._cost)

    def _confirm_cost(self, answer: Config, ran: bool = True, core: bool = True) -> float:
        """What the core of `answer`'s confirmation costs: `final_rounds` rounds of the answer and of the points without
        each of its values that need no new compile (`ran`: the answer's own first run is paid already, as where it is
        a candidate whose run is estimated apart). Kept back from exploration from the start; the rest of a round
        (new compiles, fp32, the best single change, the Apex verdict's point) runs where the budget still has room,
        and what did not is said (`SearchResult.confirmed`). Why the core only: on an H200 the GPT example's whole
        confirmation after a compile (its fp32 compile included) would take 250 s of the 300, and keeping all of it
        back left every compile mode out: the answer, bf16 + fused AdamW, ran 1.8x slower than the hand-written
        loop. An answer's Apex-free counterpart (`_apex_pair`) is always in the core, a new compile or not: on HF GPT-2
        the answer without its Apex norms was left out, and the answer held them with no verdict on them."""
        counterpart = self._apex_pair(answer)[1] if answer.needs_apex else None
        parts = [c for c in self._round_points(answer)[1:] if not core or (
            c in ablation.points(answer) and not self._new_graph(c)) or c == counterpart]
        cost = self._planned_cost((answer, *parts))
        if ran and answer not in self._cost:
            cost -= self._estimate(answer) - self._again(answer)
        return cost

    def _again(self, config: Config) -> float:
        """A run of `config` after its first: a rerun (`_rerun_cost`), a compile served mostly by the caches."""
        if config in self._cost:
            return self._rerun_cost(config)
        return self._estimate(config) * (1 - RECOMPILE_SAVED if self._new_graph(config) else 1)

    def _planned_cost(self, pts: tuple[Config, ...]) -> float:
        """`final_rounds` rounds of `pts`: each point's next run, then its reruns; new compiles of one graph (only
        the optimizer differs) pay their compile once."""
        graphs: set[tuple[str, ...]] = set()
        total = 0.0
        for c in pts:
            graph = tuple(getattr(c, a) for a in GRAPH_AXES)
            shared = c not in self._cost and c.compile != "none" and graph in graphs
            total += (self._again(c) if shared else self._estimate(c)) + max(0, self.final_rounds - 1) * self._again(c)
            graphs.add(graph)
        return total

    def _plan(self, pts: tuple[Config, ...]) -> tuple[Config, ...]:
        """The points the rounds hold: in `pts`' order (the most important first), each whose runs in every round
        still fit the budget beside those chosen before it, so that the answer and its cheapest comparisons run in
        every round rather than everything in one (on the H200 a cold search's answer stood on one run)."""
        chosen: list[Config] = []
        left = self.budget_s - self.spent
        for c in pts:
            if self._planned_cost((*chosen, c)) <= left:
                chosen.append(c)
            elif not chosen:
                break  # not even the answer's own runs fit
        return tuple(chosen)

    def _rounds(self, pts: tuple[Config, ...]) -> int:
        """`final_rounds` interleaved rounds (ABBA) of `pts`, each holding what fits (`_fitting`); a run that other
        work disturbed is run again in its round where the budget allows. The number of rounds that held the answer
        (`pts[0]`)."""
        held = 0
        plan = self._plan(pts) if not self._stopped else ()
        for k in range(self.final_rounds):
            fits = self._fitting(plan)
            if len(fits) < 2:  # the answer alone compares with nothing
                break
            self._round += 1
            held += 1
            order = fits if k % 2 else tuple(reversed(fits))  # the ascent ended on the answer: start with the others
            for i, c in enumerate(order):
                if self._stopped:  # Ctrl-C: no new run (each would start a worker only to stop it)
                    return held
                if self.spent + self._estimate(c) > self.budget_s:
                    continue
                why = f"round {k + 1}/{self.final_rounds} of the answer beside its parts: {c.label}"
                outcome = self._run("repeat", c, why, round=self._round)
                # again, where the rest of the rounds still fit after it (the answer's own runs come first)
                rest = self._round_cost(order[i + 1:]) + (self.final_rounds - k - 1) * self._round_cost(fits)
                if outcome.ok and self._disturbed_last(c) and not self._stopped \
                        and self.spent + self._rerun_cost(c) + rest <= self.budget_s:
                    self._run("repeat", c, f"{why} (again: the last run was disturbed)", round=self._round)
        return held

    def _disturbed_last(self, config: Config) -> bool:
        marks = self.result.marks(config)
        return bool(marks) and marks[-1][1] is not None

    def _median(self, config: Config) -> float | None:
        t = self.result.timing(config)
        return t.median_ms if t is not None else None

    def _parts(self, answer: Config) -> list[Part]:
        return ablation.parts(answer, self.result.versus, self._median, self._failed, self.result.rests_on_disturbed,
                              memory=self.result.peak_memory)

    def _confirm_answer(self, current: Config) -> None:
        """The answer's confirmation (module docstring, step 5): the rounds, then each value against the answer
        without it (`ablation.parts`); a value that does not earn its place is taken out (`ablation.to_drop`) and the
        simpler point confirmed in its turn, while the budget lasts."""
        r = self.result
        answer = current if self._ok(current) else BASELINE
        dropped: list[Part] = []
        held = 0
        for _ in range(len(AXES) + 1):  # each pass takes one value out: at most one pass per axis, and the last
            r.candidates = self._round_points(answer)
            held = self._rounds(r.candidates)
            drop = ablation.to_drop(self._parts(answer))
            if drop is None:
                break
            self._say(f"search: {drop.axis}={drop.value} does not earn its place in {answer.label} "
                      f"({ablation.PART_WORDS[drop.verdict]}): {drop.without.label} is the answer")
            dropped.append(drop)
            answer = drop.without
        r.winner = answer
        r.dropped = tuple(dropped)
        r.ablation = tuple(self._parts(answer))
        r.apex_point, r.apex_counterpart = self._apex_pair(answer)
        if r.apex_point is not None and r.apex_counterpart is not None and \
                r.versus(r.apex_point, r.apex_counterpart) is None:  # its probe did not run: no Apex figure
            r.apex_point = r.apex_counterpart = None
        unmeasured = [p for p in r.ablation if not p.confirmed]
        ran = {t.config for t in r.trials if t.outcome.ok}
        if held < min(2, self.final_rounds) or len(r._by_round(answer)) < min(2, self.final_rounds):
            r.unconfirmed_why = (
                "stopped before the answer ran in interleaved rounds: its figures are single runs" if self._stopped
                else "nothing ran but fp32: there is nothing to weigh it against" if len(ran) < 2
                else "the budget ended before the answer ran in interleaved rounds beside the points it is weighed "
                     "against: its figures are single runs")
        elif unmeasured:
            r.unconfirmed_why = ("not measured without " + ", ".join(f"{p.axis}={p.value}" for p in unmeasured)
                                 + " before the budget ended")
        r.confirmed = not r.unconfirmed_why

    def _same_as_default(self, c: Config) -> bool:
        """One of its values is what its axis's default already does on this device (`axes.Value.default_on`:
        torch AdamW is foreach on CUDA), so it would measure a point already measured."""
        return bool(self.device) and any(self.device in axis(a).value(getattr(c, a)).default_on for a in c.changes())

    def _why_stopped(self) -> StopReason:
        return "stopped" if self._stopped else "budget"

    def _compile_room(self, current: Config) -> float:
        """Before any compile ran: what the first compile of the best point so far and the core of its confirmation
        need (0 once one ran, where none can run, or where it would not fit anyway). Eager exploration keeps it
        back: on an H200 the single changes of HF GPT-2 (15-20 s a run) took the budget, and the answer, bf16
        alone, ran 2.5x slower than bf16 + compile."""
        if self._compile_cost is not None:
            return 0.0
        modes = [v for v in axis("compile").values_for(self.workload) if v.name != "none"]
        if not modes:
            return 0.0
        cand = current.with_("compile", min(modes, key=lambda v: v.setup_cost).name)
        if self._tried(cand) or self.available is not None and not getattr(self.available(cand), "ok", True):
            return 0.0
        need = self._estimate(cand) + self._confirm_cost(cand)
        return need if self.spent + need <= self.budget_s else 0.0  # what cannot fit anyway is not kept back

    def _keep(self, current: Config) -> float:
        """What an eager exploring run leaves in the budget: the core of the confirmation of the best point so far, and
        the first compile's room (`_compile_room`)."""
        return self._if_it_fits(self._confirm_cost(current)) + self._compile_room(current)

    def _singles(self, eager: list[Config]) -> StopReason:
        """Every single change that needs no compile (each a short run), the precision's first, while they leave the
        first compile and the confirmation their room; those left are recorded as not run."""
        stopped: StopReason | None = None
        skipped = False
        for c in eager:
            avail = self.available(c) if self.available is not None else None
            best = self._fastest([BASELINE, *eager]) or BASELINE
            if stopped is None and not skipped and self._out_of_time(reserve=self._estimate(c) + self._keep(best)):
                if self._out_of_time(reserve=self._estimate(c) + self._if_it_fits(self._confirm_cost(best))):
                    stopped = self._why_stopped()
                else:
                    skipped = True  # what is left goes to the compile and the rounds
            if (stopped is not None or skipped) and (avail is None or avail.ok):  # recorded: it did not run, and why
                self.result.trials.append(Trial(len(self.result.trials) + 1, "single", c, "single change",
                                                Outcome("not_run", reason=NOT_RUN), self.spent))
                continue  # out of time; an unavailable point costs nothing and is still recorded, with its reason
            self._run("single", c, f"single change: {', '.join(f'{a}={getattr(c, a)}' for a in c.changes())}", avail,
                      reserve=self._confirm_cost(best))
        return stopped or "converged"

    def _helped(self, c: Config) -> bool:
        """Its median is below the baseline's, by any amount: a fused optimizer's 1 % on an fp32 step is within
        noise there and worth 4 % once bf16 has made the step four times shorter, so adding it to the fastest eager
        point (`_combine`: one run, kept where that point's median comes out lower) is where such a value is
        tested."""
        return self._lower(c, BASELINE)

    def _may_compile(self, current: Config) -> bool:
        """A compile mode can run on `current` here (its availability; every mode where none is known)."""
        modes = [v.name for v in axis("compile").values_for(self.workload) if v.name != "none"]
        return any(self.available is None or getattr(self.available(current.with_("compile", m)), "ok", True)
                   for m in modes)

    def _combine(self, current: Config, eager: list[Config]) -> tuple[Config, StopReason]:
        """From the fastest eager point, each other axis's best single value (where its median beat the
        baseline's) added one at a time, the most helpful first, and kept where the point's median comes out
        lower. One at a time, because a value that is neutral alone can hurt in company (Apex's fused norms are
        as fast as torch's at fp32 and a third slower under bf16 autocast on the GPT example on an H200): all of
        them in one point would lose the others' gain with it. Where a compile can run, an Apex value waits for the
        ascent on the compiled point: it splits the compiled graph from torch's (a compile of its own for the answer
        and one for its Apex-free counterpart), and inductor fuses torch's own norms (on an H200 the Llama example's
        Apex norms ran 3.4 % faster eager, within noise compiled and 0.1 % apart in reduce-overhead by hand, and their
        compiles took the room of the CUDA-graph mode that was worth 7 %)."""
        additions = []
        for ax in AXES:
            if getattr(current, ax.name) != ax.default.name:
                continue
            best = self._torch_unless_apex_wins([c for c in eager if c.changes() == (ax.name,) and self._helped(c)])
            if best is not None and best.needs_apex and self._may_compile(current):
                continue  # left to the ascent, on the compiled point (the docstring says why)
            if best is not None:
                additions.append((self.result.timing(best).median_ms, ax.name, getattr(best, ax.name)))  # type: ignore[union-attr]
        for _, name, value in sorted(additions):
            cand = current.with_(name, value)
            if not self._tried(cand):
                if self._out_of_time(reserve=self._room_for(self._estimate(cand), current, cand)
                                     + self._compile_room(current)):
                    if self._stopped or self._out_of_time(reserve=self._room_for(self._estimate(cand), current, cand)):
                        return current, self._why_stopped()
                    return current, "converged"  # what is left goes to the compile
                self._run("ascent", cand, f"from {current.label}: {name}={value} (its single change beat fp32)",
                          reserve=self._confirm_cost(current))
                if self._ok(cand) and not self._lower(cand, current):
                    self._confirm(cand, current)
            # an Apex value (a dependency built from source) joins only where it is faster beyond noise: on HF GPT-2 on
            # an H200 Apex's norms joined bf16 + fused AdamW on a 0.3 % lower median, split the compiled graph from
            # torch's, and the answer's Apex part could not be measured before the budget ended
            apex = bool(axis(name).value(value).apex)
            if self._ok(cand) and (self._faster(cand, current) if apex else self._lower(cand, current)):
                self._say(f"search: {cand.label} is faster than {current.label}: moving there")
                current = cand
        return current, "converged"

    def _unsure(self, a: Config, b: Config) -> bool:
        """`a` ran once, and the noise rule with the drift between runs (unknown until something ran twice: then
        every interval is doubled) cannot tell it from `b`: on a host-bound model one such run says nothing (on the
        H200 the ViT example's bf16 + fused AdamW ran 30.9 ms against bf16's 25.1 in the search, and 22.7 against
        bf16 + fused + compile's 18.3 side by side in one process right after)."""
        if sum(1 for t in self.result.trials if t.config == a and t.outcome.ok) != 1:
            return False
        c = self.result.versus(a, b)
        return c is not None and c.verdict == "within_noise"

    def _confirm(self, cand: Config, current: Config) -> None:
        """Where `cand` came out no better than `current` but the pair is unsure (`_unsure`), run `cand` again and
        then `current`, right after one another, where the budget leaves room for the two runs and a round of repeats.
        The caller then decides on every run: an eager move on each point's fastest run (`_lower`), a compile by the
        noise rule on the pooled runs (`_faster`)."""
        if not self._unsure(cand, current):
            return
        cost = self._rerun_cost(cand) + self._rerun_cost(current)
        reserve = self._confirm_cost(current)
        if self._out_of_time(reserve=cost + reserve + self._compile_room(current)):
            return
        why = f"confirming {cand.label} against {current.label}: one run each was within the drift between runs"
        self._run("ascent", cand, why, reserve=reserve)
        if self._ok(cand) and not self._stopped:
            self._run("ascent", current, why, reserve=reserve)

    def _torch_unless_apex_wins(self, configs: list[Config]) -> Config | None:
        """The fastest of `configs`, but a torch-only one where the fastest needs Apex and is not faster than it by the
        noise rule: the advice's own rule (`choice.choose`), applied to what joins a combination. On the H200 Apex's
        FusedAdam beat torch's fused AdamW by 0.2 % on the ViT example at fp32, and every combination after it carried
        Apex."""
        best = self._fastest(configs)
        if best is None or not best.needs_apex:
            return best
        torch_best = self._fastest([c for c in configs if not c.needs_apex])
        return torch_best if torch_best is not None and not self._faster(best, torch_best) else best

    def _lower(self, a: Config, b: Config) -> bool:
        ma, mb = self._best_ms(a), self._best_ms(b)
        return ma is not None and mb is not None and ma < mb

    def _compile(self, current: Config) -> tuple[Config, StopReason]:
        """Each compile mode on the best point so far, cheapest set-up first; a mode whose set-up is estimated
        (from the cheapest compile's measured cost) not to fit is left for the budget to say."""
        base = current
        for v in sorted((v for v in axis("compile").values_for(self.workload) if v.name != "none"),
                       key=lambda v: v.setup_cost):
            cand = base.with_("compile", v.name)
            if self._tried(cand):
                continue
            estimate = self._estimate(cand)
            if self._out_of_time(reserve=self._room_for(estimate, current, cand)):
                if self._stopped:
                    return current, "stopped"
                self._left_out(cand, estimate)
                continue
            outcome = self._run("ascent", cand, f"from {base.label}: compile={v.name}",
                                reserve=self._confirm_cost(current))
            if self._compile_cost is None and outcome.ok:
                self._compile_cost = self._cost.get(cand)
            elif self._compile_cost is None and BUDGET_ENDED in outcome.reason:  # ended before its end: at least that
                self._compile_cost = self._cost.get(cand)
            if self._ok(cand) and not self._faster(cand, current):
                self._confirm(cand, current)
            if self._ok(cand) and self._faster(cand, current):
                self._say(f"search: {cand.label} is faster than {current.label}: moving there")
                current = cand
        return current, "converged"

    def _left_out(self, cand: Config, estimate: float) -> None:
        """A compile whose set-up would not fit the budget: said once, and recorded (`not_tried`) where it could run
        here at all."""
        if cand in self.result.not_tried or (self.available is not None
                                             and not getattr(self.available(cand), "ok", True)):
            return
        self.result.not_tried[cand] = estimate
        self._say(f"search: {cand.label} left out: its set-up (about {estimate:.0f} s) does not fit the budget")

    def _compile_estimate(self, mode: str) -> float:
        """A compile mode's run, estimated from the first compile's measured cost scaled by the modes' set-up costs
        (`axes.Value.setup_cost`); 0 before any compile ran."""
        return (self._compile_cost or 0.0) * axis("compile").value(mode).setup_cost / \
            axis("compile").value("default").setup_cost

    def _ascent(self, current: Config, eager: list[Config]) -> tuple[Config, StopReason]:
        """Coordinate ascent: from the best point, each other value of each axis not tried yet (those that need no new
        compile first, then values whose single change helped most; values whose single change failed are not
        tried); a move only when
        faster by the noise rule; ends when a pass over every axis makes no move."""
        failed = {(a, getattr(c, a)) for c in eager for a in c.changes() if self._failed(c)}

        def rank(ax_name: str, value: str) -> float:
            single = BASELINE.with_(ax_name, value)
            t = self.result.timing(single)
            return t.median_ms if t is not None else float("inf")

        moved, short = True, False
        while moved:
            moved = False
            cands = [current.with_(ax.name, v.name) for ax in AXES for v in ax.values_for(self.workload)
                     if v.name != getattr(current, ax.name) and (ax.name, v.name) not in failed]
            cands = [c for c in cands if not self._tried(c) and not self._same_as_default(c)]
            # what needs no new compile first (a rerun's cost, against a compile's minute: on an H200 the Llama
            # example's search compiled Apex's norms, the best single change, for 40 s, and fused AdamW on the compiled
            # point, 5 s and worth 11 %, no longer fit); then the values whose single change helped most; the cheapest
            cands.sort(key=lambda c: (self._new_graph(c), min(rank(a, getattr(c, a)) for a in AXIS_NAMES
                                                              if getattr(c, a) != getattr(current, a)),
                                      self._estimate(c)))
            for cand in cands:
                if self._stopped:
                    return current, "stopped"
                estimate = self._estimate(cand)
                if self._out_of_time(reserve=self._room_for(estimate, current, cand)):
                    short = True  # a cheaper neighbour may still fit (a graph compiled already, an eager one)
                    if self._new_graph(cand):
                        self._left_out(cand, estimate)
                    continue
                changed = next(a for a in AXIS_NAMES if getattr(cand, a) != getattr(current, a))
                self._run("ascent", cand, f"from {current.label}: {changed}={getattr(cand, changed)}",
                          reserve=self._confirm_cost(current))
                if self._ok(cand) and self._faster(cand, current):
                    self._say(f"search: {cand.label} is faster than {current.label}: moving there")
                    current, moved = cand, True
                    break
        return current, "budget" if short else "converged"
