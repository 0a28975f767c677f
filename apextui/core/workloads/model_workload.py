"""The user's own model as a workload: one configuration (a point on `config.axes`) applied to it.

A run is a point on the configuration axes (`config.point.Config`: precision, optimizer, norms, compile);
a named configuration is a named point (`config.point.NAMED`). Every configuration trains the same
model from the same initial weights (torch seeded before the user's function builds it) on the same batches
(`POOL` made once by `make_batch` from a seeded generator, cycled), so that their losses can be compared.

Loss parity (`check`): each configuration except fp32 first trains `PARITY_STEPS` steps as fp32 would (the model
as built, fp32, torch AdamW defaults) and then as itself, both from the initial weights and on the first
batches, and compares the two losses step by step (fp16: up to the first step GradScaler skipped, after which
the weights differ by design; `_compare`); a loss further from fp32's than the precision's
tolerance (`TOLERANCE`) fails the check, and a configuration that failed it is flagged (never recommended) by
the advice and shown red in the TUI. Then weights and buffers are put back and the optimizer is made
afresh: the measured run starts from the initial weights. For a compiled configuration the configuration's parity
steps are its compile warm-up. Both runs draw from the same random stream (`dropout.same_stream`, seeded
with seed + `CHECK_SEED_OFFSET`), so dropout draws the same masks in eager mode; a compiled configuration, or an
eager one whose masks differ anyway, is checked with dropout off (`dropout.disabled`); the record's
`dropout` says which, and a failure's `message` names the cause found. The check's fp32 steps are where the engine
first calls the model (eagerly): they note how (`config.calling.Calling`: the inputs' form, where the loss comes
from), and the record keeps it as `calling`, for the answer's code to call the model the same way.

The model's FLOPs a step (`step_flops`, what MFU reads) are counted on the model as built, before the check, the norm
swap or fp8 change anything: one eager forward and backward on the first batch (`flop_count`), weights, buffers and
random state left as they were. That forward is the model's first, and the initial weights every run starts from are
taken after it: state a forward makes (a parameter created on its first call, a lazy module's) is part of them, so
the check's fp32 steps and the configuration's put back the same entries they started from.

The norm swap (fused_norms, fused_amp; norms=liger) replaces every module that computes a LayerNorm or RMSNorm
(`norm_swap.find_norms`, whatever its class) with Apex's `FusedLayerNorm` / `FusedRMSNorm` (or Liger's; for a
Hugging Face family Liger patches, Liger's patch), its weights copied, and Liger's fused linear cross-entropy
(loss=liger_flce) patches the model's forward; either is checked on the first batch with dropout off: the model's
loss before and after, in fp32, must agree within `SWAP_TOLERANCE` (relative).

A value that does nothing to this model (channels_last without a 2-D convolution, an attention backend without an
SDPA call in the check's fp32 steps, Liger's loss on a model that is not a causal LM computing its own:
`axes.Value.applies`) fails the run with why, as the norm swap does on a model without norms: advise's probe finds
these before the search and never tries them (`model_presets.probe`); a run no probe preceded (the TUI's) finds them
here. The memory format and the attention backend act in each step (`LossModule`: the batch's 4-D tensors moved,
the forward under `sdpa_kernel`); an attention backend torch has no kernel of for the model's call fails the run
with torch's reasons (`apply.attention_failure`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import torch
from torch import nn
from torch import GradScaler

from .warmup import WARMUP_STEPS
from .failure import is_out_of_memory
from . import user_model
from . import dropout
from . import apply
from . import flop_count
from . import setup_stop
from . import stages
from .stages import Build
from ..config.axes import Stage
from .apply import fp8_layer_fits
from .base import Workload, backward_and_step, scale_tensor
from ..measure.details import CorrectnessCheck, NormSwap
from ..measure.marker import Marker, NoMark
from ..measure.mfu import StepFlops
from .norm_swap import count_norms, find_norms, swap_norms
from .traits import count_sdpa, traits
from ..config.calling import Calling, InputForm, LossForm
from ..config.needs import applies_availability
from ..config.point import BASELINE, NAMED, Config
from .spec import MODEL

__all__ = ["ModelWorkload", "count_norms", "find_norms", "fp8_layer_fits", "swap_norms", "UserCodeError"]

POOL = 8  # batches made up front and cycled: the data costs nothing in a step, and every configuration sees the same
PARITY_STEPS = 5  # steps of fp32 and of the configuration whose losses are compared
# the largest relative difference from fp32's loss over the parity steps, by the configuration's arithmetic
TOLERANCE = {"fp32": 2e-3, "tf32": 1e-2, "fp16": 3e-2, "bf16": 5e-2}
SWAP_TOLERANCE = 1e-4  # relative difference of the first batch's fp32 loss before and after the norm swap
CHECK_SEED_OFFSET = 2  # the check's random stream: torch seeded with seed + this before fp32's and the point's steps
NO_LOSS = ("the model returned an output whose loss is None (a Hugging Face model computes its loss only when the "
           "batch has labels): give make_batch a `labels` entry, or a loss_fn")

# the check's fp32 reference losses (how they called the model, how many SDPA calls they made), kept for every later
# run of the same model in a process that runs several (`run.reusable`): fp32's steps from the same initial weights on
# the same stream
_references: dict[tuple[Any, ...], tuple[tuple[float, ...], Calling | None, int]] = {}
# the model's FLOPs a step (`flop_count`), kept likewise: the model as built, the same first batch
_flops: dict[tuple[Any, ...], StepFlops] = {}
_reuse_references = False


def reuse_references(on: bool) -> None:
    """From now on (`on`), the check's fp32 reference steps run, and the model's FLOPs a step are counted, once per
    model in this process (`_fp32_losses`, `_count_flops`)."""
    global _reuse_references
    _reuse_references = on
    _references.clear()
    _flops.clear()


class UserCodeError(RuntimeError):
    """The user's function, `make_batch`, model or loss raised, or gave something unusable: a run-time
    failure (the run fails); the message says which, with the tail of their traceback (so the runner prints
    no traceback of its own)."""

    quiet_traceback = True


def one_shape(batches: list[Any]) -> bool:
    """Every batch's tensors have the same shapes as the first batch's (a compile can then be static)."""
    return len({tuple(tuple(t.shape) for t in _tensors(b)) for b in batches}) == 1


def _tensors(batch: Any) -> list[torch.Tensor]:
    """Every tensor in a batch (tensors, and tuples, lists and dicts of them, nested)."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for v in batch.values() for t in _tensors(v)]
    if isinstance(batch, (tuple, list)):
        return [t for v in batch for t in _tensors(v)]
    return []


def input_form(inputs: Any) -> InputForm:
    """How `_call` passes these inputs: a dict as keyword arguments, a tuple or list as positional ones."""
    if isinstance(inputs, dict):
        return "keyword"
    return "positional" if isinstance(inputs, (tuple, list)) else "one"


def _call(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _loss_of(output: Any) -> Any:
    """A model that returns its loss: the tensor itself, or its `loss` entry or attribute."""
    if isinstance(output, dict) and "loss" in output:
        return output["loss"]
    return getattr(output, "loss", output)


def loss_form(output: Any) -> LossForm:
    """Where `_loss_of` takes this output's loss: a dict's "loss" entry (written `.loss` in the answer's code where
    the dict has that attribute too, as a Hugging Face ModelOutput: the same tensor), an attribute, the output."""
    if isinstance(output, dict) and "loss" in output:
        return "attribute" if hasattr(output, "loss") else "key"
    return "attribute" if hasattr(output, "loss") else "returned"


class LossModule(nn.Module):
    """Forward and loss of one batch under the point's autocast and SDPA backend, the batch's 4-D tensors in its
    memory format: what each step runs, and what torch.compile compiles (it sees, and fuses, the loss too)."""

    def __init__(self, model: nn.Module, loss_fn: Callable[[Any, Any], torch.Tensor] | None, device: str,
                 config: Config, notes_calling: bool = False) -> None:
        super().__init__()
        self.model, self.loss_fn, self.device, self.config = model, loss_fn, device, config
        self.notes_calling = notes_calling  # the check's fp32 steps (eager): note how the model was called
        self.calling: Calling | None = None
        # what the point does inside the forward (the step stage's plan), as plain torch values: torch.compile traces
        # the forward, and a configuration Value read there (a `str` subclass) made torch 2.11's dynamo fail every
        # compiled step
        plan = stages.step_plan(config, device)
        self._channels_last, self._autocast_dtype, self._sdpa_backend = \
            plan.channels_last, plan.autocast_dtype, plan.sdpa_backend
        # a registered axis's own step contexts (none of the shipped axes has one): entered only where there are any,
        # so that the compiled forward of every shipped point stays as it was
        self._extra = plan.entered if plan.contexts else None

    def forward(self, batch: Any) -> torch.Tensor:
        if self._extra is None:
            return self._loss(batch)
        with self._extra():
            return self._loss(batch)

    def _loss(self, batch: Any) -> torch.Tensor:
        if self._channels_last:
            batch = apply.channels_last(batch)
        with apply.autocast_at(self.device, self._autocast_dtype), apply.sdpa_backend(self._sdpa_backend):
            if self.loss_fn is None:
                output = _call(self.model, batch)
                if self.notes_calling:
                    self.calling = Calling(input_form(batch), loss_form(output))
                return _loss_of(output)
            inputs, targets = batch
            if self.notes_calling:
                self.calling = Calling(input_form(inputs), "loss_fn")
            return self.loss_fn(_call(self.model, inputs), targets)


def _user(what: str, exc: BaseException) -> UserCodeError:
    tail = user_model.user_traceback(exc, None)
    first = (str(exc).strip().splitlines() or [""])[0]
    return UserCodeError(f"{what} raised {type(exc).__name__}: {first}\n{tail}".rstrip())


def _is_oom(exc: BaseException) -> bool:
    return is_out_of_memory(exc)



def _state_form(model: nn.Module) -> dict[str, tuple[int, ...] | None]:
    """The model's state entries and their shapes (None: a lazy module's parameter, not made yet)."""
    from torch.nn.parameter import is_lazy

    return {k: None if is_lazy(v) else tuple(v.shape) for k, v in model.state_dict().items()}


def _steps(numbers: list[int]) -> str:
    """[1, 2, 3] -> 'steps 1-3'; [2] -> 'step 2'; [1, 3] -> 'steps 1, 3'."""
    if len(numbers) == 1:
        return f"step {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"steps {numbers[0]}-{numbers[-1]}"
    return "steps " + ", ".join(map(str, numbers))


class ModelWorkload(Workload):
    """The user's model, trained one step at a time under one model configuration (see the module docstring)."""

    def __init__(self, spec: str, point: Config | str, device: str, lr: float, seed: int, steps: int) -> None:
        """`point`: the configuration it trains, or a named one's name (`config.point.NAMED`)."""
        self.spec, self.device = spec, device
        self.config = point if isinstance(point, Config) else NAMED[point]
        self.label = self.config.label  # what its messages call it
        self.build = Build(self.config, device, lr).apply(Stage.PROCESS)
        try:
            setup = user_model.build(spec, device == "cpu", seed)
        except user_model.ModelSpecError:
            raise
        except Exception as exc:  # noqa: BLE001 - their function: say so, with their traceback
            if _is_oom(exc):
                raise
            raise _user(f"{spec} (your function)", exc) from exc
        self.setup = setup
        self.model = setup.model.to(device)
        self.model.train()
        self._check_seed = seed + CHECK_SEED_OFFSET
        self.lr = self.build.lr = float(setup.lr) if setup.lr is not None else lr
        self.batches = self._make_batches(seed)
        self.units = setup.units
        self.units_per_step = setup.units_per_step or self._batch_size(self.batches[0])
        self.loss_module = LossModule(self.model, setup.loss_fn, device, self.config)
        self.calling: Calling | None = None  # how the check's fp32 steps called the model (the answer's code does so)
        self.sdpa_calls: int | None = None  # scaled_dot_product_attention calls the check's fp32 steps made
        self._i = 0
        self.step_flops = self._count_flops()
        self._initial = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        reference = None if self.config == BASELINE else self._reference_losses()
        self._reference = reference
        self._refuse_what_does_not_apply()
        swap: NormSwap | None = None
        if stages.changes_at(self.config, Stage.KERNELS):
            swap = self._swap_kernels()
            self._initial = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.build.apply(Stage.KERNELS, model=self.model)
        self.build.apply(Stage.LAYERS)
        if self.build.converted:  # fp8's float8 Linears
            self._initial = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.params = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        self.build.apply(Stage.PARALLEL)  # one process: your model is never wrapped (`Build.data_parallel`)
        self.build.apply(Stage.OPTIMIZER, params=self._trained())
        self.build.apply(Stage.STEP)
        self.opt, self.scaler = self._built()
        self.uses_grad_scaler = self.scaler is not None
        self.compiled: nn.Module | None = None
        self.uses_cuda_graphs = self.config.cuda_graphs
        if self.uses_cuda_graphs and device != "cuda":
            raise ValueError(f"{self.label} needs CUDA (CUDA graphs); this run is on {device}")
        self._swap = swap
        if apply.compile_mode(self.config) is not None:
            # dynamic=False where every batch has one shape: the check's graph (dropout off) and the measured one
            # (the user's dropout) are two static graphs, each the one a plain torch.compile(model) compiles first;
            # without it the second compile marks the dropout probabilities dynamic ("automatic dynamic") and the
            # measured graph is another one. Batches of several shapes keep torch's default (each new shape
            # would be a full compile, and past the cache limit the step would run eager)
            self.build.apply(Stage.COMPILE, loss_module=self.loss_module,
                             compile_options={"dynamic": False if one_shape(self.batches) else None})
            self.compiled = self.build.compiled  # type: ignore[assignment]
            self.compiles = True
        else:
            self.build.apply(Stage.COMPILE, loss_module=self.loss_module)
        if self.compiled is None and reference is not None:
            losses, skipped = self._point_losses(PARITY_STEPS)
            self.check = self._parity(reference, losses, skipped, swap)

    # ---- set-up --------------------------------------------------------------------------------
    def _make_batches(self, seed: int) -> list[Any]:
        device = torch.device(self.device)
        generator = torch.Generator(device=device).manual_seed(seed + 1)
        batches = []
        for _ in range(POOL):
            try:
                batch = self.setup.make_batch(device, generator)
            except Exception as exc:  # noqa: BLE001
                if _is_oom(exc):
                    raise
                raise _user("make_batch(device, generator)", exc) from exc
            tensors = _tensors(batch)
            if not tensors:
                raise UserCodeError(f"make_batch returned {type(batch).__name__} with no tensor in it; return a "
                                    "tensor, or a tuple/list/dict of tensors")
            wrong = next((t for t in tensors if t.device.type != device.type), None)
            if wrong is not None:
                raise UserCodeError(f"make_batch returned a tensor on {wrong.device}; this run is on {self.device}: "
                                    "create it with device=device (the first argument make_batch gets)")
            batches.append(batch)
        return batches

    @staticmethod
    def _batch_size(batch: Any) -> int:
        first = _tensors(batch)[0]
        return int(first.shape[0]) if first.dim() else 1

    def _trained(self) -> list[nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def _built(self) -> tuple[torch.optim.Optimizer, GradScaler | None]:
        """The optimizer stage's optimizer and GradScaler (`Build.rebuild` makes fresh ones after a rewind)."""
        assert self.build.optimizer is not None  # the optimizer stage made it
        return self.build.optimizer, self.build.scaler

    def _restore(self, partial: bool = False) -> None:
        """Weights and buffers back to the initial ones, in place (a compiled graph keeps pointing at them);
        gradients dropped; the data from its first batch. `partial`: only the entries the initial state has (after
        the norm swap, whose modules may hold other ones)."""
        state = self.model.state_dict()
        late = next((k for k in state if k not in self._initial), None) if not partial else None
        if late is not None:
            raise UserCodeError(f"the model's state gained {late!r} after its first forward (its forward made it "
                                "later): every configuration must start from the same initial weights, so create "
                                "it in __init__, or in the first forward")
        with torch.no_grad():
            for k, v in state.items():
                if not partial or k in self._initial:
                    v.copy_(self._initial[k])
        for p in self.model.parameters():
            p.grad = None
        self._i = 0

    def _checked_loss(self, loss: Any) -> torch.Tensor:
        if loss is None and self.setup.loss_fn is None:
            raise UserCodeError(NO_LOSS)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            what = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__
            src = "loss_fn" if self.setup.loss_fn is not None else "the model (no loss_fn given)"
            raise UserCodeError(f"{src} returned {what}; it must return the scalar loss tensor")
        return loss

    def _forward(self, module: nn.Module, batch: Any) -> torch.Tensor:
        try:
            return self._checked_loss(module(batch))
        except UserCodeError:
            raise
        except Exception as exc:  # noqa: BLE001
            if _is_oom(exc):
                raise
            no_kernel = apply.attention_failure(exc, self.config.attention, lambda: module(batch))
            if no_kernel is not None:  # the point's backend cannot take the model's call: not their code's fault
                raise apply.NotApplicable(no_kernel) from exc
            if self.setup.loss_fn is not None and not (isinstance(batch, (tuple, list)) and len(batch) == 2):
                raise UserCodeError(f"make_batch returned {type(batch).__name__}; with a loss_fn it must return "
                                    "(inputs, targets)") from exc
            raise _user("the model's forward (or loss_fn)", exc) from exc

    def _fp32_losses(self, dropout_off: bool) -> list[float]:
        """PARITY_STEPS steps as fp32 trains (fp32, no TF32, torch AdamW defaults) from the initial weights, on the
        check's random stream (dropout off where asked); then the weights and buffers are put back. Under
        `reuse_references`, once per process for each model and dropout handling."""
        key = (self.spec, self.device, self._check_seed, self.lr, dropout_off)
        if _reuse_references and key in _references:
            kept, self.calling, self.sdpa_calls = _references[key]
            return list(kept)
        losses = self._train_fp32(dropout_off)
        if _reuse_references:
            _references[key] = (tuple(losses), self.calling, self.sdpa_calls or 0)
        return losses

    def _train_fp32(self, dropout_off: bool) -> list[float]:
        stages.process(BASELINE, self.device)  # fp32's settings for its steps; the run's own are put back after
        module = LossModule(self.model, self.setup.loss_fn, self.device, BASELINE, notes_calling=True)
        opt = apply.optimizer(BASELINE, [p for p in self.model.parameters() if p.requires_grad], self.lr)
        losses = []
        with dropout.same_stream(self._check_seed, self.device), self._dropout_off(dropout_off), \
                count_sdpa() as sdpa:
            for k in range(PARITY_STEPS):
                opt.zero_grad()
                loss = self._forward(module, self.batches[k % POOL])
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
                setup_stop.check()
        self.calling = module.calling
        self.sdpa_calls = sdpa.calls
        del opt
        self._restore()
        stages.process(self.config, self.device)
        return losses

    def _count_flops(self) -> StepFlops:
        """The model's FLOPs a step: one forward and backward of the model as built (eager, before a norm swap or fp8)
        on the first batch, under this run's autocast; weights, buffers and random state untouched (`flop_count`).
        Under `reuse_references`, once per process for each model whose forward leaves its state's entries as they
        were: one whose forward makes state is counted in every run, as that forward makes the state its initial
        weights are then taken with (the module docstring)."""
        key = (self.spec, self.device, self._check_seed)
        if _reuse_references and key in _flops:
            return _flops[key]
        first = self.batches[0]
        before = _state_form(self.model)
        flops = flop_count.counted(self.model, lambda: self._forward(self.loss_module, first), self.device)
        if _reuse_references and _state_form(self.model) == before:
            _flops[key] = flops
        return flops

    def _dropout_off(self, off: bool) -> Any:
        from contextlib import nullcontext

        return dropout.disabled(self.model) if off else nullcontext()

    def _reference_losses(self) -> dict[dropout.DropoutHandling, list[float]]:
        """fp32's losses for the check, by how the check handles dropout: an eager configuration draws the same masks
        from the same stream ("same_masks", with the dropout-off losses kept in case its masks differ after all,
        e.g. another attention kernel); a compiled one draws its own, so it is checked with dropout off."""
        if not dropout.has_dropout(self.model):
            return {"none_found": self._fp32_losses(False)}
        if apply.compile_mode(self.config) is not None:
            return {"disabled_for_check": self._fp32_losses(True)}
        return {"same_masks": self._fp32_losses(False), "disabled_for_check": self._fp32_losses(True)}

    def _refuse_what_does_not_apply(self) -> None:
        """ValueError naming the first value of the point that does nothing to this model (`axes.Value.applies`;
        the norms' own reason is the swap's, with the finder's record): the SDPA calls counted in the check's fp32
        steps, the convolutions and the loss's form read here."""
        values = [v for v in self.config.values() if v.label and v.applies and v.applies != "norms"]
        if not values:
            return
        found = traits(self.model, norms=0, sdpa_calls=self.sdpa_calls,
                       loss=self.calling.loss if self.calling is not None else None)
        a = applies_availability(values, found)
        if not a.ok:
            raise ValueError(f"{self.label}: {a.reason}; this configuration does not apply to it")

    def _swap_kernels(self) -> NormSwap:
        """The kernels stage (the norms swapped, the loss patched, as the point says), checked on the first batch: the
        fp32 loss is the same before and after (dropout off: the change's arithmetic is what is checked; buffers such
        as BatchNorm's running stats put back)."""
        found, _ = find_norms(self.model)
        plain = LossModule(self.model, self.setup.loss_fn, self.device, BASELINE)
        with torch.no_grad(), dropout.disabled(self.model):
            before = float(self._forward(plain, self.batches[0]))
            try:
                self.build.apply(Stage.KERNELS, model=self.model)
            except apply.NotApplicable as exc:
                raise ValueError(f"{self.label}: {exc}; this configuration does not apply to it") from None
            after = float(self._forward(plain, self.batches[0]))
        self._restore(partial=True)
        report = self.build.norm_report or found
        swapped = self.config.swaps_norms
        err = abs(after - before)
        tol = SWAP_TOLERANCE * max(abs(before), 1e-6)
        passed = bool(err <= tol)
        message = None
        if not passed:
            what = " and ".join(w for w, on in (("the norm swap", swapped),
                                                ("Liger's fused linear cross-entropy", self.build.loss_patched)) if on)
            kernel = {"apex": "Apex's norm", "liger": "Liger's norm"}.get(self.config.norms.name, "Liger's loss")
            message = (f"{what} changed the first batch's fp32 loss by {err:.3g} (from {before:.6g} to {after:.6g}, "
                       f"dropout off; tolerance {tol:.3g}): {kernel} computes something else than the model's "
                       f"({report.description()})")
        return NormSwap(modules=len(self.build.swapped), loss_before=before, loss_after=after, max_abs_err=err,
                        tolerance=tol, passed=passed, norms=report.found(), message=message,
                        loss_patched=self.build.loss_patched if self.config.loss.label else None)

    @property
    def _checks_without_dropout(self) -> bool:
        """The check compares with dropout off (a compiled configuration draws its own masks: `_reference_losses`)."""
        return self._reference is not None and next(iter(self._reference)) == "disabled_for_check"

    def _point_losses(self, n: int, dropout_off: bool | None = None) -> tuple[list[float], list[int]]:
        """n steps of this point from the initial weights on the check's random stream (its compile warm-up, for a
        compiled one; its first PARITY_STEPS with dropout off where the check needs it, the rest with the user's
        dropout, so the graph the measured steps run is compiled here); then weights, optimizer, scaler and data are
        put back as they were before. Returns the losses and the parity steps (1-based) whose optimizer step
        GradScaler skipped (its scale went down: it found inf/NaN gradients)."""
        if dropout_off is None:
            dropout_off = self._checks_without_dropout
        losses, skipped = [], []
        marker = NoMark()
        scale = self.scaler.get_scale() if self.scaler is not None else None
        with dropout.same_stream(self._check_seed, self.device):
            for k in range(n):
                with self._dropout_off(dropout_off and k < PARITY_STEPS):
                    loss, _ = self.step(marker)
                losses.append(float(loss.detach()) if loss is not None else math.nan)
                setup_stop.check()
                if self.scaler is not None and scale is not None and k < PARITY_STEPS:
                    now = self.scaler.get_scale()
                    if now < scale:  # a skipped step backs the scale off; it grows only after 2,000 good ones
                        skipped.append(k + 1)
                    scale = now
            if self.device == "cuda":
                torch.cuda.synchronize()
        self._restore()
        self.build.rebuild(self._trained())
        self.opt, self.scaler = self._built()
        return losses, skipped

    def _parity(self, reference: dict[dropout.DropoutHandling, list[float]], losses: list[float], skipped: list[int],
                swap: NormSwap | None) -> CorrectnessCheck:
        """The point's losses against fp32's, step by step, within the precision's tolerance. An eager point
        that fails with dropout on (same masks) is checked again with dropout off: if it passes then, its dropout
        masks differed, not its arithmetic, and the record says so. `skipped`: the parity steps whose optimizer step
        GradScaler skipped (`_compare` stops at the first)."""
        mode = next(iter(reference))
        check = self._compare(reference[mode], losses, skipped, mode, swap)
        if not check.passed and mode == "same_masks" and (swap is None or swap.passed):
            again, again_skipped = self._point_losses(PARITY_STEPS, dropout_off=True)
            retry = self._compare(reference["disabled_for_check"], again, again_skipped, "disabled_for_check", swap)
            retry = replace(retry, same_masks_max_abs_err=check.max_abs_err)
            if retry.passed:
                masks = (f"with dropout on, the loss differed from fp32's by {check.max_abs_err:.3g}: this point "
                         "draws other dropout masks from the same seed; with dropout off for the check it matches")
                retry = replace(retry, note="; ".join(n for n in (masks, retry.note) if n))
            check = retry
        return check

    def _compare(self, reference: list[float], losses: list[float], skipped: list[int],
                 mode: dropout.DropoutHandling, swap: NormSwap | None) -> CorrectnessCheck:
        """The losses step by step, up to GradScaler's first skipped step (`skipped`, 1-based). A skipped step leaves
        the configuration's weights where they were while fp32's move on, so from the next step on the two trajectories
        differ by design, not by arithmetic. Stepping fp32 the same way would keep them comparable, but its steps
        run first, on the model as built (before the norm swap or fp8 changes it in place), when the skips are not
        known yet; so the comparison stops at the first skip, where both still have the same weights (at worst the
        first batch's loss: the forward's arithmetic). The record says which steps were skipped."""
        amp = self.config.autocast
        arithmetic = amp if amp != "none" else ("tf32" if self.config.tf32 else "fp32")
        rel = TOLERANCE[arithmetic]
        # a run may stop early: compare the steps both have, up to the first skipped one
        compared = min(len(losses), len(reference), *skipped[:1])
        scale = max((abs(r) for r in reference[:compared]), default=1.0) or 1.0
        diffs = [abs(a - b) if math.isfinite(a) else math.inf
                 for a, b in zip(losses[:compared], reference[:compared], strict=True)]
        err = max(diffs, default=0.0)
        tol = rel * scale
        passed = err <= tol and (swap is None or bool(swap.passed))
        skip_words = None
        if skipped:
            skip_words = (f"GradScaler skipped {_steps(skipped)} (inf/NaN gradients while it finds its loss scale): "
                          f"after a skipped step this point's weights differ from fp32's by design, so the losses "
                          f"were compared up to step {compared}, where both had the same weights")
        message = None
        if swap is not None and not swap.passed:
            message = swap.message
        elif not passed:
            k = next(i for i, d in enumerate(diffs) if d > tol)
            drop = {"same_masks": "same dropout masks", "disabled_for_check": "dropout off for the check",
                    "none_found": "no dropout"}[mode]
            if not math.isfinite(losses[k]):
                message = f"the loss is {losses[k]} at step {k + 1} (fp32's: {reference[k]:.6g}; {drop})"
            else:
                message = (f"the loss differs from fp32's by {diffs[k]:.3g} at step {k + 1} ({losses[k]:.6g} "
                           f"against {reference[k]:.6g}; tolerance {rel:g} x scale {scale:.4g} = {tol:.3g}, "
                           f"{arithmetic} arithmetic, same weights, batches and random stream, {drop})")
            if skip_words:
                message += f"; {skip_words}"
        return CorrectnessCheck(
            against=MODEL.baseline, kind="loss_parity", steps=len(reference), max_abs_err=err, tolerance=tol,
            relative_tolerance=rel, losses=tuple(losses), baseline_losses=tuple(reference), dropout=mode,
            seed=self._check_seed, passed=bool(passed), calling=self.calling,
            scaler_skipped=tuple(skipped) if self.scaler is not None else None,
            compared_steps=compared if self.scaler is not None else None, note=skip_words, norm_swap=swap,
            message=message)

    # ---- run -----------------------------------------------------------------------------------
    def warm_up(self) -> float | None:
        """Compile (and record CUDA graphs) on the parity steps, then start again from the initial weights."""
        if self.compiled is None:
            return None
        import time

        t0 = time.perf_counter()
        # with dropout off for the check, its steps compile a graph of their own: the measured graph (the user's
        # dropout) is compiled, and its CUDA graphs recorded, by WARMUP_STEPS more steps after them
        n = PARITY_STEPS + WARMUP_STEPS if self._checks_without_dropout else max(PARITY_STEPS, WARMUP_STEPS)
        losses, skipped = self._point_losses(n)
        if self._reference is not None:
            self.check = self._parity(self._reference, losses[:PARITY_STEPS], skipped, self._swap)
        return time.perf_counter() - t0

    def step(self, clock: Marker) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        batch = self.batches[self._i % POOL]
        self._i += 1
        self.opt.zero_grad()  # set_to_none is the default; apex FusedAdam takes no argument
        if self.compiled is not None:
            if self.uses_cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()  # a new iteration: earlier graph outputs are dead
            loss = self._forward(self.compiled, batch)
        else:
            loss = self._forward(self.loss_module, batch)
        backward_and_step(loss, self.opt, self.scaler, clock)
        return loss.detach(), scale_tensor(self.scaler)
