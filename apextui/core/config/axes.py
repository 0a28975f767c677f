"""The axes a training loop can change, each value declared once: its name, description, what it needs and where
it builds.

Why one registry: a configuration is a point with one value per axis (`point.Config`); every workload's configurations
are points (the optimizer and norm kernels, the Transformer's recipes, the user's model's named points), so one
vocabulary says what a run is, what it needs and what it builds. Adding a value is one `Value` below, one entry in
the apply table (`workloads/apply.py`: what it builds), one line in the snippet (`snippet.py`) and its tests; adding
an axis is its `Axis` below and its entries in those two tables, each at the `Stage`s it acts in (CONTRIBUTING.md
shows both).

This module is data only (no torch, nothing of apextui's above it), so that the workload registry
(`workloads/spec.py`) can declare its configurations as points; whether a value can run here is `needs.py`'s.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, Mapping

from ..errors import UsageProblem

Need = Literal["compile", "cuda_graphs", "cuda", "torchao", "sm89", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn",
               "liger", "triton"]
Autocast = Literal["none", "fp16", "bf16"]  # the dtype torch.autocast runs at ("none": no autocast context)
# what a model must have for a value to apply to it (`Value.applies`; a probe finds it: `model_presets.probe`):
# a 2-D convolution, a call of scaled_dot_product_attention in one step, a norm the finder can swap, a Hugging Face
# causal LM that computes its own loss from `labels`
Trait = Literal["conv2d", "sdpa", "norms", "causal_lm_loss"]


class Value(str):
    """One value of one axis. A Value *is* its name (a `str`): `config.precision == "bf16"`, a format string, JSON
    and a dict keyed by names read it as the name, and a `Config` holds the Values themselves, so reading what a
    value means (`config.compile.setup_cost`) is an attribute, never a lookup. Frozen; unpickled as the registry's
    own Value (`__reduce__`)."""

    description: str  # a few words: what the value is
    label: str  # its token in a point's readable name ("" for the axis's default)
    apex: tuple[str, ...]  # Apex features it needs (names from apex.features.FEATURES)
    needs: tuple[Need, ...]  # beyond torch: compile, CUDA graphs, CUDA, torchao, an sm_89+ GPU
    # set-up time relative to torch.compile's default mode (the search tries costly values last and estimates
    # whether they fit its budget from the cheapest one's measured cost); 0: no set-up of its own
    setup_cost: float
    # the workloads that build it (empty: every workload); the whole-step CUDA graph is the shipped Transformer's
    # (a user's step may not be capturable as it stands), the capturable optimizer step graph the optimizer
    # workload's, the sharded DistributedFusedAdam the Transformer's (it needs a process group and DDP's place)
    workloads: tuple[str, ...]
    # devices on which it is what the axis's default already does (torch AdamW is foreach on CUDA): the search
    # does not measure it there; `--config` still runs it
    default_on: tuple[str, ...]
    # an Apex value's torch counterpart on its axis (the value it is weighed against, like with like: FusedAdam against
    # torch's fused AdamW); "" for the axis's default
    torch_twin: str
    autocast: Autocast  # a precision's autocast dtype ("none" for the other axes' values)
    # what the model must have for it to do anything (""): a value that does not apply to a model is never tried on it
    # (`Axis.values_for` with a `Scope` that knows the model's traits), and asked for, it is unavailable with why
    applies: Trait | Literal[""]
    # devices on which it takes half-precision inputs only (flash and cuDNN attention on CUDA): there a point of it
    # needs fp16 or bf16 autocast (`point.Config.conflict`), and the search never makes one without (`single_changes`)
    half_on: tuple[str, ...]
    axis: str  # the axis it belongs to (set by `Axis`)

    def __new__(cls, name: str, description: str, label: str, *, apex: tuple[str, ...] = (),
                needs: tuple[Need, ...] = (), setup_cost: float = 0.0, workloads: tuple[str, ...] = (),
                default_on: tuple[str, ...] = (), torch_twin: str = "", autocast: Autocast = "none",
                applies: Trait | Literal[""] = "", half_on: tuple[str, ...] = ()) -> Value:
        self = super().__new__(cls, name)
        for key, value in (("description", description), ("label", label), ("apex", apex), ("needs", needs),
                           ("setup_cost", setup_cost), ("workloads", workloads), ("default_on", default_on),
                           ("torch_twin", torch_twin), ("autocast", autocast), ("applies", applies),
                           ("half_on", half_on), ("axis", "")):
            object.__setattr__(self, key, value)
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"a Value is frozen (tried to set {key})")

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _registered, (self.axis, self.name)

    @property
    def name(self) -> str:
        """What `--config axis=name` says (the plain string)."""
        return str.__str__(self)

    def builds_on(self, workload: str) -> bool:
        return not self.workloads or workload in self.workloads

    def applies_to(self, traits: frozenset[str] | None) -> bool:
        """It does something on a model of these traits (None: not known, so it may)."""
        return traits is None or not self.applies or self.applies in traits


class Stage(StrEnum):
    """When an axis's value acts on a run, in the order a run applies them (`workloads.stages.Build` holds a run to
    it, and the answer's code is written in it, `snippet.py`); within a stage, the axes act in the registry's order.
    The model's kernels are swapped before its layers change, so that a workload can check on fp32 arithmetic that
    the swapped kernels compute what the model's own did; the step's plan is known before the compile traces it."""

    PROCESS = "process"  # before anything is built: settings a run must set, never inherit (TF32, cuDNN's benchmark)
    KERNELS = "kernels"  # modules swapped for kernels that compute the same (the norms, the loss)
    LAYERS = "layers"  # the model's layers changed (fp8's float8 Linears, the weights' layout)
    # the model wrapped to train on several ranks (DDP, FSDP2), where its workload trains data-parallel; after its
    # layers changed (and its eager FLOPs were counted: a wrapped backward runs collectives), before the optimizer
    # takes its parameters (FSDP2 replaces them with sharded ones)
    PARALLEL = "parallel"
    OPTIMIZER = "optimizer"  # the optimizer over the model's parameters, and fp16's GradScaler
    STEP = "step"  # what each step runs under (autocast, the SDPA backend) and does to its batch (its layout)
    COMPILE = "compile"  # torch.compile of the step's forward and loss


def _registered(axis_name: str, name: str) -> Value:
    return axis(axis_name).value(name)


class Axis:
    """One axis: its values, the first of which is the default (fp32's); `graph`: torch.compile sees it (what the
    compiled graph holds changes with it: every axis but the optimizer, whose step is not compiled)."""

    def __init__(self, name: str, description: str, values: tuple[Value, ...], graph: bool = True) -> None:
        self.name, self.description, self.values, self.graph = name, description, values, graph
        for v in values:
            object.__setattr__(v, "axis", name)
        self._by_name: Mapping[str, Value] = MappingProxyType({v.name: v for v in values})

    def __repr__(self) -> str:
        return f"Axis({self.name!r})"

    @property
    def default(self) -> Value:
        return self.values[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.values)

    def values_for(self, workload: str) -> tuple[Value, ...]:
        """The values `workload` builds; where it is a `Scope` that knows its model's traits, only those that apply to
        that model (the default always: it is the model as written)."""
        traits = workload.traits if isinstance(workload, Scope) else None
        return tuple(v for v in self.values if v.builds_on(workload) and (v is self.default or v.applies_to(traits)))

    def value(self, name: str) -> Value:
        """The Value of this name (a Value of this axis is returned as it is); ConfigError listing the names."""
        found = self._by_name.get(name) if isinstance(name, str) else None
        if found is None:
            raise ConfigError(f"unknown {self.name} {str(name)[:40]!r}; allowed: {', '.join(self.names)}")
        return found


class Scope(str):
    """A workload's name (a `str`: every `workload=` takes one) with what is known of the model it runs and the
    device: `traits` (None: not known), `device` ("": any). The search is handed one (`advise.run`), so that every
    value it reads off an axis (`Axis.values_for`) and every single change it makes (`point.single_changes`) is one
    that applies to this model on this device: no SDPA call, no attention backend; no convolution, no memory format.
    """

    traits: frozenset[str] | None
    device: str

    def __new__(cls, workload: str, traits: frozenset[str] | None = None, device: str = "") -> Scope:
        self = super().__new__(cls, workload)
        self.traits, self.device = (frozenset(traits) if traits is not None else None), device
        return self


class ConfigError(UsageProblem, ValueError):
    """An unknown axis or value, or a malformed `--config`; the message lists what is allowed."""


_NORMS = ("FusedLayerNorm", "FusedRMSNorm")
AXES: tuple[Axis, ...] = (
    Axis("precision", "the arithmetic of forward and backward", (
        Value("fp32", "fp32 as written (no TF32)", ""),
        Value("tf32", "fp32 with TF32 matmuls and convolutions", "tf32", needs=("cuda",)),
        Value("bf16", "bf16 autocast", "bf16", autocast="bf16"),
        Value("fp16", "fp16 autocast + `GradScaler`", "fp16", autocast="fp16"),
        Value("fp8", "torchao `convert_to_float8_training` (float8 Linear layers) under bf16 autocast", "fp8",
              needs=("sm89", "torchao"), autocast="bf16"),
    )),
    Axis("optimizer", "the optimizer's implementation (AdamW arithmetic in every case but LAMB)", (
        Value("adamw", "torch AdamW defaults (foreach on CUDA; on CPU one parameter at a time)", ""),
        Value("foreach", "torch AdamW `foreach=True`", "foreach", default_on=("cuda",)),
        Value("fused", "torch AdamW `fused=True`", "fused"),
        Value("apex", "apex FusedAdam (AdamW mode)", "fused_adam", apex=("FusedAdam",), torch_twin="fused"),
        Value("lamb", "apex FusedLAMB (its defaults, AdamW's weight decay)", "fused_lamb", apex=("FusedLAMB",),
              workloads=("optimizer",)),
        Value("capturable", "torch AdamW `fused=True, capturable=True`, its step captured once in a CUDA graph and "
              "replayed", "adamw_capturable_graph", needs=("cuda_graphs",), workloads=("optimizer",)),
        Value("apex_distributed", "apex DistributedFusedAdam (ZeRO-style sharded optimizer state)",
              "distributed_fused_adam", apex=("DistributedFusedAdam",), workloads=("transformer",)),
    ), graph=False),
    Axis("norms", "the model's LayerNorm / RMSNorm modules", (
        Value("torch", "the model's own norms", ""),
        Value("apex", "swapped for apex FusedLayerNorm / FusedRMSNorm", "fused_norms", apex=_NORMS, applies="norms"),
        Value("liger", "Liger-Kernel: for a Hugging Face model family Liger patches, its patch (RMSNorm, SwiGLU, "
              "RoPE); elsewhere LigerLayerNorm / LigerRMSNorm swapped in", "liger_norms", needs=("liger",),
              applies="norms", workloads=("model",)),
    )),
    Axis("compile", "torch.compile of the model and its loss", (
        Value("none", "eager", ""),
        Value("default", "`torch.compile(mode=\"default\")`", "compile", needs=("compile",), setup_cost=1.0),
        # setup_cost: a first compile's multiple. On an H200 (torch 2.11, cold caches) the Llama example's default
        # compile took 35 s and this mode's was not done after 240 s (each of 11 matmul shapes autotuned over 21
        # choices, 6-30 s each, one after another)
        Value("max-autotune-no-cudagraphs", "`torch.compile(mode=\"max-autotune-no-cudagraphs\")`",
              "max_autotune", needs=("compile",), setup_cost=7.0),
        # torch >= 2.6 tunes by coordinate descent under max-autotune already: this is the default mode with it
        Value("coordinate-descent", "`torch.compile` with inductor's coordinate-descent tuning of its Triton kernels "
              "(`coordinate_descent_tuning`)", "compile_cd", needs=("triton", "compile"), setup_cost=2.0),
        Value("reduce-overhead", "`torch.compile(mode=\"reduce-overhead\")`: CUDA graphs", "compile_cg",
              needs=("compile", "cuda_graphs"), setup_cost=1.2),
        Value("graph", "`torch.compile` and the whole step (forward, backward, capturable fused AdamW) in one CUDA "
              "graph", "compile_graph", needs=("compile", "cuda_graphs"), setup_cost=1.5, workloads=("transformer",)),
    )),
    Axis("memory_format", "the layout of the model's 4-D weights and inputs", (
        Value("contiguous", "as written (NCHW)", ""),
        Value("channels_last", "model and 4-D inputs in `torch.channels_last` (NHWC), `cudnn.benchmark` on",
              "channels_last", applies="conv2d", workloads=("model",)),
    )),
    Axis("attention", "the kernel behind `F.scaled_dot_product_attention`", (
        Value("default", "torch's own choice of SDPA kernel", ""),
        Value("flash", "SDPA's flash-attention kernel only (`sdpa_kernel(SDPBackend.FLASH_ATTENTION)`)", "sdpa_flash",
              needs=("sdpa_flash",), applies="sdpa", half_on=("cuda",), workloads=("model",)),
        Value("efficient", "SDPA's memory-efficient kernel only (`SDPBackend.EFFICIENT_ATTENTION`)", "sdpa_efficient",
              needs=("sdpa_efficient",), applies="sdpa", workloads=("model",)),
        Value("cudnn", "SDPA's cuDNN kernel only (`SDPBackend.CUDNN_ATTENTION`)", "sdpa_cudnn",
              needs=("sdpa_cudnn",), applies="sdpa", half_on=("cuda",), workloads=("model",)),
        Value("math", "SDPA's math (unfused) kernel only (`SDPBackend.MATH`)", "sdpa_math", applies="sdpa",
              workloads=("model",)),
    )),
    Axis("loss", "how the model's loss is computed", (
        Value("model", "the model's own loss", ""),
        Value("liger_flce", "Liger's fused linear cross-entropy: the LM head and the loss in chunks, the logits never "
              "held whole (a Hugging Face causal LM of a family Liger patches)", "liger_flce", needs=("liger",),
              applies="causal_lm_loss", workloads=("model",)),
    )),
    Axis("parallel", "how the model trains on several ranks (the shipped Transformer's own ways)", (
        Value("auto", "the shipped optimizer and Transformer under DDP under torchrun, one process otherwise (Apex's "
              "DistributedFusedAdam reduces its gradients itself); your model: one process", ""),
        Value("ddp", "`DistributedDataParallel`, on a world of one outside torchrun", "ddp",
              workloads=("transformer",)),
        Value("fsdp2", "FSDP2 `fully_shard`, each block and then the model, on a world of one outside torchrun",
              "fsdp2", workloads=("transformer",)),
    )),
)
SHIPPED_AXIS_NAMES = tuple(a.name for a in AXES)
_registry: dict[str, Axis] = {a.name: a for a in AXES}


def all_axes() -> tuple[Axis, ...]:
    """Every axis, in the order points spell them and stages apply them: the shipped ones (`AXES`), then any
    `register`ed."""
    return tuple(_registry.values())


def axis_names() -> tuple[str, ...]:
    return tuple(_registry)


def register(new: Axis) -> None:
    """An axis besides the shipped ones: every point has it from now on (at its default where not given), and the
    search, the apply loop and the snippet read it from here. Its apply and snippet entries are registered beside it
    (`workloads.apply.register`, `snippet.register`)."""
    if new.name in _registry:
        raise ConfigError(f"axis {new.name!r} exists already")
    _registry[new.name] = new


def unregister(name: str) -> None:
    """A `register`ed axis taken away again (a shipped one stays: every saved point names it)."""
    if name in SHIPPED_AXIS_NAMES:
        raise ConfigError(f"axis {name!r} is shipped; only a registered one can be taken away")
    _registry.pop(name, None)


def axis(name: str) -> Axis:
    found = _registry.get(name) if isinstance(name, str) else None
    if found is None:
        raise ConfigError(f"unknown axis {str(name)[:40]!r}; allowed: {', '.join(_registry)}")
    return found


def allowed() -> str:
    """Every axis and its values, for an error line: 'precision=fp32|tf32|..., optimizer=...'."""
    return ", ".join(f"{a.name}={'|'.join(a.names)}" for a in all_axes())
