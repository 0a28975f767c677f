"""Work models: the FLOPs and the fewest bytes of one step of each workload (pure arithmetic, no torch).

The optimizer's work is its optimizer step alone (`scope="opt_step"`), compared with that step's time;
the others' with the whole step's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

ADAMW_BYTES_PER_PARAM = 7 * 4  # read p, g, m, v; write p, m, v (fp32)
# AdamW as torch writes it, per parameter: decay 1, m (lerp) 3, v 4, denominator (sqrt, /, +eps) 3, update 3
ADAMW_FLOPS_PER_PARAM = 14
NORM_BYTES_PER_ELEMENT = 5 * 4  # forward: read x, write y; backward: read x and dy, write dx (fp32)
# forward + backward per element: LayerNorm 7 + 11 (mean, centre, square, sum, scale, affine; dy*w, dw, db,
# two reductions, dx); RMSNorm 4 + 8
NORM_FLOPS_PER_ELEMENT = {"layernorm": 18, "rmsnorm": 12}
TRANSFORMER_PARAM_BYTES = 40  # AdamW 28 + gradient written 4 + weights read forward and backward 2 x 4
# x d_model elements a block keeps (ln1, qkv 3, attn, proj, ln2, fc1 4, gelu 4, fc2)
TRANSFORMER_ACT_PER_TOKEN_LAYER = 16

Scope = Literal["step", "opt_step"]  # what a work model's time is: the whole step's, or the optimizer step's
Primary = Literal["bytes", "flops"]  # the headline figure: GB/s or TFLOP/s

PRECISIONS = ("fp32", "bf16", "fp16")
AMP_PRECISION = {"none": "fp32", "bf16": "bf16", "fp16": "fp16"}


@dataclass(frozen=True)
class Work:
    """FLOPs and bytes of one step (a model, not a measurement); None where not modelled."""

    flops: float | None
    bytes: float | None
    scope: Scope = "step"  # "step": divided by the step's time; "opt_step": by the optimizer step's alone
    precision: str = "fp32"  # which matmul ceiling the FLOPs compare with
    primary: Primary = "bytes"  # the headline figure: "bytes" (GB/s) or "flops" (TFLOP/s)
    basis: str = ""  # the model in words

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP per byte."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "bytes": self.bytes, "scope": self.scope, "precision": self.precision,
                "primary": self.primary, "basis": self.basis}


class PerStepWork:
    """`flops_per_step` and `bytes_per_step` of an object's `work` (a workload, a run's info)."""

    work: Work | None

    @property
    def flops_per_step(self) -> float | None:
        return self.work.flops if self.work is not None else None

    @property
    def bytes_per_step(self) -> float | None:
        return self.work.bytes if self.work is not None else None


def optimizer_work(n_params: int, bytes_per_param: int = ADAMW_BYTES_PER_PARAM,
                   flops_per_param: int = ADAMW_FLOPS_PER_PARAM, name: str = "AdamW") -> Work:
    """The optimizer step over `n_params` fp32 parameters; the costs a parameter come from the configuration
    (`workloads.spec.OptimizerCost`), AdamW's by default."""
    return Work(flops=float(flops_per_param * n_params), bytes=float(bytes_per_param * n_params),
                scope="opt_step", precision="fp32", primary="bytes",
                basis=f"{name} step: {bytes_per_param} bytes and {flops_per_param} FLOPs a parameter")


def norm_work(batch: int, seq: int, hidden: int, kind: str = "layernorm") -> Work:
    """Forward + backward of a LayerNorm/RMSNorm over (batch, seq, hidden) fp32 elements."""
    if kind not in NORM_FLOPS_PER_ELEMENT:
        raise ValueError(f"unknown norm kind {kind!r}; allowed: {', '.join(NORM_FLOPS_PER_ELEMENT)}")
    elems = batch * seq * hidden
    per = NORM_FLOPS_PER_ELEMENT[kind]
    return Work(flops=float(per * elems), bytes=float(NORM_BYTES_PER_ELEMENT * elems), scope="step",
                precision="fp32", primary="bytes",
                basis=f"{kind} fwd+bwd: {NORM_BYTES_PER_ELEMENT} bytes and {per} FLOPs an element")


def transformer_work(size: Mapping[str, int], params: int, amp: str = "none") -> Work:
    """One training step of the decoder.

    FLOPs: 6 x non-embedding parameters x tokens (matmuls forward and backward) + 12 x layers x seq x
    d_model x tokens (QK^T and AV, forward and backward). Bytes, the fewest: 40 a parameter (AdamW 28,
    gradient 4, weights read forward and backward 8), each block's 16 x d_model activations a token
    written and read back, and their gradients written and read (4 accesses, 2 bytes under fp16/bf16
    autocast, else 4), and the logits (written in the model's precision, an fp32 copy written and read,
    its gradient written: 12 + that precision's bytes a logit).
    """
    tokens = size["batch"] * size["seq"]
    d, layers, vocab, seq = size["d_model"], size["layers"], size["vocab"], size["seq"]
    embed = vocab * d + seq * d
    dense = params - embed
    attention = 12 * layers * seq * d
    flops = (6 * dense + attention) * tokens
    act = 2 if amp in ("fp16", "bf16") else 4
    nbytes = (TRANSFORMER_PARAM_BYTES * params
              + tokens * layers * TRANSFORMER_ACT_PER_TOKEN_LAYER * d * 4 * act
              + tokens * vocab * (12 + act))
    return Work(flops=float(flops), bytes=float(nbytes), scope="step", precision=AMP_PRECISION.get(amp, "fp32"),
                primary="flops", basis="6 x non-embedding params x tokens + attention 12 x layers x seq x d_model "
                "x tokens; bytes: params 40 B each, activations and logits")

