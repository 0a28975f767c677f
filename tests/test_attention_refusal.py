"""An attention backend that cannot take the model's SDPA call is the configuration's limit, not the user's code
failing (`sdpa_flash failed: UserCodeError: … Both fused kern`), and a reason is never cut mid-word."""

from __future__ import annotations

import pytest

from apextui.core.advise.wording import not_measured_text
from apextui.core.config.point import parse
from apextui.core.measure.marker import NoMark
from apextui.core.number_format import clip
from apextui.core.workloads import apply
from apextui.core.workloads.failure import describe_failure
from apextui.core.workloads.model_workload import ModelWorkload, UserCodeError

DROPOUT_ATTENTION = '''
import torch
from torch import nn
from torch.nn import functional as F
from apextui import ModelSetup

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0, is_causal=True)
        return y.transpose(1, 2).reshape(x.shape)

def build(small=False):
    return ModelSetup(model=nn.Sequential(Attention(), nn.Linear(16, 1)),
                      make_batch=lambda d, g: (torch.randn(2, 8, 16, device=d, generator=g),
                                               torch.randn(2, 8, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


def test_a_backend_that_cannot_take_the_models_dropout_is_the_configurations_limit(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(DROPOUT_ATTENTION)
    with pytest.raises(apply.NotApplicable) as caught:
        workload = ModelWorkload(f"{path}:build", parse("attention=flash"), "cpu", lr=1e-3, seed=0, steps=4)
        workload.step(NoMark())
    assert not isinstance(caught.value, UserCodeError)
    error = describe_failure(caught.value, 0, "cpu", "model")
    assert error.startswith("attention=flash: torch's flash SDPA kernel cannot take"), error
    assert "dropout" in error and "UserCodeError" not in error and "NotApplicable" not in error


def test_a_reason_is_cut_at_a_words_end():
    reason = ("attention=flash: torch's flash SDPA kernel cannot take this model's attention call here (Flash "
              "attention kernel not used because: Both fused kernels do not support non-zero dropout.); pick another")
    cut = clip(reason, 120)
    assert len(cut) <= 120 and cut.endswith("…") and reason.startswith(cut[:-1])
    assert reason[len(cut) - 1] in " ;(", cut  # the cut falls between words
    shown = not_measured_text({"status": "failed", "errors": [reason * 2]})
    assert shown.endswith("…") and not shown.endswith("kern…")
    assert clip("short", 120) == "short"
