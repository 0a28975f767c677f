"""What the model search may try on the user's model, for every front end alike: the Advisor's arguments made from
what a probe found in the model (`model_presets.probe`: its traits, its Hugging Face type), so that a value that
does not apply to it (no SDPA call: no attention backend; no convolution: no channels_last; no HF causal-LM loss:
no fused linear cross-entropy) is left out by the search (`axes.Scope`) and unavailable with why where asked for
(`model_presets.model_availability`), on the command line (`apextui advise --model`) and on the TUI's Advice screen.

The TUI's process never imports the user's model (its runs do, in their workers): `probe_model(apart=True)` probes
it in a worker process of its own, as a run would build it, and hands back the facts (`ModelFacts` pickles). A
process that shares the runs' process (`$APEXTUI_WORKER=thread`, the tests) probes it in place, as the CLI does.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable

from .availability import Availability
from .errors import ApextuiError
from .model_presets import PROBE_GRACE_S, ModelFacts, ProbeTimeout, RaisedInProbe, model_availability, probe, \
    probe_until
from .presets import Preset
from .workloads.failure import first_line
from .workloads.spec import MODEL
from .workloads.user_model import ModelSpecError, user_traceback, validate_static

POLL_S = 0.1  # how often the wait for the probe's worker looks whether the user stopped the advice


class ModelRaised(ApextuiError):
    """The user's function raised while the probe built the model (or its worker ended without a word): every run
    would fail the same way. `str()` is one line; `detail` the tail of the user's traceback or the worker's log."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail

    @classmethod
    def of(cls, spec: str, exc: BaseException) -> "ModelRaised":
        """What the user's function raised, in one line naming it and the tail of their traceback."""
        return cls(f"--model {spec!r}: your function raised {first_line(exc)}", user_traceback(exc, None))


def advisor_args(facts: ModelFacts, device: str,
                 fallback: Callable[[Preset], Availability] | None = None) -> dict[str, Any]:
    """The `Advisor` arguments that carry what `facts` found: the model's presets' availability refined by the
    model's traits (other presets: `fallback`'s, else `availability.availability`'s), the search's scope (its
    traits), the model's type (the answer's Liger code) and how its one forward called it (the answer's code where
    no run recorded it)."""
    def availability_fn(p: Preset) -> Availability:
        if p.workload == MODEL.name:
            return model_availability(p, device, facts)
        if fallback is not None:
            return fallback(p)
        from .availability import availability

        return availability(p, device)

    return {"availability_fn": availability_fn, "model_traits": facts.traits, "model_type": facts.model_type,
            "model_calling": facts.calling}


def probe_model(spec: str, device: str, *, apart: bool, stopped: Callable[[], bool] = lambda: False,
                deadline: float | None = None, budget_s: float | None = None, to_stderr: bool = False) -> \
        ModelFacts | None:
    """`model_presets.probe` of `spec` for `device`: in a worker process of its own where `apart` (the user's code
    never runs in this process, and a build that never returns is ended with it), else here (in a thread:
    `probe_until`). ModelSpecError for a usage error (as the CLI's exit 2), ModelRaised where the function raised,
    whatever it raised, ProbeTimeout where it has not answered by `deadline` (time.monotonic, which every process
    shares; the search's budget, `budget_s`, ends then); None where `stopped()` became true before the worker
    answered (it is killed). `to_stderr`: the user's output goes to this process's stderr (the CLI), else to a log
    (the TUI's terminal is its own)."""
    if not apart:
        try:
            return probe_until(spec, device, deadline, budget_s)
        except RaisedInProbe as exc:
            raise ModelRaised.of(spec, exc.original) from None
    validate_static(spec)  # a missing file or a syntax error needs no process
    return _probe_apart(spec, device, stopped, deadline, budget_s, to_stderr)


@dataclass(frozen=True)
class _Answer:
    """What the probe's worker sends: the facts, or why there are none (`kind`: "usage" or "raised")."""

    facts: ModelFacts | None = None
    kind: str = ""
    message: str = ""
    detail: str = ""


def _probe_main(conn: Connection, spec: str, device: str, log_path: str, deadline: float | None,
                to_stderr: bool) -> None:
    """The probe's worker: its output to `log_path` (the terminal is the TUI's) or to stderr (`to_stderr`: the
    CLI's, where stdout carries JSON), its one answer to `conn`; its forward waits no later than `deadline`."""
    from .run.worker import begin_worker, end_worker

    begin_worker(log_path, to_stderr)
    try:
        answer = _Answer(facts=probe(spec, device, deadline=deadline))
    except ModelSpecError as exc:
        answer = _Answer(kind="usage", message=str(exc), detail=exc.detail)
    except BaseException as exc:  # noqa: BLE001 - their function raised (SystemExit included): said, not raised
        raised = ModelRaised.of(spec, exc)
        answer = _Answer(kind="raised", message=str(raised), detail=raised.detail)
    conn.send(answer)
    conn.close()
    end_worker()  # a thread the user's model left running must not hold it


def _probe_apart(spec: str, device: str, stopped: Callable[[], bool], deadline: float | None,
                 budget_s: float | None, to_stderr: bool) -> ModelFacts | None:
    from .run.worker import EXIT_GRACE_S, _log_tail, _starting_processes, context, describe_exit

    ctx = context()
    fd, log_path = tempfile.mkstemp(prefix="apextui-model-probe-", suffix=".log")
    os.close(fd)
    ours, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_probe_main, name="apextui-model-probe",
                       args=(theirs, spec, device, log_path, deadline, to_stderr))
    answer: _Answer | None = None
    try:
        with _starting_processes():
            proc.start()
        theirs.close()  # the worker holds the only sending end: its exit is EOF here
        while True:
            if stopped():
                proc.kill()
                return None
            if deadline is not None and time.monotonic() >= deadline + PROBE_GRACE_S:
                proc.kill()
                raise ProbeTimeout(spec, budget_s)
            if ours.poll(POLL_S):
                try:
                    answer = ours.recv()
                except (EOFError, OSError):
                    pass
                break
        proc.join(EXIT_GRACE_S)
        if proc.is_alive():  # answered but stuck in its teardown
            proc.kill()
        if answer is None:
            proc.join(EXIT_GRACE_S)
            raise ModelRaised(f"--model {spec!r}: the process that built your model to look at it ended "
                              f"({describe_exit(proc.exitcode)}) before it answered", _log_tail(log_path))
        if answer.kind == "usage":
            raise ModelSpecError(answer.message, answer.detail)
        if answer.kind == "raised":
            raise ModelRaised(answer.message, answer.detail)
        return answer.facts
    finally:
        ours.close()
        theirs.close()
        if proc.pid is not None:
            proc.join(EXIT_GRACE_S)
        try:
            os.unlink(log_path)
        except OSError:
            pass


__all__ = ["ModelRaised", "advisor_args", "probe_model"]
