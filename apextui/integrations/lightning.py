"""`apextui.integrations.lightning.WatchCallback`: watch a Lightning `Trainer` run with `apextui attach`.

```python
from apextui.integrations.lightning import WatchCallback
trainer = Trainer(max_epochs=3, callbacks=[WatchCallback(name="vit")])
```

It subclasses the `Callback` of `lightning.pytorch` where the `lightning` package is installed, else that of
`pytorch_lightning` (a Trainer accepts only its own package's callbacks). Each training batch is a step
(`on_train_batch_end`): the loss the step returned (a tensor, never read in the loop), the first optimizer's
learning rate as a metric, and the batch's samples (its first tensor's first dimension). What the run trains, for
`attach`'s comparisons: the LightningModule (its class and parameter count) and the first batch's shape."""

from __future__ import annotations

from typing import Any

from ..core.watch.hook import Watch
from ..core.watch.workload import batch_shape

try:
    from lightning.pytorch import Callback
except ImportError:
    from pytorch_lightning import Callback


def _samples(batch: Any) -> int | None:
    """The batch's size: its first tensor's first dimension (a tensor, or one in a tuple, list or dict)."""
    shape = batch_shape(batch)
    return shape[0] if shape else None


class WatchCallback(Callback):
    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__()
        self.name = name
        self.options = options
        self.mon: Watch | None = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        steps = trainer.max_steps if getattr(trainer, "max_steps", -1) and trainer.max_steps > 0 else None
        self.mon = Watch(self.name or type(pl_module).__name__, steps=steps, **{"model": pl_module, **self.options})

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.mon is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        metrics: dict[str, Any] = {}
        optimizers = getattr(trainer, "optimizers", None) or []
        if optimizers and optimizers[0].param_groups:
            metrics["lr"] = optimizers[0].param_groups[0].get("lr")
        self.mon.step(loss=loss, samples=_samples(batch), batch=batch,
                      **{k: v for k, v in metrics.items() if v is not None})

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.mon is not None:
            self.mon.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.mon is not None:
            self.mon.close("stopped" if isinstance(exception, KeyboardInterrupt) else "failed",
                           f"{type(exception).__name__}: {exception}")
