"""The workload registry: each workload and its variants declared once, read by everything else.

Why: a workload used to be spread over a dozen tables (presets' variants, Apex needs, size keys and
limits, baselines; the roofline's work model; the variants' needs (needs.py); the memory estimate's shrink order;
the advice's loss check). Now `WORKLOADS` holds one `WorkloadSpec` per workload and the others derive
their tables from it (`presets.APEX_NEEDS`, `presets.SIZE_LIMITS`, `needs.NEEDS`, ...).

Importing this module is cheap (no torch): presets and the TUI read it before any run. How each workload is
built from a preset is `builders.py`, above the workload modules (which read their specs here).

Adding a variant: one `VariantSpec` in its workload's spec below, its construction in the workload's module
(e.g. `make_optimizer` in optimizer.py), and a preset TOML in presets/. A workload: its spec here and its builder
in builders.py. See CONTRIBUTING.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Literal, Mapping

from ..config.point import NAMED, Config
from ..analysis.work import ADAMW_BYTES_PER_PARAM, ADAMW_FLOPS_PER_PARAM, Work, norm_work, optimizer_work, \
    transformer_work

# how a variant trains on several ranks (workloads/parallel.py); None: DDP under torchrun, else one process
Parallel = Literal["ddp", "fsdp2", "distributed_optimizer"]
Need = Literal["compile", "cuda_graphs", "cuda"]  # what a variant needs beyond torch (see needs.py)
Amp = Literal["none", "fp16", "bf16"]


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


@dataclass(frozen=True)
class VariantSpec:
    """One way to run a workload: what it needs and how the docs and the work model describe it."""

    name: str
    summary: str  # a few words for docs/presets.md and CONTRIBUTING.md's checks
    apex: tuple[str, ...] = ()  # Apex features it needs (names from apex_features.FEATURES)
    needs: tuple[Need, ...] = ()  # beyond torch: a compile backend and/or CUDA graphs
    optimizer: OptimizerCost = ADAMW  # the optimizer step's cost (the optimizer workload's work model)
    amp: Amp | None = None  # the precision the variant fixes, where its presets are generated (the model workload)
    parallel: Parallel | None = None  # a distributed variant's way to train on several ranks
    # its point on the configuration axes (config/axes.py), where it is one: every model variant, and the
    # transformer's (a preset's `amp` sets the point's precision, `point_of`); None: no point (the optimizer and
    # norm kernels, the sharded optimizer)
    config: Config | None = None

    @property
    def cuda_graphs(self) -> bool:
        return "cuda_graphs" in self.needs


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
WorkModel = Callable[[VariantSpec, Mapping[str, int], "int | None", str], Work]
MemoryModel = Callable[[Mapping[str, int], int], Estimate]  # (size, steps) -> the tensors a step keeps alive
ShrinkFix = Callable[[dict[str, int]], None]  # makes a halved size valid again, in place


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: its variants, sizes and their limits, baseline and work model (built by builders.py)."""

    name: str
    variants: tuple[VariantSpec, ...]
    size_limits: Mapping[str, tuple[int, int]]  # size key -> (smallest, largest), inclusive; order = keys
    product_limit: tuple[tuple[str, ...], str, int]  # (keys multiplied, what the product is, its largest value)
    baseline: str  # the variant the others are compared with
    work: WorkModel  # (variant, size, trainable parameters or None, amp) -> one step's FLOPs and bytes
    shrink_order: tuple[str, ...]  # size keys the memory estimate halves, in turn, to suggest a size that fits
    loss_checked: bool = False  # the advice compares final losses with the baseline's (a learnable task)
    size_check: SizeCheck | None = None  # relations between size keys beyond their limits
    shipped: bool = True  # its presets are files in presets/; False: made from the user's model (`--model`)
    shrink_fix: ShrinkFix | None = None  # restores those relations after the memory estimate halved a key
    # (size, steps) -> the memory a run needs, checked before building (memory.py); None: not estimated, never refused
    memory: MemoryModel | None = None
    variant_map: Mapping[str, VariantSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variant_map", MappingProxyType({v.name: v for v in self.variants}))
        if self.baseline not in self.variant_map:
            raise ValueError(f"{self.name}: baseline {self.baseline!r} is not one of its variants")

    @property
    def size_keys(self) -> tuple[str, ...]:
        return tuple(self.size_limits)

    def variant(self, name: str) -> VariantSpec:
        return self.variant_map[name]

    def find(self, name: str) -> VariantSpec | None:
        """The named variant, or None: a model preset's point off the named ones (`--config`, the search) has none."""
        return self.variant_map.get(name)


# ---- optimizer ---------------------------------------------------------------------------------------
def _optimizer_work(variant: VariantSpec, size: Mapping[str, int], params: int | None, amp: str) -> Work:
    n = params if params else size["layers"] * (size["width"] ** 2 + size["width"])
    c = variant.optimizer
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
    variants=(
        VariantSpec("adamw", "torch AdamW defaults: foreach on CUDA"),
        VariantSpec("adamw_fused", "torch `fused=True`"),
        VariantSpec("fused_adam", "apex FusedAdam", apex=("FusedAdam",)),
        VariantSpec("adamw_capturable_graph", "torch `AdamW(fused=True, capturable=True)`, its step replayed "
                    "from a CUDA graph", needs=("cuda_graphs",)),
        VariantSpec("fused_lamb", "apex FusedLAMB", apex=("FusedLAMB",), optimizer=LAMB),
    ),
    size_limits=MappingProxyType({"layers": (1, 1024), "width": (1, 65536), "batch": (1, 65536)}),
    product_limit=(("layers", "width", "width"), "parameters", 2**32),
    baseline="adamw",
    work=_optimizer_work,
    memory=_optimizer_memory,
    shrink_order=("layers", "width", "batch"),
)


# ---- norm --------------------------------------------------------------------------------------------
def _norm_work(variant: VariantSpec, size: Mapping[str, int], params: int | None, amp: str) -> Work:
    kind = "rmsnorm" if "rmsnorm" in variant.name else "layernorm"
    return norm_work(size["batch"], size["seq"], size["hidden"], kind)


def _norm_memory(size: Mapping[str, int], steps: int) -> Estimate:
    """Weight and bias; activations: the input, the output, their gradients and the upstream gradient."""
    elems = size["batch"] * size["seq"] * size["hidden"]
    h = size["hidden"]
    return Estimate({"params": 2 * h * F32, "gradients": 2 * h * F32, "optimizer state": 0,
                     "activations": 5 * elems * F32, "data": 0})


NORM = WorkloadSpec(
    name="norm",
    variants=(
        VariantSpec("layernorm", "torch nn.LayerNorm"),
        VariantSpec("fused_layernorm", "apex FusedLayerNorm", apex=("FusedLayerNorm",)),
        VariantSpec("rmsnorm", "torch nn.RMSNorm"),
        VariantSpec("fused_rmsnorm", "apex FusedRMSNorm", apex=("FusedRMSNorm",)),
    ),
    size_limits=MappingProxyType({"batch": (1, 65536), "seq": (1, 1_048_576), "hidden": (1, 65536)}),
    product_limit=(("batch", "seq", "hidden"), "input elements", 2**32),
    baseline="layernorm",
    work=_norm_work,
    memory=_norm_memory,
    shrink_order=("batch", "seq", "hidden"),
)


# ---- transformer -------------------------------------------------------------------------------------
def _transformer_work(variant: VariantSpec, size: Mapping[str, int], params: int | None, amp: str) -> Work:
    if params is None:
        raise ValueError("the transformer's work model needs its parameter count")
    return transformer_work(size, params, amp)


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


_APEX_FUSED = ("FusedAdam", "FusedLayerNorm")
TRANSFORMER = WorkloadSpec(
    name="transformer",
    variants=(
        VariantSpec("fp32", "nn.LayerNorm + torch AdamW", config=Config()),
        VariantSpec("fused_fp32", "apex FusedAdam + FusedLayerNorm", apex=_APEX_FUSED,
                    config=Config(optimizer="apex", norms="apex")),
        VariantSpec("fused_amp", "apex fused + fp16 autocast + `GradScaler`", apex=_APEX_FUSED,
                    config=Config(precision="fp16", optimizer="apex", norms="apex")),
        VariantSpec("torch_amp", "no Apex: torch fused AdamW + bf16 autocast",
                    config=Config(precision="bf16", optimizer="fused")),
        VariantSpec("torch_compile", "`torch_amp` through `torch.compile`", needs=("compile",),
                    config=Config(precision="bf16", optimizer="fused", compile="default")),
        VariantSpec("torch_compile_cg", "`torch.compile(mode=\"reduce-overhead\")`: CUDA graphs",
                    needs=("compile", "cuda_graphs"),
                    config=Config(precision="bf16", optimizer="fused", compile="reduce-overhead")),
        VariantSpec("torch_compile_graph", "`torch.compile`, the whole step in one CUDA graph",
                    needs=("compile", "cuda_graphs"),
                    config=Config(precision="bf16", optimizer="fused", compile="graph")),
        VariantSpec("ddp_adamw_fused", "DDP + torch fused AdamW", parallel="ddp", config=Config(optimizer="fused")),
        VariantSpec("ddp_fused_adam", "DDP + apex FusedAdam", apex=("FusedAdam",), parallel="ddp",
                    config=Config(optimizer="apex")),
        VariantSpec("distributed_fused_adam", "apex DistributedFusedAdam (ZeRO-style sharded optimizer state)",
                    apex=("DistributedFusedAdam",), parallel="distributed_optimizer"),
        VariantSpec("fsdp2_adamw_fused", "FSDP2 `fully_shard` + torch fused AdamW", parallel="fsdp2",
                    config=Config(optimizer="fused")),
    ),
    # vocab is bounded by the dense vocab x vocab Markov matrix, built on the host
    size_limits=MappingProxyType({
        "vocab": (1, 32768), "d_model": (1, 16384), "layers": (1, 256), "heads": (1, 256),
        "seq": (1, 65536), "batch": (1, 65536), "branching": (1, 32768),  # and branching <= vocab
    }),
    product_limit=(("batch", "seq", "vocab"), "logits", 2**32),
    baseline="fp32",
    work=_transformer_work,
    memory=_transformer_memory,
    shrink_order=("batch", "vocab", "layers", "d_model", "seq"),
    loss_checked=True,
    size_check=_transformer_size_check,
    shrink_fix=_transformer_shrink_fix,
)


# ---- model: the user's own (`--model FILE.py:FUNC`) ------------------------------------------------------
def _model_work(variant: VariantSpec, size: Mapping[str, int], params: int | None, amp: str) -> Work:
    raise ValueError("a user's model has no work model (its FLOPs and bytes are not known)")


MODEL = WorkloadSpec(
    name="model",
    # one a named point (config/point.py's NAMED): what it needs and its precision are the point's own
    variants=tuple(VariantSpec(name, point.summary(), apex=point.needs_apex, needs=point.needs,  # type: ignore[arg-type]
                               amp=point.amp, config=point)  # type: ignore[arg-type]
                   for name, point in NAMED.items()),
    size_limits=MappingProxyType({}),  # your function sizes the model (`small` on CPU)
    product_limit=((), "elements", 1),
    baseline="fp32",
    work=_model_work,
    shrink_order=(),
    shipped=False,
)


# workload name -> its spec, in the order presets are listed
WORKLOADS: Mapping[str, WorkloadSpec] = MappingProxyType(
    {s.name: s for s in (OPTIMIZER, NORM, TRANSFORMER, MODEL)})
# the workloads whose presets ship in presets/ (the model workload's are made from `--model`)
SHIPPED: tuple[str, ...] = tuple(w for w, s in WORKLOADS.items() if s.shipped)


def point_of(workload: str, variant_name: str, amp: str = "none") -> Config | None:
    """A preset's point on the configuration axes: its variant's, with the precision its `amp` sets (fp32's
    where amp is "none"); None where the variant is no point."""
    spec = WORKLOADS[workload].variant(variant_name)
    if spec.config is None or workload == MODEL.name:
        return spec.config
    precision = {"none": "fp32", "bf16": "bf16", "fp16": "fp16"}[amp]
    return spec.config.with_("precision", precision)


def variant(workload: str, name: str) -> VariantSpec:
    """The spec of a workload's variant; KeyError when either is unknown."""
    return WORKLOADS[workload].variant(name)


def work_per_step(workload: str, variant: str, size: Mapping[str, int], params: int | None,
                  amp: str = "none") -> Work:
    """The work model of one step of a workload at a size (`params`: trainable parameters, where known),
    as the workload's spec defines it (the models themselves are analysis/work.py's arithmetic)."""
    spec = WORKLOADS.get(workload)
    if spec is None:
        raise ValueError(f"unknown workload {workload!r}")
    if variant not in spec.variant_map:
        raise ValueError(f"unknown {workload} variant {variant!r}")
    return spec.work(spec.variant(variant), size, params, amp)


__all__ = ["ADAMW", "Amp", "Estimate", "LAMB", "MAX_POOL_TOKENS", "MODEL", "MemoryModel", "Need", "OptimizerCost",
           "Parallel", "SHIPPED", "VariantSpec", "WORKLOADS", "WorkloadSpec", "point_of", "transformer_params",
           "variant", "work_per_step"]
