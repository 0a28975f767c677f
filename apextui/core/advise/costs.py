"""What a run of a point will cost, learnt from what the search's runs cost on this machine.

Why learnt: a first compile's minute is not every compile's. On an H100 (HF GPT-2, cold caches) the first compile
took 50.9 s and every later one 10.3-10.9 s (inductor's and Triton's caches serve the next graph family), yet a search
that priced every compile from the first left 12 candidates out as "about 53 s does not fit". Three costs are told
apart, each from its own runs: the search's first compile (cold), a new graph family's compile through warm caches,
and a recompile of a graph compiled already (a rerun, or a point that differs only in what the graph does not hold:
the optimizer). A compile mode's set-up scales by its `axes.Value.setup_cost`.

A run's deadline follows from its estimate (`deadline_s`): a run that has not ended within its estimate and a grace is
stopped and recorded with that reason, so that one runaway compile (coordinate descent: 104 of 282 s on ResNet-50,
no step finished) cannot take the budget.

Pure: costs in, estimates out; the search records each run's wall time and compile time here.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..config.axes import all_axes
from ..config.point import Config

# before any compile ran: a first compile's prior, in seconds (a 124 M model on an H100/H200 with cold caches: 35-51 s;
# a tiny model on a 2-core CPU: 20-90 s by the machine's load)
COLD_COMPILE_PRIOR_S = {"cuda": 45.0, "cpu": 30.0}
# a new graph's compile through warm caches, as a share of the first: HF GPT-2 on an H100 10.5 / 50.9 s; the example GPT
# on an H100 28-36 / 38 s for another precision's graph, 12 / 38 s for Liger's norms
WARM_SHARE_PRIOR = 0.5
RECOMPILE_SHARE_PRIOR = 0.1  # a recompile of a graph compiled already, as a share of the first
GRACE_SHARE, GRACE_S = 0.5, 10.0  # a run may overstay its estimate by half of it and 10 s before it is stopped
DEFAULT_RUN_S = 10.0  # an eager run's cost before anything ran (the baseline is always measured first)


def graph_of(config: Config) -> tuple[str, ...]:
    """What the compiled graph holds (its axes that torch.compile sees: the optimizer's step is not compiled): two
    points with the same graph share a compile (only the optimizer differs)."""
    return tuple(getattr(config, a.name).name for a in all_axes() if a.graph)


@dataclass
class CostModel:
    """The runs' costs so far (seconds of wall time, a worker's start left out) and the estimates drawn from them."""

    device: str
    _runs: dict[Config, list[float]] = field(default_factory=dict)  # each point's run costs, in order
    _steps: dict[Config, list[float]] = field(default_factory=dict)  # each run's cost less its compile
    _cold: float | None = None  # the first compile's time
    _warm: list[float] = field(default_factory=list)  # new graphs' compile times after the first, per setup_cost
    _recompile: list[float] = field(default_factory=list)  # recompiles' times, per setup_cost
    _graphs: set[tuple[str, ...]] = field(default_factory=set)  # graphs compiled in this search

    # ---- what happened ----------------------------------------------------------------------------
    def record(self, config: Config, wall_s: float, compile_s: float | None, ok: bool = True) -> None:
        """A run of `config` that cost `wall_s`, `compile_s` of it compiling (None: not compiled, or not known);
        a run that did not end `ok` says nothing of what its steps cost."""
        compiled = config.compile != "none"
        if compiled and compile_s is not None and compile_s > 0:
            per = compile_s / max(config.compile.setup_cost, 1e-9)
            graph = graph_of(config)
            if self._cold is None:
                self._cold = per
            elif graph in self._graphs:
                self._recompile.append(per)
            else:
                self._warm.append(per)
            self._graphs.add(graph)
        elif compiled and ok:
            self._graphs.add(graph_of(config))  # compiled, its time unknown
        self._runs.setdefault(config, []).append(wall_s)
        if ok:
            self._steps.setdefault(config, []).append(max(0.0, wall_s - (compile_s or 0.0)))

    def ran(self, config: Config) -> bool:
        return config in self._runs

    @property
    def compiled_any(self) -> bool:
        return self._cold is not None

    # ---- estimates --------------------------------------------------------------------------------
    def steps_s(self, config: Config) -> float:
        """A run's cost less any compile: its own last run's, else the costliest of its precision's points (eager
        ones for an eager point), else the costliest run so far."""
        if config in self._steps:
            return self._steps[config][-1]
        same = [v[-1] for c, v in self._steps.items() if c.precision == config.precision
                and (c.compile == "none") == (config.compile == "none")]
        same = same or [v[-1] for c, v in self._steps.items() if c.precision == config.precision]
        anything = [v[-1] for v in self._steps.values()]
        return max(same or anything or [DEFAULT_RUN_S])

    def compile_s(self, config: Config) -> float:
        """The compile a run of `config` would pay now: none for an eager point; a recompile where its graph was
        compiled in this search; a new graph's through warm caches after the first compile; the first's prior
        before it."""
        if config.compile == "none":
            return 0.0
        scale = config.compile.setup_cost
        cold = self._cold if self._cold is not None else COLD_COMPILE_PRIOR_S.get(self.device, 45.0)
        if graph_of(config) in self._graphs:
            per = statistics.median(self._recompile) if self._recompile else cold * RECOMPILE_SHARE_PRIOR
            return per * scale
        if self._cold is None:
            return cold * scale
        per = statistics.median(self._warm) if self._warm else cold * WARM_SHARE_PRIOR
        return per * scale

    def estimate(self, config: Config) -> float:
        """What the next run of `config` will cost."""
        return self.steps_s(config) + self.compile_s(config)

    def rerun(self, config: Config) -> float:
        """A run of `config` after one more: its graph then compiled (a race's second round)."""
        if config.compile == "none":
            return self.steps_s(config)
        per = statistics.median(self._recompile) if self._recompile else \
            (self._cold or COLD_COMPILE_PRIOR_S.get(self.device, 45.0)) * RECOMPILE_SHARE_PRIOR
        return self.steps_s(config) + per * config.compile.setup_cost

    def race_s(self, configs: list[Config], rounds: int) -> float:
        """`rounds` rounds of `configs`: each one's next run, then its reruns."""
        return sum(self.estimate(c) + (rounds - 1) * self.rerun(c) for c in configs)

    def deadline_s(self, config: Config) -> float:
        """How long a run of `config` may take before it is stopped: its estimate and a grace."""
        if not self._runs or config.compile != "none" and self._cold is None:
            # the search's first run, or its first compile: nothing measured here to estimate it from (a large
            # model's cold compile can take minutes), so the budget bounds it
            return math.inf
        est = self.estimate(config)
        if config.compile != "none" and self._cold is not None and not self._warm \
                and graph_of(config) not in self._graphs:
            # no new graph compiled through warm caches yet: its prior may be far off (an H100's example GPT: 28-36 s
            # for a new precision's graph, 0.8 of the first), so the deadline allows what the first compile took
            est = max(est, self.steps_s(config) + self._cold * config.compile.setup_cost)
        return est * (1 + GRACE_SHARE) + GRACE_S

