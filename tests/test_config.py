"""The configuration axes, points, `--config` parsing, the snippet and the preset TOML round-trip; what each value
builds is tests/test_apply.py's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from apextui.core import presets
from apextui.core.config import axes, needs
from apextui.core.config.point import BASELINE, NAMED, Config, ConfigError, parse, single_changes
from apextui.core.config.snippet import preset_toml, snippet
from apextui.core.workloads.spec import MODEL, WORKLOADS
from helpers import named

# the optimizers the workloads built by name before the axes (the old `make_optimizer` kinds) -> the value now
KIND = {"adamw": "adamw", "adamw_foreach": "foreach", "adamw_fused": "fused", "fused_adam": "apex",
        "adamw_capturable_graph": "capturable", "fused_lamb": "lamb", "distributed_fused_adam": "apex_distributed"}

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


def test_every_axis_value_has_a_description_a_label_an_availability_and_its_snippet_lines():
    from apextui.core.config import snippet as lines

    from apextui.core.workloads import apply

    assert list(lines.LINES) == list(axes.axis_names())
    for a in axes.AXES:
        assert a.description and a.default.label == ""
        assert len(set(a.names)) == len(a.names)
        # its values' lines at the stages its apply entry acts at, and at no other (an import a step context needs is
        # the process's); every value but the default writes a line somewhere (the default optimizer is made too)
        acts = set(apply.ACTS[a.name]) | ({axes.Stage.PROCESS} if axes.Stage.STEP in apply.ACTS[a.name] else set())
        assert set(lines.LINES[a.name]) <= acts, a.name
        for stage, table in lines.LINES[a.name].items():
            assert set(table) <= set(a.names), (a.name, stage)
        for v in a.values:
            written = any(lines.LINES[a.name][stage].get(v.name) for stage in lines.LINES[a.name])
            assert written or v is a.default, (a.name, v.name)
        for v in a.values:
            assert v.description and v.axis == a.name and a.value(v.name) is v
            assert v is a.default or v.label
            assert set(v.needs) <= set(needs.NEED_AVAILABILITY) and all(w in WORKLOADS for w in v.workloads)
            answer = needs.needs_availability(v.needs, "cpu")
            assert answer.ok or (answer.reason and answer.fix)
    labels = [v.label for a in axes.AXES for v in a.values if v.label]
    assert len(labels) == len(set(labels))  # a point's label names its values unambiguously


def test_a_config_holds_its_values_and_reads_as_their_names():
    import pickle

    c = parse("precision=bf16,optimizer=apex,compile=default")
    assert c.optimizer is axes.axis("optimizer").value("apex") and c.optimizer.apex == ("FusedAdam",)
    assert c.precision == "bf16" and f"{c.compile}" == "default" and c.as_dict()["optimizer"] == "apex"
    assert pickle.loads(pickle.dumps(c)) == c and pickle.loads(pickle.dumps(c)).compile is c.compile
    with pytest.raises(AttributeError, match="frozen"):
        c.optimizer.apex = ()  # type: ignore[misc]


@pytest.mark.parametrize("name", list(OLD))
def test_every_named_point_builds_what_the_old_variant_did(name):
    from apextui.core.workloads import apply

    c = NAMED[name]
    tf32, amp, kind, fused_norms, mode = OLD[name]
    assert (c.tf32, c.autocast, apply.optimizer_value(c), c.fused_norms, apply.compile_mode(c)) == \
        (tf32, amp, KIND[kind], fused_norms, mode)
    assert c.label == name
    assert MODEL.named(name).config is c  # the model's named points are config/point.py's


def test_cpu_availability_says_why_and_how():
    from apextui.core.availability import availability
    from apextui.core.model_presets import config_preset

    def on_cpu(point):
        return availability(config_preset("m.py:build", point), "cpu")

    assert on_cpu(BASELINE).ok
    tf32 = on_cpu(NAMED["tf32"])
    assert not tf32.ok and "CUDA" in tf32.reason
    apex = on_cpu(NAMED["fused_adam"])
    assert not apex.ok and "FusedAdam" in apex.reason and "CUDA only" in apex.reason
    fp8 = on_cpu(parse("precision=fp8"))
    assert not fp8.ok and fp8.fix
    lamb = on_cpu(parse("optimizer=lamb"))  # a value of the optimizer micro-benchmark's, not the model's
    assert not lamb.ok and "optimizer workload only" in lamb.reason


@pytest.mark.parametrize("text, says", [
    ("precison=bf16", "unknown axis 'precison'; allowed: precision, optimizer, norms, compile, memory_format, "
                      "attention, loss, parallel"),
    ("precision=bf17", "unknown precision 'bf17'; allowed: fp32, tf32, bf16, fp16, fp8"),
    ("precision", "is not axis=value"),
    ("", "empty configuration"),
    ("precision=bf16,precision=fp16", "given twice"),
    ("compile=max", "allowed: none, default, max-autotune-no-cudagraphs, coordinate-descent, reduce-overhead, graph"),
    ("attention=fast", "unknown attention 'fast'; allowed: default, flash, efficient, cudnn, math"),
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
                                  "precision=fp8,compile=reduce-overhead", "fp32",
                                  "precision=bf16,compile=max-autotune-no-cudagraphs",
                                  "memory_format=channels_last,precision=bf16", "attention=flash,precision=fp16",
                                  "attention=math", "norms=liger,loss=liger_flce,compile=coordinate-descent"])
def test_the_snippet_says_the_exact_calls_and_the_toml_reproduces_the_config(text):
    c = parse(text)
    code = snippet(c)
    compile(code, "<snippet>", "exec")  # valid Python
    assert ('torch.autocast(device_type="cuda", dtype=torch.bfloat16)' in code) == (c.autocast == "bf16")
    assert ("GradScaler" in code) == (c.precision == "fp16")
    assert ("allow_tf32 = True" in code) == c.tf32
    assert "apextui" not in code  # the code depends on what the configuration uses alone
    assert ("from apex.normalization import FusedLayerNorm, FusedRMSNorm" in code) == c.fused_norms
    assert ("module_filter_fn=" in code) == c.fp8  # fp8 converts the layers advise converted, not every nn.Linear
    assert ("torch.compile(model" in code) == (c.compile != "none")
    if c.compile in ("reduce-overhead", "max-autotune-no-cudagraphs"):
        assert f'mode="{c.compile}"' in code
    assert ('options={"coordinate_descent_tuning": True}' in code) == (c.compile == "coordinate-descent")
    assert ("model.to(memory_format=torch.channels_last)" in code and "cudnn.benchmark = True" in code
            and "inputs = inputs.to(memory_format=torch.channels_last)" in code) == c.channels_last
    backend = {"flash": "FLASH_ATTENTION", "math": "MATH"}.get(c.attention)
    assert ("sdpa_kernel(" in code) == (backend is not None)
    if backend is not None:  # one `with` for autocast and the backend, the forward inside it
        assert f"sdpa_kernel(SDPBackend.{backend}):\n    loss = " in code
    assert ("from liger_kernel.transformers import LigerLayerNorm, LigerRMSNorm" in code) == (c.norms == "liger")
    assert ("fused_linear_cross_entropy=True)" in code) == (c.loss == "liger_flce")
    assert {"adamw": "AdamW(model.parameters(), lr=lr)", "fused": "fused=True", "foreach": "foreach=True",
            "apex": "FusedAdam("}[c.optimizer] in code
    p = presets.parse(tomllib.loads(preset_toml(c, "examples/gpt.py:build")), name="mine")
    assert p.config == c and p.workload == "model" and p.model == "examples/gpt.py:build"
    assert p.config.label == c.label and p.needs_apex == c.needs_apex and p.is_baseline == (c == BASELINE)


def test_preset_config_field_errors():
    base = {"workload": "model", "model": "m.py:f", "steps": 20}
    with pytest.raises(presets.PresetError, match="field 'config': unknown axis 'x'"):
        presets.parse({**base, "config": "x=1"}, name="p")
    for config in ({"precision": "fp16"}, {"precision": "bf16"}):  # never both, even naming one point
        with pytest.raises(presets.PresetError, match="field 'config': give variant = .* or config = .*, not both"):
            presets.parse({**base, "config": config, "variant": "bf16"}, name="p")
    with pytest.raises(presets.PresetError, match="field 'config': empty configuration; .*a named point \\(fp32, "):
        presets.parse({**base, "config": {}}, name="p")
    with pytest.raises(presets.PresetError, match="only the model workload takes a config"):
        presets.parse({"workload": "norm", "variant": "layernorm", "steps": 20, "config": "precision=bf16"},
                      name="p")
    p = presets.parse({**base, "variant": "bf16"}, name="p")
    assert p.config is NAMED["bf16"] and p.config.label == "bf16" and not p.is_baseline
    p = presets.parse({**base, "config": "precision=bf16,compile=default"}, name="p")
    assert p.config.label == "bf16+compile" and p.config.autocast == "bf16"


# what each shipped transformer variant built before it was a point (the old `parts` and COMPILE_MODES tables, and
# the old `VariantSpec.parallel`): (fused norms, optimizer kind, torch.compile mode, whole-step graph, parallel)
OLD_TRANSFORMER = {
    "fp32": (False, "adamw", None, False, None), "fused_fp32": (True, "fused_adam", None, False, None),
    "fused_amp": (True, "fused_adam", None, False, None), "torch_amp": (False, "adamw_fused", None, False, None),
    "torch_compile": (False, "adamw_fused", "default", False, None),
    "torch_compile_cg": (False, "adamw_fused", "reduce-overhead", False, None),
    "torch_compile_graph": (False, "adamw_capturable_graph", "default", True, None),
    "ddp_adamw_fused": (False, "adamw_fused", None, False, "ddp"),
    "ddp_fused_adam": (False, "fused_adam", None, False, "ddp"),
    "fsdp2_adamw_fused": (False, "adamw_fused", None, False, "fsdp2"),
    "distributed_fused_adam": (False, "distributed_fused_adam", None, False, "distributed_optimizer"),
}
# what the optimizer and norm micro-benchmarks' variants built by name (the old `make_optimizer` and `make_norm`):
# (optimizer kind, fused norm, the norm it timed: None for the optimizer's)
OLD_KERNELS = {"adamw": ("adamw", False, None), "adamw_fused": ("adamw_fused", False, None),
               "fused_adam": ("fused_adam", False, None),
               "adamw_capturable_graph": ("adamw_capturable_graph", False, None),
               "fused_lamb": ("fused_lamb", False, None), "layernorm": ("adamw", False, "layer_norm"),
               "rmsnorm": ("adamw", False, "rms_norm"), "fused_layernorm": ("adamw", True, "layer_norm"),
               "fused_rmsnorm": ("adamw", True, "rms_norm")}
# the old PRECISION_OF_AMP: a preset file's `amp` field -> the precision of its point
PRECISION_OF_AMP = {"none": "fp32", "bf16": "bf16", "fp16": "fp16"}


def file_fields(preset) -> tuple[str, str]:
    """A shipped preset file's `variant` and `amp` fields (its input format: read once into its point)."""
    data = tomllib.loads(Path(preset.path).read_text())
    return data["variant"], data.get("amp", "none")


@pytest.mark.parametrize("preset", [p for p in presets.load_builtin() if p.workload == "transformer"],
                         ids=lambda p: p.name)
def test_every_shipped_transformer_preset_is_the_point_its_old_variant_built(preset):
    from apextui.core.workloads import apply, parallel

    point = preset.point
    assert point is not None and point is preset.config
    variant, amp = file_fields(preset)
    assert point.precision == PRECISION_OF_AMP[amp]
    assert point == named("transformer", variant).with_("precision", PRECISION_OF_AMP[amp])
    fused_norms, kind, mode, graph, way = OLD_TRANSFORMER[variant]
    assert (point.fused_norms, apply.optimizer_value(point), apply.compile_mode(point), point.whole_step_graph) == \
        (fused_norms, KIND[kind], mode, graph)
    assert point.data_parallel == (way is not None)
    if way is not None:  # its own way of training on several ranks (without one: DDP under torchrun, one process here)
        assert parallel.kind(point) == way
    assert (apply.NORMS[point.norms].swap is None) == (not point.fused_norms)
    text = snippet(point)
    assert ("torch.compile(" in text) == (apply.compile_mode(point) is not None)
    assert ("torch.cuda.CUDAGraph()" in text) == point.whole_step_graph


@pytest.mark.parametrize("preset", [p for p in presets.load_builtin() if p.workload not in ("transformer", "model")],
                         ids=lambda p: p.name)
def test_every_kernel_preset_is_the_point_its_old_variant_built(preset):
    from apextui.core.workloads import apply

    variant, amp = file_fields(preset)
    kind, fused_norms, norm = OLD_KERNELS[variant]
    assert preset.point is None  # the micro-benchmarks answer with a preset, not with code
    assert (apply.optimizer_value(preset.config), preset.config.fused_norms) == (KIND[kind], fused_norms)
    assert preset.workload == (norm or "optimizer") and WORKLOADS[preset.workload].norm == norm
    assert preset.config.precision == PRECISION_OF_AMP[amp]
    assert preset.config == named(preset.workload, variant).with_("precision", PRECISION_OF_AMP[amp])


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
    from apextui.core.presets import load_builtin as shipped
    from apextui.core.run.data_parallel import data_parallel_problem

    point = parse("precision=bf16,optimizer=fused,norms=apex")
    assert point not in NAMED.values()
    presets = [*presets_for("m.py:build", names=("fp32",)), config_preset("m.py:build", point)]
    (p,) = plan(presets, "cuda", ["model"], lambda _: Availability(True))
    assert [x.config.label for x in p.runnable] == ["fp32", point.label] and not p.skipped
    # your model trains in one process: refused data-parallel in one line (it ran unwrapped on each rank)
    assert "trains the model workload in one process" in (data_parallel_problem(presets[1]) or "")
    graph = next(p for p in shipped() if p.name == "torch_compile_graph")
    assert "CUDA graphs" in (data_parallel_problem(graph) or "")
    assert data_parallel_problem(next(p for p in shipped() if p.name == "fsdp2_adamw_fused")) is None


def test_the_docs_say_config_takes_a_variants_name_as_the_code_does():
    """`--config bf16` (a named point) is accepted; docs/your-model.md said anything not `axis=value` is an error."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "your-model.md").read_text()
    assert parse("bf16") is NAMED["bf16"]
    assert "`--config bf16` is `--config precision=bf16`" in doc
    assert "or not `axis=value`" not in doc  # the error list said a named point was refused
    with pytest.raises(ConfigError, match="or a named point"):
        parse("bf17")


def test_the_docs_axes_table_lists_every_axis_and_every_value_the_model_builds():
    """docs/your-model.md's table has a row per axis naming each of its values your model can take."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "your-model.md").read_text()
    rows: dict[str, str] = {}
    for line in doc.splitlines():  # the axes table is the first with a row per axis (the variants' follows)
        if line.startswith("| `"):
            rows.setdefault(line.split("|")[1].strip().strip("`"), line)
    for a in axes.AXES:
        assert a.name in rows, a.name
        missing = [v.name for v in a.values_for("model") if f"`{v.name}`" not in rows[a.name]]
        assert not missing, (a.name, missing)


def test_the_written_out_norm_swap_swaps_every_norm_and_keeps_the_weights(monkeypatch):
    """The answer's norm swap, run: Apex is not installed here, so `apex.normalization` is a FAKE whose kernels are
    torch's own classes under Apex's names and signatures (the swap's logic is what is tested: which modules, which
    sizes, eps and weights)."""
    import sys
    import types

    import torch
    from torch import nn

    class FusedLayerNorm(nn.LayerNorm):
        def __init__(self, size, eps=1e-5, elementwise_affine=True):
            super().__init__(size, eps=eps, elementwise_affine=elementwise_affine)

    class FusedRMSNorm(nn.RMSNorm):
        def __init__(self, size, eps=1e-5, elementwise_affine=True):
            super().__init__(size, eps=eps, elementwise_affine=elementwise_affine)

    class MyRMSNorm(nn.Module):  # a model's own RMSNorm class, as Llama-style codebases have
        def __init__(self, d):
            super().__init__()
            self.weight, self.variance_epsilon = nn.Parameter(torch.rand(d) + 0.5), 1e-6

        def forward(self, x):
            return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)

    fake = types.ModuleType("apex.normalization")
    fake.FusedLayerNorm, fake.FusedRMSNorm = FusedLayerNorm, FusedRMSNorm
    monkeypatch.setitem(sys.modules, "apex", types.ModuleType("apex"))
    monkeypatch.setitem(sys.modules, "apex.normalization", fake)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Sequential(MyRMSNorm(8), nn.Linear(8, 2)))
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 8)
    before = model(x)
    code = snippet(parse("norms=apex"))
    setup = code.split("optimizer = ")[0]
    exec(setup, {"torch": torch, "model": model})  # noqa: S102 - the answer's own code
    assert type(model[1]) is FusedLayerNorm and type(model[2][0]) is FusedRMSNorm
    assert model[2][0].eps == 1e-6
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)  # the weights came along


def test_liger_family_patch_is_called_with_the_flags_that_family_takes_and_channels_last_comes_before_the_unpack():
    """Gemma's patch takes no `swiglu` (it has GeGLU): the code names only what the family's function takes, as the
    engine does (`liger.patch`); a (inputs, targets) batch is moved to channels_last whole, before it is unpacked."""
    from apextui.core.config.calling import Calling

    takes = ("rope", "rms_norm", "geglu", "cross_entropy", "fused_linear_cross_entropy")
    gemma = ("apply_liger_kernel_to_gemma", takes)
    code = snippet(parse("norms=liger"), calling=Calling("keyword", "attribute"), liger_apply=gemma)
    assert "apply_liger_kernel_to_gemma(model=model, rope=True, rms_norm=True, geglu=True, cross_entropy=False, " \
           "fused_linear_cross_entropy=False)" in code and "swiglu" not in code
    code = snippet(parse("memory_format=channels_last"), calling=Calling("positional", "loss_fn"))
    assert code.index("batch = to_channels_last(batch)") < code.index("inputs, targets = batch")
    import collections

    import torch

    ns: dict = {"torch": torch}
    exec("\n".join(line for line in code.splitlines() if not line.startswith(("optimizer", "model ="))  # noqa: S102
                    and "cudnn" not in line).split("# each step")[0], ns)
    Pair = collections.namedtuple("Pair", "image label")
    moved = ns["to_channels_last"](Pair(torch.zeros(2, 3, 4, 4), torch.zeros(2)))
    assert isinstance(moved, Pair) and moved.image.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("norms, swap_written", [("liger", False), ("apex", True), ("torch", False)])
def test_liger_s_family_patch_is_the_norms_and_loss_as_measured_and_another_swap_beside_it(norms, swap_written):
    """With a family patch, `norms=liger` is that patch alone (a generic LigerRMSNorm swap after it turned Gemma's
    `(1 + w) x` norms into `w x`); `norms=apex` beside Liger's loss keeps its own swap, as the engine applied it."""
    point = parse(f"norms={norms},loss=liger_flce")
    code = snippet(point, liger_apply=("apply_liger_kernel_to_llama", ("rms_norm", "fused_linear_cross_entropy")))
    assert "apply_liger_kernel_to_llama(model=model" in code
    assert ("def swap_norms(module):" in code) == swap_written, code
    assert ("FusedRMSNorm" in code) == (norms == "apex") and "LigerRMSNorm" not in code
    assert "MODEL_TYPE_TO_APPLY_LIGER_FN" not in code  # the loss's generic lines: the family patch has it
