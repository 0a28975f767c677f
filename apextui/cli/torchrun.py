"""`torchrun --nproc-per-node N -m apextui --preset NAME --json`: one data-parallel run, one JSON stream.

Every rank trains the preset (its model under DDP, FSDP2 or Apex's DistributedFusedAdam, workloads/parallel.py)
on its own GPU (cuda:LOCAL_RANK) or, on CPU, with gloo. Rank 0 prints the stream of docs/json.md, merged
over the ranks (core/run/merge.py); the other ranks send their step records to rank 0 through the rendezvous
store and print nothing on stdout. How the ranks stop together and why nothing hangs: core/run/distributed.py
and docs/distributed.md.
"""

from __future__ import annotations

import os
from typing import Any

from .session import Outcome, RunSession, exit_code
from ..core.run.request import RunRequest
from ..core.presets import Preset
from ..core.run import events
from ..core.run.distributed import Channel, Coordinator, DistEnv, Group
from ..core.run.merge import Baseline
from ..core.run.data_parallel import MAX_GRACE_S, Collector, Reporter, data_parallel_problem, log
from ..core.run.runner import Runner, run_steps, warmup_steps
from ..core.errors import UsageProblem
from .errors import report
from .json_lines import JsonLinePrinter
from .refusals import refusal
from .signals import stop_notice, twice_error


def read_baseline(path: str, preset: Preset, device: str) -> Baseline:
    """The one-GPU run of `preset` in `path` (a `--json` output or a results file): its summary and its source;
    ValueError with one line when there is none that can be a baseline."""
    from ..core.measure.compare import baseline_problem
    from ..core.results import ResultsError, load_results

    try:
        rows = load_results(path)
    except ResultsError as exc:
        raise ValueError(f"--baseline-json: {exc}") from None
    size = "cpu" if device == "cpu" else "default"
    candidates = [r for r in rows if r.preset == preset.name and r.device == device and r.size == size
                  and not r.summary.distributed]
    if not candidates:
        raise ValueError(f"--baseline-json: {path} has no single-process run of {preset.name} on {device} "
                         f"({size} size); make one with `apextui --preset {preset.name} --json > FILE`")
    row = candidates[-1]
    problem = baseline_problem(row.status, row.summary)
    if problem:
        raise ValueError(f"--baseline-json: the run of {preset.name} in {path} {problem}; it cannot be a baseline")
    return Baseline(row.summary, str(path))


def _checked(request: RunRequest, env: DistEnv, printer: JsonLinePrinter | None) -> tuple[float, Any] | int:
    """Before the rank joins the others: the collective timeout and the one-GPU baseline (`--baseline-json`), or
    the exit code of a refusal (a bad option, an unavailable preset, one that does not fit), written."""
    from ..core.availability import Availability, availability
    from ..core.run.distributed import timeout_s

    preset = request.preset
    try:
        timeout = timeout_s()
        baseline = read_baseline(request.baseline_path, preset, request.device) if request.baseline_path else None
    except ValueError as exc:  # a bad --baseline-json or $APEXTUI_DIST_TIMEOUT: rank 0 says it
        bad = UsageProblem(str(exc))
        return report(bad) if env.rank == 0 else bad.exit_code
    problem = data_parallel_problem(preset)
    avail = (Availability(False, problem, "run it without torchrun") if problem
             else availability(preset, request.device))
    refused = refusal(request, avail, printer, lambda message: log(env.rank, message))
    return refused if refused is not None else (timeout, baseline)


class _Rank:
    """This rank's part of a data-parallel run: its `start` line (rank 0), joining the others, training, and what the
    signals do (rank 0 speaks; a second signal ends rank 0's stream as a single run's does)."""

    def __init__(self, request: RunRequest, env: DistEnv, printer: JsonLinePrinter | None) -> None:
        self.request, self.env, self.printer = request, env, printer
        self.collector: Collector | None = None

    def notice(self, signum: int) -> str:
        return stop_notice(signum, "every rank stops after the same step") if self.printer is not None else ""

    def again(self, signum: int, words: str) -> None:
        if self.collector is not None:
            self.collector.finish(final=self.collector.local, waited=True)
        elif self.printer is not None:  # as a single run's (json_run): no `end` line without a `start` line
            error = twice_error(signum, words)
            before_start = self.printer.close_unstarted()
            if before_start:
                log(0, f"{error} before the run started: nothing measured")
            elif before_start is not None:
                self.printer.emit(events.end_line("stopped", error))

    def start_line(self) -> int:
        """The `start` line (rank 0); the warm-up steps."""
        from ..core.env import describe
        from ..core.run.distributed import backend_for

        preset, device, env = self.request.preset, self.request.device, self.env
        steps_n = run_steps(preset, self.request.steps)
        warmup = warmup_steps(preset, steps_n)
        if self.printer is not None:
            self.printer.emit(events.start_event(
                preset, device, steps_n, warmup, describe(device),
                distributed={"world_size": env.world_size, "backend": backend_for(device),
                             "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", env.world_size))}))
        return warmup

    def not_joined(self, exc: Exception) -> Outcome:
        error = f"could not join the other ranks: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        log(self.env.rank, error)
        if self.printer is not None:
            self.printer.emit(events.end_line("failed", error))
        return Outcome("failed")

    def train(self, group: Group, session: RunSession, warmup: int, timeout: float, baseline: Any) -> Outcome:
        """Train with the others (rank 0 collects every rank's steps); how it ended."""
        channel = Channel(group.store, self.env.world_size)
        grace = min(timeout, MAX_GRACE_S)
        if self.printer is not None:
            self.collector = Collector(channel, self.env.world_size, warmup, self.printer, group.backend, baseline,
                                       grace)
            callback: Any = self.collector.on_local
        else:
            callback = Reporter(channel, self.env.rank)
        runner = Runner(self.request, callback, analyse=False, coordinator=Coordinator(group))
        if isinstance(callback, Reporter):
            callback.runner = runner
        if self.collector is not None:
            self.collector.runner = runner
            self.collector.start()
        session.stops(runner.stop)
        runner.run()
        result = runner.result
        status = (self.collector.finish(result) if self.collector is not None
                  else result.status if result is not None else "failed")
        return Outcome(status=status, failed_because="the run failed (its end line says why)",
                       stdout_failure=self.printer.failure if self.printer is not None else None)


def run(request: RunRequest, env: DistEnv) -> int:
    """One rank of a data-parallel run of `request` (its device resolved); the exit code (0, 1, 2, 3, 130, 143
    as a single run's)."""
    printer = JsonLinePrinter() if env.rank == 0 else None
    checked = _checked(request, env, printer)
    if isinstance(checked, int):
        return checked
    timeout, baseline = checked
    rank = _Rank(request, env, printer)
    session = RunSession(rank.notice, rank.again, quiet=env.rank != 0, say=lambda message: log(env.rank, message))
    with session:  # entered before the `start` line: from it on, every signal leads to an `end` line
        warmup = rank.start_line()
        try:
            group = Group(env, request.device, timeout)
        except Exception as exc:  # noqa: BLE001 - rendezvous or init timed out, a bad address
            # said once, on every rank (`not_joined`); a signal during the rendezvous still decides the code
            return exit_code(rank.not_joined(exc), session.signals, quiet=True)
        try:
            outcome = rank.train(group, session, warmup, timeout, baseline)
        finally:
            group.close()
    return session.exit_code(outcome)
