"""The search's record: each run it made (`Trial`, with its `Outcome`), and what follows from them (`SearchResult`):
each point's timing from its kept runs, comparisons by the one noise rule (round by round where two points ran side
by side), the answer, its parts and what was left out. The strategy that makes the runs is `search.Search`'s; this
module only reads them, so the answer, the ablation, the JSON and the TUI read one record."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from ..config.point import BASELINE, Config
from ..measure.compare import Comparison, Disturbance, Drift, Timing, compare, compare_paired, disturbances, fields, \
    kept_runs, ms, timing_from_runs, unsure
from ..measure.details import CorrectnessCheck
from .ablation import Part

TrialStatus = Literal["ok", "failed", "check_failed", "unavailable", "not_run"]
# what a run was for: the model as written, the practitioner's recipe (the floor, `recipe.py`), a candidate move's
# side-by-side race against the best point so far (`race.py`), the answer beside fp32 for its figure
Phase = Literal["baseline", "recipe", "race", "confirm"]
NOT_RUN = "not run: the budget ended first"
BUDGET_ENDED = "ended by the budget"  # in the reason of a run the budget's deadline ended (`run.RunWatch`)
DEFAULT_BUDGET_S = {"cuda": 300.0, "cpu": 60.0}
# steps a search's run makes unless --steps says otherwise: fewer than a shipped preset's advice (100 on CUDA),
# so that more points fit the budget; a GPU-bound model's 40 measured steps give a tight median already
SEARCH_STEPS = {"cuda": 50, "cpu": 30}
METHOD = ("the model as written beside the practitioner's recipe (on CUDA bf16 autocast + fused AdamW + "
          "torch.compile, channels_last for convolutions; on CPU fused AdamW), in interleaved rounds; from the faster, "
          "each point one change away (a value added, swapped or removed) runs beside the best point so far in "
          "interleaved rounds, and the search moves only where it is faster by the noise rule (a tie goes to fewer "
          "changes and to torch over Apex and Liger); it ends where no neighbour is faster")
StopReason = Literal["converged", "budget", "stopped", "baseline failed"]
# what ended the search, in words (`answer.answer_lines` says it in the search's header line)
STOP_WORDS: Mapping[str, str] = {
    "converged": "converged: no point one change away from the answer was faster beside it",
    "budget": "ended by its budget with points one change away from the answer still to try",
    "stopped": "stopped before its end",
    "baseline failed": "the fp32 baseline failed: nothing to compare with",
}
MAX_CHAIN = 4  # the longest chain of side-by-side comparisons a speed-up is carried along (`SearchResult.chained`)


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
                "median_ms": ms(o.timing.median_ms) if o.timing else None,
                "median_low_ms": ms(o.timing.low_ms) if o.timing else None,
                "median_high_ms": ms(o.timing.high_ms) if o.timing else None,
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
    recipe: Config | None = None  # the practitioner's recipe the search started from (`recipe.py`)
    recipe_left_out: tuple[tuple[str, str], ...] = ()  # its parts that could not run here, with why
    # each move the search made: (from, to, why) in order; the answer is the last move's `to`
    moves: list[tuple[Config, Config, str]] = field(default_factory=list)
    # a CPU search: the most cores other work was seen to use while it ran, and the cores (`cpu_share`)
    cpu_others: tuple[float | None, int] | None = None

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

    def decided(self) -> bool:
        """Some pair of points ran side by side and the noise rule told them apart, on runs other work left alone."""
        ran = [c for c in dict.fromkeys(t.config for t in self.trials if t.round is not None) if self.timing(c)]
        for i, a in enumerate(ran):
            for b in ran[i + 1:]:
                c = self.paired(a, b)
                if c is not None and not c.within_noise:
                    return True
        return False

    def cpu_busy(self) -> bool:
        """A CPU search during which other work used a quarter of the cores or more (at least half a core: the
        monitor's own rule, `contention.CPU_BUSY_SHARE`): every comparison on such a box moved with the other work
        (beside two burners on a 2-core box three searches answered fused AdamW, fused AdamW and compile, each
        'beyond noise'), so none is an answer."""
        from ..monitor.contention import CPU_BUSY_MIN_CORES, CPU_BUSY_SHARE

        others, cores = self.cpu_others if self.cpu_others is not None else (None, 0)
        return others is not None and others >= max(CPU_BUSY_MIN_CORES, CPU_BUSY_SHARE * cores)

    def unreliable_why(self) -> str:
        """Where other work competed with the runs and no comparison was told apart beyond noise, or a CPU search ran
        on a busy machine (`cpu_busy`): the one line that says so (how much of the CPU other work used); ""
        otherwise."""
        if self.cpu_busy():
            others, cores = self.cpu_others  # type: ignore[misc]
            return (f"no reliable answer: other work used {others:.1f} of {cores} CPU cores while measuring; run "
                    "again when it is quiet")
        if not self.competed or self.decided():
            return ""
        others, cores = [], None
        for t in self.trials:
            summary = getattr(t.outcome.result, "summary", None)
            contention = getattr(summary, "contention", None)
            if contention is not None and contention.other_cpu_cores_mean is not None:
                others.append(contention.other_cpu_cores_mean)
                cores = contention.cores or cores
        used = (f"other work used {max(others):.1f} of {cores} CPU cores while measuring" if others and cores
                else "other work competed with the runs")
        return f"no reliable answer: {used}; run again when it is quiet"

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

    def _by_round_with_wide(self, config: Config) -> dict[int, Timing]:
        """`_by_round` with the runs left out only for their wide spread (not for other work that competed)."""
        return {t.round: t.outcome.timing for t, m in self.marks(config)  # type: ignore[misc]
                if t.round is not None and m != "busy"}

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
        if c.basis != "paired":
            # A run is called wide against its configuration's later runs, so a pair that raced in two clean rounds
            # can lose one when its point runs again (HF GPT-2's recipe on an H100: the run after its compile
            # spread 27.4-31.1 ms, its later runs 27.3-27.4): the wide round still ran side by side, and its
            # interval widens the rounds' hull rather than hiding in it.
            c = compare_paired(ta, tb, self._by_round_with_wide(a), self._by_round_with_wide(b)) or c
        return unsure(c) if self.rests_on_disturbed(a) or self.rests_on_disturbed(b) else c

    def paired(self, a: Config, b: Config) -> Comparison | None:
        """`a` against `b` where the two ran side by side in enough interleaved rounds, else None."""
        c = self.versus(a, b, with_drift=False)
        return c if c is not None and c.basis == "paired" else None

    def chained(self, a: Config | None, b: Config | None) -> Comparison | None:
        """`a` against `b` carried along side-by-side comparisons: directly where they ran in the same rounds, else
        through the fewest points between (the answer against the recipe, the recipe against fp32), the speed-ups
        multiplied and the intervals' ends too (every link's worst case at once: wider than any one link's). Why: a
        search that moved from the recipe never ran its answer beside fp32, and its figure against fp32 is still
        side by side at every step; None where no chain of at most `MAX_CHAIN` links joins them."""
        if a is None or b is None:
            return None
        direct = self.paired(a, b)
        if direct is not None or a == b:
            return direct
        ran = [c for c in dict.fromkeys(t.config for t in self.trials if t.round is not None) if self.timing(c)]
        came: dict[Config, tuple[Config, Comparison] | None] = {a: None}
        todo = deque([(a, 0)])
        while todo:
            here, depth = todo.popleft()
            if here == b or depth >= MAX_CHAIN:
                continue
            for nxt in ran:
                if nxt in came:
                    continue
                link = self.paired(here, nxt)
                if link is not None:
                    came[nxt] = (here, link)
                    todo.append((nxt, depth + 1))
        if b not in came:
            return None
        speedup, low, high, node, rests = 1.0, 1.0, 1.0, b, False
        while came[node] is not None:
            prev, link = came[node]  # type: ignore[misc]
            speedup, low, high = speedup * link.speedup, low * (link.low or link.speedup), high * (link.high or
                                                                                                    link.speedup)
            rests = rests or self.rests_on_disturbed(node)
            node = prev
        c = Comparison.of(speedup, low, high, basis="paired")
        return unsure(c) if rests or self.rests_on_disturbed(a) else c

    def shown(self, a: Config | None, b: Config | None) -> Comparison | None:
        """`a` against `b` as the answer reports it: measured side by side (directly or along a chain of side-by-side
        comparisons, `chained`), else never called faster or slower (its figures are then single runs made minutes
        apart: `unsure`)."""
        c = self.chained(a, b)
        if c is not None:
            return c
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
                "config": t.config.as_dict(), "median_ms": ms(timing.median_ms) if timing else None,
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
            "recipe": self.recipe.label if self.recipe else None,
            "recipe_config": self.recipe.as_dict() if self.recipe else None,
            "recipe_left_out": [{"part": part, "reason": why} for part, why in self.recipe_left_out],
            "moves": [{"from": a.label, "to": b.label, "why": why} for a, b, why in self.moves],
            "unreliable_why": self.unreliable_why() or None,
        }


