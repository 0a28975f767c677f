"""The side-by-side race: the best point so far and a few candidates in interleaved rounds, and the one decision
the search moves on.

Why side by side: runs made minutes apart drift by more than the differences a search must tell apart (a host-bound
step moved 1.8x between runs on an H200), and a move on one run each took Liger's norms into an answer on 0.1 %
(HF GPT-2 on an H100: 64.75 against 64.82 ms), where under compile they cost 1.9x. Here every candidate runs in the
same rounds as the best point (ABBA order: I C1 C2, C2 C1 I), and each is compared with it round by round
(`compare.compare_paired`): a move needs a gain beyond noise (at least `NOISE_FLOOR` and an interval that excludes 1).

Racing, as F-Race does, spends runs where they decide: after the first round a candidate slower by more than
`DROP_MARGIN` is dropped (it cannot win), and further rounds run only for a candidate still undecided (faster by more
than the floor, its interval still holding 1, or left without two comparable rounds by runs other work disturbed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config.point import Config
from ..measure.compare import NOISE_FLOOR, Comparison, compare, format_speedup
from .moves import complexity, simpler
from .search_record import Outcome, Phase, SearchResult

ROUNDS = 2  # rounds every race holds (the noise rule's paired comparison needs two)
MAX_ROUNDS = 4  # with more for a candidate still undecided after them (`Race._undecided`)
DROP_MARGIN = 0.10  # after one round a candidate slower than this beyond noise is dropped

WHAT: dict[str, str] = {"baseline": "the baseline: your model as written",
                        "recipe": "the practitioner's recipe, beside your model as written"}
RunFn = Callable[[Phase, Config, str, int], Outcome]  # (phase, point, why, round) -> its outcome
FitsFn = Callable[..., bool]  # whether a run of each of these points still fits the budget


@dataclass
class Race:
    """`incumbent` against `candidates` (the search's hooks: `run` makes one run in a round, `fits` says whether
    one more run of a point fits the budget, `new_round` numbers a round, `stopped` says the user asked to stop;
    `phases` names what a point's runs are for, else "race")."""

    record: SearchResult
    incumbent: Config
    candidates: list[Config]
    run: RunFn
    fits: FitsFn
    new_round: Callable[[], int]
    stopped: Callable[[], bool]
    why: str = "beside the best point so far"
    phases: dict[Config, Phase] | None = None
    # candidates never dropped after one round: the answer without one of its values (its part's figure needs two)
    full: frozenset[Config] = frozenset()

    def go(self) -> list[Config]:
        """Run the rounds; the candidates that ran ok in every round (none where the incumbent did not hold
        `ROUNDS` rounds)."""
        alive = list(self.candidates)
        held = 0
        for k in range(MAX_ROUNDS):
            # the third round only for candidates still undecided after two
            racing = list(alive) if k < ROUNDS else [c for c in alive if self._undecided(c)]
            if not racing or self.stopped() or not self.fits(self.incumbent):
                break
            rnd = self.new_round()
            order = [self.incumbent, *racing] if k % 2 == 0 else [*reversed(racing), self.incumbent]
            ran_incumbent = False
            for c in order:
                if self.stopped():
                    return []
                if c == self.incumbent:
                    ran_incumbent = self.fits(c) and self._one(c, rnd, k)
                    if not ran_incumbent:
                        break  # nothing to compare with in this round
                elif not (self.fits(c) if ran_incumbent else self.fits(c, self.incumbent)) or not self._one(c, rnd, k):
                    # failed, or the budget cannot hold it and the best point's run of this round still to come
                    # (without that run the round compares nothing): it leaves the race
                    alive.remove(c)
            if not ran_incumbent:
                break
            held += 1
            if k == 0:
                alive = [c for c in alive if c in self.full or not self._clearly_slower(c, rnd)]
        return alive if held >= ROUNDS else []

    def _one(self, c: Config, rnd: int, k: int) -> bool:
        phase = (self.phases or {}).get(c, "race")
        what = WHAT.get(phase) or ("the best point so far" if c == self.incumbent else self.why)
        outcome = self.run(phase, c, f"{what} (round {k + 1})", rnd)
        if outcome.ok and outcome.competed and not self.stopped() and self.fits(c):
            outcome = self.run(phase, c, f"{what} (round {k + 1} again: other work competed with its run)", rnd)
        return outcome.ok

    def _round_timing(self, c: Config, rnd: int):  # type: ignore[no-untyped-def]
        return next((t.outcome.timing for t in reversed(self.record.trials)
                     if t.config == c and t.round == rnd and t.outcome.ok), None)

    def _clearly_slower(self, c: Config, rnd: int) -> bool:
        mine, theirs = self._round_timing(c, rnd), self._round_timing(self.incumbent, rnd)
        if mine is None or theirs is None:
            return False
        cmp = compare(mine, theirs)
        return cmp.verdict == "slower" and cmp.speedup < 1 / (1 + DROP_MARGIN)

    def _undecided(self, c: Config) -> bool:
        """Faster by more than the floor with an interval that still holds 1, or not yet comparable side by side
        (other work disturbed a round's run, and disturbed runs are left out: `compare.DISTURBED_RULE`)."""
        cmp = self.record.paired(c, self.incumbent)
        if cmp is None:  # another round helps only where disturbed runs were left out (not unknown intervals)
            return any(m is not None for x in (c, self.incumbent) for _, m in self.record.marks(x))
        return cmp.verdict == "within_noise" and cmp.speedup > 1 + NOISE_FLOOR


def decide(record: SearchResult, incumbent: Config, finalists: list[Config]) -> tuple[Config | None, str]:
    """The candidate to move to, and why; (None, why not) where none is faster beside the incumbent by the noise rule
    and none simpler is as fast (a tie goes to fewer changes, and to torch over Apex and Liger: `moves.complexity`)."""
    compared: list[tuple[Config, Comparison]] = []
    for f in finalists:
        c = record.paired(f, incumbent)
        if c is not None:
            compared.append((f, c))
    faster = [(f, c) for f, c in compared if c.verdict == "faster"]
    if faster:
        best_f, best_c = max(faster, key=lambda x: x[1].speedup)
        near = [(f, c) for f, c in faster if c.speedup * (1 + NOISE_FLOOR) >= best_c.speedup and simpler(f, best_f)]
        f, c = min(near, key=lambda x: complexity(x[0])) if near else (best_f, best_c)
        return f, f"faster beside it: {format_speedup(c)}, beyond noise"
    # a tie is within noise by the rule and within the noise floor by the medians: a simpler point 8 % slower on its
    # medians is no tie because its runs were wide (HF GPT-2's bf16 + compile beside the recipe, replayed)
    tied = [(f, c) for f, c in compared if c.verdict == "within_noise" and simpler(f, incumbent)
            and c.speedup * (1 + NOISE_FLOOR) >= 1 and not slower_in_a_round(record, f, incumbent)]
    if tied:
        f, c = min(tied, key=lambda x: (complexity(x[0]), -x[1].speedup))
        return f, f"as fast beside it ({format_speedup(c)}) and simpler"
    return None, "no candidate was faster beside it beyond noise"


def slower_in_a_round(record: SearchResult, a: Config, b: Config) -> bool:
    """`a` was slower than `b` beyond noise in one of the rounds both ran in: then a tie is no tie (other work that
    slowed `b` in another round can hide a real loss in the hull of the rounds), and the simpler point does not take
    the place of a faster one."""
    mine, theirs = record._by_round(a), record._by_round(b)
    return any(compare(mine[k], theirs[k]).verdict == "slower" for k in mine.keys() & theirs.keys())
