"""`apextui.integrations.hf.WatchCallback`: watch a Hugging Face `Trainer` run with `apextui attach`.

```python
from apextui.integrations.hf import WatchCallback
trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[WatchCallback(name="gpt-finetune")])
```

Each optimizer step is a step (`on_step_end`). The Trainer computes the loss, learning rate and grad norm only at
its logging steps (`logging_steps`), as Python numbers: they go with the next step (the loss into its step line,
the others as `metric`s), the last ones at the end. Throughput: the tokens the Trainer counts
(`include_num_input_tokens_seen=True`), else samples (batch size x gradient accumulation x processes)."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ..core.watch.hook import Watch


class WatchCallback(TrainerCallback):
    def __init__(self, name: str | None = None, **options: Any) -> None:
        self.name = name
        self.options = options
        self.mon: Watch | None = None
        self._pending: dict[str, float] = {}
        self._tokens = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        name = self.name or getattr(args, "run_name", None) or "trainer"
        steps = state.max_steps if getattr(state, "max_steps", 0) > 0 else None
        self.mon = Watch(str(name), steps=steps, **self.options)
        self._tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)

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
        self.mon.close()
