"""The nested objects of a run's summary, typed: its correctness check (`CorrectnessCheck`, with a model's norm swap,
`NormSwap`), its roofline (`Roofline`, with the `CeilingsUsed`), its bottleneck (`Bottleneck`) and a data-parallel
run's ranks (`Distributed`). The fifth, the other work that competed with the run, is `monitor.contention`'s
`RunContention`, where it is counted.

Why typed: the advice, the results file, the exports and the screens each read these objects, and as dicts each
reader guessed at keys (`check.get("passed") is False`) that nothing checked. Each record is made by its producer
(the workloads' checks, `analysis.RunAnalysis`, `analysis.classify`, `run.merge.Merger`) and becomes JSON only at the
edges: `to_dict` writes the object the `end` line has always had, key for key and in the same order (docs/json.md);
`from_dict` reads one back from a results file or a `--json` output, tolerant like `Summary.from_dict`: an
ill-typed value is None, a key it does not know is kept (`extra`) and written back.

No torch, nothing of the engine above this package: the records are plain data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..config.calling import Calling
from .compare import Comparison, fields, from_fields

FinalStatus = Literal["ok", "stopped", "failed"]  # how a run (or one rank of it) ended
BottleneckLabel = Literal["host-bound", "memory-bound", "compute-bound", "unknown"]
# how the correctness check handled dropout: the point drew the same masks as fp32; dropout was off for the check;
# the model has none
DropoutHandling = Literal["same_masks", "disabled_for_check", "none_found"]
ParityKind = Literal["loss_parity"]  # a model's losses against fp32's; a kernel's check (a norm's) has no kind
Extra = Mapping[str, object]  # keys of a loaded object this version does not know: kept, written back


def json_ready(value: Any) -> Any:
    """As the `end` line writes a roofline, a bottleneck, a data-parallel run's ranks and a contention record
    (`Summary.to_dict`; their own `to_dict` keeps the producer's figures): floats to 6 significant digits (non-finite
    ones null), containers copied. Idempotent: a value read back from a line comes out the same."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


# ---- reading a loaded object: a value of the wrong type is None, never an error -------------------------------
def number(value: object) -> float | None:
    """An int or a float as it is (an int stays an int, so it is written back as it was read); else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def texts(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def numbers(value: object) -> tuple[float, ...] | None:
    return tuple(v for v in value if number(v) is not None) if isinstance(value, list) else None


def mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def extra(d: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, object]:
    return {k: v for k, v in d.items() if k not in known}


def _with_extra(out: dict[str, Any], kept: Extra) -> dict[str, Any]:
    return {**out, **{k: v for k, v in kept.items() if k not in out}}


def _choice(value: object, allowed: Any) -> Any:
    """`value` if it is one of the Literal `allowed`'s strings, else None."""
    return value if isinstance(value, str) and value in get_args(allowed) else None


# ---- the correctness check ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NormClassCount:
    """What the norm finder saw of one class: how many modules, how many it would swap and swapped, the rest and why."""

    found: int | None = None
    swappable: int | None = None
    swapped: int | None = None
    left_alone: int | None = None
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"found": self.found, "swappable": self.swappable, "swapped": self.swapped,
                "left_alone": self.left_alone, "reasons": list(self.reasons)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NormClassCount:
        return cls(integer(d.get("found")), integer(d.get("swappable")), integer(d.get("swapped")),
                   integer(d.get("left_alone")), texts(d.get("reasons")))


@dataclass(frozen=True)
class NormsFound:
    """The norm finder's report on a model (`workloads.norm_swap.NormReport.found`): per class, other norm-like
    classes it saw (`seen`), how many it can swap, and `description`, all that in one line (the JSON's `summary`)."""

    classes: Mapping[str, NormClassCount] = field(default_factory=dict)
    seen: tuple[str, ...] = ()
    swappable: int | None = None
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"classes": {name: c.to_dict() for name, c in self.classes.items()}, "seen": list(self.seen),
                "swappable": self.swappable, "summary": self.description}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NormsFound:
        classes = {str(k): NormClassCount.from_dict(v) for k, v in mapping(d.get("classes")).items()
                   if isinstance(v, Mapping)}
        return cls(classes, texts(d.get("seen")), integer(d.get("swappable")), text(d.get("summary")))


NORM_SWAP_KEYS = ("modules", "loss_before", "loss_after", "max_abs_err", "tolerance", "passed", "norms", "message",
                  "loss_patched")


@dataclass(frozen=True)
class NormSwap:
    """A model's norm swap (Apex's norms or Liger's) and loss patch (Liger's fused linear cross-entropy) checked on its
    first batch: the fp32 loss before and after they went in."""

    modules: int | None = None
    loss_before: float | None = None
    loss_after: float | None = None
    max_abs_err: float | None = None
    tolerance: float | None = None
    passed: bool | None = None
    norms: NormsFound | None = None
    message: str | None = None  # a failed swap's cause
    loss_patched: bool | None = None  # the loss value patched the model's forward too (None: a record from before)
    extra: Extra = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"modules": self.modules, "loss_before": self.loss_before, "loss_after": self.loss_after,
                               "max_abs_err": self.max_abs_err, "tolerance": self.tolerance, "passed": self.passed,
                               "norms": self.norms.to_dict() if self.norms is not None else None}
        if self.message is not None:
            out["message"] = self.message
        if self.loss_patched is not None:
            out["loss_patched"] = self.loss_patched
        return _with_extra(out, self.extra)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NormSwap:
        norms = d.get("norms")
        return cls(integer(d.get("modules")), number(d.get("loss_before")), number(d.get("loss_after")),
                   number(d.get("max_abs_err")), number(d.get("tolerance")), flag(d.get("passed")),
                   NormsFound.from_dict(norms) if isinstance(norms, Mapping) else None, text(d.get("message")),
                   flag(d.get("loss_patched")), extra(d, NORM_SWAP_KEYS))


CHECK_KEYS = ("against", "kind", "steps", "max_abs_err", "max_abs_err_output", "max_abs_err_grad", "tolerance",
              "relative_tolerance", "losses", "baseline_losses", "dropout", "seed", "passed", "calling",
              "scaler_skipped", "compared_steps", "note", "norm_swap", "message", "same_masks_max_abs_err")
# written even when null: by every check, and by a model's loss parity
_EVERY_CHECK = ("against", "max_abs_err", "tolerance", "passed")
_PARITY = ("kind", "steps", "relative_tolerance", "losses", "baseline_losses", "dropout", "seed", "calling")


@dataclass(frozen=True)
class CorrectnessCheck:
    """A configuration's correctness check, done at set-up against the baseline (`against`), the summary's `check`:
    a model's losses step by step against fp32's (`kind` "loss_parity", `workloads.model_workload`) or a kernel's
    output and gradient against its torch counterpart's (no kind, `workloads.norm`). `passed` False: the run
    measured fine and its result is wrong (`message` says where). A field that is None is left out of the JSON,
    but for the ones every check (and every loss parity) writes."""

    against: str | None = None
    passed: bool | None = None
    max_abs_err: float | None = None
    tolerance: float | None = None
    kind: ParityKind | None = None
    steps: int | None = None
    max_abs_err_output: float | None = None
    max_abs_err_grad: float | None = None
    relative_tolerance: float | None = None
    losses: tuple[float, ...] | None = None
    baseline_losses: tuple[float, ...] | None = None
    dropout: DropoutHandling | None = None
    seed: int | None = None
    calling: Calling | None = None  # how the check's fp32 steps called the model (`config.calling`)
    scaler_skipped: tuple[int, ...] | None = None  # the parity steps GradScaler skipped (a run with a scaler)
    compared_steps: int | None = None
    note: str | None = None
    norm_swap: NormSwap | None = None
    message: str | None = None
    same_masks_max_abs_err: float | None = None  # checked again with dropout off: the error with the same masks
    extra: Extra = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """The check ran and did not pass (a record without `passed` is no failure)."""
        return self.passed is False

    @property
    def error_line(self) -> str | None:
        """A failed check in one line, naming the cause it found (the `end` line's `check_error`); None otherwise."""
        if not self.failed:
            return None
        what = self.message or f"max_abs_err {self.max_abs_err} over tolerance {self.tolerance}"
        return f"failed the correctness check against {self.against or 'the baseline'}: {what}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON object. The key order is the producer's: a note written by the dropout-off retry alone (no
        GradScaler skip to note first) comes after `same_masks_max_abs_err`, any other note before `norm_swap`."""
        keep = _EVERY_CHECK + (_PARITY if self.kind == "loss_parity" else ())
        late_note = self.same_masks_max_abs_err is not None and not self.scaler_skipped
        out: dict[str, Any] = {}
        for name in CHECK_KEYS:
            value = getattr(self, name)
            if value is None and name not in keep or name == "note" and late_note:
                continue
            out[name] = _plain(value)
        if late_note and self.note is not None:
            out["note"] = self.note
        return _with_extra(out, self.extra)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CorrectnessCheck:
        swap = d.get("norm_swap")
        skipped = d.get("scaler_skipped")
        return cls(
            against=text(d.get("against")), passed=flag(d.get("passed")), max_abs_err=number(d.get("max_abs_err")),
            tolerance=number(d.get("tolerance")), kind=_choice(d.get("kind"), ParityKind),
            steps=integer(d.get("steps")), max_abs_err_output=number(d.get("max_abs_err_output")),
            max_abs_err_grad=number(d.get("max_abs_err_grad")), relative_tolerance=number(d.get("relative_tolerance")),
            losses=numbers(d.get("losses")), baseline_losses=numbers(d.get("baseline_losses")),
            dropout=_choice(d.get("dropout"), DropoutHandling), seed=integer(d.get("seed")),
            calling=Calling.from_dict(d.get("calling")),
            scaler_skipped=tuple(v for v in skipped if integer(v) is not None) if isinstance(skipped, list) else None,
            compared_steps=integer(d.get("compared_steps")), note=text(d.get("note")),
            norm_swap=NormSwap.from_dict(swap) if isinstance(swap, Mapping) else None, message=text(d.get("message")),
            same_masks_max_abs_err=number(d.get("same_masks_max_abs_err")), extra=extra(d, CHECK_KEYS))


def _plain(value: Any) -> Any:
    """A record's field as JSON: a record as its object, a tuple as a list."""
    if isinstance(value, (NormSwap, Calling)):
        return value.to_dict() if isinstance(value, NormSwap) else value.as_dict()
    return list(value) if isinstance(value, tuple) else value


# ---- the roofline and the bottleneck -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CeilingsUsed:
    """The ceilings a run was placed against (`analysis.Ceilings`, as the roofline names them)."""

    key: str | None = None
    name: str | None = None
    device: str | None = None
    copy_gb_s: float | None = None
    matmul_tflops: Mapping[str, float] = field(default_factory=dict)  # precision -> TFLOP/s
    measured_at: int | None = None  # unix time
    cached: bool | None = None  # read from the cache file, not measured for this run

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "device": self.device, "copy_gb_s": self.copy_gb_s,
                "matmul_tflops": dict(self.matmul_tflops), "measured_at": self.measured_at, "cached": self.cached}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CeilingsUsed:
        tflops = {str(k): v for k, v in mapping(d.get("matmul_tflops")).items() if number(v) is not None}
        return cls(text(d.get("key")), text(d.get("name")), text(d.get("device")), number(d.get("copy_gb_s")),
                   tflops, integer(d.get("measured_at")), flag(d.get("cached")))


ROOFLINE_KEYS = ("flops_per_step", "bytes_per_step", "scope", "primary", "time_ms", "tflops", "gb_s", "precision",
                 "compute_ceiling_tflops", "copy_ceiling_gb_s", "compute_fraction", "bandwidth_fraction", "intensity",
                 "ridge", "ceilings", "note")


@dataclass(frozen=True)
class Roofline:
    """A run on the roofline (`analysis.RunAnalysis.roofline`): its work model, what it achieved against the
    ceilings (None where not placed), the ceilings, and why there were none (`note`)."""

    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    scope: str | None = None  # "step" or "opt_step" (`analysis.work.Scope`)
    primary: str | None = None  # "bytes" or "flops": the headline figure
    time_ms: float | None = None
    tflops: float | None = None
    gb_s: float | None = None
    precision: str | None = None  # the matmul ceiling compared with
    compute_ceiling_tflops: float | None = None
    copy_ceiling_gb_s: float | None = None
    compute_fraction: float | None = None
    bandwidth_fraction: float | None = None
    intensity: float | None = None
    ridge: float | None = None
    ceilings: CeilingsUsed | None = None
    note: str | None = None
    extra: Extra = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in ROOFLINE_KEYS}
        out["ceilings"] = self.ceilings.to_dict() if self.ceilings is not None else None
        return _with_extra(out, self.extra)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Roofline:
        ceilings = d.get("ceilings")
        numeric = ("flops_per_step", "bytes_per_step", "time_ms", "tflops", "gb_s", "compute_ceiling_tflops",
                   "copy_ceiling_gb_s", "compute_fraction", "bandwidth_fraction", "intensity", "ridge")
        return cls(**{k: number(d.get(k)) for k in numeric}, scope=text(d.get("scope")),
                   primary=text(d.get("primary")), precision=text(d.get("precision")),
                   ceilings=CeilingsUsed.from_dict(ceilings) if isinstance(ceilings, Mapping) else None,
                   note=text(d.get("note")), extra=extra(d, ROOFLINE_KEYS))


@dataclass(frozen=True)
class Bottleneck:
    """"host-bound" | "memory-bound" | "compute-bound" | "unknown", why, and the figures that decided it
    (`analysis.classify` makes it)."""

    label: BottleneckLabel | None
    reason: str | None
    figures: Mapping[str, float | str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "reason": self.reason, "figures": dict(self.figures)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Bottleneck:
        figures = {str(k): v for k, v in mapping(d.get("figures")).items() if v is None or text(v) is not None
                   or number(v) is not None}
        return cls(_choice(d.get("label"), BottleneckLabel), text(d.get("reason")), figures)


# ---- a data-parallel run -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankOutcome:
    """How one rank of a data-parallel run ended (`run.merge.RankEnd`) and its own median."""

    rank: int | None = None
    status: FinalStatus | None = None  # None: the rank never said
    error: str | None = None
    steps: int | None = None
    median_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "status": self.status, "error": self.error, "steps": self.steps,
                "median_ms": self.median_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankOutcome:
        return cls(integer(d.get("rank")), _choice(d.get("status"), FinalStatus), text(d.get("error")),
                   integer(d.get("steps")), number(d.get("median_ms")))


@dataclass(frozen=True)
class ScalingBaseline:
    """The one-GPU run a data-parallel run's scaling efficiency is against: its median and interval, and its file."""

    median_ms: float | None = None
    median_low_ms: float | None = None
    median_high_ms: float | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"median_ms": self.median_ms, "median_low_ms": self.median_low_ms,
                "median_high_ms": self.median_high_ms, "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScalingBaseline:
        return cls(number(d.get("median_ms")), number(d.get("median_low_ms")), number(d.get("median_high_ms")),
                   text(d.get("source")))


SCALING = "scaling_efficiency"
DISTRIBUTED_KEYS = ("world_size", "backend", "ranks", "spread_median_ms", "slowest_rank_share", "throughput_per_gpu",
                    "baseline", *fields(None, SCALING))


@dataclass(frozen=True)
class Distributed:
    """A data-parallel run's ranks (`run.merge.Merger.distributed`; docs/distributed.md): how each ended, the spread
    between them, how often each was the slowest, and the scaling efficiency against a one-GPU `baseline` (the noise
    rule's comparison of the two medians; None without a baseline)."""

    world_size: int | None = None
    backend: str | None = None
    ranks: tuple[RankOutcome, ...] = ()
    spread_median_ms: float | None = None
    slowest_rank_share: Mapping[str, float] | None = None  # rank (as a JSON key) -> share of the measured intervals
    throughput_per_gpu: float | None = None
    baseline: ScalingBaseline | None = None
    scaling_efficiency: Comparison | None = None
    extra: Extra = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"world_size": self.world_size, "backend": self.backend, "ranks": [r.to_dict() for r in self.ranks],
               "spread_median_ms": self.spread_median_ms,
               "slowest_rank_share": dict(self.slowest_rank_share) if self.slowest_rank_share is not None else None,
               "throughput_per_gpu": self.throughput_per_gpu,
               "baseline": self.baseline.to_dict() if self.baseline is not None else None,
               **fields(self.scaling_efficiency, SCALING)}
        return _with_extra(out, self.extra)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Distributed:
        ranks = d.get("ranks")
        share = d.get("slowest_rank_share")
        baseline = d.get("baseline")
        return cls(
            integer(d.get("world_size")), text(d.get("backend")),
            tuple(RankOutcome.from_dict(r) for r in ranks if isinstance(r, Mapping)) if isinstance(ranks, list)
            else (), number(d.get("spread_median_ms")),
            {str(k): v for k, v in share.items() if number(v) is not None} if isinstance(share, Mapping) else None,
            number(d.get("throughput_per_gpu")),
            ScalingBaseline.from_dict(baseline) if isinstance(baseline, Mapping) else None,
            from_fields(d, SCALING), extra(d, DISTRIBUTED_KEYS))


__all__ = ["Bottleneck", "BottleneckLabel", "CeilingsUsed", "CorrectnessCheck", "Distributed", "DropoutHandling",
           "FinalStatus", "NormClassCount", "NormSwap", "NormsFound", "RankOutcome", "Roofline", "ScalingBaseline",
           "json_ready"]
