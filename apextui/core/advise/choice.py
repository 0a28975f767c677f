"""The one decision of the advice: which option to use, from timings (pure; no torch, no words).

Why one function: the advice used to decide three times, and the lines disagreed on one screen: `Use: fp32
(nothing is measurably faster)` above `the best torch-only option is bf16 (≈1.69×)`, and a headline naming as
its runner-up the option it recommended. Now the shipped presets' verdict (`decide.verdict`) and the model
search's winner (`search.Search`) both call `choose`, and every line (the verdict, the Apex line, the torch-only
options of the machine line, the answer with its code) is worded from its result.

The chain, each step by the one noise rule (`compare.compare`):

1. the **torch-only choice**: the fastest torch-only option, unless it is within noise of the baseline (then
   the baseline: nothing torch-only is measurably faster);
2. **Apex** is chosen only when its fastest option is faster, beyond noise, than the fastest torch-only one
   (so it is never recommended where a torch option is as fast);
3. the **recommended** option is Apex's where step 2 chose it, else the torch-only choice (where nothing
   torch-only was measured: the fastest Apex option, unless within noise of the baseline).

Flagged options (a failed correctness check, a worse final loss) are left out by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

from ..measure.compare import Comparison, Drift, Timing, compare

T = TypeVar("T")


@dataclass(frozen=True)
class Choice(Generic[T]):
    """What `choose` decided; every option is one of the candidates (or the baseline)."""

    recommended: T | None
    torch: T | None  # the torch-only choice (step 1)
    fastest_torch: T | None  # the fastest torch-only option, what Apex is measured against
    apex: T | None  # the fastest Apex option
    apex_vs_torch: Comparison | None  # `apex` against `fastest_torch`


def choose(candidates: Sequence[T], timing: Callable[[T], Timing | None], is_apex: Callable[[T], bool],
           baseline: T | None, drift: Drift | None = None,
           versus: Callable[[T, T], Comparison | None] | None = None) -> Choice[T]:
    """The chain of the module docstring over `candidates` (the eligible options; those without a timing are
    ignored). `baseline` is compared with whether or not it is among them (it is torch-only). `drift`: the
    between-run drift of the runs compared (`compare.compare`). `versus(a, b)`: the caller's comparison of two
    options by the same rule, where it knows more than their timings (runs side by side in interleaved rounds:
    `compare.compare_paired`); None where it has none, then `compare` of the timings with `drift`."""
    timed = [(t, c) for c in candidates if (t := timing(c)) is not None]
    base_t = timing(baseline) if baseline is not None else None
    base = (base_t, baseline) if base_t is not None and baseline is not None else None

    def against(a: tuple[Timing, T], b: tuple[Timing, T]) -> Comparison:
        c = versus(a[1], b[1]) if versus is not None else None
        return c if c is not None else compare(a[0], b[0], drift=drift)

    def fastest(apex: bool) -> tuple[Timing, T] | None:
        mine = [x for x in timed if is_apex(x[1]) == apex]
        return min(mine, key=lambda x: x[0].median_ms) if mine else None

    def unless_noise(best: tuple[Timing, T] | None) -> T | None:
        if best is None:
            return None
        if base is not None and (best[1] == baseline or against(best, base).within_noise):
            return baseline
        return best[1]

    torch_best, apex_best = fastest(False), fastest(True)
    torch_choice = unless_noise(torch_best)
    vs = against(apex_best, torch_best) if apex_best is not None and torch_best is not None else None
    if apex_best is not None and torch_best is None:
        recommended = unless_noise(apex_best)
    elif vs is not None and vs.verdict == "faster":
        recommended = apex_best[1]  # type: ignore[index]
    else:
        recommended = torch_choice
    return Choice(recommended, torch_choice, torch_best[1] if torch_best else None,
                  apex_best[1] if apex_best else None, vs)
