"""Workload details that run on CPU: the fused-norm error check and GradScaler plumbing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from apextui.core.config.point import Config
from apextui.core.workloads.norm import NormWorkload
from apextui.core.workloads.spec import LAYER_NORM, RMS_NORM
from apextui.core.measure.marker import NoMark
from apextui.core.workloads.optimizer import OptimizerWorkload

SIZE = {"batch": 2, "seq": 8, "hidden": 32}


@pytest.mark.slow
def test_error_check_passes_for_an_identical_implementation():
    w = NormWorkload(Config(), LAYER_NORM, SIZE, "cpu", seed=0)
    check = w._compare(nn.LayerNorm(32), "layernorm")
    assert check.passed is True
    assert check.max_abs_err < 1e-6
    assert check.tolerance == 1e-3


def test_error_check_fails_for_a_different_function():
    w = NormWorkload(Config(), LAYER_NORM, SIZE, "cpu", seed=0)
    # RMSNorm is not LayerNorm: the check must notice
    check = w._compare(nn.RMSNorm(32), "rmsnorm")
    assert check.passed is False
    assert check.max_abs_err > 1e-3


def test_norm_step_computes_input_gradients():
    w = NormWorkload(Config(), RMS_NORM, SIZE, "cpu", seed=0)
    assert w.step(NoMark()) == (None, None)
    assert w.x.grad is not None and torch.isfinite(w.x.grad).all()
    assert w.params == 32


@pytest.mark.slow
def test_optimizer_workload_moves_parameters_and_lowers_loss():
    w = OptimizerWorkload(Config(optimizer="fused"), {"layers": 3, "width": 16, "batch": 8}, "cpu", lr=1e-2)
    before = [p.detach().clone() for p in w.model.parameters()]
    losses = [w.step(NoMark())[0].item() for _ in range(30)]
    assert losses[-1] < losses[0]
    assert any(not torch.equal(a, b) for a, b in zip(before, w.model.parameters(), strict=True))
    assert w.params == 3 * (16 * 16 + 16)
