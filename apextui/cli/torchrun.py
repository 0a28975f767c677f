"""`torchrun --nproc-per-node N -m apextui --preset NAME --json`: one data-parallel run, one JSON stream.

Every rank trains the preset (its model under DDP, FSDP2 or Apex's DistributedFusedAdam, workloads/parallel.py)
on its own GPU (cuda:LOCAL_RANK) or, on CPU, with gloo. Rank 0 prints the stream of docs/json.md, merged
over the ranks (core/run/merge.py); the other ranks send their step records to rank 0 through the rendezvous
store and print nothing on stdout. How the ranks stop together and why nothing hangs: core/run/distributed.py
and docs/distributed.md.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from .outcome import Outcome, exit_code
from ..core.run.request import RunRequest
from ..core.presets import Preset
from ..core.run import events
from ..core.run.distributed import Channel, Coordinator, DistEnv, Group
from ..core.run.merge import Baseline
from ..core.run.data_parallel import MAX_GRACE_S, Collector, Reporter, data_parallel_problem, log
from ..core.run.runner import Runner, run_steps, warmup_steps
from ..core.exits import EXIT_FAILED, EXIT_USAGE
from .json_lines import JsonLinePrinter
from .refusals import refusal
from .signals import StopOnSignals, stop_notice, twice_error

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
    except ValueError as exc:
        if env.rank == 0:
            print(f"apextui: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    problem = data_parallel_problem(preset)
    avail = (Availability(False, problem, "run it without torchrun") if problem
             else availability(preset, request.device))
    refused = refusal(request, avail, printer, lambda message: log(env.rank, message))
    return refused if refused is not None else (timeout, baseline)


def run(request: RunRequest, env: DistEnv) -> int:
    """One rank of a data-parallel run of `request` (its device resolved); the exit code (0, 1, 2, 3, 130, 143
    as a single run's)."""
    from ..core.env import describe
    from ..core.run.distributed import backend_for

    preset, device = request.preset, request.device
    rank0 = env.rank == 0
    printer = JsonLinePrinter() if rank0 else None
    checked = _checked(request, env, printer)
    if isinstance(checked, int):
        return checked
    timeout, baseline = checked

    runner: Runner | None = None
    stop_early = threading.Event()

    def first(signum: int) -> None:
        if rank0:
            log(0, stop_notice(signum, "every rank stops after the same step"))
        stop_early.set()
        if runner is not None:
            runner.stop()

    collector: Collector | None = None

    def again(signum: int) -> None:
        if collector is not None:
            collector.finish(final=collector.local, waited=True)
        elif printer is not None:  # as a single run's (json_run): no `end` line without a `start` line
            error = twice_error(signum, signals.twice())
            before_start = printer.close_unstarted()
            if before_start:
                log(0, f"{error} before the run started: nothing measured")
            elif before_start is not None:
                printer.emit(events.end_line("stopped", error))

    signals = StopOnSignals(first, again)  # named before the `with`: `again` may run as soon as it is entered
    with signals:
        steps_n = run_steps(preset, request.steps)
        warmup = warmup_steps(preset, steps_n)
        if printer is not None:
            printer.emit(events.start_event(
                preset, device, steps_n, warmup, describe(device),
                distributed={"world_size": env.world_size, "backend": backend_for(device),
                             "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", env.world_size))}))
        try:
            group = Group(env, device, timeout)
        except Exception as exc:  # noqa: BLE001 - rendezvous or init timed out, a bad address
            error = f"could not join the other ranks: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            log(env.rank, error)
            if printer is not None:
                printer.emit(events.end_line("failed", error))
            return EXIT_FAILED
        try:
            channel = Channel(group.store, env.world_size)
            grace = min(timeout, MAX_GRACE_S)
            if rank0:
                assert printer is not None
                collector = Collector(channel, env.world_size, warmup, printer, group.backend, baseline, grace)
                callback: Any = collector.on_local
            else:
                callback = Reporter(channel, env.rank)
            runner = Runner(request, callback, analyse=False, coordinator=Coordinator(group))
            if isinstance(callback, Reporter):
                callback.runner = runner
            if collector is not None:
                collector.runner = runner
                collector.start()
            if stop_early.is_set():
                runner.stop()
            runner.run()
            result = runner.result
            status = collector.finish(result) if collector is not None else (result.status if result else "failed")
        finally:
            group.close()
    return exit_code(Outcome(status=status, signals=signals, failed_because="the run failed (its end line says why)",
                             stdout_failure=printer.failure if printer is not None else None, quiet=not rank0))
