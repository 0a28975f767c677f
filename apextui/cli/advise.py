"""`apextui advise`: which configuration to use on this machine, from runs made here (core/advise/).

Human-readable output by default, one JSON document with --json; progress on stderr (a line per run).
Exit codes: 0 ok, 1 every run failed, 2 usage, 3 device unavailable, 130 interrupted (Ctrl-C; 143 for
SIGTERM), with the partial advice printed: one signal is enough, even while a step hangs (its worker is ended
`run.STOP_GRACE_S` after the stop).
"""

from __future__ import annotations

import argparse
import os
import json
import sys
import threading
from typing import Any, Callable, Sequence

from .argtypes import add_shared_options, int_in, seconds_in
from ..core.advise.search import DEFAULT_BUDGET_S, SEARCH_STEPS
from ..core.advise import DEFAULT_REPEATS, DEFAULT_STEPS, MAX_REPEATS, AdviceError, parse_workloads
from ..core.advise.records import SCHEMA
from ..core.workloads.spec import SHIPPED
from ..core.errors import NotHere, UsageProblem
from .errors import report
from .session import Outcome, RunSession, exit_code, guarded
from .signals import stop_notice



def _workloads(text: str) -> tuple[str, ...]:
    try:
        return parse_workloads(text)
    except AdviceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DESCRIPTION = ("Which configuration is fastest on this machine, and is Apex worth installing here: runs every "
               "available preset of each workload, interleaved, and computes the verdict from those runs only.")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.description = parser.description or DESCRIPTION
    parser.add_argument("--json", action="store_true", help="print the advice as one JSON document")
    add_shared_options(
        parser, device_help="auto (default): CUDA when present, else CPU at the presets' small size",
        steps_help=f"steps a run (default {DEFAULT_STEPS['cuda']} on CUDA, {DEFAULT_STEPS['cpu']} on CPU; a search "
                   f"with --model: {SEARCH_STEPS['cuda']} and {SEARCH_STEPS['cpu']})",
        model_help="advise on your own model: a search of its configurations (docs/your-model.md)",
        nproc_help="advise for a data-parallel run on N ranks of this machine (through torchrun's API; "
                   "docs/distributed.md)")
    parser.add_argument("--repeats", type=int_in(1, MAX_REPEATS), metavar="R",
                        help=f"runs of each preset, interleaved (default {DEFAULT_REPEATS})")
    parser.add_argument("--workloads", type=_workloads, metavar="LIST",
                        help=f"comma-separated, from {','.join(SHIPPED)} (default: all; with --model: none)")
    parser.add_argument("--budget", type=seconds_in(1.0, 86400.0), metavar="SECONDS",
                        help=f"with --model: the search's time budget (default {DEFAULT_BUDGET_S['cuda']:.0f} s on "
                             f"CUDA, {DEFAULT_BUDGET_S['cpu']:.0f} s on CPU)")
    parser.add_argument("--config", metavar="AXIS=VALUE,...",
                        help="with --model: measure this point against fp32 (interleaved repeats) instead of "
                             "searching")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the last advice stored for this environment (GPU, driver, torch, Apex) if any")
    return parser


def build_parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog="apextui advise"))


def log(message: str) -> None:
    try:
        print(f"apextui: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _print(text: str) -> bool:
    """Through apextui.output: a stdout that fails raises OutputFailed, which cli.main reports and exits with."""
    from .output import write

    write(text + "\n")
    return True


class OutputOnce:
    """The advice printed once: by the run's end or by a second signal's handler (another thread), whichever comes
    first; the other prints nothing, so that stdout holds one document when the two come together (the stop's grace
    ending a hung run as the second signal arrives). Reentrant: a handler on the printing thread itself finds it
    printed."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._lock = threading.RLock()
        self._done = False

    def __call__(self, doc: Callable[[], dict[str, Any]]) -> bool:
        with self._lock:
            if self._done:
                return True
            self._done = True
            return _output(doc(), self.as_json)


def _output(doc: dict[str, Any], as_json: bool) -> bool:
    from ..core.advise import format_text

    if as_json:
        return _print(json.dumps(doc, indent=2))
    model = doc.get("model")
    norms = ((model.get("norm_finder") or {}).get("summary") if model else None) or ""
    head = (f"model {model['name']} ({model['spec']}): {model['params']:,} parameters at its "
            f"{'CPU size' if model['size'] == 'small' else 'full size'}"
            f"{f'; norms: {norms}' if norms else ''}\n") if model else ""
    return _print(head + format_text(doc, terminal_width()))


def terminal_width() -> int | None:
    """The terminal's columns where stdout is one ($COLUMNS where set), else None: a file or a pipe gets every column
    and unwrapped lines."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else None
    except (OSError, ValueError):
        return None


class ProgressPrinter:
    """A line on stderr per run (its end), per skipped preset, and when a run starts compiling."""

    def __init__(self) -> None:
        self._compiling: set[tuple[int, str]] = set()

    def __call__(self, p: Any) -> None:
        if p.event in ("plan", "skip", "search"):
            log(p.message)
        elif p.event == "run_end":
            log(p.line())
        elif p.event == "run" and p.status == "compiling" and (p.index, p.preset) not in self._compiling:
            self._compiling.add((p.index, p.preset))
            log(p.line() + " (compile time is reported apart, never in ms/step)")


def run(args: argparse.Namespace, runner_factory: Any = None) -> int:
    """`apextui advise` with parsed arguments; the exit code. `runner_factory`: tests."""
    from ..core.analysis.torch_messages import diverted

    try:
        with diverted():  # torch's notes on apextui's own profiler and imports: to the log, not the user
            return guarded(lambda: _run(args, runner_factory))
    except KeyboardInterrupt:  # before the signal handlers are in place (e.g. while torch imports)
        log("interrupted before any run started")
        return exit_code(Outcome("stopped"))


def _elsewhere(args: argparse.Namespace) -> int | None:
    """`apextui advise` that runs elsewhere than in this process alone: `--nproc N` (the ranks started here) or
    under torchrun (every rank); its exit code, or None for a run here."""
    from ..core.run.distributed import DistEnv

    try:
        dist_env = DistEnv.from_env()
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if getattr(args, "nproc", None) is not None:
        if dist_env is not None:
            raise UsageProblem("--nproc starts the ranks itself: run it without torchrun")
        from .launch import launch

        return launch(args.nproc, getattr(args, "argv", None) or sys.argv[1:])
    if dist_env is not None:
        if args.reuse:
            raise UsageProblem("--reuse is for advice measured on one GPU; a data-parallel advice is always measured")
        return guarded(lambda: _run_distributed(args, dist_env), speaks=dist_env.rank == 0)
    return None


def _unavailable(args: argparse.Namespace, reason: str, fix: str) -> int:
    """The device asked for is not here: one line on stderr and, with --json, the advice's document saying so."""
    code = report(NotHere(reason))  # said first: a stdout that then fails still leaves the reason on stderr
    if args.json:
        _print(json.dumps({"kind": "apextui-advice", "schema": SCHEMA, "status": "unavailable",
                           "device": args.device, "reason": reason, "fix": fix}))
    return code


def _check_options(args: argparse.Namespace) -> None:
    """Options that make no advice together: UsageProblem saying why."""
    config, budget = getattr(args, "config", None), getattr(args, "budget", None)
    if getattr(args, "model", None) is None and (config is not None or budget is not None):
        raise UsageProblem(f"{'--config' if config is not None else '--budget'} goes with --model FILE.py:FUNC")
    if config is not None and budget is not None:
        raise UsageProblem("--budget is for the search; --config measures one point against fp32 (give one of them)")


def _model_runs(args: argparse.Namespace, device: str, presets: list[Any]) -> dict[str, Any]:
    """With `--model`: the Advisor's arguments for the user's model (its presets added to `presets`, their
    availability, the search's budget), and `facts` (the model, named in the advice). Its errors are raised."""
    import time

    from ..core.config.point import BASELINE
    from ..core.model_presets import config_preset
    from ..core.model_scope import advisor_args
    from .model_option import config_of, model_for_advice

    model, config, budget = args.model, getattr(args, "config", None), getattr(args, "budget", None)
    # the search's budget counts from here: loading the model and building it to check it are part of the wall
    # time the user gave (a 60 s build with --budget 30 took 128 s)
    budget_started = time.monotonic() if config is None else None
    search_budget = None if config is not None else budget if budget is not None else DEFAULT_BUDGET_S[device]
    deadline = budget_started + search_budget if budget_started is not None and search_budget is not None else None
    facts, model_presets = model_for_advice(model, device, args.reuse, deadline, search_budget)
    if config is not None:
        point = config_of(config)
        model_presets = [p for p in model_presets if p.config == BASELINE]
        if point != BASELINE:
            model_presets.append(config_preset(model, point))
    return {"facts": facts, "presets": [*presets, *model_presets], "workloads": (*(args.workloads or ()), "model"),
            "search_budget_s": search_budget, "budget_started": budget_started, **advisor_args(facts, device)}


def _reused(advisor: Any, args: argparse.Namespace) -> int | None:
    """`--reuse`: the advice stored for this environment, printed (its exit code); None when there is none to
    reuse (said on stderr): then it is measured."""
    doc, why = advisor.reusable(steps=args.steps, repeats=args.repeats)
    if doc is None:
        log(f"--reuse: nothing to reuse: {why}; measuring now")
        return None
    log(f"{doc['reuse_note']}; run without --reuse to measure again")
    if doc.get("trust_note"):
        log(f"warning: {doc['trust_note']}")
    return exit_code(Outcome("ok", stdout_broken=not _output(doc, args.json)))


def _runs(args: argparse.Namespace, device: str) -> dict[str, Any]:
    """The Advisor's arguments: the presets (a user preset that does not load is a warning), and with `--model`
    the user's model's (`_model_runs`); `facts`, the model or None."""
    from ..core.presets import load_all

    presets, errors = load_all()
    for e in errors:
        log(f"warning: skipped a user preset: {e.message}")
    _check_options(args)
    if getattr(args, "model", None) is not None:
        return _model_runs(args, device, presets)
    return {"facts": None, "presets": presets, "workloads": args.workloads}


def _advisor(args: argparse.Namespace, device: str, runs: dict[str, Any], runner_factory: Any) -> tuple[Any, Any]:
    """The Advisor, and the factory of the search's runs (None without a search), each run in a worker process
    unless `runner_factory` (tests) says otherwise."""
    from ..core.advise import Advisor

    search_factory = None
    wait_before = os.environ.get("OMP_WAIT_POLICY")
    if device == "cpu" and runs.get("search_budget_s") is not None and runner_factory is None:
        from ..core.advise.cpu_share import others_now, passive_wait

        passive_wait(others_now())  # before the worker processes' server starts: OpenMP reads it as it loads
    if runner_factory is None:
        runner_factory, search_factory = _runs_in_processes(search=runs.get("search_budget_s") is not None)
    try:
        return Advisor(device, steps=args.steps, repeats=args.repeats or DEFAULT_REPEATS,
                       runner_factory=runner_factory, on_progress=ProgressPrinter(),
                       search_runner_factory=search_factory, **runs), search_factory
    finally:  # the workers' server has it; this process (a caller's, where advise runs in it) gets its own back
        if wait_before is None:
            os.environ.pop("OMP_WAIT_POLICY", None)
        else:
            os.environ["OMP_WAIT_POLICY"] = wait_before


class _Advice:
    """What the signals do to an advice being measured: the first stops the current run after its step (its worker is
    killed if it does not end within STOP_GRACE_S: a hung step never looks at the stop), and the advice so far is
    printed; the second quits at once with it. `rank0`: this process speaks (every process but the other ranks of a
    data-parallel advice)."""

    def __init__(self, advisor: Any, as_json: bool, notice: str, rank0: bool = True, kill: bool = True) -> None:
        self.advisor, self.words, self.rank0, self.kill = advisor, notice, rank0, kill
        self.output = OutputOnce(as_json)

    def notice(self, signum: int) -> str:
        return (stop_notice(signum, self.words) if self.kill else f"interrupted: {self.words}") if self.rank0 else ""

    def again(self, signum: int, words: str) -> None:
        if self.rank0:
            log(f"{words}: quitting at once with the partial advice")
        if self.kill:
            self.advisor.kill_run(words)  # the process exits next: its worker must not go on
        self.advisor.interrupted = True
        if self.rank0:
            self.output(self.advisor.document)

    def outcome(self, doc: dict[str, Any]) -> Outcome:
        """How the advice ended: printed (rank 0), stopped, or every run failing."""
        printed = self.output(lambda: doc) if self.rank0 else True
        return Outcome("stopped" if self.advisor.interrupted else "ok" if doc["runs"]["ok"] else "failed",
                       failed_because="every run failed" if doc["runs"]["total"] else "no preset could run here",
                       stdout_broken=not printed)


def _run(args: argparse.Namespace, runner_factory: Any) -> int:
    from functools import partial

    from ..core.advise.run import STOP_GRACE_S
    from . import refusals

    code = _elsewhere(args)
    if code is not None:
        return code
    device = refusals.resolve(args.device, partial(_unavailable, args))
    if isinstance(device, int):
        return device
    runs = _runs(args, device)
    facts = runs.pop("facts")
    advisor, search_factory = _advisor(args, device, runs, runner_factory)
    reused = _reused(advisor, args) if args.reuse else None
    if reused is not None:
        return reused
    if device == "cpu":
        log("on CPU the presets run at their small size; the Apex presets cannot run (CUDA only)")
    advice = _Advice(advisor, args.json, f"stopping after the current step (a run that has not ended "
                     f"{STOP_GRACE_S:.0f} s later is ended), then printing the partial advice")
    session = RunSession(advice.notice, advice.again)
    session.stops(advisor.stop)
    with session:
        doc = advisor.run()
    _worker_log(search_factory, doc)
    _name_or_store(doc, facts)
    return session.exit_code(advice.outcome(doc))


def _name_or_store(doc: dict[str, Any], facts: Any) -> None:
    """The user's model is named in the advice, never stored (its code may change); any other advice is stored."""
    if facts is not None:
        from ..core.model_presets import describe

        doc["model"] = describe(facts)
        return
    from ..core.advise import store

    try:
        path = store(doc)
        log(f"advice stored in {path} (reuse it with --reuse)")
    except OSError as exc:
        log(f"warning: could not store the advice: {exc}")


def _worker_log(factory: Any, doc: dict[str, Any]) -> None:
    """Where the search's runs printed what they printed, and how many lines of each kind (`advise.search_log`): on
    stderr, and as the document's `search.log`."""
    path = getattr(factory, "log_path", "") if getattr(factory, "keep_log", False) else ""
    if not path or not doc.get("search"):
        return
    from ..core.advise.search_log import summarise

    summary = summarise(path)
    if summary is None:
        return
    doc["search"]["log"] = summary.to_dict()
    for line in summary.words():
        log(line)


def _runs_in_processes(search: bool) -> tuple[Any, Any]:
    """Each run in a worker process of its own, as the TUI's (`worker.headless_runner_factory` says why);
    $APEXTUI_WORKER=thread keeps them in this process. With `search` (`--model`'s search) also the factory of
    the search's runs, which share one worker (core/run/reusable.py says why); else None."""
    from ..core.run.worker import env_runner_factory, prestart, thread_runner_factory

    factory = env_runner_factory(headless=True)
    if factory is not thread_runner_factory:
        prestart()  # the server imports torch once; every run's process is forked from it
    if not search:
        return factory, None
    from ..core.advise.search_log import new_path
    from ..core.run.reusable import search_runner_factory

    return factory, search_runner_factory(headless=True, log_path=str(new_path()))


def _run_distributed(args: argparse.Namespace, dist_env: Any) -> int:
    """`apextui advise` on every rank under torchrun: the same runs in the same order on every rank, each
    data-parallel (core/run/data_parallel.py); rank 0 prints the advice, the verdicts from the merged runs (the slowest
    rank's ms), with the one noise rule. Not stored: the stored advice is a one-GPU machine's."""
    from ..core.presets import load_all
    from ..core.run.distributed import Group, timeout_s
    from ..core.run.data_parallel import MAX_GRACE_S, DataParallelRuns
    from . import refusals

    rank0 = dist_env.rank == 0
    device = refusals.resolve(args.device, lambda reason, fix: report(NotHere(reason)) if rank0 else NotHere.exit_code)
    if isinstance(device, int):
        return device
    try:
        timeout = timeout_s()
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    presets, _ = load_all()  # a broken preset file is said at once, before the ranks wait for each other
    try:
        group = Group(dist_env, device, timeout)
    except Exception as exc:  # noqa: BLE001 - rendezvous or init failed or timed out
        log(f"error: could not join the other ranks: {type(exc).__name__}: {exc}")
        return exit_code(Outcome("failed"), quiet=True)
    try:
        advisor = _distributed_advisor(args, device, presets, DataParallelRuns(group, min(timeout, MAX_GRACE_S)), rank0)
        advice = _Advice(advisor, args.json, "every rank stops after the same step, then the partial advice is "
                         "printed (again to quit at once)", rank0=rank0, kill=False)
        session = RunSession(advice.notice, advice.again, quiet=not rank0)
        session.stops(advisor.stop)
        with session:
            doc = advisor.run()
    finally:
        group.close()
    doc["distributed"] = {"world_size": dist_env.world_size, "backend": group.backend}
    if rank0:
        log(f"data-parallel advice on {dist_env.world_size} ranks ({group.backend}): every ms/step is the slowest "
            "rank's, every rank training the preset's batch")
    return session.exit_code(advice.outcome(doc))


def _distributed_advisor(args: argparse.Namespace, device: str, presets: list[Any], factory: Any,
                         rank0: bool) -> Any:
    """The Advisor of a data-parallel advice: every preset that can run data-parallel, through `factory`; a remote
    rank's stop stops it."""
    from ..core.advise import Advisor
    from ..core.availability import Availability, availability
    from ..core.run.data_parallel import data_parallel_problem

    def available(preset: Any) -> Availability:
        problem = data_parallel_problem(preset)
        return Availability(False, problem, "run it without torchrun") if problem else availability(preset, device)

    advisor = Advisor(device, steps=args.steps, repeats=args.repeats or DEFAULT_REPEATS, workloads=args.workloads,
                      presets=presets, runner_factory=factory, availability_fn=available,
                      on_progress=ProgressPrinter() if rank0 else None, data_parallel=True)
    factory.on_remote_stop = advisor.stop
    return advisor


def main(argv: Sequence[str] | None = None, runner_factory: Any = None) -> int:
    """`python -m apextui.cli.advise ...` / tests: parse and run."""
    return run(build_parser().parse_args(argv), runner_factory=runner_factory)


if __name__ == "__main__":
    raise SystemExit(main())
