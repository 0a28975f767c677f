"""A configuration as a point: one value per axis (`axes.AXES`), frozen and hashable.

The model workload's named variants are named points (`NAMED`; `spec.MODEL.variants` is made from them), so
`--variant bf16` still means what it meant; the shipped Transformer's variants are points too (their
`VariantSpec.config`); any other point is asked for by its axes (`parse("precision=bf16,optimizer=fused")`,
or a table `{precision = "bf16", ...}` in a preset). A point's `label` is its preset name's tail: the named
point's name where it is one, else the non-default values' labels joined by "+" (`bf16+fused+compile`),
"fp32" for the point with every default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from .axes import AXES, AXIS_NAMES, ConfigError, Value, allowed, axis

Amp = str  # "none" | "fp16" | "bf16" (workloads.spec.Amp)


@dataclass(frozen=True)
class Config:
    """One value per axis, by name; the defaults are fp32's (your model as written)."""

    precision: str = "fp32"
    optimizer: str = "adamw"
    norms: str = "torch"
    compile: str = "none"

    def __post_init__(self) -> None:
        for name in AXIS_NAMES:
            axis(name).value(getattr(self, name))  # ConfigError naming the axis and its values

    # ---- reading ----------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[str, str]]:
        for name in AXIS_NAMES:
            yield name, getattr(self, name)

    def values(self) -> Iterator[Value]:
        for name, v in self.items():
            yield axis(name).value(v)

    def with_(self, axis_name: str, value: str) -> "Config":
        axis(axis_name).value(value)
        return replace(self, **{axis_name: value})

    def changes(self) -> tuple[str, ...]:
        """The axes whose value is not the default."""
        return tuple(n for n, v in self.items() if v != axis(n).default.name)

    def as_dict(self) -> dict[str, str]:
        return dict(self.items())

    def spec(self) -> str:
        """'precision=bf16,optimizer=fused,norms=torch,compile=default': what `parse` reads back."""
        return ",".join(f"{n}={v}" for n, v in self.items())

    @property
    def label(self) -> str:
        for name, point in NAMED.items():
            if point == self:
                return name
        tokens = [v.label for v in self.values() if v.label]
        return "+".join(tokens) or "fp32"

    # ---- what the workload builds -------------------------------------------------------------------
    @property
    def amp(self) -> Amp:
        """The autocast dtype: fp8's float8 Linears run under bf16 autocast."""
        return {"bf16": "bf16", "fp8": "bf16", "fp16": "fp16"}.get(self.precision, "none")

    @property
    def tf32(self) -> bool:
        return self.precision == "tf32"

    @property
    def fp8(self) -> bool:
        return self.precision == "fp8"

    @property
    def optimizer_kind(self) -> str:
        """The name the workloads' `make_optimizer` takes (the whole-step graph: fused AdamW, capturable)."""
        if self.whole_step_graph and self.optimizer == "fused":
            return "adamw_capturable_graph"
        return {"adamw": "adamw", "foreach": "adamw_foreach", "fused": "adamw_fused",
                "apex": "fused_adam"}[self.optimizer]

    @property
    def fused_norms(self) -> bool:
        return self.norms == "apex"

    @property
    def compile_mode(self) -> str | None:
        """torch.compile's mode; the whole-step graph compiles in mode "default", then captures the step."""
        return {"none": None, "graph": "default"}.get(self.compile, self.compile)

    @property
    def whole_step_graph(self) -> bool:
        return self.compile == "graph"

    @property
    def cuda_graphs(self) -> bool:
        return self.compile in ("reduce-overhead", "graph")

    def builds_on(self, workload: str) -> str | None:
        """None where `workload` builds every value of the point, else why not."""
        for name, value in zip(AXIS_NAMES, self.values(), strict=True):
            if not value.builds_on(workload):
                return (f"{name}={value.name} ({value.summary}) is built for the {', '.join(value.workloads)} "
                        f"workload only")
        return None

    @property
    def needs_apex(self) -> tuple[str, ...]:
        out: list[str] = []
        for v in self.values():
            out += [f for f in v.apex if f not in out]
        return tuple(out)

    @property
    def needs(self) -> tuple[str, ...]:
        out: list[str] = []
        for v in self.values():
            out += [n for n in v.needs if n not in out]
        return tuple(out)

    def summary(self) -> str:
        parts = [v.summary for v in self.values() if v.label]
        return " + ".join(parts) if parts else "your model as written: fp32, torch AdamW defaults"


BASELINE = Config()

# the model workload's named variants as points (their names and meanings as before the axes)
NAMED: Mapping[str, Config] = MappingProxyType({
    "fp32": BASELINE,
    "tf32": Config(precision="tf32"),
    "bf16": Config(precision="bf16"),
    "fp16": Config(precision="fp16"),
    "adamw_foreach": Config(optimizer="foreach"),
    "adamw_fused": Config(optimizer="fused"),
    "fused_adam": Config(optimizer="apex"),
    "fused_norms": Config(norms="apex"),
    "fused_amp": Config(precision="fp16", optimizer="apex", norms="apex"),
    "compile": Config(compile="default"),
    "compile_cg": Config(compile="reduce-overhead"),
})


def parse(text: Any) -> Config:
    """A point from 'axis=value,...' (spaces allowed, axes not named keep their defaults), a mapping
    {axis: value}, or a named point's name ('bf16'); ConfigError listing what is allowed."""
    if isinstance(text, Config):
        return text
    if isinstance(text, Mapping):
        pairs = [(str(k), v) for k, v in text.items()]
    elif isinstance(text, str):
        s = text.strip()
        if s in NAMED:
            return NAMED[s]
        if not s:
            raise ConfigError(f"empty configuration; give axis=value pairs, comma-separated: {allowed()}")
        pairs = []
        for part in s.split(","):
            key, eq, value = part.partition("=")
            if not eq:
                raise ConfigError(f"{part.strip()[:40]!r} is not axis=value; give axis=value pairs, comma-separated "
                                  f"({allowed()}), or a named point ({', '.join(NAMED)})")
            pairs.append((key.strip(), value.strip()))
    else:
        raise ConfigError(f"a configuration is a string 'axis=value,...' or a table; got {type(text).__name__}")
    chosen: dict[str, str] = {}
    for key, value in pairs:
        ax = axis(key)
        if key in chosen:
            raise ConfigError(f"axis {key!r} given twice")
        if not isinstance(value, str):
            raise ConfigError(f"{key}: got {value!r}; allowed: {', '.join(ax.names)}")
        ax.value(value)
        chosen[key] = value
    return Config(**chosen)


def single_changes(base: Config = BASELINE, workload: str = "model") -> list[Config]:
    """Every point one axis away from `base` that `workload` builds, in axis then value order."""
    return [base.with_(a.name, v.name) for a in AXES for v in a.values_for(workload) if v.name != getattr(base, a.name)]


CONFIG_FIELDS = tuple(f.name for f in fields(Config))
assert CONFIG_FIELDS == AXIS_NAMES, "Config has one field per axis, in AXES order"
