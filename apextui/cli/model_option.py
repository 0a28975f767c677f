"""`--model FILE.py:FUNC` on the command line: the headless run (`apextui --model M --variant V --json`),
`apextui list --model M` and the model's presets for the TUI and `apextui advise --model M`.

Usage errors (`ModelSpecError`: the spec, the file, its syntax, its imports, the function, what it returns)
print one line, plus the tail of the user's traceback where it is their code, and exit 2. A function that
raises is a run-time failure: the headless run reports it as a `failed` run (exit 1).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

from . import output
from ..core.errors import UsageProblem
from ..core.config.point import NAMED
from ..core.exits import EXIT_OK
from ..core.run.request import RunRequest
from ..core.workloads.failure import first_line
from ..core.workloads.user_model import ModelSpecError



def theirs(exc: BaseException) -> bool:
    """An exception the user's code raised, whatever its class, rather than a signal's in this thread (Ctrl-C's
    KeyboardInterrupt, apextui's EarlySignal) or an exit."""
    from .signals import EarlySignal

    return not isinstance(exc, (KeyboardInterrupt, SystemExit, EarlySignal))


def presets(spec: str, steps: int | None = None) -> list[Any]:
    """The model's presets (ModelSpecError for a malformed spec; nothing is imported)."""
    from ..core.model_presets import DEFAULT_STEPS, presets_for

    return presets_for(spec, steps=steps or DEFAULT_STEPS)


def config_of(text: str, name: str | None = None) -> Any:
    """`--config axis=value,...` as a point, by the rule a preset file's `config` field follows
    (`point.model_point`: never with `--variant`, never empty); ModelSpecError (exit 2) saying what is wrong and
    listing the axes and values allowed."""
    from ..core.config.axes import ConfigError
    from ..core.config.point import model_point

    try:
        return model_point(name, text, variant_is="--variant NAME", config_is="--config axis=value,...")
    except ConfigError as exc:
        raise ModelSpecError(f"--config: {exc}") from None


def chosen_preset(spec: str, name: str | None, steps: int | None = None, config: str | None = None) -> Any:
    """The preset of `--model spec --variant NAME` (a named point) or `--model spec --config axis=value,...`;
    ModelSpecError naming what is wrong."""
    from ..core import model_presets as mp

    names = mp.point_names()
    if config is not None:
        point = config_of(config, name)
    elif name is None:
        raise ModelSpecError(f"--json with --model needs --variant NAME (one of: {', '.join(names)}) or --config "
                             "axis=value,...")
    elif name not in names:
        raise ModelSpecError(f"unknown model configuration {name[:40]!r}; choose one of: {', '.join(names)}")
    else:
        point = NAMED[name]
    return next((p for p in presets(spec, steps) if p.config == point), None) or \
        mp.config_preset(spec, point, steps=steps or mp.DEFAULT_STEPS)


def run_headless(spec: str, name: str | None, requested_device: str, steps: int | None,
                 sample_interval: float, force: bool, config: str | None = None) -> int:
    """`apextui --model M --variant NAME --json` (or `--config ...`): the same JSON lines and exit codes as a
    preset's run."""
    preset = chosen_preset(spec, name, config=config)  # ModelSpecError: a usage error, raised (exit 2)
    return run_preset(RunRequest(preset, requested_device, steps, sample_interval, force))


def run_preset(request: RunRequest) -> int:
    """A model preset headless (from --model, or a preset file naming a `model`; `request.device` as asked):
    usage errors first (exit 2), then availability (exit 3), then the run (in this process; its failure
    exits 1)."""
    from ..core import model_presets as mp
    from ..core.workloads import user_model
    from . import json_run, refusals

    preset, spec = request.preset, request.preset.model
    assert spec is not None, "run_preset takes a preset of the user's model"  # its callers check preset.model
    fn = user_model.load_function(spec)  # ModelSpecError: a usage error, raised (exit 2)
    device = refusals.resolve(request.device, partial(refusals.unavailable, request))
    if isinstance(device, int):
        return device
    avail = mp.model_availability(preset, device)
    if avail.ok:
        try:
            facts = mp.probe(spec, device, preset.seed, fn)
            avail = mp.model_availability(preset, device, facts)
        except ModelSpecError:
            raise
        except BaseException as exc:  # noqa: BLE001 - their function raised: the run builds it again and fails
            if not theirs(exc):
                raise
            refusals.log(f"your function raised {first_line(exc)}; the run reports it")
    return json_run.run(replace(request, device=device, steps=request.steps if request.steps is not None
                                else preset.steps), avail=avail)


def cmd_list(spec: str, as_json: bool, requested_device: str) -> int:
    """`apextui list --model M`: the model's configurations and whether each can run here."""
    from ..core import model_presets as mp
    from ..core.env import resolve_device

    device = resolve_device(requested_device)  # DeviceUnavailable: raised (exit 3)
    try:
        found = presets(spec)
        facts = mp.probe(spec, device)
    except ModelSpecError:
        raise
    except BaseException as exc:  # noqa: BLE001 - their function raised while building the model
        if not theirs(exc):
            raise
        from ..core.model_scope import ModelRaised

        raise ModelRaised.of(spec, exc) from None
    rows = []
    for p in found:
        a = mp.model_availability(p, device, facts)
        rows.append({"name": p.name, "workload": p.workload, "config": p.config.as_dict(), "label": p.label,
                     "amp": p.config.autocast, "needs_apex": list(p.needs_apex), "available": a.ok,
                     "reason": a.reason or None, "fix": a.fix or None, "description": p.description,
                     "source": "model", "path": spec})
    values = axis_values(spec, device, facts)
    if as_json:
        output.write(json.dumps({"device": device, "model": mp.describe(facts), "presets": rows,
                                 "axis_values": values}) + "\n")
        return EXIT_OK
    size = "CPU size (small=True)" if facts.small else "full size"
    norms = (facts.norm_report or {}).get("summary") or f"{facts.norms} norms"
    lines = [f"model {facts.name} ({spec}) on {device}: {facts.params:,} trainable parameters at its {size}, "
             f"{facts.norms} norm{'s' if facts.norms != 1 else ''} Apex could swap ({norms})", ""]
    width = max(len(r["label"]) for r in rows)
    for r in rows:
        mark = "available" if r["available"] else f"unavailable: {r['reason']}"
        lines.append(f"  {r['label']:<{width}} {mark}")
    lines += ["", "axis values (what `advise --model` may try, each one change from fp32; `--config` runs any):"]
    width = max(len(v["value"]) for v in values)
    for v in values:
        mark = "available" if v["available"] else f"unavailable: {v['reason']}"
        lines.append(f"  {v['value']:<{width}} {mark}{' (with precision=bf16)' if v['with_bf16'] else ''}")
    output.write("\n".join(lines) + "\n")
    return EXIT_OK


def axis_values(spec: str, device: str, facts: Any) -> list[dict[str, Any]]:
    """Every value of every axis the user's model builds, other than the defaults, each as the one change from fp32
    the search would try (on bf16 where the value needs half precision on this device, as the search tries it), with
    whether it can run on this model here and why not (`model_availability`: the same rule as the configurations')."""
    from ..core import model_presets as mp
    from ..core.config.axes import all_axes
    from ..core.config.point import BASELINE
    from ..core.workloads.spec import MODEL

    out = []
    for ax in all_axes():
        for v in ax.values:
            if v is ax.default or not v.builds_on(MODEL.name):
                continue
            point = BASELINE.with_(ax.name, v.name)
            with_bf16 = point.conflict(device) is not None
            if with_bf16:
                point = point.with_("precision", "bf16")
            a = mp.model_availability(mp.config_preset(spec, point), device, facts)
            out.append({"axis": ax.name, "value": f"{ax.name}={v.name}", "description": v.description,
                        "available": a.ok, "reason": a.reason or None, "fix": a.fix or None, "with_bf16": with_bf16})
    return out


def model_for_advice(spec: str, device: str, reuse: bool, deadline: float | None = None,
                     budget_s: float | None = None) -> Any:
    """`apextui advise --model M`: (facts, the model's presets). Raised: a usage error (exit 2), a function that
    raises, whatever it raises, or that has not returned by `deadline` (time.monotonic; the search's budget of
    `budget_s` ends then): exit 1, nothing to measure."""
    import os

    from ..core.model_scope import probe_model
    from ..core.run.worker import WHERE_ENV

    if reuse:
        raise UsageProblem("--reuse does not apply to --model: advice on your model is measured afresh (its code "
                           "may have changed)")
    found = presets(spec)
    # in a worker process, as the runs: one that never returns is ended with it at the budget's end; a usage error,
    # a function that raises or does not return by `deadline` (every run would fail the same way) is raised
    facts = probe_model(spec, device, apart=os.environ.get(WHERE_ENV) != "thread", deadline=deadline,
                        budget_s=budget_s, to_stderr=True)
    return facts, found
