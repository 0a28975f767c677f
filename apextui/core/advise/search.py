"""The search for the fastest configuration of the user's model that passes the correctness check.

How, and why in this order:

1. **The recipe first** (`recipe.py`): the model as written and the practitioner's recipe for this device run side by
   side in interleaved rounds (`race.py`). The faster beyond noise is where the search starts; the answer is never
   slower than it beyond noise, since every later move must beat the point it leaves. A recipe that fails to run or
   fails the correctness check loses a part (its compile first) until it runs, and the answer says which and why.
2. **Moves on side-by-side evidence only** (`moves.py`, `race.py`): from the best point so far, every point one
   change away (a value added, swapped or removed) is a candidate; a few at a time race beside the best point in
   interleaved rounds, and the search moves to the best of those faster beyond noise (or to one as fast and simpler:
   fewer changes, torch over Apex and Liger). It never moves back to a point it left. Values are judged where they
   are used: from a compiled recipe every kernel value is tried on the compiled point, and a value that helps eager
   and hurts compiled is a removal that wins.
3. **Costs that learn** (`costs.py`): each run is priced from what runs cost here (a first compile, a new graph through
   warm caches, a recompile), a race is started only where it fits what is left of the budget, and a run that
   overstays its estimate and a grace is stopped with that reason (`run_until`).
4. It ends where no candidate is left (converged) or none fits (the budget); then, where the answer never ran beside
   fp32 along a chain of races, one last race gives its figure against fp32.

No torch here: `measure` (a point -> an `Outcome`) is the only contact with the model, so the logic is tested on
recorded GPU timing tables replayed on a fake clock (`replay.py`, `tests/test_search_replay.py`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from ..config.point import BASELINE, Config
from . import ablation
from .costs import CostModel
from .moves import described, kind, neighbours, order
from .race import ROUNDS, Race, decide
from .recipe import recipe, without_part
from .search_record import BUDGET_ENDED, DEFAULT_BUDGET_S, METHOD, NOT_RUN, SEARCH_STEPS, STOP_WORDS, Outcome, \
    Phase, SearchResult, StopReason, Trial

__all__ = ["BUDGET_ENDED", "DEFAULT_BUDGET_S", "METHOD", "NOT_RUN", "SEARCH_STEPS", "STOP_WORDS", "Outcome", "Search",
           "SearchResult", "Trial"]
BATCH = 4  # candidates a race holds beside the best point (its runs in each round are shared among them)


class Measure(Protocol):
    """Runs one point once: `why` for the progress line, `round` the round of interleaved repeats it is part of."""

    def __call__(self, config: Config, why: str, round: int | None = None) -> Outcome: ...


Available = Callable[[Config], Any]  # -> an object with ok, reason, fix



def room_words(left_s: float) -> str:
    """What is left of the budget, in words: a run may outlast the budget by its grace, and a search that ended so
    printed "none fits the -11 s left of the budget" on a busy CPU."""
    return f"the {left_s:.0f} s left of the budget" if left_s >= 0.5 else "the budget, which is spent"

class Search:
    """Runs the search (module docstring); `stop()` ends it after the current run."""

    def __init__(self, measure: Measure, budget_s: float, *, available: Available | None = None,
                 clock: Callable[[], float] = time.monotonic, on_progress: Callable[[str], None] | None = None,
                 workload: str = "model", device: str = "", batch: int = BATCH) -> None:
        self.measure, self.budget_s, self.clock = measure, float(budget_s), clock
        self.available, self.on_progress = available, on_progress
        self.workload, self.device, self.batch = workload, device, batch
        self.costs = CostModel(device or "cuda")
        self.result = SearchResult(budget_s=float(budget_s))
        self.run_until: float = float(budget_s)  # when the run in flight must end, on the search's clock
        self._t0: float | None = None
        self._stopped = False
        self._round = 0
        self._avail: dict[Config, Any] = {}
        self._raced: set[tuple[Config, Config]] = set()  # (the best point then, a candidate raced beside it)
        self._left: set[Config] = set()  # points the search moved away from: never moved back to

    # ---- control and clock ------------------------------------------------------------------------
    def stop(self) -> None:
        self._stopped = True

    @property
    def started(self) -> bool:
        return self._t0 is not None

    @property
    def spent(self) -> float:
        return self.clock() - self._t0 if self._t0 is not None else 0.0

    def _say(self, line: str) -> None:
        if self.on_progress is not None:
            self.on_progress(line)

    def _new_round(self) -> int:
        self._round += 1
        return self._round

    def _availability(self, config: Config) -> Any:
        if config not in self._avail:
            self._avail[config] = self.available(config) if self.available is not None else None
        return self._avail[config]

    def _usable(self, config: Config) -> bool:
        a = self._availability(config)
        return (a is None or getattr(a, "ok", True)) and not self._failed(config)

    def _failed(self, config: Config) -> bool:
        return any(t.config == config and t.outcome.status in ("failed", "check_failed", "unavailable")
                   for t in self.result.trials) and self.result.timing(config) is None

    def _fits(self, *configs: Config) -> bool:
        """A run of each of `configs` still fits the budget (and no stop was asked for)."""
        return not self._stopped and self.spent + sum(self.costs.estimate(c) for c in configs) <= self.budget_s

    # ---- one run ----------------------------------------------------------------------------------
    def _run(self, phase: Phase, config: Config, why: str, round: int | None = None) -> Outcome:
        index = len(self.result.trials) + 1
        a = self._availability(config)
        if a is not None and not getattr(a, "ok", True):
            outcome = Outcome("unavailable", reason=a.reason, fix=getattr(a, "fix", ""))
            self.result.trials.append(Trial(index, phase, config, why, outcome, self.spent, round))
            self._say(f"search [{index}] {config.label}: unavailable: {a.reason}")
            return outcome
        estimate = self.costs.estimate(config)
        self.run_until = min(self.budget_s, self.spent + self.costs.deadline_s(config))
        own_deadline = self.run_until < self.budget_s
        self._say(f"search [{index}] {config.label}: {why} ({self.spent:.0f}/{self.budget_s:.0f} s)")
        t = self.clock()
        outcome = self.measure(config, why, round=round)
        self.costs.record(config, max(0.0, self.clock() - t - outcome.start_s), outcome.compile_s, outcome.ok)
        if not outcome.ok and own_deadline and BUDGET_ENDED in outcome.reason:
            outcome = Outcome(outcome.status, outcome.timing, f"stopped: it overstayed its estimate (about "
                              f"{estimate:.0f} s) and a grace; {outcome.reason}", outcome.fix, outcome.check,
                              outcome.peak_memory_bytes, outcome.result, outcome.competed, outcome.start_s,
                              outcome.compile_s)
        self.result.trials.append(Trial(index, phase, config, why, outcome, self.spent, round))
        if outcome.ok:
            self._say(f"search [{index}] {config.label}: {outcome.timing.median_ms:.4g} ms/step")  # type: ignore[union-attr]
        else:
            self._say(f"search [{index}] {config.label}: excluded ({outcome.status}): {outcome.reason}")
        return outcome

    def _race(self, incumbent: Config, cands: list[Config], why: str,
              phases: dict[Config, Phase] | None = None) -> list[Config]:
        """`cands` beside `incumbent` (`race.Race`); a removal runs every round, so that the answer's part it
        measures has its side-by-side figure."""
        first = len(self.result.trials)
        removals = frozenset(c for c in cands if kind(c, incumbent) == "remove")
        out = Race(self.result, incumbent, cands, self._run, self._fits, self._new_round, lambda: self._stopped,
                   why, phases, removals).go()
        ran = {t.config for t in self.result.trials[first:]}
        self._raced.update((incumbent, c) for c in cands if c in ran)  # one the budget left out may come again
        return out

    # ---- the search -------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        self._t0 = self.clock()
        r = self.result
        rec = recipe(self.device or "cuda", self.workload, self._availability)
        r.recipe, r.recipe_left_out = rec.point, rec.left_out
        self._say(f"search: the recipe for this device: {rec.words()}")
        current = self._start(rec.point)
        if current is None:
            r.stopped_by = "stopped" if self._stopped else "baseline failed"
            r.spent_s = self.spent
            return r
        current, stopped_by = self._explore(current)
        self._figure_against_fp32(current)
        r.stopped_by = "stopped" if self._stopped else stopped_by
        self._conclude(current)
        r.spent_s = self.spent
        return r

    def _start(self, start: Config) -> Config | None:
        """The model as written beside the recipe (less each part that fails, said so); the faster beyond noise,
        None where the baseline could not run."""
        r = self.result
        tried = [p for p in (start, *without_part(start)) if p != BASELINE]
        for point in tried:
            if not self._usable(point):
                continue
            phases: dict[Config, Phase] = {BASELINE: "baseline", point: "recipe"}
            finalists = self._race(BASELINE, [point], "the recipe beside your model as written", phases)
            if self.result.timing(BASELINE) is None:
                break
            if finalists:
                if point != start:
                    self._say(f"search: the recipe runs as {point.label}: {start.label} could not")
                    r.recipe_left_out += tuple((f"{a}={getattr(start, a).name}", self._why_failed(start))
                                               for a in start.changes() if getattr(point, a) != getattr(start, a))
                r.recipe = point
                moved, why = decide(r, BASELINE, [point])
                if moved is not None:
                    r.moves.append((BASELINE, point, why))
                    self._left.add(BASELINE)
                    return point
                self._say(f"search: the recipe {point.label} is not faster than your model as written ({why})")
                return BASELINE
            if self._stopped or not self._failed(point):
                break  # the budget or a stop ended the race, not the recipe
        if not any(t.config == BASELINE for t in r.trials) and not self._stopped:
            self._run("baseline", BASELINE, "the baseline: your model as written")  # its record says why not
        return BASELINE if self.result.timing(BASELINE) is not None else None

    def _why_failed(self, config: Config) -> str:
        return next((t.outcome.reason for t in reversed(self.result.trials)
                     if t.config == config and not t.outcome.ok), "it failed")

    def _explore(self, current: Config) -> tuple[Config, StopReason]:
        """Race the candidates one change away from `current`, a few at a time, moving where one wins; the point it
        ended on and why it ended."""
        while not self._stopped:
            near = [c for c in neighbours(current, self.workload) if c not in self._left]
            for c in near:  # each unavailable one recorded once, with why (it costs nothing)
                if not self._usable(c) and not any(t.config == c for t in self.result.trials):
                    self._run("race", c, f"a move from {current.label}")
            cands = [c for c in near if (current, c) not in self._raced and self._usable(c)]
            if not cands:
                return current, "converged"
            batch: list[Config] = []
            for c in order(cands, current, self.costs):
                need = self.costs.race_s([*batch, c, current], ROUNDS)
                if self.spent + need <= self.budget_s:
                    batch.append(c)
                if len(batch) == self.batch:
                    break
            if not batch:
                for c in cands:  # what the budget left untried, with the cost it was priced at
                    if not self.costs.ran(c):
                        self.result.not_tried.setdefault(c, self.costs.estimate(c))
                self._say(f"search: {len(cands)} candidate(s) left, none fits {room_words(self.budget_s - self.spent)}")
                return current, "budget"
            self._say(f"search: from {current.label}: " + ", ".join(described(c, current) for c in batch))
            finalists = self._race(current, batch, f"a move from {current.label}")
            moved, why = decide(self.result, current, finalists)
            if moved is not None:
                self._say(f"search: moving to {moved.label}: {why}")
                self.result.moves.append((current, moved, why))
                self._left.add(current)
                current = moved
        return current, "stopped"

    def _figure_against_fp32(self, answer: Config) -> None:
        """One race of the answer beside fp32 where no chain of races joins them yet and it fits."""
        if answer == BASELINE or self._stopped or self.result.chained(answer, BASELINE) is not None:
            return
        if self.spent + self.costs.race_s([answer, BASELINE], ROUNDS) <= self.budget_s:
            self._race(answer, [BASELINE], "the answer's figure against fp32", {BASELINE: "confirm", answer: "confirm"})

    def _conclude(self, answer: Config) -> None:
        """The answer, what each of its parts buys (the answer against itself without it, where they raced), and
        whether it stands on side-by-side runs."""
        r = self.result
        ok = [c for c in dict.fromkeys(t.config for t in r.trials) if r.timing(c) is not None]
        r.winner = answer if r.timing(answer) is not None else (BASELINE if r.timing(BASELINE) else None)
        singles = [c for c in ok if len(c.changes()) == 1]
        r.best_single = min(singles, key=lambda c: r.timing(c).median_ms) if singles else None  # type: ignore[union-attr]
        r.candidates = tuple(ok)
        ranked = sorted((c for c in ok if c not in (BASELINE, r.winner)), key=lambda c: r.timing(c).median_ms)  # type: ignore[union-attr]
        r.runner_up = ranked[0] if ranked else None
        if r.winner is None:
            return
        r.ablation = tuple(ablation.parts(r.winner, r.paired, self._median, self._failed, r.rests_on_disturbed,
                                          memory=r.peak_memory))
        r.apex_point, r.apex_counterpart = self._apex_pair(r.winner)
        rounds = len(r._by_round(r.winner))
        if rounds < ROUNDS:
            r.unconfirmed_why = ("stopped before the answer ran in interleaved rounds: its figures are single runs"
                                 if self._stopped else "nothing ran but fp32: there is nothing to weigh it against"
                                 if len(ok) < 2 else "the budget ended before the answer ran in interleaved rounds")
        elif any(not p.confirmed for p in r.ablation):
            r.unconfirmed_why = "not measured without " + ", ".join(
                f"{p.axis}={p.value}" for p in r.ablation if not p.confirmed) + (
                " before it was stopped" if self._stopped else " before the budget ended")
        r.confirmed = not r.unconfirmed_why

    def _median(self, config: Config) -> float | None:
        t = self.result.timing(config)
        return t.median_ms if t is not None else None

    def _apex_pair(self, answer: Config) -> tuple[Config | None, Config | None]:
        """The Apex verdict's pair, like with like: the answer against itself without its Apex values, or an Apex
        point that raced beside the answer against the answer; (None, None) where neither ran side by side."""
        r = self.result
        if answer.needs_apex:
            counterpart = ablation.without_apex(answer)
            return (answer, counterpart) if r.paired(answer, counterpart) is not None else (None, None)
        raced = [c for c in r.candidates if c.needs_apex and r.paired(c, answer) is not None]
        return (min(raced, key=lambda c: r.timing(c).median_ms), answer) if raced else (None, None)  # type: ignore[union-attr]

