"""Preset files: TOML in `presets/` (shipped as `apextui.presets`), one preset per file.

A preset names a workload and a variant, the sizes to run it at (a default size
for a GPU and a small size for CPU), steps, warm-up, precision, lr and seed.
Loading validates every field and raises `PresetError` naming the file and field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

# workload -> variant -> Apex features the variant needs
WORKLOADS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType({
    "optimizer": MappingProxyType({
        "adamw": (),
        "adamw_fused": (),
        "fused_adam": ("FusedAdam",),
    }),
    "norm": MappingProxyType({
        "layernorm": (),
        "fused_layernorm": ("FusedLayerNorm",),
        "rmsnorm": (),
        "fused_rmsnorm": ("FusedRMSNorm",),
    }),
    "transformer": MappingProxyType({
        "fp32": (),
        "fused_fp32": ("FusedAdam", "FusedLayerNorm"),
        "fused_amp": ("FusedAdam", "FusedLayerNorm"),
        "torch_amp": (),
    }),
})

# workload -> size keys it accepts (all positive ints)
SIZE_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "optimizer": ("layers", "width", "batch"),
    "norm": ("batch", "seq", "hidden"),
    "transformer": ("vocab", "d_model", "layers", "heads", "seq", "batch", "branching"),
})

# variants whose throughput and loss floor are compared against this baseline
BASELINES: Mapping[str, str] = MappingProxyType({
    "optimizer": "adamw",
    "norm": "layernorm",
    "transformer": "fp32",
})

AMP_MODES = ("none", "fp16", "bf16")
TOP_KEYS = {
    "description", "workload", "variant", "steps", "warmup", "amp", "lr", "seed", "size", "cpu_size",
}


class PresetError(ValueError):
    """A preset file is missing, unreadable or invalid; the message names file and field."""


@dataclass(frozen=True)
class Preset:
    """One validated preset."""

    name: str
    path: str
    workload: str
    variant: str
    description: str
    steps: int
    warmup: int
    amp: str
    lr: float
    seed: int
    size: Mapping[str, int] = field(default_factory=dict)
    cpu_size: Mapping[str, int] = field(default_factory=dict)

    @property
    def needs_apex(self) -> tuple[str, ...]:
        """Apex features this preset needs (empty for torch-only presets)."""
        return WORKLOADS[self.workload][self.variant]

    @property
    def baseline(self) -> str:
        """The variant this preset is compared against."""
        return BASELINES[self.workload]


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
    """Every shipped preset, grouped by workload in WORKLOADS order."""
    presets = [load_file(p) for p in sorted(builtin_dir().glob("*.toml"))]
    order = {w: i for i, w in enumerate(WORKLOADS)}
    variants = {w: list(v) for w, v in WORKLOADS.items()}
    return sorted(presets, key=lambda p: (order[p.workload], variants[p.workload].index(p.variant), p.name))


def resolve(name_or_path: str) -> Preset:
    """A shipped preset by name, or a user's preset file by path (anything ending in .toml)."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return load_file(Path(name_or_path))
    path = builtin_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(builtin_names())
        raise PresetError(f"unknown preset {name_or_path!r}; choose one of: {known}, or give a path to a .toml file")
    return load_file(path)


def load_file(path: Path) -> Preset:
    """Read and validate one preset file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PresetError(f"{path}: no such preset file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{path}: not valid TOML: {exc}") from None
    return parse(data, name=path.stem, path=str(path))


def parse(data: Mapping[str, Any], name: str, path: str = "<memory>") -> Preset:
    """Validate a preset's decoded TOML table."""

    def fail(fld: str, why: str) -> PresetError:
        return PresetError(f"{path}: field '{fld}': {why}")

    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown field; allowed: {', '.join(sorted(TOP_KEYS))}")
    workload = data.get("workload")
    if workload not in WORKLOADS:
        raise fail("workload", f"got {workload!r}; allowed: {', '.join(WORKLOADS)}")
    variant = data.get("variant")
    if variant not in WORKLOADS[workload]:
        raise fail("variant", f"got {variant!r}; allowed for {workload}: {', '.join(WORKLOADS[workload])}")

    def integer(fld: str, minimum: int, default: int | None = None) -> int:
        value = data.get(fld, default)
        if value is None:
            raise fail(fld, "missing; give an integer")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise fail(fld, f"got {value!r}; must be an integer >= {minimum}")
        return value

    steps = integer("steps", 1)
    warmup = integer("warmup", 0, default=10)
    if warmup >= steps:
        raise fail("warmup", f"got {warmup}; must be smaller than steps ({steps})")
    seed = integer("seed", 0, default=0)
    amp = data.get("amp", "none")
    if amp not in AMP_MODES:
        raise fail("amp", f"got {amp!r}; allowed: {', '.join(AMP_MODES)}")
    lr = data.get("lr", 1e-3)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 10:
        raise fail("lr", f"got {lr!r}; must be a number between 0 and 10")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", "must be a string")

    def sizes(fld: str) -> Mapping[str, int]:
        table = data.get(fld)
        if not isinstance(table, dict):
            raise fail(fld, f"missing table [{fld}] with keys {', '.join(SIZE_KEYS[workload])}")
        allowed = SIZE_KEYS[workload]
        for key, value in table.items():
            if key not in allowed:
                raise fail(f"{fld}.{key}", f"unknown size for {workload}; allowed: {', '.join(allowed)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail(f"{fld}.{key}", f"got {value!r}; must be a positive integer")
        missing = [k for k in allowed if k not in table]
        if missing:
            raise fail(f"{fld}.{missing[0]}", "missing")
        if workload == "transformer" and table["d_model"] % table["heads"]:
            raise fail(f"{fld}.heads", f"d_model ({table['d_model']}) must be divisible by heads")
        if workload == "transformer" and table["branching"] > table["vocab"]:
            raise fail(f"{fld}.branching", "must not exceed vocab")
        return MappingProxyType(dict(table))

    return Preset(
        name=name, path=path, workload=workload, variant=variant, description=description,
        steps=steps, warmup=warmup, amp=amp, lr=float(lr), seed=seed,
        size=sizes("size"), cpu_size=sizes("cpu_size"),
    )
