"""The warm-up that leaves no trace: compile and capture time kept out of the measured steps.

`compile_warmup`: the workload runs its compiled/captured step `WARMUP_STEPS` times during set-up (tracing,
compiling, autotuning, CUDA-graph recording), waits for the device, and then puts parameters, gradients,
optimizer state and the data position back exactly as they were, in place (a captured graph keeps pointing at
the same memory), so the run's step 1 starts from the same state as an eager run's step 1 and losses stay
comparable step for step. The time it took is `compile_s`. Whether a configuration can compile or capture here at all
is `config/needs.py`'s.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

WARMUP_STEPS = 3  # cudagraph trees: 1 warm-up run, 1 recording, then replays


class TrainingState:
    """A copy of parameters (values) and a way to put them, their gradients and the optimizer's state back,
    all in place: tensors captured in a CUDA graph (or static inputs of a compiled one) keep their memory."""

    def __init__(self, params: Iterable[Any], optimizer: Any) -> None:
        self.params = list(params)
        self.optimizer = optimizer
        self.saved = [p.detach().clone() for p in self.params]

    def restore(self, zero_grads: bool = False) -> None:
        """Parameters back to their saved values; gradients set to None (or zeroed in place if `zero_grads`:
        for graphs that captured them); optimizer state back to 'no step taken yet'."""
        import torch

        with torch.no_grad():
            for p, saved in zip(self.params, self.saved, strict=True):
                p.copy_(saved)
                if p.grad is not None:
                    if zero_grads:
                        p.grad.zero_()
                    else:
                        p.grad = None
            reset_optimizer_state(self.optimizer)


def reset_optimizer_state(optimizer: Any) -> None:
    """Every tensor of the optimizer's state zeroed in place: for Adam/AdamW (moments 0, step 0) this is
    the state of a fresh optimizer, except that the buffers exist (and keep their addresses)."""
    import torch

    with torch.no_grad():
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    value.zero_()


def compile_warmup(run_step: Callable[[], Any], state: TrainingState, device: str, steps: int = WARMUP_STEPS,
                   zero_grads: bool = False, after: Callable[[], None] | None = None) -> float:
    """Run `run_step` `steps` times (compiling/capturing), wait for the device, restore `state`; call `after`
    (e.g. rewind the data); return the seconds it all took."""
    import torch

    t0 = time.perf_counter()
    for _ in range(steps):
        run_step()
    if device == "cuda":
        torch.cuda.synchronize()
    state.restore(zero_grads=zero_grads)
    if after is not None:
        after()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0
