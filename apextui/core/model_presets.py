"""The user's model (`--model FILE.py:FUNC`) as presets: one a model variant (`workloads.spec.MODEL`), so that
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
from dataclasses import dataclass, field
from typing import Any, Callable

from .availability import Availability, availability
from .config.needs import applies_availability
from .config.point import Config
from .presets import Preset
from .workloads import user_model
from .workloads.spec import MODEL

DEFAULT_STEPS = 50
DEFAULT_WARMUP = 10
# how long the probe waits for the model's one forward at its CPU size (`_one_forward`): a tiny model's takes well under
# a second; past this, what it would have found (an SDPA call) is left unknown and the search tries the attention axis
PROBE_FORWARD_S = 15.0


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


def preset_name(spec: str, variant: str) -> str:
    """'gpt:build/bf16', 'gpt:build/bf16+fused+compile': the model's short name and the configuration's label
    (how the runs are named in tables and JSON)."""
    return f"{user_model.model_name(spec)}/{variant}"


def config_preset(spec: str, config: Config, steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP,
                  seed: int = 0, lr: float = 1e-3) -> Preset:
    """The preset of one point (`--config`, the search). Raises ModelSpecError for a malformed spec."""
    user_model.split_spec(spec)
    return Preset(name=preset_name(spec, config.label), path=spec, workload=MODEL.name, variant=config.label,
                  description=f"{user_model.model_name(spec)}: {config.description()}", steps=steps,
                  warmup=min(warmup, steps - 1), amp=config.autocast, lr=lr, seed=seed, model=spec, config=config)


def presets_for(spec: str, steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP, seed: int = 0,
                lr: float = 1e-3, variants: tuple[str, ...] | None = None) -> list[Preset]:
    """A preset per model variant (all of them, or `variants`), in the registry's order. Raises
    ModelSpecError for a malformed spec (no file or function is looked at)."""
    user_model.split_spec(spec)
    chosen = [v for v in MODEL.variants if variants is None or v.name in variants]
    return [Preset(name=preset_name(spec, v.name), path=spec, workload=MODEL.name, variant=v.name,
                   description=f"{user_model.model_name(spec)}: {v.description}", steps=steps,
                   warmup=min(warmup, steps - 1), amp=v.config.autocast, lr=lr, seed=seed, model=spec,
                   config=v.config)
            for v in chosen]


def variant_names() -> tuple[str, ...]:
    return tuple(v.name for v in MODEL.variants)


def probe(spec: str, device: str, seed: int = 0, fn: Callable[..., Any] | None = None) -> ModelFacts:
    """Import the user's file and build the model once (CPU size on CPU), as a run would, in this process:
    ModelSpecError for usage errors; any exception the user's function raises passes through (the caller
    reports a failed run). The setup built is kept for this process's first run of the model."""
    import torch

    from .workloads.liger import model_type
    from .workloads.norm_swap import find_norms
    from .workloads.traits import count_convs, traits

    fn = fn if fn is not None else user_model.load_function(spec)
    small = device == "cpu"
    torch.manual_seed(seed)
    setup = user_model.call_build(fn, spec, small)
    report, _ = find_norms(setup.model)
    sdpa_calls, loss = _one_forward(fn, spec, setup if small else None, seed)
    facts = ModelFacts(spec=spec, name=user_model.model_name(spec),
                       params=sum(p.numel() for p in setup.model.parameters() if p.requires_grad),
                       norms=report.swappable, units=setup.units, small=small, norm_report=report.as_dict(),
                       unavailable_norms=report.unavailable_reason() if report.swappable == 0 else "",
                       convs=count_convs(setup.model), sdpa_calls=sdpa_calls, model_type=model_type(setup.model),
                       traits=traits(setup.model, norms=report.swappable, sdpa_calls=sdpa_calls, loss=loss))
    user_model.keep(spec, small, seed, setup)
    return facts


def _one_forward(fn: Callable[..., Any], spec: str, small: Any, seed: int) -> tuple[int | None, Any]:
    """One training-mode forward of the model at its CPU size, on the CPU (a copy of `small`, the CPU-size setup built
    already, else one built here: the function takes `small`), counting its SDPA calls (`traits.count_sdpa`) and
    noting where its loss comes from (`calling.LossForm`). Torch's random state is left as it was, and the model that
    runs is kept apart from the one a run takes. (None, None) where the function has no CPU size (the full model's
    forward on the CPU could take minutes: the attention axis is then not ruled out), where the forward raised (the
    run will say why), or where it has not returned within `PROBE_FORWARD_S`: it runs in a thread of its own, so that
    a forward that hangs (the run's budget and stop end that one, in its worker) never holds up advise here."""
    import threading

    import torch

    if small is None and not user_model.takes_small(fn):
        return None, None
    found: list[tuple[int, Any]] = []
    state = torch.get_rng_state()
    thread = threading.Thread(target=_count_forward, args=(fn, spec, small, seed, found), daemon=True,
                              name="apextui-probe-forward")
    thread.start()
    thread.join(PROBE_FORWARD_S)
    torch.set_rng_state(state)
    return found[0] if found else (None, None)


def _count_forward(fn: Callable[..., Any], spec: str, small: Any, seed: int, found: list[tuple[int, Any]]) -> None:
    """`_one_forward`'s body, in its thread: (SDPA calls, loss form) appended to `found` where the forward returned."""
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
    found.append((sdpa.calls, module.calling.loss if module.calling is not None else None))


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
