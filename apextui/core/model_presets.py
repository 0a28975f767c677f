"""The user's model (`--model FILE.py:FUNC`) as presets: one a model variant (`workloads.spec.MODEL`), so that
`apextui list`, the headless run, the advice and the TUI handle it as they handle the shipped presets.

`presets_for(spec)` makes them (no user code runs: the TUI process never imports the user's model, its
worker does). `probe(spec, device, seed)` imports the user's file and calls the function once, in this
process, for the front ends whose runs happen in this process anyway (headless, advise, list): a usage
error (the file, its syntax, an import error, no such function, a wrong return type) raises
`ModelSpecError` (`fn`: the function, where the caller loaded it already); what it built is kept for the
first run (`user_model.keep`), and the facts it yields (parameters, norms) refine availability
(`model_availability`: no norms, no norm swap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .availability import Availability, availability
from .config.point import Config
from .presets import Preset
from .workloads import user_model
from .workloads.spec import MODEL

DEFAULT_STEPS = 50
DEFAULT_WARMUP = 10


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

    from .workloads.norm_swap import find_norms

    fn = fn if fn is not None else user_model.load_function(spec)
    small = device == "cpu"
    torch.manual_seed(seed)
    setup = user_model.call_build(fn, spec, small)
    report, _ = find_norms(setup.model)
    facts = ModelFacts(spec=spec, name=user_model.model_name(spec),
                       params=sum(p.numel() for p in setup.model.parameters() if p.requires_grad),
                       norms=report.swappable, units=setup.units, small=small, norm_report=report.as_dict(),
                       unavailable_norms=report.unavailable_reason() if report.swappable == 0 else "")
    user_model.keep(spec, small, seed, setup)
    return facts


def model_availability(preset: Preset, device: str, facts: ModelFacts | None = None) -> Availability:
    """`availability` (Apex, torch.compile, CUDA), and for the norm swap a model with norms to swap."""
    a = availability(preset, device)
    if a.ok and facts is not None and preset.config.fused_norms and facts.norms == 0:
        return Availability(False, facts.unavailable_norms or "no norm found",
                            "nothing to do: the norm swap does not apply to this model")
    return a


def describe(facts: ModelFacts) -> dict[str, Any]:
    """The model's JSON description (list, advise)."""
    return {"spec": facts.spec, "name": facts.name, "params": facts.params, "norms": facts.norms,
            "norm_finder": facts.norm_report or None,
            "size": "small" if facts.small else "full"}
