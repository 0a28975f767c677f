"""The candidate moves from the best point so far: every point one change away, a value added, swapped or removed,
in the order the search tries them.

Why removals: the best point can be two moves away (HF Llama on an H100: Liger's norms win eager, 37.7 against
57.9 ms, and hurt under compile; compile without them, 32.1 ms, needed a value taken out and another put in). Why
here, on the best point: a value is judged where it will be used (fused AdamW gained nothing on ResNet-50's fp32
step, 153.1 against 152.9 ms, and a good share on its compiled step, six times shorter).

The order spends the budget where a move is likeliest to be decided cheaply: what needs no new compile first (the same
graph, or an eager point: a removal gives the answer's parts their figure, and a tie goes to the simpler point), then
a compile
(another mode of the compiled point, CUDA graphs the likeliest gain on a short step; or compile added to an eager
point: on CPU, where the recipe has none, the likeliest large gain), then new graphs by their estimated cost (a
removal that compiles another graph among them: HF GPT-2's fp32 graph took 65 s on an H100, and the CUDA-graph mode
went untried), the costly compile modes last.
"""

from __future__ import annotations

from typing import Any, Callable

from ..config.axes import Scope, Value, all_axes, axis
from ..config.point import Config
from .costs import CostModel, graph_of

Available = Callable[[Config], Any]  # -> an object with ok, reason


def third_party(value: Value) -> bool:
    """A value of a package beyond torch (Apex, Liger): a tie goes to torch's own."""
    return bool(value.apex) or "liger" in value.needs


def complexity(config: Config) -> tuple[int, int]:
    """What a tie is broken by, the lower the simpler: values of Apex or Liger, then changes from the model as
    written."""
    return sum(third_party(v) for v in config.values()), len(config.changes())


def simpler(a: Config, b: Config) -> bool:
    return complexity(a) < complexity(b)


def neighbours(current: Config, scope: str) -> list[Config]:
    """Every point one value away from `current` (added, swapped or removed) that the model's scope offers, runs
    together on its device (`Config.conflict`) and is not what the default already does there (torch AdamW is
    foreach on CUDA: `axes.Value.default_on`)."""
    device = scope.device if isinstance(scope, Scope) else ""
    out = []
    for ax in all_axes():
        for v in ax.values_for(scope):
            if v == getattr(current, ax.name):
                continue
            c = current.with_(ax.name, v.name)
            if device and (c.conflict(device) is not None or any(device in getattr(c, a).default_on
                                                                 for a in c.changes())):
                continue
            out.append(c)
    return out


def kind(cand: Config, current: Config) -> str:
    """'remove', 'add' or 'swap': what the move does to the axis it changes."""
    ax = next(a for a in cand.as_dict() if getattr(cand, a) != getattr(current, a))
    default = axis(ax).default
    return "remove" if getattr(cand, ax) == default else "add" if getattr(current, ax) == default else "swap"


def order(cands: list[Config], current: Config, costs: CostModel) -> list[Config]:
    """The order candidates are tried in (the module docstring says why)."""
    def key(c: Config) -> tuple[int, float]:
        mode = c.compile != current.compile and c.compile != "none"  # another compile mode, or compile added
        costly = c.compile.setup_cost > 1.5 and c.compile != current.compile
        # what needs no new compile: the same graph, a point that ran, or a removal that runs eager
        cheap = graph_of(c) == graph_of(current) or costs.ran(c) or c.compile == "none"
        group = 3 if costly else 0 if cheap else 1 if mode else 2
        return group, costs.estimate(c)

    return sorted(cands, key=key)


def described(cand: Config, current: Config) -> str:
    """'compile=reduce-overhead added', 'norms=liger removed', 'precision: bf16 -> fp16'."""
    ax = next(a for a in cand.as_dict() if getattr(cand, a) != getattr(current, a))
    k = kind(cand, current)
    if k == "remove":
        return f"{ax}={getattr(current, ax).name} removed"
    if k == "add":
        return f"{ax}={getattr(cand, ax).name} added"
    return f"{ax}: {getattr(current, ax).name} -> {getattr(cand, ax).name}"
