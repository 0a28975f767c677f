"""How the user's model is called on a batch and where its loss comes from: what the engine did with each batch
(`workloads.model_workload`: `_call` passes the inputs, `_loss_of` takes the loss), as plain data, so that the
answer's code (`snippet.snippet`) does the same in the user's script.

The engine learns it from the model itself: the inputs' form from the first batch, the loss's from the first
output (a tensor, a dict, a Hugging Face `ModelOutput`). The process that writes the answer may never import the
user's code (the TUI), so a run records it in its correctness check's record (its `calling`: the check is where the
engine first calls the model, eagerly, through that very path) and the answer reads it back from the runs
(`recorded`). fp32 has no check: where only fp32 ran, the answer takes what the model's probe saw in its one forward
(`model_presets.ModelFacts.calling`), and where nothing saw the model called, ModelSetup's documented form
(`Calling()`: `(inputs, targets)` and a loss_fn). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Protocol, get_args

# how the inputs reach the model: model(x), model(*x) for a tuple or list, model(**x) for a dict
InputForm = Literal["one", "positional", "keyword"]
# where the loss comes from: loss_fn(output, targets); the output itself (a scalar tensor); its `.loss`
# attribute (a Hugging Face ModelOutput: the same tensor as its "loss" entry); a plain dict's "loss" entry
LossForm = Literal["loss_fn", "returned", "attribute", "key"]
_CALL = {"one": "{m}({x})", "positional": "{m}(*{x})", "keyword": "{m}(**{x})"}


@dataclass(frozen=True)
class Calling:
    """The model's calling convention: the form of its inputs and where its loss comes from. With a loss_fn the
    batch is `(inputs, targets)` and `inputs` has the form; without, the whole batch has it."""

    inputs: InputForm = "one"
    loss: LossForm = "loss_fn"

    def __post_init__(self) -> None:
        if self.inputs not in get_args(InputForm) or self.loss not in get_args(LossForm):
            raise ValueError(f"no calling convention {self.inputs!r}/{self.loss!r}")

    def as_dict(self) -> dict[str, str]:
        return {"inputs": self.inputs, "loss": self.loss}

    @classmethod
    def from_dict(cls, d: Any) -> Calling | None:
        """The convention a record holds, None where it holds none (an older record, a malformed one)."""
        if not isinstance(d, Mapping):
            return None
        try:
            return cls(d.get("inputs"), d.get("loss"))  # type: ignore[arg-type]
        except ValueError:
            return None

    def unpack(self, batch: str = "batch") -> list[str]:
        """The lines before the forward: with a loss_fn the batch is (inputs, targets)."""
        return [f"inputs, targets = {batch}"] if self.loss == "loss_fn" else []

    def loss_line(self, model: str, batch: str = "batch") -> str:
        """The line that computes `loss` through `model` (the model, or its compiled form), after `unpack`."""
        if self.loss == "loss_fn":
            return f"loss = loss_fn({_CALL[self.inputs].format(m=model, x='inputs')}, targets)"
        tail = {"returned": "", "attribute": ".loss", "key": '["loss"]'}[self.loss]
        return f"loss = {_CALL[self.inputs].format(m=model, x=batch)}{tail}"


class HoldsCalling(Protocol):
    """A correctness check's record (`measure.details.CorrectnessCheck`): where a run records how it called the
    model."""

    @property
    def calling(self) -> Calling | None: ...


def recorded(checks: Iterable[HoldsCalling | None]) -> Calling | None:
    """The convention the first of these check records holds (every run of one model calls it alike), None where
    none holds one (only fp32 ran: it has no check; or a shipped workload)."""
    return next((c.calling for c in checks if c is not None and c.calling is not None), None)
