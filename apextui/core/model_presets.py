"""The user's model (`--model FILE.py:FUNC`) as presets: one a model configuration (`workloads.spec.MODEL`), so that
`apextui list`, the headless run, the advice and the TUI handle it as they handle the shipped presets.

`presets_for(spec)` makes them (no user code runs: the TUI process never imports the user's model, its
worker does). `probe(spec, device, seed)` imports the user's file and calls the function once, in this
process, for the front ends whose runs happen in this process anyway (headless, advise, list): a usage
error (the file, its syntax, an import error, no such function, a wrong return type) raises
`ModelSpecError` (`fn`: the function, where the caller loaded it already); what it built is kept for the
first run (`user_model.keep`), and the facts it yields (parameters, norms, convolutions, SDPA calls, the loss's
form: `traits`) refine availability (`model_availability`: no norms, no norm swap; no convolution, no channels_last;
no SDPA call, no attention backend) and what the search tries (`traits`: `axes.Scope`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .availability import Availability, availability
from .errors import ApextuiError
from .config.calling import Calling
from .config.needs import applies_availability
from .config.point import Config
from .presets import Preset
from .workloads import user_model
from .workloads.spec import MODEL
from .workloads.user_model import ModelSpecError

DEFAULT_STEPS = 50
DEFAULT_WARMUP = 10
# how long the probe waits for the model's one forward at its CPU size (`_one_forward`): a tiny model's takes well under
# a second; past this, what it would have found (an SDPA call) is left unknown and the search tries the attention axis
PROBE_FORWARD_S = 15.0
# past the budget's end, how long `probe_until` still waits for a probe whose forward's wait ended there: what it found
# by then (a build that returned, a forward that did not) is returned rather than called a build that hung
PROBE_GRACE_S = 1.0


@dataclass(frozen=True)
class ModelFacts:
    """What a probe learnt of the model: its name, trainable parameters and how many norms Apex could swap."""

    spec: str
    name: str
    params: int
    norms: int
    units: str
    small: bool  # built at the CPU size
    norm_report: dict[str, Any] = field(default_factory=dict)  # the norm finder's record (`NormReport.as_dict`)
    unavailable_norms: str = ""  # why the norm swap does not apply (names the classes seen), "" where it does
    convs: int = 0  # 2-D convolutions
    sdpa_calls: int | None = None  # F.scaled_dot_product_attention calls in one forward at the CPU size (None: not run)
    model_type: str = ""  # the Hugging Face model type ("llama"), "" for another model
    # what the configuration values need of a model that it has (`axes.Trait`); None: not known (every value may apply)
    traits: frozenset[str] | None = None
    # how its one forward called it (`calling.Calling`; None: not run): the answer's code where no run recorded it
    calling: Calling | None = None


def preset_name(spec: str, label: str) -> str:
    """'gpt:build/bf16', 'gpt:build/bf16+fused+compile': the model's short name and the configuration's label
    (how the runs are named in tables and JSON)."""
    return f"{user_model.model_name(spec)}/{label}"


def config_preset(spec: str, config: Config, steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP,
                  seed: int = 0, lr: float = 1e-3) -> Preset:
    """The preset of one point (`--config`, the search). Raises ModelSpecError for a malformed spec."""
    user_model.split_spec(spec)
    return Preset(name=preset_name(spec, config.label), path=spec, workload=MODEL.name,
                  description=f"{user_model.model_name(spec)}: {config.description()}", steps=steps,
                  warmup=min(warmup, steps - 1), lr=lr, seed=seed, model=spec, config=config)


def presets_for(spec: str, steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP, seed: int = 0,
                lr: float = 1e-3, names: tuple[str, ...] | None = None) -> list[Preset]:
    """A preset per named point of the model workload (all of them, or those of `names`), in the registry's order.
    Raises ModelSpecError for a malformed spec (no file or function is looked at)."""
    user_model.split_spec(spec)
    chosen = [v for v in MODEL.points if names is None or v.name in names]
    return [Preset(name=preset_name(spec, v.name), path=spec, workload=MODEL.name,
                   description=f"{user_model.model_name(spec)}: {v.description}", steps=steps,
                   warmup=min(warmup, steps - 1), lr=lr, seed=seed, model=spec,
                   config=v.config)
            for v in chosen]


def point_names() -> tuple[str, ...]:
    """The model workload's named points (`--variant NAME`)."""
    return tuple(v.name for v in MODEL.points)


class ProbeTimeout(ApextuiError):
    """The user's file and function (import, build, one forward) had not returned when the wait for them ended."""

    def __init__(self, spec: str, budget_s: float | None = None) -> None:
        super().__init__(f"--model {spec!r}: your file and function had not returned after {budget_s or 0:.0f} s, the "
                         "whole budget (apextui imports your file and builds the model once, with one forward on "
                         "the CPU, in a worker process, before it searches): nothing was measured; give --budget "
                         "more time if the build is slow")


class RaisedInProbe(Exception):
    """What the user's code raised while the probe ran it in a thread (`original`, whatever its class): apart from
    what reaches the caller's own thread (a signal's KeyboardInterrupt), which is no fault of theirs."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(type(original).__name__))
        self.original = original


def probe_until(spec: str, device: str, deadline: float | None, budget_s: float | None = None,
                clock: Callable[[], float] = time.monotonic) -> ModelFacts:
    """`probe` in a thread of its own, waited for until `deadline` (on `clock`; None: as long as it takes): a build
    that never returns holds the caller no longer than the budget, and a signal still reaches the caller's thread
    meanwhile. For a process that runs the user's code anyway (`APEXTUI_WORKER=thread`); others probe in a worker
    process they can end (`model_scope.probe_model`). ModelSpecError as `probe` raises it; RaisedInProbe for whatever
    else the user's code raised; `PROBE_GRACE_S` past the deadline, ProbeTimeout (the thread, a daemon, is left to
    the process's exit)."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["facts"] = probe(spec, device, deadline=deadline, clock=clock)
        except ModelSpecError as exc:
            box["error"] = exc
        except BaseException as exc:  # noqa: BLE001 - their code's, reported by the caller
            box["error"] = RaisedInProbe(exc)

    thread = threading.Thread(target=body, name="apextui-probe", daemon=True)
    thread.start()
    while thread.is_alive():
        left = None if deadline is None else deadline + PROBE_GRACE_S - clock()
        if left is not None and left <= 0:
            raise ProbeTimeout(spec, budget_s)
        thread.join(0.1 if left is None else min(0.1, left))
    if "error" in box:
        raise box["error"]
    return box["facts"]


def probe(spec: str, device: str, seed: int = 0, fn: Callable[..., Any] | None = None,
          deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> ModelFacts:
    """Import the user's file and build the model once (CPU size on CPU), as a run would, in this process:
    ModelSpecError for usage errors; any exception the user's function raises passes through (the caller
    reports a failed run). The setup built is kept for this process's first run of the model. `deadline` (on
    `clock`): the one forward that finds the model's traits waits at most until then (`PROBE_FORWARD_S` at most)."""
    import torch

    from .workloads.liger import model_type
    from .workloads.norm_swap import find_norms
    from .workloads.traits import count_convs, traits

    fn = fn if fn is not None else user_model.load_function(spec)
    small = device == "cpu"
    torch.manual_seed(seed)
    setup = user_model.call_build(fn, spec, small)
    report, _ = find_norms(setup.model)
    wait = PROBE_FORWARD_S if deadline is None else max(0.0, min(PROBE_FORWARD_S, deadline - clock()))
    sdpa_calls, calling = _one_forward(fn, spec, setup if small else None, seed, wait)
    loss = calling.loss if calling is not None else None
    facts = ModelFacts(spec=spec, name=user_model.model_name(spec),
                       params=sum(p.numel() for p in setup.model.parameters() if p.requires_grad),
                       norms=report.swappable, units=setup.units, small=small, norm_report=report.as_dict(),
                       unavailable_norms=report.unavailable_reason() if report.swappable == 0 else "",
                       convs=count_convs(setup.model), sdpa_calls=sdpa_calls, model_type=model_type(setup.model),
                       traits=traits(setup.model, norms=report.swappable, sdpa_calls=sdpa_calls, loss=loss),
                       calling=calling)
    user_model.keep(spec, small, seed, setup)
    return facts


def _one_forward(fn: Callable[..., Any], spec: str, small: Any, seed: int,
                 wait_s: float = PROBE_FORWARD_S) -> tuple[int | None, Calling | None]:
    """One training-mode forward of the model at its CPU size, on the CPU (a copy of `small`, the CPU-size setup built
    already, else one built here: the function takes `small`), counting its SDPA calls (`traits.count_sdpa`) and
    noting how it was called (`calling.Calling`: its inputs' form, where its loss comes from). Torch's random state
    is left as it was, and the model that runs is kept apart from the one a run takes. (None, None) where the function
    has no CPU size (the full model's forward on the CPU could take minutes: the attention axis is then not ruled
    out), where the forward raised (the run will say why), or where it has not returned within `wait_s`: it runs in a
    thread of its own, so that a forward that hangs (the run's budget and stop end that one, in its worker) never
    holds up advise here."""
    import threading

    import torch

    if small is None and not user_model.takes_small(fn):
        return None, None
    found: list[tuple[int, Calling | None]] = []
    state = torch.get_rng_state()
    thread = threading.Thread(target=_count_forward, args=(fn, spec, small, seed, found), daemon=True,
                              name="apextui-probe-forward")
    thread.start()
    thread.join(wait_s)
    torch.set_rng_state(state)
    return found[0] if found else (None, None)


def _count_forward(fn: Callable[..., Any], spec: str, small: Any, seed: int,
                   found: list[tuple[int, Calling | None]]) -> None:
    """`_one_forward`'s body, in its thread: (SDPA calls, how it was called) appended to `found` where the forward
    returned."""
    import copy

    import torch

    from .workloads.model_workload import LossModule
    from .workloads.traits import count_sdpa

    try:
        if small is not None:
            setup = dataclasses.replace(small, model=copy.deepcopy(small.model))
        else:
            torch.manual_seed(seed)
            setup = user_model.call_build(fn, spec, True)
        setup.model.train()
        batch = setup.make_batch(torch.device("cpu"), torch.Generator().manual_seed(seed + 1))
        module = LossModule(setup.model, setup.loss_fn, "cpu", Config(), notes_calling=True)
        with count_sdpa() as sdpa:
            module(batch)
    except BaseException:  # noqa: BLE001 - their code: a run builds and calls it again, and reports what it raised
        return
    found.append((sdpa.calls, module.calling))


def model_availability(preset: Preset, device: str, facts: ModelFacts | None = None) -> Availability:
    """`availability` (Apex, torch.compile, CUDA), and whether each value applies to this model (`facts.traits`: a
    norm swap needs norms, channels_last a convolution, an attention backend an SDPA call)."""
    a = availability(preset, device)
    if not a.ok or facts is None:
        return a
    if preset.config.swaps_norms and facts.norms == 0:
        return Availability(False, facts.unavailable_norms or "no norm found",
                            "nothing to do: the norm swap does not apply to this model")
    return applies_availability(preset.config.values(), facts.traits)


def describe(facts: ModelFacts) -> dict[str, Any]:
    """The model's JSON description (list, advise)."""
    return {"spec": facts.spec, "name": facts.name, "params": facts.params, "norms": facts.norms,
            "norm_finder": facts.norm_report or None, "convs": facts.convs, "sdpa_calls": facts.sdpa_calls,
            "model_type": facts.model_type or None,
            "traits": sorted(facts.traits) if facts.traits is not None else None,
            "size": "small" if facts.small else "full"}
