"""A training step's model FLOPs, counted once per model: torch's `FlopCounterMode` around one forward and backward
of the eager model (no optimizer step), the one place FLOPs are counted for MFU (`measure/mfu.py`).

What it counts: the matrix products (mm, addmm, bmm, baddbmm, convolutions, scaled-dot-product attention), forward
and backward, as torch's counter does (2·m·n·k a product forward, twice that backward: the gradients of both
operands); elementwise work (norms, activations, the loss, the optimizer) is left out, as in every MFU figure. Its
two changes: the CPU's flash-attention kernel (`_scaled_dot_product_flash_attention_for_cpu` and its backward),
which torch's table lacks, is counted by torch's own attention formulas; and a fused attention's backward is counted
without its recomputation of the scores (torch's formula counts the kernel's 5 products, the model needs 4). So a
fused kernel's count, on a GPU or the CPU, is the math path's: 12·B·H·T²·Q an attention call, forward and backward.

What it leaves as it was: the count runs on the model as built (before a norm swap or fp8 changes it), under the
run's autocast, with torch's random state forked (dropout draws nothing from the run's stream), and puts back the
buffers (BatchNorm's running statistics) and gradients it changed. The caller keeps it per model
(`model_workload`: once per model in a process that runs several, `run/reusable.py`).

For a transformer it also says how the count compares with nanoGPT's estimate (PaLM appendix B): 6N + 12·L·H·Q·T
FLOPs a token, N the parameters that take part in matrix products (an embedding table used only as a lookup left
out, a tied LM head's counted), L the attention calls of one forward, H heads, Q the head size and T the sequence,
read from the `scaled_dot_product_attention` calls the step made. A note, not a second figure: the count is the
one MFU uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import flop_counter

from ..measure.mfu import StepFlops
from .failure import is_out_of_memory

COUNTER = "FlopCounterMode"


def _cpu_attention(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, **kwargs: Any) -> int:
    return int(flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape))


def _cpu_attention_backward(grad_out_shape: Any, query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                            **kwargs: Any) -> int:
    return int(flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape))


# the fused attention backward kernels; torch's formula reads each one's query and key as (batch, heads, length, head
# size) and counts their recomputation of the scores
FUSED_BACKWARD = (
    "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_flash_attention_backward", "_efficient_attention_backward",
)


def _without_recompute(count: Callable[..., int]) -> Callable[..., int]:
    """A fused attention backward's count less its recomputation of the scores (QK^T: torch's formula counts it, as
    the kernel does it; model FLOPs do not), so that a fused kernel's count is the math path's: 12·B·H·T²·Q."""
    def model_flops(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        total = int(count(*args, out_val=out_val, **kwargs))
        q, k = args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None
        if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4):
            return total  # a variable-length batch (3-D, with its offsets): torch's count as it is
        b, h, s_q, d = (int(n) for n in q.shape)
        return total - 2 * b * h * s_q * d * int(k.shape[2])

    model_flops._get_raw = True  # type: ignore[attr-defined]  # handed the tensors, as torch's own formula is
    return model_flops


def _custom_mapping() -> dict[Any, Any]:
    """What this counter counts beyond, or otherwise than, torch's table: the CPU's flash-attention kernels (which
    the table lacks) and every fused attention backward without the scores' recomputation."""
    aten = torch.ops.aten
    out: dict[Any, Any] = {}
    cpu = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if cpu is not None and cpu not in flop_counter.flop_registry:
        out[cpu] = _cpu_attention
    for name in FUSED_BACKWARD:
        op = getattr(aten, name, None)
        if op is None:
            continue
        count = flop_counter.flop_registry.get(op) or flop_counter.shape_wrapper(_cpu_attention_backward)
        out[op] = _without_recompute(count)
    return out


@dataclass(frozen=True)
class AttentionCall:
    """One `scaled_dot_product_attention` call's shape: batch, heads, query and key lengths, head size."""

    batch: int
    heads: int
    q_len: int
    kv_len: int
    head_dim: int

    @property
    def flops(self) -> int:
        """nanoGPT's attention term for this call, forward and backward: 12·H·Q·T_kv a query token."""
        return 12 * self.batch * self.heads * self.q_len * self.kv_len * self.head_dim


class _AttentionCalls(TorchFunctionMode):
    """Notes the shape of every attention call: `F.scaled_dot_product_attention` (whichever kernel runs it) and
    `nn.MultiheadAttention`'s `F.multi_head_attention_forward` (whose own attention call the mode does not see)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[AttentionCall] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        try:
            if func is F.scaled_dot_product_attention:
                self._sdpa(args[0] if args else kwargs.get("query"), args[1] if len(args) > 1 else kwargs.get("key"))
            elif func is F.multi_head_attention_forward:
                self._mha(args[0] if args else kwargs.get("query"), args[1] if len(args) > 1 else kwargs.get("key"),
                          args[4] if len(args) > 4 else kwargs.get("num_heads"))
        except (TypeError, ValueError, IndexError, ZeroDivisionError):  # an odd call: not noted, never in the way
            pass
        return func(*args, **kwargs)

    def _sdpa(self, q: Any, k: Any) -> None:
        """(..., heads, length, head size)."""
        if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() >= 3:
            batch = 1
            for n in q.shape[:-3]:
                batch *= int(n)
            self.calls.append(AttentionCall(batch, int(q.shape[-3]), int(q.shape[-2]), int(k.shape[-2]),
                                            int(q.shape[-1])))

    def _mha(self, q: Any, k: Any, heads: Any) -> None:
        """(length, batch, embedding), or (length, embedding) unbatched."""
        if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(heads, int) and heads > 0:
            batch = int(q.shape[1]) if q.dim() == 3 else 1
            self.calls.append(AttentionCall(batch, heads, int(q.shape[0]), int(k.shape[0]),
                                            int(q.shape[-1]) // heads))


def matmul_params(model: nn.Module) -> int:
    """nanoGPT's N: the trainable parameters, less the embedding tables used only as lookups (a table shared with a
    Linear, a tied LM head, is a matrix product and counts)."""
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    used = {id(p) for m in model.modules() if not isinstance(m, nn.Embedding) for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in model.parameters() if p.requires_grad and (id(p) not in tables or id(p) in used))


def nanogpt_note(counted: float, model: nn.Module, calls: list[AttentionCall]) -> str | None:
    """The count against 6N + 12·L·H·Q·T a token, where the step's attention calls give L, H, Q and T (all of one
    shape); None for a model without them (a convolutional network: the estimate is a transformer's)."""
    if not calls or len(set(calls)) != 1:
        return None
    c, n = calls[0], matmul_params(model)
    tokens = c.batch * c.q_len
    estimate = 6 * n * tokens + len(calls) * c.flops
    return (f"{COUNTER} counted {counted:.4g} FLOPs a step; nanoGPT's 6N + 12·L·H·Q·T a token (PaLM appendix B; "
            f"N {n:,} parameters in matrix products, L {len(calls)}, H {c.heads}, Q {c.head_dim}, T {c.kv_len}) "
            f"over {tokens:,} tokens gives {estimate:.4g}: the count is {counted / estimate:.3f}x the estimate")


def count_step_flops(model: nn.Module, loss_of: Callable[[], torch.Tensor], device: str) -> StepFlops:
    """One forward (`loss_of()`, the model's loss on one batch) and its backward under `FlopCounterMode`: the model
    FLOPs of a training step. Model, buffers, gradients and random state are left as they were (the module
    docstring). Raises what the step raises."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    grads = [(p, p.grad) for p in model.parameters()]
    attention = _AttentionCalls()
    devices = [torch.cuda.current_device()] if device == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), \
                flop_counter.FlopCounterMode(display=False, custom_mapping=_custom_mapping()) as counter:
            with attention:
                loss = loss_of()
            loss.backward()
        total = float(counter.get_total_flops())
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for p, g in grads:
            p.grad = g
    if total <= 0:
        return StepFlops(None, COUNTER, reason=f"{COUNTER} counted no matrix products in a step (it counts matmuls, "
                                               "convolutions and attention)")
    return StepFlops(total, COUNTER, note=nanogpt_note(total, model, attention.calls))


def counted(model: nn.Module, loss_of: Callable[[], torch.Tensor], device: str) -> StepFlops:
    """`count_step_flops`, with a failure as the count's reason (the run goes on without MFU); an out-of-memory
    is raised (the run could not have fitted either)."""
    try:
        return count_step_flops(model, loss_of, device)
    except Exception as exc:  # noqa: BLE001 - the run's timing matters more than its FLOP count
        if is_out_of_memory(exc):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return StepFlops(None, COUNTER, reason=f"counting the FLOPs of a step failed: {type(exc).__name__}: {first}")


def six_n(model: nn.Module) -> float:
    """6N FLOPs a token (N: `matmul_params`): a watched run's count when it is handed the model but no batch."""
    return 6.0 * matmul_params(model)
