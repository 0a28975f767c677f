"""The configuration axes, points, `--config` parsing, the snippet and the preset TOML round-trip (no torch)."""

from __future__ import annotations

import tomllib

import pytest

from apextui.core import presets
from apextui.core.config import axes, checks
from apextui.core.config.point import BASELINE, NAMED, Config, ConfigError, parse, single_changes
from apextui.core.config.snippet import preset_toml, snippet
from apextui.core.workloads.spec import MODEL

# what each named variant meant before the axes (the old Recipe table and VariantSpec.amp)
OLD = {  # name: (tf32, amp, optimizer, fused_norms, compile_mode)
    "fp32": (False, "none", "adamw", False, None), "tf32": (True, "none", "adamw", False, None),
    "bf16": (False, "bf16", "adamw", False, None), "fp16": (False, "fp16", "adamw", False, None),
    "adamw_foreach": (False, "none", "adamw_foreach", False, None),
    "adamw_fused": (False, "none", "adamw_fused", False, None),
    "fused_adam": (False, "none", "fused_adam", False, None), "fused_norms": (False, "none", "adamw", True, None),
    "fused_amp": (False, "fp16", "fused_adam", True, None), "compile": (False, "none", "adamw", False, "default"),
    "compile_cg": (False, "none", "adamw", False, "reduce-overhead"),
}


def test_every_axis_value_has_a_summary_a_label_and_an_availability():
    for a in axes.AXES:
        assert a.summary and a.default.label == ""
        assert len(set(a.names)) == len(a.names)
        for v in a.values:
            assert v.summary
            assert v is a.default or v.label
            check = checks.value_availability(v, "cpu")
            assert check.ok or (check.reason and check.fix)
    labels = [v.label for a in axes.AXES for v in a.values if v.label]
    assert len(labels) == len(set(labels))  # a point's label names its values unambiguously


@pytest.mark.parametrize("name", list(OLD))
def test_every_named_point_builds_what_the_old_variant_did(name):
    c = NAMED[name]
    assert (c.tf32, c.amp, c.optimizer_kind, c.fused_norms, c.compile_mode) == OLD[name]
    assert c.label == name
    assert MODEL.variant(name).config is c  # the model's variants are made from the named points


def test_cpu_availability_says_why_and_how():
    assert checks.config_availability(BASELINE, "cpu").ok
    tf32 = checks.config_availability(NAMED["tf32"], "cpu")
    assert not tf32.ok and "CUDA" in tf32.reason
    apex = checks.config_availability(NAMED["fused_adam"], "cpu")
    assert not apex.ok and "FusedAdam" in apex.reason and "CUDA only" in apex.reason
    fp8 = checks.config_availability(parse("precision=fp8"), "cpu")
    assert not fp8.ok and fp8.fix


@pytest.mark.parametrize("text, says", [
    ("precison=bf16", "unknown axis 'precison'; allowed: precision, optimizer, norms, compile"),
    ("precision=bf17", "unknown precision 'bf17'; allowed: fp32, tf32, bf16, fp16, fp8"),
    ("precision", "is not axis=value"),
    ("", "empty configuration"),
    ("precision=bf16,precision=fp16", "given twice"),
    ("compile=max", "allowed: none, default, max-autotune-no-cudagraphs, reduce-overhead, graph"),
])
def test_config_errors_name_what_is_wrong_and_what_is_allowed(text, says):
    with pytest.raises(axes.ConfigError) as e:
        parse(text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_parse_forms_and_labels():
    c = parse(" precision = bf16 , optimizer=fused,compile=default")
    assert c == Config("bf16", "fused", "torch", "default") == parse(c.spec()) == parse(c.as_dict())
    assert c.label == "bf16+fused+compile" and hash(c) == hash(Config("bf16", "fused", "torch", "default"))
    assert parse("bf16") is NAMED["bf16"] and parse("precision=fp16,optimizer=apex,norms=apex").label == "fused_amp"
    assert len(single_changes()) == sum(len(a.values_for("model")) - 1 for a in axes.AXES)


@pytest.mark.parametrize("text", ["precision=bf16,optimizer=fused,compile=default", "fused_amp", "tf32",
                                  "precision=fp8,compile=reduce-overhead", "fp32"])
def test_the_snippet_says_the_exact_calls_and_the_toml_reproduces_the_config(text):
    c = parse(text)
    code = snippet(c)
    compile(code, "<snippet>", "exec")  # valid Python
    assert ('torch.autocast(device_type="cuda", dtype=torch.bfloat16)' in code) == (c.amp == "bf16")
    assert ("GradScaler" in code) == (c.precision == "fp16")
    assert ("allow_tf32 = True" in code) == c.tf32
    assert ("swap_norms(model)" in code) == c.fused_norms
    assert ("module_filter_fn=" in code) == c.fp8  # fp8 converts the layers advise converted, not every nn.Linear
    assert ("torch.compile(model" in code) == (c.compile != "none")
    if c.compile == "reduce-overhead":
        assert 'mode="reduce-overhead"' in code
    assert {"adamw": "AdamW(model.parameters(), lr=lr)", "fused": "fused=True", "foreach": "foreach=True",
            "apex": "FusedAdam("}[c.optimizer] in code
    p = presets.parse(tomllib.loads(preset_toml(c, "examples/gpt.py:build")), name="mine")
    assert p.config == c and p.workload == "model" and p.model == "examples/gpt.py:build" and p.amp == c.amp
    assert p.variant == c.label and p.needs_apex == c.needs_apex


def test_preset_config_field_errors():
    base = {"workload": "model", "model": "m.py:f", "steps": 20}
    with pytest.raises(presets.PresetError, match="field 'config': unknown axis 'x'"):
        presets.parse({**base, "config": "x=1"}, name="p")
    with pytest.raises(presets.PresetError, match="field 'config': .* is not the variant bf16"):
        presets.parse({**base, "config": {"precision": "fp16"}, "variant": "bf16"}, name="p")
    with pytest.raises(presets.PresetError, match="only the model workload takes a config"):
        presets.parse({"workload": "norm", "variant": "layernorm", "steps": 20, "config": "precision=bf16"},
                      name="p")
    p = presets.parse({**base, "variant": "bf16"}, name="p")
    assert p.config == NAMED["bf16"] and p.variant == "bf16"
    p = presets.parse({**base, "config": "precision=bf16,compile=default"}, name="p")
    assert p.variant == "bf16+compile" and p.amp == "bf16"


# what each shipped transformer variant built before it was a point (the old `parts` and COMPILE_MODES tables):
# (fused norms, optimizer kind, torch.compile mode, whole-step graph)
OLD_TRANSFORMER = {
    "fp32": (False, "adamw", None, False), "fused_fp32": (True, "fused_adam", None, False),
    "fused_amp": (True, "fused_adam", None, False), "torch_amp": (False, "adamw_fused", None, False),
    "torch_compile": (False, "adamw_fused", "default", False),
    "torch_compile_cg": (False, "adamw_fused", "reduce-overhead", False),
    "torch_compile_graph": (False, "adamw_capturable_graph", "default", True),
    "ddp_adamw_fused": (False, "adamw_fused", None, False), "ddp_fused_adam": (False, "fused_adam", None, False),
    "fsdp2_adamw_fused": (False, "adamw_fused", None, False),
}


@pytest.mark.parametrize("preset", [p for p in presets.load_builtin() if p.workload == "transformer"],
                         ids=lambda p: p.name)
def test_every_shipped_transformer_preset_is_the_point_its_old_variant_built(preset):
    from apextui.core.workloads import transformer

    point = preset.point
    if preset.variant == "distributed_fused_adam":  # its optimizer is sharded over ranks: no axis value
        assert point is None and transformer.parts(preset.variant, preset.amp)[1] == "distributed_fused_adam"
        return
    assert point is not None and point.amp == preset.amp
    assert (point.fused_norms, point.optimizer_kind, point.compile_mode, point.whole_step_graph) == \
        OLD_TRANSFORMER[preset.variant]
    if not point.fused_norms:  # (Apex's norm is imported where it is built: not installed here)
        norm, kind, built = transformer.parts(preset.variant, preset.amp)
        assert built == point and kind == point.optimizer_kind and norm.__name__ == "LayerNorm"
    text = snippet(point)
    assert ("torch.compile(" in text) == (point.compile_mode is not None)
    assert ("torch.cuda.CUDAGraph()" in text) == point.whole_step_graph


def test_the_whole_step_graph_is_the_transformers_only():
    from apextui.core.availability import availability
    from apextui.core.model_presets import config_preset

    graph = parse("precision=bf16,optimizer=fused,compile=graph")
    assert graph not in single_changes(BASELINE) and graph.label == "bf16+fused+compile_graph"
    a = availability(config_preset("m.py:build", graph), "cuda")
    assert not a.ok and "transformer workload only" in a.reason


def test_a_point_off_the_named_ones_plans_and_checks_for_data_parallel_without_a_registry_entry():
    """`advise --model --config precision=bf16,optimizer=fused,norms=apex` (no named variant has that point) crashed
    with KeyError in the plan; the data-parallel check read the registry the same way."""
    from apextui.core.advise.planning import plan
    from apextui.core.availability import Availability
    from apextui.core.model_presets import config_preset, presets_for
    from apextui.core.run.data_parallel import data_parallel_problem

    point = parse("precision=bf16,optimizer=fused,norms=apex")
    assert point not in NAMED.values()
    presets = [*presets_for("m.py:build", variants=("fp32",)), config_preset("m.py:build", point)]
    (p,) = plan(presets, "cuda", ["model"], lambda _: Availability(True))
    assert [x.variant for x in p.runnable] == ["fp32", point.label] and not p.skipped
    assert data_parallel_problem(presets[1]) is None
    graph = config_preset("m.py:build", parse("precision=bf16,compile=graph"))
    assert "CUDA graphs" in (data_parallel_problem(graph) or "")


def test_the_docs_say_config_takes_a_variants_name_as_the_code_does():
    """`--config bf16` (a named point) is accepted; docs/your-model.md said anything not `axis=value` is an error."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "your-model.md").read_text()
    assert parse("bf16") is NAMED["bf16"]
    assert "`--config bf16` is `--config precision=bf16`" in doc
    assert "or not `axis=value`" not in doc  # the error list said a named point was refused
    with pytest.raises(ConfigError, match="or a named point"):
        parse("bf17")
