"""The answer's code when no run recorded how the model was called (only fp32 ran: a small budget, a busy machine;
fp32 has no correctness check, and the check is where a run records it): the code still runs when pasted. It
unpacks the batch as the ModelSetup's documented form says, and for a model that returns its own loss it takes the
convention the model's probe saw (`ModelFacts.calling`), not `loss_fn`, which that model has none of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from apextui.core.config.point import parse
from apextui.core.config.snippet import snippet
from apextui.core.workloads import user_model
from helpers import one_torch_thread, run_cli  # noqa: F401 - the fixture, used by name below

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HEAD = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F\nfrom apextui import ModelSetup\n"

LOGITS = HEAD + '''
def build(small=False):
    """Logits, and a loss_fn: the batch is (inputs, targets)."""
    return ModelSetup(model=nn.Linear(4, 3), loss_fn=F.cross_entropy,
                      make_batch=lambda d, g: (torch.randn(8, 4, device=d, generator=g),
                                               torch.randint(0, 3, (8,), device=d, generator=g)))
'''

OWN_LOSS = HEAD + '''
class OwnLoss(nn.Module):
    """Returns its own scalar loss, from positional inputs; no loss_fn."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x, y):
        return F.mse_loss(self.fc(x), y)


def build(small=False):
    return ModelSetup(model=OwnLoss(), make_batch=lambda d, g: (torch.randn(8, 4, device=d, generator=g),
                                                               torch.randn(8, 1, device=d, generator=g)))
'''


def _spec(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return f"{path}:build"


def pasted(spec: str, code: str, steps: int = 2) -> list[float]:
    """The code pasted into a training script of the model `spec` names, built as its function builds it: its set-up
    once, its step on each of `steps` batches (as make_batch returns them); the losses. `loss_fn` is the ModelSetup's
    (None for a model that returns its loss: a step that calls it fails)."""
    compile(code, "<snippet>", "exec")
    setup_part, _, rest = code.partition("# each step")
    step = rest.partition("\n")[2]
    built = user_model.call_build(user_model.load_function(spec), spec, True)
    ns: dict[str, Any] = {"model": built.model, "lr": 1e-3, "loss_fn": built.loss_fn}
    exec(compile(setup_part, "<snippet set-up>", "exec"), ns)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        ns["batch"] = built.make_batch(torch.device("cpu"), generator)
        exec(compile(step, "<snippet step>", "exec"), ns)
        losses.append(float(ns["loss"].detach()))
    return losses


@pytest.mark.parametrize("text", ["precision=fp32", "precision=bf16,optimizer=foreach", "precision=fp16"])
def test_without_a_recorded_calling_the_code_unpacks_the_batch_and_runs(tmp_path, text):
    """No calling convention known: the ModelSetup's documented form, `inputs, targets = batch` first (the code
    used to start the step with `loss_fn(model(inputs), targets)`: a NameError for every model)."""
    code = snippet(parse(text), calling=None, device="cpu")
    losses = pasted(_spec(tmp_path, "logits", LOGITS), code)
    assert len(losses) == 2 and all(loss == loss for loss in losses)
    assert "inputs, targets = batch\n" in code, code


@pytest.mark.slow
@pytest.mark.parametrize(("text", "line"), [(LOGITS, "loss = loss_fn(model(inputs), targets)"),
                                            (OWN_LOSS, "loss = model(*batch)")], ids=["logits", "own-loss"])
def test_the_answer_runs_when_only_fp32_ran(tmp_path, text, line):
    """`advise --config precision=fp32`: fp32 alone runs (no check, so no run records the calling convention) and is
    the answer; its code, pasted into the model's own script, compiles and trains: the loss_fn model's batch
    unpacked, the model that returns its loss called as its probe saw it (never `loss_fn`, which is None there)."""
    spec = _spec(tmp_path, "m", text)
    r = run_cli("advise", "--model", spec, "--device", "cpu", "--json", "--config", "precision=fp32",
                "--steps", "3", "--repeats", "1", timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["runs"]["ok"] == 1 and doc["answer"]["label"] == "fp32", doc["runs"]
    ran = [(m["preset"], m["parity"]) for w in doc["workloads"] for m in w["presets"] if m["runs"]]
    assert ran == [("m:build/fp32", None)], ran  # fp32 alone, and no check: nothing recorded the calling convention
    code = doc["answer"]["snippet"]
    losses = pasted(spec, code)
    assert len(losses) == 2 and all(loss == loss for loss in losses)
    assert line in code, code
