"""What a watched run trains: its model and its batch, so that `attach` compares a run only with runs of the same work.

A ratio of step times says something only between runs that do the same work a step: an HF GPT-2 Trainer run was
shown `≈0.62×` against an MLP loop. The hook records, in its `start` line's `watch` object, what identifies the work
where it is told: `"model": {"class": "GPT2LMHeadModel", "params": 124439808}` (`apextui.watch(model=...)`, or the
callbacks, which know the model) and `"batch": {"shape": [8, 128]}` (the first tensor of the batch given to the first
`mon.step(batch=...)`: its shape only, never its values) or `"batch": {"size": 8}` (`apextui.watch(batch_size=8)`).

`group`: runs that record both are compared when both are equal, whatever their names (the same GPT-2 and batch in
bf16 and in fp32 are the comparison one wants); a run that records less (an older stream records neither) is
compared with the runs of its name that record the same (a run whose model is known is never compared with another
model's). Groups never overlap, so each has one baseline.

Wrappers are seen through: `torch.compile`'s `OptimizedModule`, DDP, `DataParallel`, FSDP (compiled or not, the
model is the same, and that comparison is what apextui is for)."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WRAPPERS = {"OptimizedModule": "_orig_mod", "DistributedDataParallel": "module", "DataParallel": "module",
            "FullyShardedDataParallel": "module"}  # a wrapper's class name -> the attribute holding the model
MAX_DIMS = 8  # a batch shape longer than this (or a dimension not an integer) is not recorded
MAX_NAME = 200  # a class name longer than this is cut (a damaged stream's is not trusted further)


class BadBatch(ValueError):
    """`batch_size=` is not a positive integer (the hook warns once and records no batch)."""


def unwrapped(model: Any) -> Any:
    """The model inside `torch.compile`'s, DDP's, DataParallel's and FSDP's wrappers (nested ones too)."""
    for _ in range(8):
        attr = WRAPPERS.get(type(model).__name__)
        inner = getattr(model, attr, None) if attr else None
        if inner is None:
            return model
        model = inner
    return model


def _class_name(model: Any) -> str:
    """The model's class name; FSDP2's `fully_shard` makes a class `FSDP<Name>` (bases: FSDPModule, the model's
    class): the model's own is named."""
    cls = type(model)
    bases = [b for b in cls.__bases__ if b.__name__ != "FSDPModule"]
    if len(bases) < len(cls.__bases__) and bases:
        cls = bases[0]
    return cls.__name__


def model_fields(model: Any) -> dict[str, Any] | None:
    """`{"class": NAME, "params": N}` for `model` (N: `model.parameters()`' element count, tied weights once; null
    when it has none to count, or they cannot be counted: lazy modules); None for no model."""
    if model is None:
        return None
    model = unwrapped(model)
    params: int | None = None
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        try:
            params = sum(int(p.numel()) for p in parameters())
        except Exception:  # noqa: BLE001 - an uninitialised (lazy) parameter: the class alone is recorded
            params = None
    return {"class": _class_name(model)[:MAX_NAME], "params": params}


def batch_shape(batch: Any) -> list[int] | None:
    """The shape of the batch's first tensor (the batch itself, or the first in a tuple, list or mapping: inputs
    before labels); None when there is none. Its shape only: nothing is read from the device."""
    items = batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, (list, tuple)) else [batch]
    for item in items:
        shape = getattr(item, "shape", None)
        if shape is None or isinstance(item, type) or not len(shape):  # no tensor, or a 0-d one: the next
            continue
        try:
            dims = [int(d) for d in shape]
        except (TypeError, ValueError):  # a symbolic or unknown dimension
            return None
        return dims if len(dims) <= MAX_DIMS else None
    return None


def batch_fields(batch: Any = None, size: Any = None) -> dict[str, Any] | None:
    """`{"shape": [...]}` from a batch (`batch_shape`), else `{"size": N}` from `batch_size=`; `BadBatch` for a size
    that is not a positive integer."""
    shape = batch_shape(batch) if batch is not None else None
    if shape is not None:
        return {"shape": shape}
    if size is None:
        return None
    try:
        n = operator.index(size)  # an int, a NumPy integer; never a float or a bool
    except TypeError:
        n = 0
    if isinstance(size, bool) or not 0 < n < 2**63:
        raise BadBatch(f"batch_size={size!r} is not a positive integer")
    return {"size": n}


@dataclass(frozen=True)
class Workload:
    """A run's model and batch as its start line records them (None: not recorded)."""

    model: tuple[str, int | None] | None = None
    batch: tuple[str, tuple[int, ...]] | None = None  # ("shape", (8, 128)) or ("size", (8,))

    @classmethod
    def of(cls, start: Mapping[str, Any] | None) -> "Workload":
        """From a `start` line; what is missing or of another shape (an older stream, a damaged one) is None."""
        watch = start.get("watch") if isinstance(start, Mapping) else None
        if not isinstance(watch, Mapping):
            return cls()
        model, batch = watch.get("model"), watch.get("batch")
        found_model: tuple[str, int | None] | None = None
        if isinstance(model, Mapping) and isinstance(model.get("class"), str) and model["class"]:
            params = model.get("params")
            found_model = (model["class"][:MAX_NAME], params if _integer(params) else None)
        found_batch: tuple[str, tuple[int, ...]] | None = None
        if isinstance(batch, Mapping):
            shape, size = batch.get("shape"), batch.get("size")
            if isinstance(shape, list) and 0 < len(shape) <= MAX_DIMS and all(_integer(d) for d in shape):
                found_batch = ("shape", tuple(shape))
            elif isinstance(size, int) and _integer(size) and size > 0:
                found_batch = ("size", (size,))
        return cls(found_model, found_batch)

    @property
    def known(self) -> bool:
        """Both the model and the batch are recorded: the run is compared by them, not by its name."""
        return self.model is not None and self.batch is not None

    def group(self, name: str) -> str:
        """The runs this run is compared with (on its device: `rows.py`), in words: what they train when both the
        model and the batch are recorded ('GPT2LMHeadModel, 124,439,808 params, batch 8×128'), else their name and
        what of it is ("runs named 'mlp' (Sequential, 577 params)"; "runs named 'mlp'" for an older stream)."""
        label = self.label()
        return label if self.known else f"runs named {name!r}" + (f" ({label})" if label else "")

    def label(self) -> str:
        """'GPT2LMHeadModel, 124,439,808 params, batch 8×128' ('batch size 8' from `batch_size=`; exact, so that two
        workloads never read alike); '' when nothing is recorded."""
        out = []
        if self.model is not None:
            name, params = self.model
            out.append(f"{name}, {params:,} params" if params is not None else name)
        if self.batch is not None:
            kind, dims = self.batch
            out.append("batch " + "×".join(str(d) for d in dims) if kind == "shape" else f"batch size {dims[0]}")
        return ", ".join(out)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63
