"""The correctness check knows GradScaler (issue 37, item 7): fp16's GradScaler skips the optimizer step while it
finds its scale (inf gradients), so the variant's weights stay where fp32's move on; comparing the losses after a
skipped step blamed the arithmetic for a difference made by design (ResNet-50 fp16: "its loss differs from fp32's by
2.65"). The check compares up to the first skipped step, says which steps were skipped, and still fails a variant
whose arithmetic is wrong. A real GradScaler with a huge initial scale makes the skips happen on CPU."""

from __future__ import annotations

import pytest
import torch

from apextui.core.workloads import apply
from apextui.core.workloads.model_workload import PARITY_STEPS, ModelWorkload

HEADER = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F\nfrom apextui import ModelSetup\n"

# a regression that fp32 trains fast (lr 0.3, targets offset by 5): after one step its loss has moved far beyond
# fp16's tolerance, so a variant that skipped that step is far from it
LEARNS_FAST = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
    def forward(self, x):
        y = self.fc(x)
        return y + OFFSET if torch.is_autocast_enabled(x.device.type) else y

def make_batch(d, g):
    x = torch.randn(16, 8, device=d, generator=g)
    return x, x.sum(dim=1, keepdim=True) + 5.0

def build(small=False):
    return ModelSetup(model=Net(), make_batch=make_batch, loss_fn=F.mse_loss, lr=0.3)
'''


def spec(tmp_path, offset: float) -> str:
    f = tmp_path / "m.py"
    f.write_text(HEADER + f"OFFSET = {offset}\n" + LEARNS_FAST)
    return f"{f}:build"


@pytest.fixture
def huge_scale(monkeypatch):
    """fp16's GradScaler starting at 2**40: every scaled gradient overflows fp16, so every parity step is skipped
    (the scale halves each time: 2**35 after five)."""
    def scaler(device, precision):
        return torch.amp.GradScaler(device, init_scale=2.0**40) if precision == "fp16" else None

    monkeypatch.setattr(apply, "grad_scaler", scaler)


def test_fp16_whose_scaler_skips_its_first_steps_passes_and_the_record_says_why(tmp_path, huge_scale):
    w = ModelWorkload(spec(tmp_path, 0.0), "fp16", "cpu", lr=1e-3, seed=0, steps=1)
    c = w.check
    assert c.passed, c.message  # it was rejected: "the loss differs from fp32's by 13.5 at step 2"
    assert w.uses_grad_scaler and c.scaler_skipped == tuple(range(1, PARITY_STEPS + 1)), c
    # the variant really stood still while fp32 trained: beyond the tolerance after the first step
    assert abs(c.losses[1] - c.baseline_losses[1]) > c.tolerance
    assert c.compared_steps == 1 and "GradScaler skipped steps 1-5" in c.note, c


def test_fp16_that_skips_no_step_is_compared_over_every_step(tmp_path, monkeypatch):
    def scaler(device, precision):  # a scale at which nothing overflows: no step is skipped
        return torch.amp.GradScaler(device, init_scale=1.0) if precision == "fp16" else None

    monkeypatch.setattr(apply, "grad_scaler", scaler)
    c = ModelWorkload(spec(tmp_path, 0.0), "fp16", "cpu", lr=1e-3, seed=0, steps=1).check
    assert c.passed and c.scaler_skipped == () and c.compared_steps == PARITY_STEPS, c
    assert c.note is None


def test_a_wrong_fp16_variant_still_fails_when_its_scaler_skips(tmp_path, huge_scale):
    c = ModelWorkload(spec(tmp_path, 2.0), "fp16", "cpu", lr=1e-3, seed=0, steps=1).check
    assert not c.passed and c.max_abs_err > c.tolerance, c
    assert "at step 1" in c.message and "GradScaler skipped steps 1-5" in c.message, c.message


def test_the_search_names_the_skipped_steps_in_a_failure(tmp_path, huge_scale):
    from apextui.core.advise.records import RunResult
    from apextui.core.advise.run import outcome_of
    from apextui.core.measure.summary import Summary

    check = ModelWorkload(spec(tmp_path, 2.0), "fp16", "cpu", lr=1e-3, seed=0, steps=1).check
    out = outcome_of(RunResult(1, "ok", Summary(median_ms=1.0, timed_intervals=10, check=check)))
    assert out.status == "check_failed" and "GradScaler skipped steps 1-5" in out.reason, out.reason
