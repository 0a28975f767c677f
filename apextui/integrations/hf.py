"""`apextui.integrations.hf.WatchCallback`: watch a Hugging Face `Trainer` run with `apextui attach`.

```python
from apextui.integrations.hf import WatchCallback
trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[WatchCallback(name="gpt-finetune")])
```

Each optimizer step is a step (`on_step_end`). The Trainer computes the loss, learning rate and grad norm only at
its logging steps (`logging_steps`), as Python numbers: they go with the next step (the loss into its step line,
the others as `metric`s), the last ones at the end. Throughput: the tokens the Trainer counts
(`include_num_input_tokens_seen=True`), else samples (batch size x gradient accumulation x processes).

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


class WatchCallback(TrainerCallback):
    def __init__(self, name: str | None = None, **options: Any) -> None:
        self.name = name
        self.options = options
        self.mon: Watch | None = None
        self._pending: dict[str, float] = {}
        self._tokens = 0
        self._earlier_exc: BaseException | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        unfinished = _open.pop(threading.get_ident(), None)
        if unfinished is not None:  # this thread's previous train() raised: its run failed
            unfinished._end("failed", UNFINISHED)
        name = self.name or getattr(args, "run_name", None) or "trainer"
        steps = state.max_steps if getattr(state, "max_steps", 0) > 0 else None
        self.mon = Watch(str(name), steps=steps, **self.options)
        self._tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        self._earlier_exc = getattr(sys, "last_value", None)
        _open[threading.get_ident()] = self
        atexit.register(self._at_exit)  # after the hook's own: runs before it

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.mon is None:
            return
        pending, self._pending = self._pending, {}
        loss = pending.pop("loss", None)
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if seen > self._tokens:
            self.mon.step(loss=loss, tokens=seen - self._tokens, **pending)
            self._tokens = seen
        else:
            samples = (args.per_device_train_batch_size * args.gradient_accumulation_steps
                       * max(1, getattr(args, "world_size", 1)))
            self.mon.step(loss=loss, samples=samples, **pending)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        for key in ("loss", "learning_rate", "grad_norm"):
            value = (logs or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._pending[key] = float(value)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.mon is None:
            return
        if self._pending:
            self.mon.log(**self._pending)
            self._pending = {}
        self._end("ok", None)

    def _end(self, status: FinalStatus, error: str | None) -> None:
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
