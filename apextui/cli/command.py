"""Command line: `apextui` (TUI), `apextui --preset NAME --json` (headless), `apextui list`, `apextui doctor`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from dataclasses import replace
from functools import partial
from typing import Any, Literal, Sequence, cast

from . import output
from .session import guarded
from ..core.errors import ApextuiError, UsageProblem
from ..core.env import DEVICE_CHOICES
from ..core.exits import EXIT_OK
from ..core.run.request import RunRequest, RunSettings
from .argtypes import OneLineParser, add_shared_options, seconds_in


SAMPLE_INTERVAL_RANGE = (0.01, 86400.0)  # seconds
BASELINE_JSON_ALONE = ("--baseline-json is for a data-parallel run: under torchrun, or with --nproc N --json "
                       "(see docs/distributed.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="apextui",
        description="Measure NVIDIA Apex fused kernels against PyTorch on this machine, live. "
        "Without --json it opens the terminal UI.",
    )
    parser.add_argument("--preset", metavar="NAME|FILE.toml",
                        help="preset name (see `apextui list`) or a path to your own preset file")
    parser.add_argument("--variant", metavar="NAME", help="with --model --json: the model variant to run "
                        "(see `apextui list --model ...`)")
    parser.add_argument("--config", metavar="AXIS=VALUE,...",
                        help="with --model: any point on the configuration axes, e.g. "
                        "precision=bf16,optimizer=fused,compile=default (docs/your-model.md)")
    parser.add_argument("--json", action="store_true", help="run headless; JSON lines on stdout")
    add_shared_options(
        parser, device_help="auto (default): CUDA when present, else CPU with the preset's small size",
        steps_help="override the preset's step count",
        model_help="your own model: a function returning apextui.ModelSetup (docs/your-model.md); "
                   "also package.module:FUNC",
        nproc_help="run presets data-parallel on N ranks (GPUs) of this machine, through torchrun's API; "
                   "headless with --json, else in the TUI (docs/distributed.md)")
    parser.add_argument("--sample-interval", type=seconds_in(*SAMPLE_INTERVAL_RANGE), default=1.0, metavar="SECONDS",
                        help="how often GPU/host metrics are sampled (default 1.0)")
    parser.add_argument("--force", action="store_true",
                        help="run even where the preset's memory estimate exceeds the free memory")
    parser.add_argument("--baseline-json", metavar="FILE",
                        help="under torchrun: a one-GPU `--json` run of the same preset; the end line adds the "
                             "scaling efficiency against it")
    parser.add_argument("--load", action="append", default=[], metavar="RESULTS.json",
                        help="TUI: add runs saved with w (or --json output) to the comparison table")
    sub = parser.add_subparsers(dest="command", metavar="{list,doctor,advise,attach}")
    lister = sub.add_parser("list", help="every preset, and whether it can run here")
    lister.add_argument("--json", action="store_true", help="print JSON")
    lister.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    lister.add_argument("--model", metavar="FILE.py:FUNC", help="list your model's named points instead of the presets")
    doctor = sub.add_parser("doctor", help="which Apex fused kernels work here, and why not")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    from .advise import add_arguments as add_advise_arguments

    add_advise_arguments(sub.add_parser("advise", help="which configuration is fastest on this machine, measured here"))
    from .attach import add_arguments as add_attach_arguments

    add_attach_arguments(sub.add_parser("attach", help="watch your own training run (apextui.watch), live or finished "
                                                       "(docs/watch.md)"))
    return parser


# a data-parallel preset runs here (one rank without torchrun); the one-device advice does not compare it
DATA_PARALLEL_NOTE = "one rank alone here; `apextui advise --nproc N` compares it, the one-device advice does not"


def cmd_list(as_json: bool, requested_device: str) -> int:
    from ..core.availability import availability
    from ..core.presets import builtin_dir, load_all, user_dir
    from ..core.workloads.spec import WORKLOADS
    from ..core.env import resolve_device

    device = resolve_device(requested_device)  # DeviceUnavailable: raised (exit 3)
    presets, errors = load_all()  # a bad user file is reported below, never fatal; a bad shipped one is raised
    shipped = builtin_dir()
    rows: list[dict[str, Any]] = []
    for p in presets:
        a = availability(p, device)
        rows.append({"name": p.name, "workload": p.workload, "config": p.config.as_dict(), "label": p.label,
                     "amp": p.config.autocast, "needs_apex": list(p.needs_apex), "available": a.ok,
                     "reason": a.reason or None, "fix": a.fix or None, "description": p.description,
                     "parallel": p.config.data_parallel,
                     "source": "builtin" if Path(p.path).parent == shipped else "user", "path": p.path})
    for e in errors:
        print(f"apextui: warning: skipped a user preset: {e.message}", file=sys.stderr)
    if as_json:
        output.write(json.dumps({"device": device, "presets": rows, "user_dir": str(user_dir()),
                                 "errors": [{"path": e.path, "message": e.message} for e in errors]}) + "\n")
        return EXIT_OK
    lines = [f"presets on {device}:"]
    workload = None
    order = list(WORKLOADS)
    width = max((len(r["name"]) for r in rows), default=16)
    for r in sorted(rows, key=lambda r: order.index(r["workload"])):  # stable: shipped ones first
        if r["workload"] != workload:
            workload = r["workload"]
            lines.append(f"\n  {workload}")
        mark = "available" if r["available"] else f"unavailable: {r['reason']}"
        if r["available"] and r["parallel"]:  # advise on one device leaves it out: said the same way here
            mark += f" (data-parallel: {DATA_PARALLEL_NOTE})"
        user = f" (user: {r['path']})" if r["source"] == "user" else ""
        lines.append(f"    {r['name']:<{width}} {mark}{user}")
    if errors:
        lines.append(f"\n  {len(errors)} user preset file{'s' if len(errors) != 1 else ''} in {user_dir()} could not "
                     "be loaded (see stderr)")
    output.write("\n".join(lines) + "\n")
    return EXIT_OK


def tui_refusal(device: str, term: str | None = None) -> ApextuiError | None:
    """Why the TUI cannot open, checked before it draws anything, or None. A dumb terminal (TERM=dumb: no cursor
    movement, no colour) gets usage (2); `--device cuda` on a machine without a usable GPU gets 3, as `apextui list
    --device cuda` and `--json` do (the TUI used to open, then exit 3 once its device probe failed)."""
    term = os.environ.get("TERM", "") if term is None else term
    if term == "dumb":
        return UsageProblem("TERM=dumb: this terminal cannot draw the full-screen UI; run in a terminal that can "
                            "(e.g. TERM=xterm-256color), or headless: apextui --preset NAME --json, apextui advise, "
                            "apextui doctor")
    if device == "cuda":
        from ..core.env import DeviceUnavailable, resolve_device

        try:
            resolve_device(device)
        except DeviceUnavailable as exc:
            return exc
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The command, its handlers for signals before the run's own already in (`apextui.cli.main` installs them
    before this module imports). A stdout that cannot be written ends with its documented code, never a
    traceback."""
    return guarded(lambda: _main(argv))


Mode = Literal["list", "list-model", "doctor", "advise", "attach", "model-json", "launch", "json", "torchrun-json",
               "tui"]
"""What one `apextui` command line does: `list` (the presets), `list-model` (a model's configurations), `doctor`,
`advise`, `attach` (a watched run, TUI or `--json`), `model-json` (`--model --json`: one configuration headless),
`launch` (`--nproc N --json`: torchrun's ranks started here), `json` (`--preset --json`: one run headless),
`torchrun-json` (one rank of a data-parallel run) and `tui` (the terminal UI)."""


class UsageError(UsageProblem, ValueError):
    """A combination of options that makes no command; its message is the one line for stderr (exit 2)."""


def mode(args: argparse.Namespace, under_torchrun: bool) -> Mode:
    """The mode of the parsed command line `args` (`under_torchrun`: torchrun's variables are set); UsageError
    for a combination that is none. Pure: reads nothing but its arguments, so every mode is tested alone."""
    if args.command == "list":
        return "list-model" if args.model is not None else "list"
    if args.command == "attach" and args.once and not args.json:
        raise UsageError("--once goes with attach --json (the TUI follows the run until you quit)")
    if args.command in ("advise", "doctor", "attach"):
        return cast(Mode, args.command)
    if args.model is not None and args.preset is not None:
        raise UsageError("give --preset or --model, not both")
    if args.variant is not None and args.model is None:
        raise UsageError("--variant goes with --model FILE.py:FUNC (a preset names its variant itself)")
    if getattr(args, "config", None) is not None and args.model is None:
        raise UsageError("--config goes with --model FILE.py:FUNC (a preset file takes config = ... itself)")
    if args.json and getattr(args, "load", None):
        raise UsageError("--load is for the TUI (it adds saved runs to its table); --json runs one preset")
    if args.model is not None and args.json:
        if args.nproc is not None:
            raise UsageError("--nproc runs presets data-parallel; --model with --json runs in one process: "
                             "drop --nproc")
        if args.baseline_json is not None:
            raise UsageError(BASELINE_JSON_ALONE)
        return "model-json"
    if args.nproc is not None:
        if under_torchrun:
            raise UsageError("--nproc starts the ranks itself: run it without torchrun")
        if args.json:
            if args.preset is None:
                raise UsageError("--json needs --preset NAME (see `apextui list`)")
            return "launch"
    if under_torchrun and not args.json:
        raise UsageError("under torchrun apextui runs headless: add --json (rank 0 prints the merged stream)")
    if args.baseline_json is not None and not under_torchrun:
        raise UsageError(BASELINE_JSON_ALONE)
    if args.json:
        if args.preset is None:
            raise UsageError("--json needs --preset NAME (see `apextui list`)")
        return "torchrun-json" if under_torchrun else "json"
    return "tui"


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "json", False) and getattr(args, "nproc", None) is None:  # --nproc: each rank does this
        from ..core.analysis.torch_messages import diverted

        with output.json_stdout(), diverted():  # torch's notes on apextui's own use of it: to their log
            return _dispatch(args, argv)
    return _dispatch(args, argv)


def _dispatch(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # what --nproc hands every rank
    from ..core.run.distributed import DistEnv

    dist_env = None
    if args.command is None:  # torchrun's variables matter to a run only
        try:
            dist_env = DistEnv.from_env()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    what = mode(args, dist_env is not None)
    if what == "list-model":
        from .model_option import cmd_list as cmd_list_model

        return cmd_list_model(args.model, args.json, args.device)
    if what == "list":
        return cmd_list(args.json, args.device)
    if what == "advise":
        from .advise import run as run_advise

        return run_advise(args)
    if what == "attach":
        from .attach import run as run_attach

        return run_attach(args)
    if what == "doctor":
        from .doctor_command import run as run_doctor

        return run_doctor(as_json=args.json)
    if what == "model-json":
        from .model_option import run_headless

        return run_headless(args.model, args.variant, args.device, args.steps, args.sample_interval, args.force,
                            config=args.config)
    return _run(what, args, dist_env)


def _run(what: Mode, args: argparse.Namespace, dist_env: Any) -> int:
    """The modes that run a preset (`launch`, `json`, `torchrun-json`) or open the TUI: the preset and the
    model's code are checked (without running it) before anything starts."""
    from ..core.presets import resolve

    model_presets, preset = _model_presets(args)
    if args.preset is not None:
        preset = resolve(args.preset)
    spec = preset.model if preset is not None and preset.model is not None else args.model
    if spec is not None:
        from ..core.workloads.user_model import validate_static

        validate_static(spec)  # its file, syntax and function (without running it): usage errors first
    if what == "launch":
        from .launch import launch

        return launch(args.nproc, args.argv)
    if what == "tui":
        return _tui(args, preset, model_presets)
    assert preset is not None  # mode(): json and torchrun-json have --preset
    return _headless(what, args, preset, dist_env)


def _model_presets(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """With `--model`, the TUI's picker gets the model's configurations (its code runs in the worker only), and with
    `--variant` or `--config` the one preselected and started, as `--preset NAME`; ([], None) without."""
    if args.model is None:
        return [], None
    from .model_option import presets as model_presets_for
    from .model_option import chosen_preset

    model_presets, preset = model_presets_for(args.model), None
    if args.variant is not None or args.config is not None:
        preset = chosen_preset(args.model, args.variant, config=args.config)
        if all(p.name != preset.name for p in model_presets):
            model_presets.append(preset)
    return model_presets, preset


def _tui(args: argparse.Namespace, preset: Any, model_presets: list[Any]) -> int:
    """The terminal UI, once nothing refuses it (`tui_refusal`, more ranks than GPUs)."""
    refused = tui_refusal(args.device)
    if refused is not None:
        raise refused
    if args.nproc is not None and args.device != "cpu":
        from ..core.env import gpu_count

        gpus = gpu_count()
        if gpus and gpus < args.nproc:
            raise UsageError(f"--nproc {args.nproc}: this machine has {gpus} GPU{'s' if gpus > 1 else ''}; "
                             "use at most that many (or --device cpu)")
    from ..ui.app import run_app
    from .signals import release_hangup

    release_hangup()  # the app takes SIGHUP itself once it is up; until then a hang-up ends it at once
    return run_app(RunSettings(args.device, args.steps, args.sample_interval), preset=preset,
                   load=args.load, extra=model_presets, nproc=args.nproc)


def _headless(what: Mode, args: argparse.Namespace, preset: Any, dist_env: Any) -> int:
    """`--json`: the preset's run in this process, or this rank's part of a data-parallel one."""
    from . import json_run, refusals

    request = RunRequest(preset, args.device, args.steps, args.sample_interval, args.force, args.baseline_json)
    if preset.model is not None:  # a preset file naming your model
        from .model_option import run_preset

        return run_preset(request)
    device = refusals.resolve(args.device, partial(refusals.unavailable, request))
    if isinstance(device, int):
        return device
    if what == "torchrun-json":
        from . import torchrun

        return torchrun.run(replace(request, device=device), dist_env)
    return json_run.run(replace(request, device=device))
