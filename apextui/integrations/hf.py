"""`apextui.integrations.hf.WatchCallback`: watch a Hugging Face `Trainer` run with `apextui attach`.

```python
from apextui.integrations.hf import WatchCallback
trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[WatchCallback(name="gpt-finetune")])
```

Each optimizer step is a step (`on_step_end`). The Trainer computes the loss, learning rate and grad norm only at
its logging steps (`logging_steps`), as Python numbers, in `on_log` just after that step's `on_step_end`: a step the
Trainer is about to log (`control.should_log`) is handed to the monitor in `on_log`, with its own loss in its step
line and the others as `metric`s (the final step's loss too: never a `metric`). Values logged after a step's end
(logging by epoch) go with the next step; at the end, the learning rate and grad norm as `metric`s, the loss
left out (it is no metric: a one-point "loss" plot beside the loss curve). Throughput: the tokens the Trainer
counts (`include_num_input_tokens_seen=True`), else samples (batch size x gradient accumulation x processes).
What the run trains, for `attach`'s comparisons: the Trainer's model (its class and parameter count) and the
samples a step of this process trains on (batch size x gradient accumulation) as the batch size.

A `train()` that raises never calls `on_train_end`, and a Trainer callback has no exception hook (Lightning's has
`on_exception`). When the caller catches the error (a sweep goes on to its next trial), the run would stay live
and be closed `ok` at exit; so a run begun and never ended is closed `failed` when the next `train()` of the same
thread begins (one thread trains one Trainer at a time), or at exit (with the uncaught error, if one ended the
program, as a plain loop's run is)."""

from __future__ import annotations

import atexit
import sys
import threading
from typing import Any

from transformers import TrainerCallback

from ..core.run.snapshot import FinalStatus
from ..core.watch.hook import Watch

UNFINISHED = "train() ended without on_train_end: it raised (an error the caller caught)"
_open: dict[int, "WatchCallback"] = {}  # by thread: the callback whose run is begun and not yet ended


class _Shaped:
    """A batch's shape for `mon.step(batch=)`: the monitor reads `.shape` alone (`watch.workload.batch_shape`)."""

    def __init__(self, shape: list[int]) -> None:
        self.shape = tuple(shape)


class WatchCallback(TrainerCallback):
    def __init__(self, name: str | None = None, **options: Any) -> None:
        self.name = name
        self.options = options
        self.mon: Watch | None = None
        self._pending: dict[str, float] = {}
        self._tokens = 0
        self._deferred: dict[str, Any] | None = None  # the step waiting for its log: its token or sample count
        self._earlier_exc: BaseException | None = None
        self._shape: list[int] | None = None  # the first forward's input shape (`_record_shape`)
        self._shape_hook: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        unfinished = _open.pop(threading.get_ident(), None)
        if unfinished is not None:  # this thread's previous train() raised: its run failed
            unfinished._end("failed", UNFINISHED)
        name = self.name or getattr(args, "run_name", None) or "trainer"
        steps = state.max_steps if getattr(state, "max_steps", 0) > 0 else None
        # what the run trains (`attach` compares it with runs of the same): the model, and its batch as a loop's
        # `mon.step(batch=)` records it: the shape of the first forward's inputs (the Trainer hands no batch to a
        # callback: a forward pre-hook reads it, once), else the samples a step of this process trains on
        model = kwargs.get("model")
        self._accumulation = max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1))
        if not getattr(args, "torch_compile", False):  # a hook in a compiled forward would be traced into it
            self._watch_first_forward(model)
        workload = {"model": model,
                    "batch_size": args.per_device_train_batch_size * args.gradient_accumulation_steps}
        self.mon = Watch(str(name), steps=steps, **{**workload, **self.options})
        self._pending, self._deferred = {}, None
        self._tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        self._earlier_exc = getattr(sys, "last_value", None)
        _open[threading.get_ident()] = self
        atexit.register(self._at_exit)  # after the hook's own: runs before it

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.mon is None:
            return
        self._flush()  # a step the Trainer meant to log and never did
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if seen > self._tokens:
            count: dict[str, Any] = {"tokens": seen - self._tokens}
            self._tokens = seen
        else:
            count = {"samples": args.per_device_train_batch_size * args.gradient_accumulation_steps
                     * max(1, getattr(args, "world_size", 1))}
        self._deferred = count
        if not getattr(control, "should_log", False):  # no log of this step follows: it is done now
            self._flush()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()

    def _flush(self) -> None:
        """The step waiting for its log, handed to the monitor with what was logged since."""
        count, self._deferred = self._deferred, None
        if count is None or self.mon is None:
            return
        pending, self._pending = self._pending, {}
        loss = pending.pop("loss", None)
        shape, self._shape = self._shape, None  # the first step's alone: the monitor reads only the first
        self._unhook()
        batch = _Shaped([shape[0] * self._accumulation, *shape[1:]]) if shape else None
        self.mon.step(loss=loss, batch=batch, **count, **pending)

    def _watch_first_forward(self, model: Any) -> None:
        """A forward pre-hook on the model that records its first call's input shape (metadata only: nothing is
        read from the device) and then goes; nothing where the model takes none. An earlier run's hook that never
        fired (its train() ended before a training forward) is taken off first."""
        self._unhook()
        self._shape = None
        try:
            self._shape_hook = model.register_forward_pre_hook(self._record_shape, with_kwargs=True)
        except Exception:  # noqa: BLE001 - no hook, no shape: the batch's size stands for it
            self._shape_hook = None

    def _record_shape(self, module: Any, args: Any, kwargs: Any) -> None:
        if not getattr(module, "training", True):  # an evaluation before training (`eval_on_start`): not its batch
            return
        if self._shape is None:
            from ..core.watch.workload import batch_shape

            try:
                self._shape = batch_shape(kwargs) if kwargs else batch_shape(args)
            except Exception:  # noqa: BLE001 - an odd input: no shape
                self._shape = None
        self._unhook()

    def _unhook(self) -> None:
        hook, self._shape_hook = self._shape_hook, None
        if hook is not None:
            hook.remove()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        for key in ("loss", "learning_rate", "grad_norm"):
            value = (logs or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._pending[key] = float(value)
        self._flush()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.mon is None:
            return
        self._flush()
        self._pending.pop("loss", None)  # logged after the last step's end: no step line to carry it
        if self._pending:
            self.mon.log(**self._pending)
            self._pending = {}
        self._end("ok", None)

    def _end(self, status: FinalStatus, error: str | None) -> None:
        self._unhook()  # a run that ended before its first training forward leaves no hook on the user's model
        for thread, callback in list(_open.items()):
            if callback is self:
                del _open[thread]
        atexit.unregister(self._at_exit)
        if self.mon is not None:
            self.mon.close(status, error)

    def _at_exit(self) -> None:
        """The program ends with this run begun and not ended: an uncaught error ended it (the hook's own exit
        handler says which), else train() raised and the caller went on."""
        exc = getattr(sys, "last_value", None)
        if exc is not None and exc is not self._earlier_exc and self.mon is not None:
            self.mon._at_exit()
        else:
            self._end("failed", UNFINISHED)
