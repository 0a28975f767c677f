"""Running the advice: the `Advisor` drives every planned run through a runner factory and reports progress."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from ..config.calling import Calling
from ..measure.compare import Drift
from ..number_format import ms as _ms
from ..presets import Preset
from ..run.handle import RunnerFactory
from ..run.request import RunRequest
from ..run.runner import thread_runner_factory
from ..workloads.spec import WORKLOADS
from . import cpu_share
from .cache import environment, find_reusable
from .choice import Choice
from .decide import verdict
from .document import document
from .records import advice_drift
from .records import DEFAULT_REPEATS, DEFAULT_STEPS, MAX_REPEATS, RUN_JOIN_S, AdviceError, Measurement, RunResult, \
    WorkloadVerdict
from .planning import AvailabilityFn, WorkloadPlan, parse_workloads, plan
from .search import NOT_RUN, SEARCH_STEPS


ProgressEvent = Literal["plan", "skip", "run", "run_end", "reused", "done", "search"]
POLL_S = 0.1  # how often the thread that drives a run looks at its deadline and at the user's stop
STOP_GRACE_S = 5.0  # after a run is asked to stop: how long it gets to end by itself before its worker is killed
BUDGET_GRACE_S, BUDGET_GRACE_SHARE = 5.0, 0.1  # a run may outlast the budget by the larger of these (budget_grace)


@dataclass(frozen=True)
class Progress:
    """What the advice is doing: `event` "plan" | "skip" | "run" (a run's update) | "run_end" | "reused" | "done"
    | "search" (the model's search: which point it runs and why, `message`)."""

    event: ProgressEvent
    index: int = 0  # this run, 1-based, of `total`
    total: int = 0
    workload: str | None = None
    preset: str | None = None
    repeat: int = 0
    repeats: int = 0
    status: str = ""  # the run's: starting | compiling | running | profiling | ok | stopped | failed
    steps_done: int = 0
    steps: int = 0
    elapsed_s: float | None = None
    compile_s: float | None = None
    result: RunResult | None = None  # run_end
    message: str = ""
    # the model's search: its budget and the seconds spent of it when this was sent (a run, a search line)
    budget_s: float | None = None
    spent_s: float | None = None

    def line(self) -> str:
        """One line for a log (the CLI prints it for each run's end, skip and plan)."""
        # a search's run (how many runs there will be is not known ahead), or one past the plan (a run confirming an
        # answer): "[9/9] … repeat 3/2" said more than was planned, so it is counted, not set against the plan
        if self.budget_s is not None or self.index > self.total or self.repeat > self.repeats:
            where = f"[run {self.index}] {self.workload} {self.preset} (its run {self.repeat})"
        else:
            where = f"[{self.index}/{self.total}] {self.workload} {self.preset} repeat {self.repeat}/{self.repeats}"
        if self.event == "run_end" and self.result is not None:
            r, s = self.result, self.result.summary
            comp = f", compiled in {s.compile_s:.1f} s (not in ms/step)" if s.compile_s is not None else ""
            if r.ok:
                return (f"{where}: ok, median {_ms(s.median_ms)} ms/step (p10 {_ms(s.p10_ms)}, "
                        f"p90 {_ms(s.p90_ms)}) over {s.measured_steps or 0} steps{comp}")
            err = f": {(r.error or '').splitlines()[0][:200]}" if r.error else ""
            return f"{where}: {r.status} after {s.steps or 0} steps{err}"
        if self.event == "run":
            what = "compiling…" if self.status == "compiling" else f"{self.status} {self.steps_done}/{self.steps}"
            return f"{where}: {what}"
        return self.message


ProgressFn = Callable[[Progress], None]
RunAction = Literal["", "stop", "kill"]


def budget_grace(budget_s: float) -> float:
    """How long a run may go on past the search's budget before it is stopped: the larger of 5 s and a tenth of the
    budget, so that a run about to end finishes, and a hung step or an 86 s compile started at 33 of 60 s does not
    hold the search (it took 123 s on CPU)."""
    return max(BUDGET_GRACE_S, BUDGET_GRACE_SHARE * budget_s)


class RunWatch:
    """When the thread driving one run must stop it and, if it does not end, kill its worker: at `deadline` (on
    `clock`; None: none) or at the user's stop, whichever comes first, then `STOP_GRACE_S` later. A stop is
    cooperative (the run ends after its current step) and a hung step never looks at it; a worker process can be
    killed (`RunHandle.kill`), a thread of this process cannot."""

    def __init__(self, deadline: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline, self.clock = deadline, clock
        self.started = clock()
        self.stop_at: float | None = None
        self.by_budget = False  # the deadline stopped it (not the user)
        self.killed = False

    def poll(self, stopping: bool) -> RunAction:
        """What to do now: "stop" once (the deadline passed, or `stopping`: the user asked), "kill" once a grace
        after that, else ""."""
        now = self.clock()
        if self.stop_at is None:
            self.by_budget = not stopping and self.deadline is not None and now >= self.deadline
            if stopping or self.by_budget:
                self.stop_at = now
                return "stop"
            return ""
        if not self.killed and now >= self.stop_at + STOP_GRACE_S:
            self.killed = True
            return "kill"
        return ""

    def _ran_s(self) -> float:
        return (self.stop_at if self.stop_at is not None else self.clock()) - self.started

    def kill_words(self) -> str:
        """Why the worker was killed, for its final snapshot."""
        if self.by_budget:
            return f"ended by the budget after {self._ran_s():.0f} s"
        return f"it did not end within {STOP_GRACE_S:.0f} s of the stop (a step or a compile went on): its worker " \
               "was ended"

    def ending(self, snap: Any) -> tuple[Literal["failed", "stopped"], str] | None:
        """The status and words of a run the budget ended, from its last snapshot (None: the budget did not end it):
        failed where no step had finished (a hung step, or a build that takes longer than the budget), else stopped."""
        if not self.by_budget:
            return None
        if not getattr(snap, "steps_done", 0):
            return "failed", f"no step finished in {self._ran_s():.0f} s: ended by the budget"
        return "stopped", f"ended by the budget after {self._ran_s():.0f} s"


class Advisor:
    """Runs the advice: `run()` blocks (call it from the thread that should drive the runs) and returns
    the document; `stop()` (any thread, or a signal handler) stops the current run and makes `run()`
    return the partial advice; `document()` is the advice as measured so far."""

    def __init__(self, device: str, *, steps: int | None = None, repeats: int = DEFAULT_REPEATS,
                 workloads: Sequence[str] | str | None = None, presets: Sequence[Preset] | None = None,
                 availability_fn: AvailabilityFn | None = None, runner_factory: RunnerFactory | None = None,
                 on_progress: ProgressFn | None = None, sample_interval: float = 1.0,
                 env: Mapping[str, Any] | None = None, use_run: bool = True,
                 search_budget_s: float | None = None, data_parallel: bool = False,
                 budget_started: float | None = None, clock: Callable[[], float] = time.monotonic,
                 search_runner_factory: RunnerFactory | None = None,
                 model_traits: frozenset[str] | None = None, model_type: str = "",
                 model_calling: Calling | None = None) -> None:
        if device not in DEFAULT_STEPS:
            raise AdviceError(f"device must be cpu or cuda (resolved), got {device!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
            raise AdviceError(f"repeats must be a whole number from 1 to {MAX_REPEATS}, got {repeats!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise AdviceError(f"steps must be a whole number >= 1, got {steps!r}")
        self.device = device
        # a search makes shorter runs than the shipped presets' advice, so that more points fit its budget
        self.steps = steps if steps is not None else (SEARCH_STEPS if search_budget_s is not None
                                                      else DEFAULT_STEPS)[device]
        self.repeats = repeats
        self.workloads = parse_workloads(workloads, allowed=tuple(WORKLOADS))
        if presets is None:
            from ..presets import load_all

            presets = load_all()[0]
        self.presets = list(presets)
        if availability_fn is None:
            from ..availability import availability

            availability_fn = lambda p: availability(p, device)  # noqa: E731
        self.availability_fn = availability_fn
        self.runner_factory = runner_factory or thread_runner_factory
        # the model search's runs (None: `runner_factory`'s): one reusable worker (`run.reusable`), closed (its
        # `close()`) when the search ends
        self.search_runner_factory = search_runner_factory
        self.on_progress = on_progress
        self.sample_interval = sample_interval
        self._env = dict(env) if env is not None else None
        self.use_run = use_run
        # the model workload: a search over the configuration axes within this many seconds (None: its presets)
        self.search_budget_s = search_budget_s
        # what the user's model has that values need (`model_presets.ModelFacts.traits`; None: not known): the search
        # never tries a value that does not apply to it (`axes.Scope`)
        self.model_traits = model_traits
        self.model_type = model_type  # the model's Hugging Face type ("llama"; ""): the answer's Liger code
        # how the model's probe saw it called (`ModelFacts.calling`; None: not known): the answer's code where no run
        # recorded it (only fp32 ran, and fp32 has no check)
        self.model_calling = model_calling
        # when the budget began to count, on `clock` (the CLI: before it loaded and built the model to check it, which
        # counts against the budget; None: when the search starts); `clock` times the budget and every run's deadline
        self.budget_started = budget_started
        self.clock = clock
        self._setup_s = 0.0  # of the budget, the seconds spent before the search started
        self._last_start_s = 0.0  # the last run's worker start (`run.reusable.ReusedRun.start_s`)
        # a CPU search's runs: the cores, the wait policy, the intra-op threads every run had (`cpu_share`), and the
        # cores other work was seen to use (at the start, during runs, at the end)
        self.cpu_record: dict[str, Any] = {"cores": cpu_share.usable_cores(),
                                           "wait_policy": os.environ.get(cpu_share.WAIT_ENV), "threads": None,
                                           "other_cores": []}
        self.data_parallel = data_parallel  # under torchrun: the data-parallel presets run too (planning.plan)
        self._search: Any = None  # the running search.Search
        self._search_result: Any = None  # its SearchResult
        self._search_presets: dict[str, Preset] = {}  # every point it ran or found unavailable, in order
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._runner: Any = None
        self._plans: list[WorkloadPlan] | None = None
        self._runs: dict[tuple[str, str], list[RunResult]] = {}
        self.started = time.time()
        self.finished: float | None = None
        self.interrupted = False

    # ---- control --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop after the current step of the current run; safe from any thread and from signal handlers."""
        self._cancel.set()
        if self._search is not None:
            self._search.stop()
        runner = self._runner
        if runner is not None:
            try:
                runner.stop()
            except Exception:  # noqa: BLE001
                pass

    def kill_run(self, reason: str) -> None:
        """End the current run's worker at once (a second signal, which exits next: never leave it running);
        `reason`: the signals that asked for it, by name (`signals.StopOnSignals.twice`)."""
        runner = self._runner
        if runner is not None:
            try:
                runner.kill(reason)
            except Exception:  # noqa: BLE001
                pass

    @property
    def stopping(self) -> bool:
        return self._cancel.is_set()

    @property
    def env(self) -> dict[str, Any]:
        if self._env is None:
            try:
                self._env = environment(self.device)
            except Exception as exc:  # noqa: BLE001 - the advice stands without it (and is never reused)
                self._env = {"device": self.device, "error": f"{type(exc).__name__}: {exc}",
                             "key": f"{self.device}|unknown environment|{time.time()}"}
        return self._env

    def plans(self) -> list[WorkloadPlan]:
        if self._plans is None:
            self._plans = plan(self.presets, self.device, self.workloads, self.availability_fn,
                               data_parallel=self.data_parallel)
        return self._plans

    @property
    def total_runs(self) -> int:
        """Planned runs (the model's search: its runs so far; how many it makes depends on what it finds)."""
        return sum(len(p.runnable) * self.repeats if not self._searches(p) else
                   sum(len(self._runs.get((p.workload, n), ())) for n in self._search_presets)
                   for p in self.plans())

    def _searches(self, p: WorkloadPlan) -> bool:
        return p.workload == "model" and self.search_budget_s is not None

    # ---- results --------------------------------------------------------------------------------
    @property
    def drift(self) -> Drift:
        """The largest drift between two runs of one configuration in this advice, every workload's (the host's,
        not a preset's): a comparison that involves a single run is widened by it, or by `compare.UNKNOWN_DRIFT`
        where nothing ran twice."""
        return advice_drift(self._runs.values())

    def verdicts(self) -> list[WorkloadVerdict]:
        out = []
        for p in self.plans():
            if self._searches(p):
                out.append(self._search_verdict(p))
                continue
            ms = [Measurement(preset=x.name, workload=x.workload, config=x.config, needs_apex=tuple(x.needs_apex),
                              autocast=x.config.autocast, runs=tuple(self._runs.get((p.workload, x.name), ())),
                              planned=self.repeats,
                              drift=self.drift)
                  for x in p.runnable]
            out.append(verdict(p.workload, [*ms, *p.skipped], baseline=p.baseline))
        return out

    def document(self) -> dict[str, Any]:
        """The advice so far; each workload whose presets are points on the configuration axes (the model, the
        Transformer) with its `answer`, derived from its verdict (`answer.answer`); the model's also at the top,
        with the search's record."""
        from ..config.calling import recorded
        from .answer import answer, confirmation

        verdicts = self.verdicts()
        doc = document(verdicts, device=self.device, env=self.env, steps=self.steps, repeats=self.repeats,
                       workloads=self.workloads, partial=self.interrupted, started=self.started,
                       finished=self.finished, search=any(self._searches(p) for p in self.plans()))
        for v, w in zip(verdicts, doc["workloads"], strict=True):
            mine = [x for x in (*self.presets, *self._search_presets.values()) if x.workload == v.workload]
            points = {x.name: x.point for x in mine if x.point is not None}
            model = next((x.model for x in mine if x.model), None)
            calling = recorded(r.summary.check for m in v.measurements for r in m.runs)  # how the runs called it
            if calling is None and v.workload == "model":
                calling = self.model_calling
            searched = v.workload == "model" and self._search_result is not None
            w["answer"] = answer(v, points, model=model, steps=self.steps, calling=calling, device=self.device,
                                 side_by_side=searched, model_type=self.model_type)
            if v.workload == "model":
                doc["answer"] = w["answer"]
        if self._search_result is not None:
            doc["search"] = self._search_result.to_dict()
            if self.cpu_record["threads"] is not None:
                doc["search"]["cpu"] = dict(self.cpu_record)
            if self.budget_started is not None:  # the search had the budget less what went before it (`_run_search`)
                s = doc["search"]
                s.update(budget_s=self.search_budget_s, setup_s=round(self._setup_s, 3),
                         spent_s=round(s["spent_s"] + self._setup_s, 3))
            if doc.get("answer"):  # what each part buys, and whether the answer was confirmed side by side
                doc["answer"].update(confirmation(self._search_result))
                self._one_figure(doc["answer"])
                self._busy_answer(doc["answer"])
        return doc

    def _one_figure(self, a: dict[str, Any]) -> None:
        """The answer's speed-up against fp32 is the search's own (`SearchResult.shown`: side by side, along the chain
        of races where the two never ran in one), so the answer, the search record and the text say one thing."""
        from ..config.point import BASELINE
        from ..measure.compare import fields
        from .answer import shown_words

        r = self._search_result
        if r.winner is None or r.winner == BASELINE or a.get("label") != r.winner.label:
            return
        c = r.shown(r.winner, BASELINE)
        if c is None:
            return
        a.update(fields(c, "speedup_vs_fp32"), speedup_vs_fp32_text=shown_words(c))

    def _busy_answer(self, a: dict[str, Any]) -> None:
        """Where other work left no comparison beyond noise (`SearchResult.unreliable_why`): the answer says so, names
        the practitioner's recipe as the usual gain, and hands over no code as the fastest."""
        r = self._search_result
        why = r.unreliable_why()
        a["reliable"] = not why
        if not why:
            return
        recipe = r.recipe
        a.update(unreliable_why=why, snippet=None, toml=None,
                 usual_gain=f"{recipe.label} ({recipe.description()})" if recipe is not None else None)

    def _search_verdict(self, p: WorkloadPlan) -> WorkloadVerdict:
        """The model's verdict over every point the search ran (all of its runs) and those it found unavailable."""
        from ..config.point import BASELINE

        base = next((x for x in self._search_presets.values() if x.point == BASELINE), None)
        judge = self._judge()
        ms = []
        for name, x in self._search_presets.items():
            runs = tuple(self._runs.get((p.workload, name), ()))
            kw: dict[str, Any] = dict(preset=x.name, workload=x.workload, config=x.config,
                                      needs_apex=tuple(x.needs_apex), autocast=x.config.autocast, judge=judge)
            if runs:
                ms.append(Measurement(**kw, runs=runs, planned=len(runs), drift=self.drift))
            else:
                a = self.availability_fn(x)
                if getattr(a, "ok", False):  # it could run: the budget ended before it did
                    ms.append(Measurement(**kw, planned=0, reason=NOT_RUN))
                else:
                    ms.append(Measurement(**kw, available=False, reason=getattr(a, "reason", None) or "unavailable",
                                          fix=getattr(a, "fix", None) or ""))
        return verdict(p.workload, ms, baseline=base.name if base is not None else p.baseline,
                       decided=self._search_choice(ms))

    def _judge(self) -> Any:
        """The search's one comparison of two of its presets (`SearchResult.shown`: side by side, along its chain of
        races where the two never ran in one; else single runs, never called faster or slower), for every reader of
        its measurements (`records.versus`); None before the search ran."""
        r = self._search_result
        if r is None:
            return None
        points = {name: x.point for name, x in self._search_presets.items()}

        def judge(a: Measurement, b: Measurement) -> Any:
            pa, pb = points.get(a.preset), points.get(b.preset)
            return r.shown(pa, pb) if pa is not None and pb is not None else None

        return judge

    def _search_choice(self, ms: Sequence[Measurement]) -> Choice[Measurement] | None:
        """The search's decision, as the verdict's (`decide.verdict`'s `decided`): its confirmed answer (`ablation`),
        and for the Apex line the answer's like-with-like pair (`SearchResult.apex_point`, `apex_counterpart`); None
        before the search decided."""
        r = self._search_result
        if r is None or r.winner is None:
            return None
        by = {m.preset: m for m in ms}
        name_of = {x.point: x.name for x in self._search_presets.values() if x.point is not None}

        def of(c: Any) -> Measurement | None:
            return by.get(name_of.get(c, "")) if c is not None else None

        rec, apex, counter = of(r.winner), of(r.apex_point), of(r.apex_counterpart)
        if rec is None:
            return None
        torch_side = counter if rec.needs_apex else rec
        return Choice(rec, torch_side, counter if apex is not None else torch_side, apex, None)

    def reusable(self, steps: int | None = None, repeats: int | None = None,
                 path: Path | None = None) -> tuple[dict[str, Any] | None, str]:
        """Stored advice measured in this environment that covers these workloads and presets, or None,
        and why (see find_reusable); `steps`/`repeats`: what the user asked for explicitly, if anything."""
        return find_reusable(self.env, self.workloads, self.plans(), steps=steps, repeats=repeats, path=path)

    # ---- running --------------------------------------------------------------------------------
    def _budget(self) -> tuple[float, float] | None:
        """While the search runs: its budget and what it has spent (Progress fields), else None."""
        search = self._search
        if search is None or self.search_budget_s is None or not search.started:
            return None
        return float(self.search_budget_s), max(0.0, self._setup_s + search.spent)

    def _emit(self, progress: Progress) -> None:
        if self.on_progress is None:
            return
        if progress.budget_s is None and progress.event in ("run", "run_end", "search"):
            budget = self._budget()
            if budget is not None:
                progress = replace(progress, budget_s=budget[0], spent_s=budget[1])
        try:
            self.on_progress(progress)
        except Exception:  # noqa: BLE001 - a broken consumer must not stop the advice
            import sys
            import traceback

            traceback.print_exc(file=sys.stderr)

    def run(self) -> dict[str, Any]:
        """Measure every runnable preset `repeats` times, interleaved; the document (partial if stopped). Its time
        counts from the budget's start where the search has one: loading the model and building it are part of it."""
        self.started = time.time() - (max(0.0, self.clock() - self.budget_started)
                                      if self.budget_started is not None else 0.0)
        plans = self.plans()
        total = self.total_runs
        searched = [p.workload for p in plans if self._searches(p)]
        grid = ", ".join(w for w in self.workloads if w not in searched)
        parts = [f"{total} runs ({self.repeats} repeat(s) × {self.steps} steps) over {grid}"] if grid else []
        if searched:  # a search makes its own repeats: no "repeat(s)" for it
            parts.append(f"{', '.join(searched)}: a search of the configuration axes within "
                         f"{self.search_budget_s:.0f} s ({self.steps} steps a run)")
        self._emit(Progress("plan", total=total, repeats=self.repeats, steps=self.steps,
                            message=f"advice on {self.device}: {'; '.join(parts)}"))
        for p in plans:
            for m in p.skipped:
                self._emit(Progress("skip", workload=p.workload, preset=m.preset, total=total,
                                    message=f"{p.workload} {m.preset}: not run: {m.reason}"))
        index = 0
        for p in plans:
            if self._searches(p):
                index = self._run_search(p, index)
                continue
            for repeat in range(1, self.repeats + 1):
                order = p.runnable if repeat % 2 else tuple(reversed(p.runnable))
                for preset in order:
                    if self._cancel.is_set():
                        self.interrupted = True
                        break
                    index += 1
                    result = replace(self._run_one(preset, repeat, index, total), round=repeat)  # ABBA rounds
                    self._runs.setdefault((p.workload, preset.name), []).append(result)
                    self._emit(Progress("run_end", index=index, total=total, workload=p.workload,
                                        preset=preset.name, repeat=repeat, repeats=self.repeats,
                                        status=result.status, steps_done=result.summary.steps or 0, steps=self.steps,
                                        elapsed_s=result.summary.elapsed_s, compile_s=result.summary.compile_s,
                                        result=result))
        if self._cancel.is_set():
            self.interrupted = True
        self.finished = time.time()
        doc = self.document()
        self._emit(Progress("done", total=total, index=index, message=f"advice {doc['status']}"))
        return doc

    def _run_search(self, p: WorkloadPlan, index: int) -> int:
        """The model workload's search (search.py) within `search_budget_s`; every run goes through `_run_one`
        as a preset of its point (model_presets.config_preset). Returns the last run's index."""
        from ..config.axes import Scope
        from ..config.point import Config
        from ..model_presets import config_preset
        from .search import Search

        spec = next((x.model for x in self.presets if x.workload == p.workload and x.model), None)
        if spec is None:
            return index
        counter = [index]

        def preset_of(config: Config) -> Preset:
            preset = config_preset(spec, config, steps=self.steps)
            self._search_presets.setdefault(preset.name, preset)
            return preset

        def available(config: Config) -> Any:
            return self.availability_fn(preset_of(config))

        def measure(config: Config, why: str, round: int | None = None) -> Any:
            preset = preset_of(config)
            runs = self._runs.setdefault((p.workload, preset.name), [])
            counter[0] += 1
            deadline = self.run_deadline()
            if deadline is not None and self._budget_spent():  # e.g. the model's build took the whole budget: a run
                # started now would spend only the grace, and a hung make_batch its stop's too
                result = RunResult(len(runs) + 1, "failed", error=f"not run: the budget ended first{setup_words}")
            else:
                result = self._run_one(preset, len(runs) + 1, counter[0], counter[0], deadline=deadline,
                                       factory=self.search_runner_factory, cpu_threads=self._cpu_threads(say))
            result = replace(result, round=round)
            contention = result.summary.contention
            others = cpu_share.others_in(contention.to_dict() if contention is not None else None)
            if others is not None and self.cpu_record["threads"] is not None:  # what the busy rule reads
                self.cpu_record["other_cores"].append(float(f"{others:.2f}"))  # (`round` is the round here)
            start_s, self._last_start_s = self._last_start_s, 0.0
            runs.append(result)
            self._emit(Progress("run_end", index=counter[0], total=counter[0], workload=p.workload,
                                preset=preset.name, repeat=len(runs), repeats=len(runs), status=result.status,
                                steps_done=result.summary.steps or 0, steps=self.steps,
                                elapsed_s=result.summary.elapsed_s, compile_s=result.summary.compile_s, result=result))
            return replace(outcome_of(result), start_s=start_s)

        def say(line: str) -> None:
            self._emit(Progress("search", workload=p.workload, message=line))

        preset_of(Config())  # the model as written first: the verdict's baseline and the table's first row
        budget = self.search_budget_s or 0.0
        self._setup_s = max(0.0, self.clock() - self.budget_started) if self.budget_started is not None else 0.0
        setup_words = ""
        if self._setup_s >= 1.0:
            setup_words = (f" (loading your model and building it to check it took {self._setup_s:.0f} s of the "
                           f"{budget:.0f} s budget)")
            say(f"search: loading your model and building it to check it took {self._setup_s:.0f} s of the "
                f"{budget:.0f} s budget: {max(0.0, budget - self._setup_s):.0f} s left for the search")
        self._search = Search(measure, max(0.0, budget - self._setup_s), available=available, on_progress=say,
                              device=self.device, clock=self.clock,
                              workload=Scope(p.workload, self.model_traits, self.device))
        if self._cancel.is_set():
            self._search.stop()
        self._search_result = self._search.result
        try:
            self._search.run()
            if self.cpu_record["threads"] is not None:  # a last look: other work that started while the search ran
                last = cpu_share.others_now()
                if last is not None:
                    self.cpu_record["other_cores"].append(round(last, 2))
                self._search.result.cpu_others = (max(self.cpu_record["other_cores"], default=None),
                                                  self.cpu_record["cores"])
        finally:
            close = getattr(self.search_runner_factory, "close", None)
            if callable(close):
                close()
        return counter[0]

    def _cpu_threads(self, say: Callable[[str], None]) -> int | None:
        """A CPU search run's intra-op threads: the cores other work left at the search's start (a short look), the
        same for every run, so that two runs compared side by side ran alike (`cpu_share`); None on CUDA, or where the
        runs are not in a search worker."""
        if self.device != "cpu" or self.search_runner_factory is None:
            return None
        if self.cpu_record["threads"] is None:
            others = cpu_share.others_now()
            if others is not None:
                self.cpu_record["other_cores"].append(round(others, 2))
            cores = self.cpu_record["cores"]
            self.cpu_record["threads"] = threads = cpu_share.fit_threads(cores, others)
            other = f"other work used {others:.1f} cores" if others is not None else "other work unknown"
            say(f"search: CPU runs with {threads} intra-op thread{'s' * (threads != 1)} of {cores} cores ({other}; "
                f"{cpu_share.WAIT_ENV}={self.cpu_record['wait_policy'] or 'unset'})")
        return int(self.cpu_record["threads"])

    def _budget_spent(self) -> bool:
        """The search's whole budget is spent (loading the model included): no run starts."""
        search = self._search
        if search is None or self.search_budget_s is None:
            return False
        return float(self.search_budget_s) - (self._setup_s + search.spent) <= 0

    def run_deadline(self) -> float | None:
        """When a search's run started now must end, on `clock`: an exploring run, when the search said it must
        (`Search.run_until`: it leaves the answer's confirmation its time, no grace, as the search planned it); any
        other, the budget's end + `budget_grace` (the budget's start: `budget_started`, else the search's); None outside
        a running search."""
        search = self._search
        if search is None or self.search_budget_s is None or not search.started:
            return None
        budget, spent, now = float(self.search_budget_s), search.spent, self.clock()
        left = budget - (self._setup_s + spent)  # of the whole budget
        if search.run_until < min(search.budget_s, budget - self._setup_s) - 1e-9:  # it leaves the rounds their room
            return now + min(left, max(0.0, search.run_until - spent))  # ended where the search's plan says
        return now + left + budget_grace(budget)

    def _run_one(self, preset: Preset, repeat: int, index: int, total: int,
                 deadline: float | None = None, factory: RunnerFactory | None = None,
                 cpu_threads: int | None = None) -> RunResult:
        """One run of `preset` (made by `factory`, else `runner_factory`), to its end, or stopped at `deadline` (on
        `clock`; the search's budget) or at the user's stop, and its worker killed where it does not end
        `STOP_GRACE_S` later (`RunWatch`)."""
        done = threading.Event()
        final: list[Any] = []

        def callback(snap: Any) -> None:  # the runner's delivery (or reader) thread, <= ~10 times a second
            if snap.finished:
                final.append(snap)
            info = snap.info
            self._emit(Progress("run", index=index, total=total, workload=preset.workload, preset=preset.name,
                                repeat=repeat, repeats=self.repeats, status=snap.status,
                                steps_done=snap.steps_done, steps=self.steps, elapsed_s=snap.elapsed_s,
                                compile_s=info.compile_s if info is not None else None))
            if snap.finished:
                done.set()

        self._emit(Progress("run", index=index, total=total, workload=preset.workload, preset=preset.name,
                            repeat=repeat, repeats=self.repeats, status="starting", steps=self.steps))
        try:
            runner = (factory or self.runner_factory)(RunRequest(preset, self.device, self.steps,
                                                                 self.sample_interval, cpu_threads=cpu_threads),
                                                      callback)
        except Exception as exc:  # noqa: BLE001
            return RunResult(repeat, "failed", error=f"could not start: {type(exc).__name__}: {exc}")
        with self._lock:
            self._runner = runner
        if self._cancel.is_set():  # stop() came between the check in run() and now
            runner.stop()
        watch = RunWatch(deadline, self.clock)
        try:
            run_here = getattr(runner, "run", None)  # a Runner's: not part of RunHandle (a worker has none)
            if self.use_run and callable(run_here):
                guard = threading.Thread(target=self._guard, args=(runner, done, watch, False),
                                         name="apextui-run-deadline", daemon=True)
                guard.start()
                try:
                    run_here()  # trains in this thread (headless: the main thread)
                finally:
                    done.set()
            else:
                runner.start()
                self._guard(runner, done, watch, True)
                join = getattr(runner, "join", None)
                if callable(join):  # the worker process exits before the next run starts
                    join(RUN_JOIN_S)
        except Exception as exc:  # noqa: BLE001
            if not final:
                return RunResult(repeat, "failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._runner = None
        start_s = getattr(runner, "start_s", 0.0)  # a reusable worker's start, paid by its first run
        self._last_start_s = float(start_s) if isinstance(start_s, (int, float)) else 0.0
        snap = final[-1] if final else getattr(runner, "result", None)
        if snap is None:
            return RunResult(repeat, "failed", error="the run ended without a final result")
        result = RunResult.from_snapshot(repeat, snap)
        ending = watch.ending(snap)
        if ending is not None and not result.ok:  # the budget ended it: say so, whatever the runner said
            result = replace(result, status=ending[0], error=ending[1])
        return result

    def _guard(self, runner: Any, done: threading.Event, watch: RunWatch, watch_alive: bool) -> None:
        """Until `done`: stop the run at its deadline or at the user's stop, kill its worker when it has not ended a
        grace later (`RunWatch`); `watch_alive`: also end when the runner is no longer alive (a worker that died
        without a final snapshot)."""
        while not done.wait(POLL_S):
            action = watch.poll(self._cancel.is_set())
            try:
                if action == "stop":
                    runner.stop()
                elif action == "kill":
                    runner.kill(watch.kill_words())
            except Exception:  # noqa: BLE001 - a runner that cannot be stopped: its run ends as it will
                pass
            if watch_alive and not runner.is_alive():
                done.wait(1.0)
                return


def run_advice(device: str, steps: int | None = None, repeats: int = DEFAULT_REPEATS,
               workloads: Sequence[str] | str | None = None, runner_factory: RunnerFactory | None = None,
               on_progress: ProgressFn | None = None, **kw: Any) -> dict[str, Any]:
    """Measure and return the advice document (see `Advisor` for the other keyword arguments)."""
    return Advisor(device, steps=steps, repeats=repeats, workloads=workloads, runner_factory=runner_factory,
                   on_progress=on_progress, **kw).run()


def outcome_of(result: RunResult) -> Any:
    """A run's result as the search reads it: ok, failed, or failed its correctness check (with the numbers)."""
    from .search import Outcome

    check, peak = result.summary.check, result.summary.peak_memory_bytes
    # the compile's time: a rerun is planned at its cost less most of it (a RunResult keeps it in its summary only:
    # read as the result's attribute, it was never there, and each compiled rerun was priced at its first run's
    # whole cost, compile included: on an H200 the Llama example's search left fused AdamW on the compiled point out)
    compile_s = result.summary.compile_s
    if result.ok and result.check_failed and check is not None:
        err = check.max_abs_err if check.max_abs_err is not None else float("nan")
        tol = check.tolerance if check.tolerance is not None else float("nan")
        why = f"failed the correctness check: its loss differs from fp32's by {err:.3g} (tolerance {tol:.3g})"
        if check.scaler_skipped and check.note:  # compared only up to GradScaler's first skip: say so
            why += f"; {check.note}"
        return Outcome("check_failed", timing=result.timing, reason=why, check=check, peak_memory_bytes=peak,
                       result=result, competed=result.competed, compile_s=compile_s)
    if result.ok:
        return Outcome("ok", timing=result.timing, check=check, peak_memory_bytes=peak, result=result,
                       competed=result.competed, compile_s=compile_s)
    error = (result.error or result.status).splitlines()[0][:300]
    # a run the budget ended keeps its contention: the answer's busy caution reads it (a baseline ended so on a busy
    # machine said nothing of the machine)
    return Outcome("failed", reason=error, check=check, peak_memory_bytes=peak, result=result, competed=result.competed,
                   compile_s=compile_s)
