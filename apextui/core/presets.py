"""Preset files: TOML in `presets/` (shipped as `apextui.presets`), one preset per file.

A preset is a workload and a point on the configuration axes, the sizes to run it at (a default size
for a GPU and a small size for CPU), steps, warm-up, lr and seed. Its file names the point by a named point of its
workload (`variant = "fused_amp"`, at the precision its `amp` field sets; the model workload's by `config` too), read
once into the point (`Preset.config`): from then on the point is the preset's identity.
Loading validates every field and raises `PresetError` naming the file and field.
Every number has an allowed range (`LIMITS`, `SIZE_LIMITS`, `PRODUCT_LIMITS`) that the
error message quotes.

User presets: `*.toml` files in `user_dir()` (`$APEXTUI_PRESET_DIR`, else
`$XDG_CONFIG_HOME/apextui/presets`, else `~/.config/apextui/presets`) are listed next to
the shipped ones; `load_all()` returns the good ones and collects the bad ones as
(path, message) pairs instead of raising.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from . import files
from .errors import UsageProblem
from .config.axes import ConfigError
from .config.point import NAMED as NAMED_POINTS
from .config.point import Config
from .config.point import from_label, model_point
from .config.point import parse as parse_point
from .workloads.spec import MODEL as _MODEL_SPEC
from .workloads.spec import WORKLOADS as REGISTRY
from .workloads.spec import FORMER_NORM, current_workload

REGISTRY_MODEL = _MODEL_SPEC.name  # the workload of the user's own model: presets name a `model`, no sizes

# The tables below are views of the workload registry (`workloads.spec.WORKLOADS`), where each workload and
# its named points are declared once.
# workload -> its named points' names, in the registry's order (what a preset file's `variant` field may name)
POINT_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {w: tuple(v.name for v in spec.points) for w, spec in REGISTRY.items()})

# workload -> size keys it accepts (all positive ints)
SIZE_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType({w: s.size_keys for w, s in REGISTRY.items()})

# workload -> the name of the named point its runs are compared with (its point: `WorkloadSpec.baseline_point`)
BASELINE_NAMES: Mapping[str, str] = MappingProxyType({w: s.baseline for w, s in REGISTRY.items()})

AMP_MODES = ("none", "fp16", "bf16")
TOP_KEYS = {
    "description", "workload", "variant", "steps", "warmup", "amp", "lr", "seed", "size", "cpu_size", "model", "config",
}

MAX_STEPS = 10_000_000  # also the largest `--steps`
MAX_FILE_BYTES = files.PRESET_LIMIT  # a preset file is a few hundred bytes; anything over 1 MiB is not one
MAX_DESCRIPTION = 1000  # characters

# top-level integer fields: (smallest, largest) allowed, both inclusive. warmup must also be < steps.
LIMITS: Mapping[str, tuple[int, int]] = MappingProxyType({
    "steps": (1, MAX_STEPS),
    "warmup": (0, MAX_STEPS - 1),
    "seed": (0, 2**32 - 1),
})
# lr: a finite number with LR_RANGE[0] < lr < LR_RANGE[1] (both exclusive)
LR_RANGE = (0.0, 10.0)

# workload -> size key -> (smallest, largest), inclusive (the registry's limits: generous for an H200-class GPU)
SIZE_LIMITS: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType(
    {w: s.size_limits for w, s in REGISTRY.items()})

# workload -> (size keys multiplied, what the product is, its largest value): the biggest tensor
PRODUCT_LIMITS: Mapping[str, tuple[tuple[str, ...], str, int]] = MappingProxyType(
    {w: s.product_limit for w, s in REGISTRY.items()})


class PresetError(UsageProblem, ValueError):
    """A preset file is missing, unreadable or invalid; the message names file and field."""


class PresetFileError(NamedTuple):
    """A preset file that could not be loaded (from `load_all`): its path and the `PresetError` message."""

    path: str
    message: str


@dataclass(frozen=True)
class Preset:
    """One validated preset: a workload's point, and how long and at what size to run it."""

    name: str
    path: str
    workload: str
    description: str
    steps: int
    warmup: int
    lr: float
    seed: int
    # the point on the configuration axes it runs, its identity (`shipped_point`: a shipped workload's file's named
    # point at its `amp`; the model workload's `config` or named point)
    config: Config
    size: Mapping[str, int] = field(default_factory=dict)
    cpu_size: Mapping[str, int] = field(default_factory=dict)
    model: str | None = None  # workload "model": the user's FILE.py:FUNC or package.module:FUNC

    @property
    def needs_apex(self) -> tuple[str, ...]:
        """Apex features this preset needs (empty for torch-only presets): its point's, as its workload builds it."""
        return REGISTRY[self.workload].needs_apex(self.config)

    @property
    def point(self) -> Config | None:
        """Its point where the advice hands it back as code (the Transformer's and the user's model's presets,
        `WorkloadSpec.code_answer`); None for a kernel micro-benchmark's (optimizer, norms)."""
        return self.config if REGISTRY[self.workload].code_answer else None

    @property
    def is_baseline(self) -> bool:
        """It runs its workload's baseline point: the run its workload's others are compared with."""
        return self.config == REGISTRY[self.workload].baseline_point

    @property
    def label(self) -> str:
        """What its point is called: its workload's named point's name (`fused_rmsnorm`), else the point's label."""
        return REGISTRY[self.workload].label(self.config)

    @property
    def baseline(self) -> str:
        """The name of the named point it is compared with (what the table's heading and the `start` line say)."""
        return BASELINE_NAMES[self.workload]

    @property
    def order(self) -> int:
        """Its place among its workload's presets: its named point's in the registry (one off them: last)."""
        points = REGISTRY[self.workload].points
        return next((i for i, v in enumerate(points) if v.config == self.config), len(points))


def builtin_dir() -> Path:
    """Folder holding the presets shipped with apextui (in the wheel, or in a source checkout)."""
    try:
        return Path(str(resources.files("apextui.presets")))
    except ModuleNotFoundError:  # running from a source tree that is not installed
        return Path(__file__).resolve().parents[2] / "presets"


def builtin_names() -> list[str]:
    """Names of the shipped presets, sorted by workload then file name."""
    return [p.name for p in load_builtin()]


def load_builtin() -> list[Preset]:
    """Every shipped preset, grouped by workload in the registry's order."""
    presets = [load_file(p) for p in sorted(builtin_dir().glob("*.toml"))]
    order = {w: i for i, w in enumerate(REGISTRY)}
    return sorted(presets, key=lambda p: (order[p.workload], p.order, p.name))


def user_dir() -> Path:
    """Folder of the user's own presets: $APEXTUI_PRESET_DIR, else $XDG_CONFIG_HOME/apextui/presets,
    else ~/.config/apextui/presets (it need not exist)."""
    explicit = os.environ.get("APEXTUI_PRESET_DIR")
    if explicit:
        return Path(explicit).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME")
    base = Path(config).expanduser() if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "apextui" / "presets"


def load_user(directory: str | Path | None = None,
              taken: set[str] | frozenset[str] = frozenset()) -> tuple[list[Preset], list[PresetFileError]]:
    """The user's presets (sorted by file name) and the files that could not be loaded; never raises.

    A missing folder is no error; a file whose name is in `taken` (the shipped presets' names) is one."""
    folder = Path(directory) if directory is not None else user_dir()
    good: list[Preset] = []
    bad: list[PresetFileError] = []
    try:
        if not folder.exists():
            return good, bad
        if not folder.is_dir():
            return good, [PresetFileError(str(folder), f"{folder}: the user preset folder is not a directory")]
        files = sorted(f for f in folder.glob("*.toml") if not f.name.startswith("."))
    except (OSError, ValueError) as exc:
        return good, [PresetFileError(str(folder), f"{folder}: cannot list the preset folder: {exc}")]
    for f in files:
        if f.stem in taken:
            bad.append(PresetFileError(str(f), f"{f}: field 'name': the file name {f.stem!r} is taken by a "
                                               "shipped preset; rename the file"))
            continue
        try:
            good.append(load_file(f))
        except PresetError as exc:
            bad.append(PresetFileError(str(f), str(exc)))
    return good, bad


def load_all(directory: str | Path | None = None) -> tuple[list[Preset], list[PresetFileError]]:
    """The shipped presets followed by the user's (each group ordered by workload), and the user files
    that could not be loaded as (path, message) pairs. A broken shipped preset still raises PresetError."""
    builtin = load_builtin()
    user, errors = load_user(directory, taken=frozenset(p.name for p in builtin))
    order = {w: i for i, w in enumerate(REGISTRY)}
    return builtin + sorted(user, key=lambda p: (order[p.workload], p.name)), errors


def resolve(name_or_path: str) -> Preset:
    """A shipped preset by name, a user preset (in `user_dir()`) by name, or a preset file by path
    (anything ending in .toml or containing a /)."""
    if name_or_path.endswith(".toml") or "/" in name_or_path or os.sep in name_or_path:
        return load_file(Path(name_or_path))
    path = builtin_dir() / f"{name_or_path}.toml"
    if path.is_file():
        return load_file(path)
    mine = user_dir() / f"{name_or_path}.toml"
    if name_or_path and not name_or_path.startswith(".") and os.path.lexists(mine):  # a FIFO too: load_file says so
        return load_file(mine)
    known = ", ".join(p.name for p in load_all()[0])
    raise PresetError(f"unknown preset {name_or_path!r}; choose one of: {known}, or give a path to a .toml file")


def load_file(path: str | Path) -> Preset:
    """Read and validate one preset file; any problem raises PresetError (never another exception)."""
    path = Path(path)
    try:
        text = files.read_text(path, MAX_FILE_BYTES, "preset file")
    except files.UnreadableFile as exc:
        raise PresetError(str(exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise PresetError(f"{path}: not valid TOML for a preset: arrays or tables nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal with thousands of digits
        raise PresetError(f"{path}: not valid TOML for a preset: {files.one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - a loader is total: whatever the parser trips over is the file's fault
        raise PresetError(f"{path}: not valid TOML for a preset ({_why(exc)})") from None
    try:
        return parse(data, name=path.stem, path=str(path))
    except PresetError:
        raise
    except Exception as exc:  # noqa: BLE001 - likewise a value parse() did not foresee
        raise PresetError(f"{path}: not a usable preset ({_why(exc)})") from None


def _names_for(workload: str) -> str:
    """The names a preset file's `variant` may give for `workload` (for "norm", both norms' presets)."""
    names = POINT_NAMES.get(workload) or tuple(n for s in REGISTRY.values() if s.norm for n in s.point_map)
    return ", ".join(names)


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {files.one_line(exc)}"


def _range(lo: int, hi: int) -> str:
    return f"an integer from {lo} to {hi}"


def _show(value: Any) -> str:
    """A value as an error line quotes it: its repr, at most 60 characters."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return "a number with thousands of digits"
    return text if len(text) <= 60 else text[:57] + "..."


class _Table:
    """A preset's decoded TOML table being read: each check names its field and what is allowed
    (`PresetError("PATH: field 'F': why")`, one line)."""

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self.data, self.path = data, path

    def fail(self, fld: str, why: str) -> PresetError:
        if not fld.isprintable():  # a key with a newline or a control character: keep the message on one line
            fld = repr(fld)[1:-1]
        return PresetError(f"{self.path}: field '{fld}': {why}")

    def integer(self, fld: str, default: int | None = None) -> int:
        lo, hi = LIMITS[fld]
        value = self.data.get(fld, default)
        if value is None:
            raise self.fail(fld, f"missing; give {_range(lo, hi)}")
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.fail(fld, f"got {_show(value)}; must be {_range(lo, hi)}")
        return value

    def workload(self) -> str:
        """The workload as the file names it ("norm", the name both norms' micro-benchmarks shared, too)."""
        unknown = sorted(str(k) for k in set(self.data) - TOP_KEYS)
        if unknown:
            raise self.fail(unknown[0], f"unknown field; allowed: {', '.join(sorted(TOP_KEYS))}")
        workload = self.data.get("workload")
        if workload is None:
            raise self.fail("workload", f"missing; allowed: {', '.join(POINT_NAMES)}")
        if not isinstance(workload, str) or (workload not in POINT_NAMES and workload != FORMER_NORM):
            raise self.fail("workload", f"got {_show(workload)}; allowed: {', '.join(POINT_NAMES)}")
        return workload

    def point(self, workload: str) -> tuple[str, str, Config | None]:
        """The workload the file names, its named point's name and the model workload's point (its `config`, or its
        named point): a shipped workload's point is its named point at the precision `amp` sets (`parse`)."""
        name = self.data.get("variant")
        if "config" in self.data and workload != REGISTRY_MODEL:
            raise self.fail("config", f"only the model workload takes a config; this preset's workload is {workload}")
        config: Config | None = None
        if workload == REGISTRY_MODEL:
            try:  # the rule `--variant`/`--config` follow
                config = model_point(name, self.data.get("config"), variant_is='variant = "NAME"',
                                     config_is='config = "axis=value,..."')
            except ConfigError as exc:
                raise self.fail("config", str(exc)) from None
        if name is None and config is None:
            also = " (or config = \"axis=value,...\")" if workload == REGISTRY_MODEL else ""
            raise self.fail("variant", f"missing{also}; allowed for {workload}: {_names_for(workload)}")
        if name is not None:
            workload = current_workload(workload, str(name)) if isinstance(name, str) else workload
            if not isinstance(name, str) or name not in POINT_NAMES.get(workload, ()):
                raise self.fail("variant", f"got {_show(name)}; allowed for {workload}: {_names_for(workload)}")
        if workload == REGISTRY_MODEL:
            return workload, str(name), config if config is not None else NAMED_POINTS[str(name)]
        return workload, str(name), None

    def model(self, workload: str) -> str | None:
        model = self.data.get("model")
        if workload == REGISTRY_MODEL and (not isinstance(model, str) or not model.strip()):
            wanted = "the model workload needs model = \"FILE.py:FUNC\" or \"package.module:FUNC\""
            raise self.fail("model", f"got {_show(model)}; {wanted}" if model is not None else f"missing; {wanted}")
        if workload != REGISTRY_MODEL and model is not None:
            raise self.fail("model", f"only the model workload takes a model; this preset's workload is {workload}")
        return str(model).strip() if model is not None else None

    def lr(self) -> float:
        lr = self.data.get("lr", 1e-3)
        lo_lr, hi_lr = LR_RANGE
        if (isinstance(lr, bool) or not isinstance(lr, (int, float))
                or (isinstance(lr, float) and not math.isfinite(lr)) or not lo_lr < lr < hi_lr):
            raise self.fail("lr", f"got {_show(lr)}; must be a finite number greater than {lo_lr:g} and less than "
                                  f"{hi_lr:g}")
        return float(lr)

    def amp_field(self) -> str:
        amp = self.data.get("amp", "none")
        if not isinstance(amp, str) or amp not in AMP_MODES:
            raise self.fail("amp", f"got {_show(amp)}; allowed: {', '.join(AMP_MODES)}")
        return amp

    def model_precision(self, config: Config, amp: str) -> None:
        """The model workload's precision is its point's: `amp` may only restate it, and it has no sizes."""
        if "amp" in self.data and amp != config.autocast:
            raise self.fail("amp", f"got {_show(amp)}; the model configuration {config.label} runs at amp = "
                                   f"{config.autocast!r} (leave amp out)")
        for table in ("size", "cpu_size"):
            if table in self.data:
                raise self.fail(table, "the model workload has no sizes: your function sizes the model (its "
                                       "`small` argument on CPU)")

    def description(self) -> str:
        description = self.data.get("description", "")
        if not isinstance(description, str):
            raise self.fail("description", f"got {_show(description)}; must be a string")
        if len(description) > MAX_DESCRIPTION:
            raise self.fail("description", f"{len(description)} characters; at most {MAX_DESCRIPTION} allowed")
        return description

    def sizes(self, fld: str, workload: str) -> Mapping[str, int]:
        allowed = SIZE_KEYS[workload]
        limits = SIZE_LIMITS[workload]
        table = self.data.get(fld)
        if table is None:
            raise self.fail(fld, f"missing table [{fld}] with keys {', '.join(allowed)}")
        if not isinstance(table, dict):
            raise self.fail(fld, f"got {_show(table)}; must be a table [{fld}] with keys {', '.join(allowed)}")
        for key, value in table.items():
            if key not in allowed:
                raise self.fail(f"{fld}.{key}", f"unknown size for {workload}; allowed: {', '.join(allowed)}")
            lo, hi = limits[key]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise self.fail(f"{fld}.{key}", f"got {_show(value)}; must be {_range(lo, hi)}")
        missing = [k for k in allowed if k not in table]
        if missing:
            lo, hi = limits[missing[0]]
            raise self.fail(f"{fld}.{missing[0]}", f"missing; give {_range(lo, hi)}")
        check = REGISTRY[workload].size_check
        bad = check(table) if check is not None else None
        if bad is not None:
            raise self.fail(f"{fld}.{bad[0]}", bad[1])
        keys, what, most = PRODUCT_LIMITS[workload]
        product = math.prod(table[k] for k in keys)
        if product > most:
            raise self.fail(fld, f"{' x '.join(keys)} = {product} {what}; at most {most} allowed")
        return MappingProxyType(dict(table))


def parse(data: Mapping[str, Any], name: str, path: str = "<memory>") -> Preset:
    """Validate a preset's decoded TOML table: the first bad field, in the order below, is the one named."""
    if not isinstance(data, Mapping):
        raise PresetError(f"{path}: field '<top level>': got {type(data).__name__}; a preset is a TOML table")
    table = _Table(data, path)
    workload, named, config = table.point(table.workload())
    model = table.model(workload)
    steps = table.integer("steps")
    warmup = table.integer("warmup", default=10)
    if warmup >= steps:
        given = "" if "warmup" in data else " (the default)"
        raise table.fail("warmup", f"got {warmup}{given}; must be smaller than steps ({steps})")
    seed = table.integer("seed", default=0)
    amp = table.amp_field()
    lr = table.lr()
    if config is not None:
        table.model_precision(config, amp)
    description = table.description()
    if config is not None:
        return Preset(name=name, path=path, workload=workload, description=description, steps=steps, warmup=warmup,
                      lr=lr, seed=seed, model=str(model), config=config)
    return Preset(name=name, path=path, workload=workload, description=description, steps=steps, warmup=warmup,
                  lr=lr, seed=seed, config=shipped_point(workload, named, amp), size=table.sizes("size", workload),
                  cpu_size=table.sizes("cpu_size", workload))


# a preset file's `amp` field -> the precision it sets on its named point
_PRECISION_OF_AMP_FIELD: Mapping[str, str] = MappingProxyType({"none": "fp32", "bf16": "bf16", "fp16": "fp16"})


def shipped_point(workload: str, name: str, amp: str = "none") -> Config:
    """The point a shipped workload's preset file names: its named point `name`'s, at the precision its `amp` field
    sets (the file's two fields, read once here; the preset is its point from then on). Also how a saved run from
    before runs carried their point is read back (`results`)."""
    return REGISTRY[workload].named(name).config.with_("precision", _PRECISION_OF_AMP_FIELD[amp])


def recorded(record: Mapping[str, Any]) -> tuple[Any, Config | None]:
    """The workload and the point a saved run or a `start` line records, read once: its `config`, or, in one written
    before runs carried their point, what its `variant` and `amp` name (a shipped workload's named point at that
    precision; a model run's label), and "norm" as its named point's norm workload (`current_workload`). A `config`
    written before the parallel axis existed has none: a shipped named point's way (`ddp_adamw_fused`'s DDP) is read
    from its `variant`. The point is None where none reads back (a watched run, a file edited by hand): the run still
    loads, and compares by its names. The workload is returned as recorded where it is not a known one."""
    named = str(record.get("variant") or "")
    workload = record.get("workload")
    if not isinstance(workload, str):
        return workload, None
    workload = current_workload(workload, named)
    spec = REGISTRY.get(workload)
    if spec is None:
        return workload, None
    saved = record.get("config")
    try:
        if isinstance(saved, dict):
            point = parse_point(saved)
            shipped = spec.find(named) if spec.shipped else None
            if "parallel" not in saved and shipped is not None:
                point = point.with_("parallel", shipped.config.parallel)
            return workload, point
        if not spec.shipped:
            return workload, from_label(named)
        return workload, shipped_point(workload, named, str(record.get("amp") or "none"))
    except (ConfigError, KeyError):
        return workload, None
