"""A point on the axes builds the model workload as the named variant did: the same autocast, optimizer, TF32
and compile settings, from the Config the preset carries (a tiny model on CPU)."""

from __future__ import annotations

import pytest
import torch

from apextui.core import model_presets as mp
from apextui.core.config.point import NAMED, parse
from apextui.core.measure.marker import NoMark
from apextui.core.workloads.builders import build
from apextui.core.workloads.model_workload import ModelWorkload, fp8_layer_fits
from helpers import TINY_MODEL

SOURCE = TINY_MODEL


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(SOURCE)
    return f"{path}:build"


def _fused(opt: torch.optim.Optimizer) -> tuple[bool, bool]:
    g = opt.param_groups[0]
    return bool(g.get("fused")), bool(g.get("foreach"))


@pytest.mark.parametrize("variant", ["fp32", "bf16", "fp16", "adamw_foreach", "adamw_fused"])
def test_a_named_variant_and_its_point_build_the_same_workload(spec, variant):
    by_name = ModelWorkload(spec, variant, "cpu", lr=1e-3, seed=0, steps=2)
    by_point = build(mp.config_preset(spec, NAMED[variant], steps=2), "cpu", {}, 2)
    for w in (by_name, by_point):
        assert w.config == NAMED[variant]
    assert (by_name.config.autocast, by_name.uses_grad_scaler, type(by_name.opt), _fused(by_name.opt)) == \
        (by_point.config.autocast, by_point.uses_grad_scaler, type(by_point.opt), _fused(by_point.opt))
    assert by_name.compiled is None and by_point.compiled is None


def test_a_combined_point_applies_every_axis(spec):
    c = parse("precision=bf16,optimizer=fused")
    w = build(mp.config_preset(spec, c, steps=3), "cpu", {}, 3)
    assert w.config.autocast == "bf16" and _fused(w.opt) == (True, False) and not w.uses_grad_scaler
    assert w.check is not None and w.check.passed, w.check
    loss, _ = w.step(NoMark())
    assert torch.isfinite(loss)


def test_the_fp8_snippet_converts_the_layers_the_engine_converts(monkeypatch):
    """The snippet's fp8 line converted every nn.Linear where the engine converts only those whose dimensions
    float8 matmuls take (divisible by 16): both filters, run through a stand-in for torchao, pick the same layers."""
    import sys
    import types

    from apextui.core.config.snippet import snippet

    picked: dict[str, list[str]] = {}

    def convert(model, module_filter_fn):  # torchao's signature: the filter sees (module, its qualified name)
        picked.setdefault("now", []).extend(n for n, m in model.named_modules() if module_filter_fn(m, n))

    float8 = types.ModuleType("torchao.float8")
    float8.convert_to_float8_training = convert
    monkeypatch.setitem(sys.modules, "torchao", types.ModuleType("torchao"))
    monkeypatch.setitem(sys.modules, "torchao.float8", float8)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10),
                                torch.nn.Linear(10, 16))
    setup = snippet(parse("precision=fp8")).split("# each step")[0]
    exec(compile(setup, "<snippet>", "exec"), {"model": model, "lr": 1e-3})
    from_snippet = picked.pop("now")
    convert(model, module_filter_fn=fp8_layer_fits)  # the engine's filter (`ModelWorkload._to_float8`)
    assert from_snippet == picked["now"] == ["0"]
