"""The apply table (core/workloads/apply.py): every value of every axis builds something, and what it builds."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn

from apextui.core.config import axes
from apextui.core.config.point import BASELINE, Config, parse
from apextui.core.workloads import apply

TABLES = {"precision": apply.PRECISIONS, "optimizer": apply.OPTIMIZERS, "norms": apply.NORMS,
          "compile": apply.COMPILE_MODES, "memory_format": apply.MEMORY_FORMATS, "attention": apply.ATTENTION,
          "loss": apply.LOSSES}


def test_every_value_of_every_axis_has_its_entry_and_nothing_else_has_one():
    from typing import get_args

    from apextui.core.workloads import parallel

    # the parallel axis has no table of its own: its stage wraps the model the way `parallel.kind` names
    assert set(TABLES) | {"parallel"} == set(axes.axis_names()) == set(apply.ACTS)
    for a in axes.AXES:
        if a.name != "parallel":
            assert list(TABLES[a.name]) == list(a.names), a.name
    way = axes.axis("parallel")
    assert parallel.kind(Config(parallel=way.default.name)) is None  # no process group here: one process
    for v in way.values:
        if v is not way.default:  # every other value is a way `parallel.wrap` trains, named as the value is
            assert v.name in get_args(parallel.Parallel) and parallel.kind(Config(parallel=v.name)) == v.name


def params() -> list[nn.Parameter]:
    return [nn.Parameter(torch.zeros(3))]


@pytest.mark.parametrize("value, options", [("adamw", {"foreach": None, "fused": None}),
                                            ("foreach", {"foreach": True, "fused": None}),
                                            ("fused", {"fused": True, "capturable": False}),
                                            ("capturable", {"fused": True, "capturable": True})])
def test_the_torch_optimizers_are_adamw_with_their_options(value, options):
    opt = apply.optimizer(Config(optimizer=value), params(), 1e-3)
    assert type(opt) is torch.optim.AdamW and opt.defaults["lr"] == 1e-3
    assert {k: opt.defaults[k] for k in options} == options


def test_the_whole_step_graph_makes_the_fused_adamw_capturable_and_refuses_another():
    graph = parse("precision=bf16,optimizer=fused,compile=graph")
    assert apply.optimizer_value(graph) == "capturable" and apply.compile_mode(graph) == "default"
    with pytest.raises(ValueError, match="optimizer=fused"):
        apply.optimizer(graph.with_("optimizer", "adamw"), params(), 1e-3)


def test_the_apex_optimizers_are_built_with_adamws_decay(monkeypatch):
    """Without Apex here: stand-ins record how FusedAdam and DistributedFusedAdam are constructed."""
    made: dict[str, dict] = {}

    def stand_in(name: str) -> type:
        class Fake(torch.optim.AdamW):
            def __init__(self, ps, **kw):
                made[name] = kw
                super().__init__(ps, lr=kw["lr"])
        return Fake

    optimizers = types.ModuleType("apex.optimizers")
    optimizers.FusedAdam = stand_in("FusedAdam")
    distributed = types.ModuleType("apex.contrib.optimizers.distributed_fused_adam")
    distributed.DistributedFusedAdam = stand_in("DistributedFusedAdam")
    for name, module in (("apex", types.ModuleType("apex")), ("apex.optimizers", optimizers),
                         ("apex.contrib", types.ModuleType("apex.contrib")),
                         ("apex.contrib.optimizers", types.ModuleType("apex.contrib.optimizers")),
                         ("apex.contrib.optimizers.distributed_fused_adam", distributed)):
        monkeypatch.setitem(sys.modules, name, module)
    apply.optimizer(Config(optimizer="apex"), params(), 1e-3)
    apply.optimizer(Config(optimizer="apex_distributed"), params(), 1e-3)
    assert made["FusedAdam"] == {"lr": 1e-3, "adam_w_mode": True, "weight_decay": 0.01}
    assert made["DistributedFusedAdam"] == {"lr": 1e-3, "adam_w_mode": True, "weight_decay": 0.01,
                                            "overlap_grad_sync": True}


def test_precision_builds_its_autocast_scaler_and_layers():
    x = torch.ones(2, 2)
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        with apply.autocast("cpu", axes.axis("precision").value(name)):
            assert (x @ x).dtype == dtype
    fp16 = axes.axis("precision").value("fp16")
    assert isinstance(apply.grad_scaler("cpu", fp16), torch.amp.GradScaler)
    assert apply.grad_scaler("cpu", BASELINE.precision) is None
    assert not apply.convert(nn.Linear(16, 16), BASELINE.precision)  # fp32 leaves the layers alone
    assert apply.PRECISIONS["tf32"].tf32 and apply.PRECISIONS["fp8"].convert is not None


def test_norms_keep_the_models_own_or_swap_them_for_the_kernels():
    assert apply.NORMS["torch"].swap is None and apply.NORMS["apex"].swap is not None


def test_compile_is_eager_for_none_and_torch_compile_otherwise():
    assert apply.compiled(nn.Linear(2, 2), BASELINE) is None
    compiled = apply.compiled(nn.Linear(2, 2), Config(compile="reduce-overhead"))
    assert compiled is not None and callable(compiled)  # torch.compile is lazy: nothing is compiled here
    assert apply.compile_mode(Config(compile="max-autotune-no-cudagraphs")) == "max-autotune-no-cudagraphs"
