"""A configuration as a point: one value per axis (`axes.AXES`), frozen and hashable.

Every run is a point: the model workload's named points (`NAMED`; `spec.MODEL.points` is made from them) keep their
names, so `--variant bf16` still means what it meant; the shipped workloads' presets are their named points
(`spec.NamedPoint.config`). Any other point is asked for by its axes
(`parse("precision=bf16,optimizer=fused")`, or a table `{precision = "bf16", ...}` in a preset). A point's `label`
is its preset name's tail: the named point's name where it is one, else the non-default values' labels joined by
"+" (`bf16+fused+compile`), "fp32" for the point with every default.
"""

from __future__ import annotations

from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from .axes import Autocast, ConfigError, Scope, Value, all_axes, allowed, axis, axis_names


class Config:
    """One `Value` per axis (each given as a Value or by its name, by keyword or in the axes' order); an axis not
    given is at its default (fp32's: your model as written). It holds the Values themselves: what a value means is
    read off it, never looked up again. Frozen and hashable; its axes are the registry's (`axes.all_axes`), so an
    axis registered later is a point's too, at its default."""

    # the shipped axes, typed; any axis is an attribute (`__getattr__` for one registered after this point was made)
    precision: Value
    optimizer: Value
    norms: Value
    compile: Value
    memory_format: Value
    attention: Value
    loss: Value
    parallel: Value

    def __init__(self, *given: str, **named: str) -> None:
        names = axis_names()
        if len(given) > len(names):
            raise ConfigError(f"{len(given)} values for {len(names)} axes ({', '.join(names)})")
        chosen = dict(zip(names[:len(given)], given, strict=True))
        for key, value in named.items():
            if key in chosen:
                raise ConfigError(f"axis {key!r} given twice")
            chosen[key] = value
        for key in chosen:
            axis(key)  # ConfigError naming the unknown axis and the allowed ones
        for ax in all_axes():
            object.__setattr__(self, ax.name, ax.value(chosen.get(ax.name, ax.default)))

    def __getattr__(self, name: str) -> Value:
        """An axis registered after this point was made: its default (only reached where no attribute is set)."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return axis(name).default
        except ConfigError:
            raise AttributeError(f"Config has no axis {name!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"a Config is frozen (tried to set {key}); make another with `with_`")

    def _key(self) -> frozenset[tuple[str, str]]:
        """Its values off their axes' defaults: the same for a point made before an axis was registered as after (its
        hash, and the named points' table keyed by it, never change with the registry)."""
        return frozenset((name, v.name) for name, v in self.items() if v is not axis(name).default)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, tuple[dict[str, str]]]:
        # by its values off the defaults: a process that has not registered an axis this point leaves at its default
        # still reads it back
        return _config_of, (dict(self._key()),)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{n}={v.name!r}" for n, v in self.items()) + ")"

    # ---- reading ----------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[str, Value]]:
        for name in axis_names():
            yield name, getattr(self, name)

    def values(self) -> Iterator[Value]:
        for name in axis_names():
            yield getattr(self, name)

    def value_of(self, axis_name: str) -> Value:
        """Its value on `axis_name` (ConfigError for an unknown axis)."""
        return getattr(self, axis(axis_name).name)

    def with_(self, axis_name: str, value: str) -> "Config":
        ax = axis(axis_name)
        return Config(**{**self.as_dict(), ax.name: ax.value(value)})

    def changes(self) -> tuple[str, ...]:
        """The axes whose value is not the default."""
        return tuple(v.axis for v in self.values() if v.label)

    def as_dict(self) -> dict[str, str]:
        return {name: v.name for name, v in self.items()}

    def spec(self) -> str:
        """'precision=bf16,optimizer=fused,norms=torch,compile=default': what `parse` reads back."""
        return ",".join(f"{n}={v.name}" for n, v in self.items())

    @cached_property
    def label(self) -> str:
        named = _NAME_OF.get(self)
        if named is not None:
            return named
        return "+".join(v.label for v in self.values() if v.label) or "fp32"

    # ---- what it is (what each value builds is workloads/apply.py's table) -------------------------------
    @property
    def autocast(self) -> Autocast:
        """The dtype autocast runs at: fp8's float8 Linears run under bf16 autocast."""
        return self.precision.autocast

    @property
    def tf32(self) -> bool:
        return self.precision == "tf32"

    @property
    def fp8(self) -> bool:
        return self.precision == "fp8"

    @property
    def fused_norms(self) -> bool:
        """Apex's norms (`swaps_norms`: any value that swaps the model's norms, Liger's too)."""
        return self.norms == "apex"

    @property
    def swaps_norms(self) -> bool:
        return self.norms != axis("norms").default

    @property
    def channels_last(self) -> bool:
        return self.memory_format == "channels_last"

    @property
    def whole_step_graph(self) -> bool:
        return self.compile == "graph"

    @property
    def cuda_graphs(self) -> bool:
        """It replays CUDA graphs (a compile mode's, the whole step's, the optimizer step's)."""
        return any("cuda_graphs" in v.needs for v in self.values())

    @property
    def parallel_way(self) -> str | None:
        """Its own way of training on several ranks: the `parallel` value it names ("ddp", "fsdp2"), or Apex's sharded
        DistributedFusedAdam, which reduces its gradients itself ("distributed_optimizer"); None at `auto`."""
        if self.optimizer == "apex_distributed":
            return "distributed_optimizer"
        return None if self.parallel == axis("parallel").default else self.parallel.name

    @property
    def data_parallel(self) -> bool:
        """It trains in a data-parallel way of its own (`parallel_way`): measured on one device it shows its wrapper's
        overhead, so a one-device advice leaves it out and `apextui list` says so."""
        return self.parallel_way is not None

    def builds_on(self, workload: str) -> str | None:
        """None where `workload` builds every value of the point, else why not."""
        for value in self.values():
            if not value.builds_on(workload):
                return (f"{value.axis}={value.name} ({value.description}) is built for the "
                        f"{', '.join(value.workloads)} workload only")
        return None

    def conflict(self, device: str) -> str | None:
        """None where its values can run together on `device`, else why not: flash and cuDNN attention take fp16 or
        bf16 inputs only on CUDA (`axes.Value.half_on`), so there they need a half-precision autocast."""
        for value in self.values():
            if device in value.half_on and self.autocast == "none":
                return (f"{value.axis}={value.name} ({value.description}) takes fp16 or bf16 inputs only on {device}; "
                        f"this point runs precision={self.precision.name}")
        return None

    @cached_property
    def needs_apex(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for v in self.values() for f in v.apex))

    @cached_property
    def needs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for v in self.values() for n in v.needs))

    def description(self) -> str:
        """What the point changes, in a few words (its values' descriptions); a preset's description."""
        parts = [v.description for v in self.values() if v.label]
        return " + ".join(parts) if parts else "your model as written: fp32, torch AdamW defaults"


def _config_of(values: dict[str, str]) -> Config:
    """A pickled point made again (`Config.__reduce__`): by its values' names, so it is the registry's own Values."""
    return Config(**values)


BASELINE = Config()

# the model workload's named points as points (their names and meanings as before the axes)
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
_NAME_OF: Mapping[Config, str] = MappingProxyType({point: name for name, point in NAMED.items()})


def _what_to_give() -> str:
    return f"give axis=value pairs, comma-separated ({allowed()}), or a named point ({', '.join(NAMED)})"


def parse(text: Any) -> Config:
    """A point from 'axis=value,...' (spaces allowed, axes not named keep their defaults), a mapping
    {axis: value}, or a named point's name ('bf16'); ConfigError listing what is allowed. An empty one ('', {}) is
    refused: it names no point, and is likelier a slip (a value left out) than a wish for fp32, which is `fp32`."""
    if isinstance(text, Config):
        return text
    if isinstance(text, Mapping):
        if not text:
            raise ConfigError(f"empty configuration; {_what_to_give()}")
        pairs = [(str(k), v) for k, v in text.items()]
    elif isinstance(text, str):
        s = text.strip()
        if s in NAMED:
            return NAMED[s]
        if not s:
            raise ConfigError(f"empty configuration; {_what_to_give()}")
        pairs = []
        for part in s.split(","):
            key, eq, value = part.partition("=")
            if not eq:
                raise ConfigError(f"{part.strip()[:40]!r} is not axis=value; {_what_to_give()}")
            pairs.append((key.strip(), value.strip()))
    else:
        raise ConfigError(f"a configuration is a string 'axis=value,...' or a table; got {type(text).__name__}")
    chosen: dict[str, Value] = {}
    for key, value in pairs:
        ax = axis(key)
        if key in chosen:
            raise ConfigError(f"axis {key!r} given twice")
        if not isinstance(value, str):
            raise ConfigError(f"{key}: got {value!r}; allowed: {', '.join(ax.names)}")
        chosen[key] = ax.value(value)
    return Config(**chosen)


def from_label(label: str) -> Config:
    """The point a label names (`Config.label`: a named point's name, or its values' labels joined by "+"): how a
    model run saved with its label alone is read back. ConfigError where a token is no value's label."""
    if label in NAMED:
        return NAMED[label]
    by_label = {v.label: v for a in all_axes() for v in a.values if v.label}
    chosen: dict[str, str] = {}
    for token in label.split("+"):
        value = by_label.get(token)
        if value is None or value.axis in chosen:
            raise ConfigError(f"{label[:60]!r} is not a point's label ({token[:40]!r}: no value's, or its axis twice)")
        chosen[value.axis] = value.name
    return Config(**chosen)


def model_point(name: object, config: object, *, variant_is: str, config_is: str) -> Config | None:
    """The point a run of the user's model names by its `config` (`parse`), or None where it names a named point instead
    (its caller checks that name): the one rule for a preset file's `variant`/`config` fields and for the `--variant`/
    `--config` flags. Never both, even where they would name one point: one of the two would be read and the other
    silently dropped. ConfigError naming the two as the caller spells them (`variant_is`, `config_is`)."""
    if name is not None and config is not None:
        raise ConfigError(f"give {variant_is} or {config_is}, not both")
    return None if config is None else parse(config)


def single_changes(base: Config = BASELINE, workload: str = "model") -> list[Config]:
    """Every point one axis away from `base` that `workload` builds, in axis then value order; for a `Scope`, only
    values that apply to its model (`axes.Axis.values_for`), and on its device no point whose values cannot run
    together (`Config.conflict`: flash attention at fp32 on CUDA: the search tries it on a bf16 point instead)."""
    device = workload.device if isinstance(workload, Scope) else ""
    points = [base.with_(a.name, v) for a in all_axes() for v in a.values_for(workload) if v != getattr(base, a.name)]
    return [c for c in points if not device or c.conflict(device) is None]

