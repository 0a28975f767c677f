"""The workload registry (core/workloads/spec.py): one declaration that presets, the named points' needs, the work
model, the memory estimate, the advice and the docs all read; and FusedLAMB, added through it."""

from __future__ import annotations

import dataclasses
import re
import sys
import types

import pytest

from apextui.core import memory, presets
from apextui.core.advise import LOSS_CHECKED
from apextui.core.availability import availability
from apextui.core.workloads.builders import BUILDERS, build
from apextui.core.config.point import Config
from apextui.core.workloads.spec import ADAMW, LAMB, OPTIMIZER_COSTS, WORKLOADS, work_per_step
from helpers import ROOT

SIZE = {"layers": 2, "width": 4, "batch": 1}  # 40 parameters


def test_preset_tables_are_views_of_the_registry():
    assert list(presets.POINT_NAMES) == list(WORKLOADS)
    for name, spec in WORKLOADS.items():
        assert presets.POINT_NAMES[name] == tuple(v.name for v in spec.points)
        assert presets.SIZE_KEYS[name] == spec.size_keys
        assert presets.BASELINE_NAMES[name] == spec.baseline
        assert spec.baseline_point == spec.named(spec.baseline).config
        assert presets.PRODUCT_LIMITS[name] == spec.product_limit
        assert memory.SHRINK_ORDER[name] == spec.shrink_order
        assert set(spec.shrink_order) <= set(spec.size_keys)
    assert WORKLOADS["optimizer"].named("adamw_capturable_graph").config.needs == ("cuda_graphs",)
    assert WORKLOADS["transformer"].named("torch_compile_cg").config.needs == ("compile", "cuda_graphs")
    assert LOSS_CHECKED == ("transformer",)


def test_every_registered_named_point_has_a_shipped_preset_and_a_row_in_the_docs():
    docs = (ROOT / "docs" / "presets.md").read_text()
    shipped = {(p.workload, p.config) for p in presets.load_builtin()}
    for name, spec in WORKLOADS.items():
        if not spec.shipped:  # the model workload: its presets are made from the user's model (--model)
            continue
        for v in spec.points:
            file_point = presets.resolve(v.name).config  # the file of its name, at the precision its amp sets
            assert (name, file_point) in shipped and file_point.with_("precision", v.config.precision) == v.config, \
                f"{name}/{v.name}: no TOML in presets/"
            assert re.search(rf"`{re.escape(v.name)}`", docs), f"{name}/{v.name}: not in docs/presets.md"


def test_a_baseline_must_be_one_of_its_named_points_and_no_two_are_one_point():
    spec = WORKLOADS["layer_norm"]
    with pytest.raises(ValueError, match="baseline"):
        type(spec)(name="x", points=spec.points, size_limits=spec.size_limits,
                   product_limit=spec.product_limit, baseline="nope", work=spec.work,
                   shrink_order=spec.shrink_order)
    twins = (*spec.points, dataclasses.replace(spec.points[0], name="again"))
    with pytest.raises(ValueError, match="two named points are one point"):
        type(spec)(name="x", points=twins, size_limits=spec.size_limits, product_limit=spec.product_limit,
                   baseline=spec.baseline, work=spec.work, shrink_order=spec.shrink_order)


def test_every_workload_of_the_registry_has_a_builder():
    assert set(BUILDERS) == set(WORKLOADS)
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        build(dataclasses.replace(presets.resolve("layernorm"), workload="nope"), "cpu", {}, 1)


def test_the_optimizer_work_model_comes_from_the_points_optimizer_value():
    assert OPTIMIZER_COSTS.get(WORKLOADS["optimizer"].named("adamw").config.optimizer, ADAMW) == ADAMW
    assert OPTIMIZER_COSTS[WORKLOADS["optimizer"].named("fused_lamb").config.optimizer] == LAMB
    lamb = work_per_step("optimizer", Config(optimizer="lamb"), SIZE, None)
    assert (lamb.bytes, lamb.flops, lamb.scope) == (40 * LAMB.bytes_per_param, 40 * LAMB.flops_per_param, "opt_step")
    assert lamb.bytes != work_per_step("optimizer", Config(optimizer="apex"), SIZE, None).bytes
    assert lamb.basis.startswith("LAMB step: 52 bytes")
    with pytest.raises(ValueError, match="unknown workload 'sgd'"):
        work_per_step("sgd", Config(), SIZE, None)


def test_fused_lamb_preset_needs_apex_fused_lamb_and_is_unavailable_on_cpu():
    p = presets.resolve("fused_lamb")
    assert (p.workload, p.config, p.baseline, p.needs_apex) == ("optimizer", Config(optimizer="lamb"), "adamw",
                                                                ("FusedLAMB",))
    a = availability(p, "cpu")
    assert not a.ok and "FusedLAMB" in a.reason and "CPU" in a.reason and a.fix


def test_fused_lamb_availability_reads_the_apex_check(monkeypatch):
    """On CUDA the registry's Apex need goes to the feature check, whose reason and fix come back."""
    import apextui.core.apex.probe as av  # availability reads it at call time

    seen = {}

    def fake_check(features, cuda_available):
        seen["features"] = tuple(features)
        return {f: types.SimpleNamespace(ok=False, reason="apex has no fused_lamb_cuda", fix="rebuild apex")
                for f in features}

    monkeypatch.setattr(av, "features_availability", fake_check)
    a = availability(presets.resolve("fused_lamb"), "cuda")
    assert seen["features"] == ("FusedLAMB",)
    assert (a.ok, a.reason, a.fix) == (False, "needs Apex FusedLAMB: apex has no fused_lamb_cuda", "rebuild apex")


@pytest.mark.slow
def test_fused_lamb_builds_apex_fused_lamb(monkeypatch):
    """Without Apex here: a stand-in apex.optimizers.FusedLAMB records how the workload constructs it."""
    torch = pytest.importorskip("torch")
    from apextui.core.config.point import Config
    from apextui.core.workloads import apply
    from apextui.core.workloads.optimizer import OptimizerWorkload

    made = {}

    class FusedLAMB(torch.optim.AdamW):  # a working optimizer, so a CPU step runs
        def __init__(self, params, **kw):
            made.update(kw)
            super().__init__(params, lr=kw["lr"], weight_decay=kw["weight_decay"])

    apex = types.ModuleType("apex")
    apex.optimizers = types.ModuleType("apex.optimizers")
    apex.optimizers.FusedLAMB = FusedLAMB
    monkeypatch.setitem(sys.modules, "apex", apex)
    monkeypatch.setitem(sys.modules, "apex.optimizers", apex.optimizers)

    opt = apply.optimizer(Config(optimizer="lamb"), [torch.nn.Parameter(torch.zeros(2))], 1e-3)
    assert isinstance(opt, FusedLAMB) and made == {"lr": 1e-3, "weight_decay": 0.01}
    w = OptimizerWorkload(Config(optimizer="lamb"), SIZE, "cpu", 1e-3)
    assert w.work.bytes == w.params * LAMB.bytes_per_param and not w.graphed


def test_every_shipped_preset_is_its_named_point_and_is_called_by_its_name():
    """A shipped preset's file (its `variant` at its `amp`) is exactly its workload's named point of its name: so its
    runs are labelled by that name everywhere (results, the start line, the advice), never by the point's spelling."""
    for p in presets.load_builtin():
        assert p.config == WORKLOADS[p.workload].named(p.name).config, p.name
        assert p.label == p.name
