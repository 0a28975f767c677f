"""The Transformer experiment: a small decoder-only model learning a Markov chain."""

from __future__ import annotations

import time
from typing import Callable, Mapping

import torch
from torch import nn
from torch.nn import functional as F

from .warmup import WARMUP_STEPS, TrainingState, compile_warmup
from ..analysis import transformer_work
from . import apply, flop_count, markov, parallel
from ..measure.marker import Marker, NoMark
from .base import Workload, backward_and_step, scale_tensor
from ..config.axes import Value
from .spec import MAX_POOL_TOKENS, TRANSFORMER  # MAX_POOL_TOKENS: fresh tokens made up front, then cycled
from .stages import Build
from ..config.axes import Stage
from ..config.point import Config


NormFactory = Callable[[int], nn.Module]


class Block(nn.Module):
    """Pre-norm block: causal self-attention and a GELU MLP."""

    def __init__(self, d_model: int, heads: int, norm: NormFactory) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = norm(d_model), norm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyDecoder(nn.Module):
    """Token + position embeddings, `layers` blocks, final norm, LM head."""

    def __init__(self, vocab: int, d_model: int, layers: int, heads: int, seq: int, norm: NormFactory) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, norm) for _ in range(layers))
        self.ln_f = norm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class LossModel(nn.Module):
    """Model + loss in one module, for torch.compile to see (and fuse) both. Exactly the eager step's maths:
    the model under autocast, the cross-entropy on fp32 logits outside it."""

    def __init__(self, model: nn.Module, device: str, precision: Value) -> None:
        super().__init__()
        self.model, self.device = model, device
        self._autocast_dtype = apply.autocast_dtype(precision)  # a plain dtype: torch.compile traces the forward

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with apply.autocast_at(self.device, self._autocast_dtype):
            logits = self.model(inputs)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


class TransformerWorkload(Workload):
    """Next-token prediction on Markov-chain tokens; the loss floor is the chain's entropy rate. What a configuration
    builds is its point's (precision, optimizer, norms and compile mode), applied stage by stage (`stages.Build`) as
    the user's model's is, so a configuration is a point and the advice can hand back its code (`config/snippet.py`).
    The model is written with torch's LayerNorms; the kernels stage swaps them where the point says so.

    `torch_compile` / `torch_compile_cg`: the same model, data and seed as the eager configurations, model + loss
    through torch.compile (mode "default" / "reduce-overhead"), torch fused AdamW eager. `warm_up()` compiles
    (and records the CUDA graphs) on the first batches, then restores parameters, optimizer state and the data
    position, so that step N sees the same batch and starting weights as fp32's step N.

    `torch_compile_graph`: the compiled model (mode "default"), and then the whole step (forward, backward
    and torch AdamW(fused=True, capturable=True)) captured once in a torch.cuda.CUDAGraph during set-up;
    each step copies its batch into the graph's input buffer and replays it: two launches a step, no Python
    per layer. Gradients are created by the captured backward in the graph's memory (set to None before
    capture, as the CUDA graphs docs do). CUDA only; bf16 or fp32 (GradScaler reads its scale on the host
    and cannot be captured).
    """

    units = "tokens"

    def __init__(self, config: Config, size: Mapping[str, int], device: str, lr: float, seed: int, steps: int,
                 name: str = "") -> None:
        point = self.config = config
        name = name or config.label  # what the messages call it (the preset's name)
        build = Build(point, device, lr, data_parallel=TRANSFORMER.trains_data_parallel).apply(Stage.PROCESS)
        rank, self.world_size = parallel.world()  # torchrun's group, where there is one (the stage makes no other)
        torch.manual_seed(seed)
        self.chain = markov.make_chain(size["vocab"], size["branching"], seed)
        self.loss_floor = self.chain.entropy_rate
        seq, batch = size["seq"], size["batch"]
        # a new batch every step (so the expected loss cannot go below the entropy floor by memorising; a single
        # batch's loss can), within a memory cap
        self.pool = max(1, min(steps, MAX_POOL_TOKENS // (batch * (seq + 1))))
        # each rank its own batches (weak scaling: the single-GPU batch on every rank), the same chain and weights
        tokens = markov.sample(self.chain, self.pool * batch, seq + 1, seed + 1 + 7919 * rank, device)
        self.batches = tokens.view(self.pool, batch, seq + 1)
        self.model = TinyDecoder(size["vocab"], size["d_model"], size["layers"], size["heads"], seq,
                                 nn.LayerNorm).to(device)
        build.through(Stage.LAYERS, model=self.model)  # Apex's norms swapped in where the point says so
        self.params = sum(p.numel() for p in self.model.parameters())  # before FSDP2 shards them
        # the eager model's FLOPs, before DDP or FSDP2 wraps it (its backward would run their collectives)
        loss_model, first = LossModel(self.model, device, point.precision), self.batches[0]
        self.step_flops = flop_count.counted(self.model, lambda: loss_model(first[:, :-1], first[:, 1:]), device)
        self.model = build.apply(Stage.PARALLEL, shards=tuple(self.model.blocks)).target()  # type: ignore[assignment]  # DDP/FSDP wrap it
        build.through(Stage.STEP, params=list(self.model.parameters()))
        assert build.optimizer is not None  # the optimizer stage made it
        self.opt, self.scaler, self.build = build.optimizer, build.scaler, build
        self.device = device
        self.uses_grad_scaler = self.scaler is not None
        self.units_per_step = batch * seq
        self.work = transformer_work(size, self.params, point.autocast)
        self._i = 0
        self.compiled: Callable[..., torch.Tensor] | None = None  # torch.compile's wrapper of the loss model
        self.whole_graph = point.whole_step_graph
        if self.whole_graph and device != "cuda":
            raise ValueError(f"{name} needs CUDA (a CUDA graph); this run is on {device}")
        if self.whole_graph and self.scaler is not None:
            raise ValueError(f"{name} cannot use GradScaler (amp = fp16): its step reads the scale on the "
                             "host; use amp = bf16 or none")
        self.uses_cuda_graphs = point.cuda_graphs
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: torch.Tensor | None = None  # the whole-step graph's input: each step's batch is copied in
        self.static_loss: torch.Tensor | None = None
        build.apply(Stage.COMPILE, loss_module=LossModel(self.model, device, point.precision))
        self.compiled = build.compiled
        self.compiles = self.compiled is not None

    def warm_up(self) -> float | None:
        if self.compiled is None:
            return None
        marker = NoMark()

        def rewind() -> None:
            self._i = 0
            self.scaler = apply.grad_scaler(self.device, self.config.precision)  # a fresh scale and growth tracker

        state = TrainingState(self.model.parameters(), self.opt)
        if self.whole_graph:
            return self._capture(state, rewind)
        return compile_warmup(lambda: self.step(marker), state, self.device, after=rewind)

    def _graph_body(self) -> torch.Tensor:
        """Forward, backward and optimizer step on the input buffer: what the whole-step graph holds."""
        assert self.compiled is not None and self.static is not None
        loss = self.compiled(self.static[:, :-1], self.static[:, 1:])
        loss.backward()
        self.opt.step()
        return loss

    def _capture(self, state: TrainingState, rewind: Callable[[], None]) -> float:
        """Compile (and autotune) on eager warm-up steps on a side stream, capture one step, put the
        parameters and optimizer state back in place, rewind the data. Returns the seconds it took."""
        t0 = time.perf_counter()
        self.static = self.batches[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for k in range(WARMUP_STEPS):
                self.static.copy_(self.batches[k % self.pool])
                self.opt.zero_grad(set_to_none=True)
                self._graph_body()
        torch.cuda.current_stream().wait_stream(side)
        self.opt.zero_grad(set_to_none=True)  # the captured backward creates them in the graph's pool
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_loss = self._graph_body()
        torch.cuda.synchronize()
        self.graph = graph
        state.restore(zero_grads=True)
        rewind()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        batch = self.batches[self._i % self.pool]
        self._i += 1
        if self.whole_graph:
            if self.graph is None or self.static is None:
                raise RuntimeError("warm_up() must capture the step before the first step")
            self.static.copy_(batch)
            self.graph.replay()
            return self.static_loss, None
        inputs, targets = batch[:, :-1], batch[:, 1:]
        self.opt.zero_grad()  # set_to_none is the default; apex FusedAdam takes no argument
        if self.compiled is not None:
            if self.uses_cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()  # a new iteration: earlier graph outputs are dead
            loss = self.compiled(inputs, targets)
        elif self.config.autocast == "none":  # no autocast context at all: the user's fp32 loop has none
            loss = F.cross_entropy(self.model(inputs).float().flatten(0, 1), targets.flatten())
        else:
            with apply.autocast(self.device, self.config.precision):
                logits = self.model(inputs)
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        backward_and_step(loss, self.opt, self.scaler)
        return loss, scale_tensor(self.scaler)
