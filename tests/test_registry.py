"""The workload registry (core/workloads/spec.py): one declaration that presets, compilation, the work
model, the memory estimate, the advice and the docs all read."""

from __future__ import annotations

import re

import pytest

from apextui.core import compilation, memory, presets
from apextui.core.advise import LOSS_CHECKED
from apextui.core.workloads.spec import WORKLOADS
from helpers import ROOT


def test_preset_tables_are_views_of_the_registry():
    assert list(presets.WORKLOADS) == list(WORKLOADS)
    for name, spec in WORKLOADS.items():
        assert dict(presets.WORKLOADS[name]) == {v.name: v.apex for v in spec.variants}
        assert presets.SIZE_KEYS[name] == spec.size_keys
        assert presets.BASELINES[name] == spec.baseline
        assert presets.PRODUCT_LIMITS[name] == spec.product_limit
        assert memory.SHRINK_ORDER[name] == spec.shrink_order
        assert set(spec.shrink_order) <= set(spec.size_keys)
    assert compilation.needs("optimizer", "adamw_capturable_graph") == ("cuda_graphs",)
    assert compilation.needs("transformer", "torch_compile_cg") == ("compile", "cuda_graphs")
    assert LOSS_CHECKED == ("transformer",)


def test_every_registered_variant_has_a_shipped_preset_and_a_row_in_the_docs():
    docs = (ROOT / "docs" / "presets.md").read_text()
    shipped = {p.variant for p in presets.load_builtin()}
    for name, spec in WORKLOADS.items():
        for v in spec.variants:
            assert v.name in shipped, f"{name}/{v.name}: no TOML in presets/"
            assert re.search(rf"`{re.escape(v.name)}`", docs), f"{name}/{v.name}: not in docs/presets.md"


def test_a_baseline_must_be_one_of_its_variants():
    spec = WORKLOADS["norm"]
    with pytest.raises(ValueError, match="baseline"):
        type(spec)(name="x", variants=spec.variants, size_limits=spec.size_limits,
                   product_limit=spec.product_limit, baseline="nope", builder=spec.builder, work=spec.work,
                   shrink_order=spec.shrink_order)
