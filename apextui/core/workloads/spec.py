"""The workload registry: each workload and its named points declared once, read by everything else.

Why: a workload used to be spread over a dozen tables (presets' names, Apex needs, size keys and
limits, baselines; the roofline's work model; the presets' needs; the memory estimate's shrink order;
the advice's loss check). Now `WORKLOADS` holds one `WorkloadSpec` per workload and the others derive
their tables from it (`presets.SIZE_LIMITS`, ...). A workload's presets are named points on the configuration axes
(`NamedPoint.config`): what one needs and what it builds are its values' (`config/axes.py`, `workloads/apply.py`),
and a run is its workload and its point (its baseline too: `WorkloadSpec.baseline_point`).

Importing this module is cheap (no torch): presets and the TUI read it before any run. How each workload is
built from a preset is `builders.py`, above the workload modules (which read their specs here).

Adding a named point: one `NamedPoint` in its workload's spec below (a new kind of change is a new axis value first)
and a preset TOML in presets/. A workload: its spec here and its builder in builders.py. See CONTRIBUTING.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Literal, Mapping

from ..config.point import NAMED, Config
from ..analysis.work import ADAMW_BYTES_PER_PARAM, ADAMW_FLOPS_PER_PARAM, Work, norm_work, optimizer_work, \
    transformer_work

NormKind = Literal["layer_norm", "rms_norm"]


@dataclass(frozen=True)
class OptimizerCost:
    """The fewest bytes and the FLOPs of one optimizer step, per fp32 parameter (the roofline's model)."""

    name: str  # in the work model's basis, e.g. "AdamW"
    bytes_per_param: int
    flops_per_param: int


ADAMW = OptimizerCost("AdamW", ADAMW_BYTES_PER_PARAM, ADAMW_FLOPS_PER_PARAM)
# apex FusedLAMB (its kernels, per parameter): the global gradient norm reads g (4); stage 1 reads p, g, m, v
# and writes m, v and the update (28); the trust ratio's norms read p and the update (8); stage 2 reads the
# update and p and writes p (12). FLOPs: Adam's 14, the three norms' square-and-add 6, the trust-ratio scale 2.
LAMB = OptimizerCost("LAMB", 52, 22)


# optimizer value -> the cost of its step, where it is not AdamW's (the optimizer workload's roofline)
OPTIMIZER_COSTS: Mapping[str, OptimizerCost] = MappingProxyType({"lamb": LAMB})


@dataclass(frozen=True)
class NamedPoint:
    """A workload's named point on the configuration axes (a shipped preset's; the user's model's named ones), and the
    words the docs use for it."""

    name: str
    description: str  # a few words for docs/presets.md
    # its point (config/axes.py): what it needs and builds (a preset file's `amp` field sets its precision)
    config: Config = Config()


@dataclass(frozen=True)
class Estimate:
    """Bytes a run needs on its device (`device`), and on the host besides (`host`, transformer only); what a
    workload's memory model returns (memory.py explains what it counts and why it is on the high side)."""

    parts: Mapping[str, int]  # device: params, gradients, optimizer state, activations, data
    host: int = 0

    @property
    def device(self) -> int:
        return sum(self.parts.values())


F32 = 4  # bytes: the estimate counts every tensor in fp32
MAX_POOL_TOKENS = 2**23  # the transformer's token pool: one new batch a step up to this many tokens, then cycled

SizeCheck = Callable[[Mapping[str, int]], "tuple[str, str] | None"]  # -> (size key, why) when the size is bad
# (size, trainable parameters or None, the point run) -> one step's work
WorkModel = Callable[[Mapping[str, int], "int | None", Config], Work]
MemoryModel = Callable[[Mapping[str, int], int], Estimate]  # (size, steps) -> the tensors a step keeps alive
ShrinkFix = Callable[[dict[str, int]], None]  # makes a halved size valid again, in place


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: its named points, sizes and their limits, baseline and work model (built by builders.py)."""

    name: str
    points: tuple[NamedPoint, ...]
    size_limits: Mapping[str, tuple[int, int]]  # size key -> (smallest, largest), inclusive; order = keys
    product_limit: tuple[tuple[str, ...], str, int]  # (keys multiplied, what the product is, its largest value)
    baseline: str  # the named point the others are compared with (its point: `baseline_point`)
    work: WorkModel  # (size, trainable parameters or None, point) -> one step's FLOPs and bytes
    shrink_order: tuple[str, ...]  # size keys the memory estimate halves, in turn, to suggest a size that fits
    loss_checked: bool = False  # the advice compares final losses with the baseline's (a learnable task)
    size_check: SizeCheck | None = None  # relations between size keys beyond their limits
    shipped: bool = True  # its presets are files in presets/; False: made from the user's model (`--model`)
    shrink_fix: ShrinkFix | None = None  # restores those relations after the memory estimate halved a key
    # (size, steps) -> the memory a run needs, checked before building (memory.py); None: not estimated, never refused
    memory: MemoryModel | None = None
    # the one norm module a kernel micro-benchmark times, forward and backward (no loss, nothing to train
    # data-parallel); None: a workload that trains a model
    norm: NormKind | None = None
    # the Apex norm features its model's norms take when they are swapped (the Transformer's LayerNorms:
    # FusedLayerNorm alone); None: every one the norm value names (the user's model, whose norms are found at run time)
    norm_features: tuple[str, ...] | None = None
    # it trains a model that the parallel stage wraps to train on several ranks (DDP under torchrun, or its point's own
    # way); a workload that does not is never run data-parallel (`run.data_parallel.data_parallel_problem`)
    trains_data_parallel: bool = False
    # the advice's answer hands back its recommended point as code for a training script (`Preset.point`): the
    # Transformer's and the user's model's; the kernel micro-benchmarks (optimizer, norms) answer with a preset
    code_answer: bool = False
    point_map: Mapping[str, NamedPoint] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "point_map", MappingProxyType({v.name: v for v in self.points}))
        if self.baseline not in self.point_map:
            raise ValueError(f"{self.name}: baseline {self.baseline!r} is not one of its named points")
        if len({v.config for v in self.points}) != len(self.points):
            raise ValueError(f"{self.name}: two named points are one point (a run is its workload and its point)")

    @property
    def size_keys(self) -> tuple[str, ...]:
        return tuple(self.size_limits)

    @property
    def baseline_point(self) -> Config:
        """The point the workload's other runs are compared with (a run is its baseline where it runs this point)."""
        return self.point_map[self.baseline].config

    @property
    def kernel_only(self) -> bool:
        """It times one kernel (a norm micro-benchmark): no loss, no model to train data-parallel."""
        return self.norm is not None

    def named(self, name: str) -> NamedPoint:
        return self.point_map[name]

    def find(self, name: str) -> NamedPoint | None:
        """The named point of this name, or None."""
        return self.point_map.get(name)

    def label(self, config: Config) -> str:
        """What a run of `config` is called: its named point's name where it is one of this workload's (`fused_rmsnorm`,
        not the model workload's `fused_norms`), else the point's own label (`bf16+fused+compile`)."""
        return next((v.name for v in self.points if v.config == config), config.label)

    def needs_apex(self, config: Config) -> tuple[str, ...]:
        """The Apex features `config` needs on this workload: its values' (`Config.needs_apex`), of the norm swap's
        only those of the norms the workload's model has (`norm_features`)."""
        if self.norm_features is None or not config.fused_norms:
            return config.needs_apex
        return tuple(f for f in config.needs_apex if f not in config.norms.apex or f in self.norm_features)


# ---- optimizer ---------------------------------------------------------------------------------------
def _optimizer_work(size: Mapping[str, int], params: int | None, config: Config) -> Work:
    n = params if params else size["layers"] * (size["width"] ** 2 + size["width"])
    c = OPTIMIZER_COSTS.get(config.optimizer, ADAMW)
    return optimizer_work(n, c.bytes_per_param, c.flops_per_param, c.name)


def _optimizer_memory(size: Mapping[str, int], steps: int) -> Estimate:
    """AdamW / FusedAdam state 2 x P (exp_avg, exp_avg_sq); activations: each layer's Linear and ReLU outputs;
    data: inputs and targets."""
    w, n, b = size["width"], size["layers"], size["batch"]
    p = n * (w * w + w)
    return Estimate({"params": p * F32, "gradients": p * F32, "optimizer state": 2 * p * F32,
                     "activations": 2 * n * b * w * F32, "data": 2 * b * w * F32})


OPTIMIZER = WorkloadSpec(
    name="optimizer",
    points=(
        NamedPoint("adamw", "torch AdamW defaults: foreach on CUDA; on CPU one parameter at a time"),
        NamedPoint("adamw_fused", "torch `fused=True`", Config(optimizer="fused")),
        NamedPoint("fused_adam", "apex FusedAdam", Config(optimizer="apex")),
        NamedPoint("adamw_capturable_graph", "torch `AdamW(fused=True, capturable=True)`, its step replayed "
                    "from a CUDA graph", Config(optimizer="capturable")),
        NamedPoint("fused_lamb", "apex FusedLAMB", Config(optimizer="lamb")),
    ),
    size_limits=MappingProxyType({"layers": (1, 1024), "width": (1, 65536), "batch": (1, 65536)}),
    product_limit=(("layers", "width", "width"), "parameters", 2**32),
    baseline="adamw",
    work=_optimizer_work,
    trains_data_parallel=True,
    memory=_optimizer_memory,
    shrink_order=("layers", "width", "batch"),
)


# ---- norms: one micro-benchmark a norm ----------------------------------------------------------------------
APEX_NORM = {"layer_norm": "FusedLayerNorm", "rms_norm": "FusedRMSNorm"}  # a norm kind -> Apex's fused one


def _norm_memory(size: Mapping[str, int], steps: int) -> Estimate:
    """Weight and bias; activations: the input, the output, their gradients and the upstream gradient."""
    elems = size["batch"] * size["seq"] * size["hidden"]
    h = size["hidden"]
    return Estimate({"params": 2 * h * F32, "gradients": 2 * h * F32, "optimizer state": 0,
                     "activations": 5 * elems * F32, "data": 0})


def _norm_spec(kind: NormKind, torch_name: str, preset: str) -> WorkloadSpec:
    """The micro-benchmark of one norm: torch's module, and Apex's fused one swapped in by the norms value (its
    baseline is torch's module of the same norm: a LayerNorm is never compared with an RMSNorm)."""
    def work(size: Mapping[str, int], params: int | None, config: Config) -> Work:
        return norm_work(size["batch"], size["seq"], size["hidden"], "rmsnorm" if kind == "rms_norm" else "layernorm")

    return WorkloadSpec(
        name=kind,
        points=(NamedPoint(preset, f"torch nn.{torch_name}"),
                NamedPoint(f"fused_{preset}", f"apex {APEX_NORM[kind]}", Config(norms="apex"))),
        size_limits=MappingProxyType({"batch": (1, 65536), "seq": (1, 1_048_576), "hidden": (1, 65536)}),
        product_limit=(("batch", "seq", "hidden"), "input elements", 2**32),
        baseline=preset,
        work=work,
        memory=_norm_memory,
        shrink_order=("batch", "seq", "hidden"),
        norm=kind,
        norm_features=(APEX_NORM[kind],),
    )


LAYER_NORM = _norm_spec("layer_norm", "LayerNorm", "layernorm")
RMS_NORM = _norm_spec("rms_norm", "RMSNorm", "rmsnorm")


# ---- transformer -------------------------------------------------------------------------------------
def _transformer_work(size: Mapping[str, int], params: int | None, config: Config) -> Work:
    if params is None:
        raise ValueError("the transformer's work model needs its parameter count")
    return transformer_work(size, params, config.autocast)


def transformer_params(size: Mapping[str, int]) -> int:
    """TinyDecoder's parameter count: embeddings, blocks, final norm and the LM head (no bias)."""
    v, d, n, s = size["vocab"], size["d_model"], size["layers"], size["seq"]
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return v * d + s * d + n * block + 2 * d + v * d


def _transformer_memory(size: Mapping[str, int], steps: int) -> Estimate:
    """Activations: 18 x batch x seq x d_model a layer (norms, qkv, attention, projection, the 4x MLP,
    residuals) plus the logits three times (logits, fp32 logits, their gradient); data: the token pool (int64),
    as the workload sizes it; host: building the Markov chain (vocab x vocab in float32, int64 and float64, and
    the float64 solve for its stationary distribution), about 40 x vocab^2 bytes, on the host even for a CUDA
    run."""
    b, s, v, d = size["batch"], size["seq"], size["vocab"], size["d_model"]
    p = transformer_params(size)
    pool = max(1, min(steps, MAX_POOL_TOKENS // (b * (s + 1))))
    return Estimate({"params": p * F32, "gradients": p * F32, "optimizer state": 2 * p * F32,
                     "activations": (18 * size["layers"] * b * s * d + 3 * b * s * v) * F32,
                     "data": pool * b * (s + 1) * 8},
                    host=40 * v * v)


def _transformer_size_check(size: Mapping[str, int]) -> tuple[str, str] | None:
    if size["d_model"] % size["heads"]:
        return "heads", f"d_model ({size['d_model']}) must be divisible by heads"
    if size["branching"] > size["vocab"]:
        return "branching", f"got {size['branching']}; must not exceed vocab ({size['vocab']})"
    return None


def _transformer_shrink_fix(size: dict[str, int]) -> None:
    """branching <= vocab, heads <= d_model and d_model divisible by heads (as `_transformer_size_check`)."""
    size["branching"] = min(size["branching"], size["vocab"])
    size["heads"] = min(size["heads"], size["d_model"])
    while size["d_model"] % size["heads"]:
        size["heads"] -= 1


TRANSFORMER = WorkloadSpec(
    name="transformer",
    points=(
        NamedPoint("fp32", "nn.LayerNorm + torch AdamW"),
        NamedPoint("fused_fp32", "apex FusedAdam + FusedLayerNorm", Config(optimizer="apex", norms="apex")),
        NamedPoint("fused_amp", "apex fused + fp16 autocast + `GradScaler`",
                    Config(precision="fp16", optimizer="apex", norms="apex")),
        NamedPoint("torch_amp", "no Apex: torch fused AdamW + bf16 autocast",
                    Config(precision="bf16", optimizer="fused")),
        NamedPoint("torch_compile", "`torch_amp` through `torch.compile`",
                    Config(precision="bf16", optimizer="fused", compile="default")),
        NamedPoint("torch_compile_cg", "`torch.compile(mode=\"reduce-overhead\")`: CUDA graphs",
                    Config(precision="bf16", optimizer="fused", compile="reduce-overhead")),
        NamedPoint("torch_compile_graph", "`torch.compile`, the whole step in one CUDA graph",
                    Config(precision="bf16", optimizer="fused", compile="graph")),
        NamedPoint("ddp_adamw_fused", "DDP + torch fused AdamW",
                   Config(precision="bf16", optimizer="fused", parallel="ddp")),
        NamedPoint("ddp_fused_adam", "DDP + apex FusedAdam",
                   Config(precision="fp16", optimizer="apex", parallel="ddp")),
        NamedPoint("distributed_fused_adam", "apex DistributedFusedAdam (ZeRO-style sharded optimizer state)",
                   Config(precision="bf16", optimizer="apex_distributed")),
        NamedPoint("fsdp2_adamw_fused", "FSDP2 `fully_shard` + torch fused AdamW",
                   Config(precision="bf16", optimizer="fused", parallel="fsdp2")),
    ),
    # vocab is bounded by the dense vocab x vocab Markov matrix, built on the host
    size_limits=MappingProxyType({
        "vocab": (1, 32768), "d_model": (1, 16384), "layers": (1, 256), "heads": (1, 256),
        "seq": (1, 65536), "batch": (1, 65536), "branching": (1, 32768),  # and branching <= vocab
    }),
    product_limit=(("batch", "seq", "vocab"), "logits", 2**32),
    baseline="fp32",
    work=_transformer_work,
    trains_data_parallel=True,
    memory=_transformer_memory,
    shrink_order=("batch", "vocab", "layers", "d_model", "seq"),
    loss_checked=True,
    size_check=_transformer_size_check,
    shrink_fix=_transformer_shrink_fix,
    norm_features=("FusedLayerNorm",),  # TinyDecoder's norms are LayerNorms
    code_answer=True,
)


# ---- model: the user's own (`--model FILE.py:FUNC`) ------------------------------------------------------
def _model_work(size: Mapping[str, int], params: int | None, config: Config) -> Work:
    raise ValueError("a user's model has no work model (its FLOPs and bytes are not known)")


MODEL = WorkloadSpec(
    name="model",
    # config/point.py's NAMED points (`--variant NAME`): what one needs and its precision are the point's own
    points=tuple(NamedPoint(name, point.description(), point) for name, point in NAMED.items()),
    size_limits=MappingProxyType({}),  # your function sizes the model (`small` on CPU)
    product_limit=((), "elements", 1),
    baseline="fp32",
    work=_model_work,
    shrink_order=(),
    shipped=False,
    code_answer=True,
)


# workload name -> its spec, in the order presets are listed
WORKLOADS: Mapping[str, WorkloadSpec] = MappingProxyType(
    {s.name: s for s in (OPTIMIZER, LAYER_NORM, RMS_NORM, TRANSFORMER, MODEL)})
# the workloads whose presets ship in presets/ (the model workload's are made from `--model`)
SHIPPED: tuple[str, ...] = tuple(w for w, s in WORKLOADS.items() if s.shipped)
# a workload name of files, flags and lines written before each norm had a micro-benchmark of its own: its named
# points' workloads now (`current_workload`)
FORMER_NORM = "norm"


def current_workload(workload: str, named: str) -> str:
    """The workload a preset file, a saved run or a JSON line names, read once: "norm" (one workload for both norms
    until 2026-12-06) is the workload of its named point `named` ("rmsnorm" -> "rms_norm"); any other as it is."""
    if workload != FORMER_NORM:
        return workload
    return next((w for w, s in WORKLOADS.items() if s.norm is not None and named in s.point_map), workload)


def work_per_step(workload: str, config: Config, size: Mapping[str, int], params: int | None) -> Work:
    """The work model of one step of a workload's point at a size (`params`: trainable parameters, where known), as
    the workload's spec defines it (the models themselves are analysis/work.py's arithmetic)."""
    spec = WORKLOADS.get(workload)
    if spec is None:
        raise ValueError(f"unknown workload {workload!r}")
    return spec.work(size, params, config)


__all__ = ["ADAMW", "APEX_NORM", "Estimate", "FORMER_NORM", "LAMB", "LAYER_NORM", "MAX_POOL_TOKENS", "MODEL",
           "MemoryModel", "NamedPoint", "NormKind", "OPTIMIZER_COSTS", "OptimizerCost", "RMS_NORM", "SHIPPED",
           "WORKLOADS", "WorkloadSpec", "current_workload", "transformer_params", "work_per_step"]
