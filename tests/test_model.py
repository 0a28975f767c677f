"""Your own model (`--model FILE.py:FUNC`, docs/your-model.md): the examples under every variant that runs on
CPU, loss parity, the norm swap's numerical check, the preset form, and the advice's flag for a wrong variant.
The CLI's bad-input cases are in test_model_cli.py."""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import apextui
from apextui.core import model_presets as mp
from apextui.core.presets import PresetError, parse
from apextui.core.workloads import apply
from apextui.core.measure.marker import NoMark
from apextui.core.workloads import model_workload as model_mod
from apextui.core.workloads import user_model
from apextui.core.config.point import NAMED
from apextui.core.workloads.model_workload import PARITY_STEPS, ModelWorkload
from apextui.core.workloads.spec import MODEL
from helpers import ROOT, one_torch_thread  # noqa: F401 - the fixture, used by name below

GPT, VIT = str(ROOT / "examples" / "gpt.py") + ":build", str(ROOT / "examples" / "vit.py") + ":build"
EAGER_CPU = ("fp32", "bf16", "fp16", "adamw_foreach", "adamw_fused")  # the eager variants CPU can run


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_model_setup_is_public_and_every_registered_variant_is_a_named_point():
    assert apextui.ModelSetup is user_model.ModelSetup
    assert set(NAMED) == {v.name for v in MODEL.points}
    assert all(v.config.autocast in ("none", "bf16", "fp16") for v in MODEL.points)


@pytest.mark.parametrize("spec", [GPT, VIT], ids=["gpt", "vit"])
@pytest.mark.parametrize("variant", EAGER_CPU)
def test_every_eager_variant_trains_the_examples_on_cpu_within_loss_parity(spec, variant):
    w = ModelWorkload(spec, variant, "cpu", lr=1e-3, seed=0, steps=3)
    torch.manual_seed(w._check_seed)  # the examples have dropout: the check's random stream, so its masks
    losses = [float(w.step(NoMark())[0]) for _ in range(3)]
    assert all(math.isfinite(x) for x in losses)
    assert w.uses_grad_scaler == (variant == "fp16")
    if variant == "fp32":
        assert w.check is None  # the reference itself
        return
    assert w.check.against == "fp32" and w.check.steps == PARITY_STEPS
    assert w.check.passed, w.check
    # the measured run starts again from the initial weights: its first loss is the variant's first parity loss
    assert losses[0] == pytest.approx(w.check.losses[0], rel=1e-5)


def test_every_variant_starts_from_the_same_weights_and_batches():
    a = ModelWorkload(GPT, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
    b = ModelWorkload(GPT, "adamw_fused", "cpu", lr=1e-3, seed=0, steps=1)
    assert torch.equal(a.batches[0][0], b.batches[0][0])
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    c = ModelWorkload(GPT, "fp32", "cpu", lr=1e-3, seed=1, steps=1)
    assert not torch.equal(a.batches[0][0], c.batches[0][0])


@pytest.mark.slow
@pytest.mark.parametrize("spec", [GPT], ids=["gpt"])  # one inductor build is a minute here; the ViT's is on the GPU
def test_compile_variant_on_cpu_checks_parity_during_its_warm_up(spec):
    from apextui.core.config.needs import compile_availability

    if not compile_availability("cpu").ok:
        pytest.skip(compile_availability("cpu").reason)
    w = ModelWorkload(spec, "compile", "cpu", lr=1e-3, seed=0, steps=3)
    assert w.compiles and w.check is None
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    assert w.warm_up() > 0
    assert w.check.passed, w.check
    assert w.check.dropout == "disabled_for_check"  # GPT's dropout: a compiled graph draws its own masks
    # two graphs in the warm-up (the check's, dropout off; the measured one, the user's dropout), none after it
    assert counters["stats"]["unique_graphs"] - graphs == 2
    compiled = counters["stats"]["unique_graphs"]
    assert all(math.isfinite(float(w.step(NoMark())[0])) for _ in range(3))
    assert counters["stats"]["unique_graphs"] == compiled


def test_the_traced_forward_reads_no_configuration_value():
    """torch.compile traces LossModule.forward, and torch 2.11's dynamo failed every compiled step of the model
    workload on a configuration Value read there (a `str` subclass: "UserDefinedObjectVariable(Value) is not a
    constant", on an H200; torch 2.13 traces it). The forward works from plain values resolved when the module is
    built: with its config taken away it still runs the point's layout, autocast and SDPA backend."""
    from apextui.core.config.point import parse
    from apextui.core.workloads.model_workload import LossModule

    seen: dict = {}

    class Probe(nn.Module):
        def forward(self, x):
            seen["channels_last"] = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
            seen["autocast"] = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu")
            seen["math_only"] = (torch._C._get_flash_sdp_enabled(), torch._C._get_math_sdp_enabled())
            return x.sum(dim=(1, 2, 3))

    def loss_fn(out, target):
        return (out.float() - target).pow(2).mean()

    module = LossModule(Probe(), loss_fn, "cpu", parse("precision=bf16,memory_format=channels_last,attention=math"))
    module.config = None  # the forward must not need it
    loss = module((torch.randn(2, 3, 4, 4), torch.zeros(2)))
    assert torch.isfinite(loss)
    assert seen == {"channels_last": True, "autocast": torch.bfloat16, "math_only": (False, True)}


def test_the_shipped_transformers_traced_forward_reads_no_configuration_value():
    """The same for the Transformer workload's LossModel (compiled by the torch_compile presets): with its precision
    taken away its forward still runs under the point's autocast."""
    from apextui.core.config.axes import axis
    from apextui.core.workloads.transformer import LossModel

    seen: list = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"))
            return x.unsqueeze(-1).float().expand(*x.shape, 3)

    module = LossModel(Probe(), "cpu", axis("precision").value("bf16"))
    module.precision = None  # the forward must not need it
    assert torch.isfinite(module(torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.long)))
    assert seen == [torch.bfloat16]


# ---- the norm swap, against a FAKE apex (apex is not installed here; the fake computes the norms in torch) --
class FakeFusedLayerNorm(nn.Module):
    """A FAKE of apex.normalization.FusedLayerNorm (same constructor and parameters), computed by torch."""

    wrong = False

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        out = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return out * 1.5 if self.wrong else out


class FakeFusedRMSNorm(nn.Module):
    """A FAKE of apex.normalization.FusedRMSNorm, computed by torch."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


@pytest.fixture
def fake_apex(monkeypatch):
    apex = types.ModuleType("apex")
    norms = types.ModuleType("apex.normalization")
    norms.FusedLayerNorm, norms.FusedRMSNorm = FakeFusedLayerNorm, FakeFusedRMSNorm
    apex.normalization = norms
    monkeypatch.setitem(sys.modules, "apex", apex)
    monkeypatch.setitem(sys.modules, "apex.normalization", norms)
    monkeypatch.setattr(FakeFusedLayerNorm, "wrong", False)
    return norms


def test_norm_swap_replaces_every_norm_copies_weights_and_checks_the_first_batch(fake_apex):
    w = ModelWorkload(GPT, "fused_norms", "cpu", lr=1e-3, seed=0, steps=1)
    swap = w.check.norm_swap
    assert swap.modules == 5 and swap.passed and swap.max_abs_err <= swap.tolerance
    assert not any(type(m) is nn.LayerNorm for m in w.model.modules())
    assert sum(isinstance(m, FakeFusedLayerNorm) for m in w.model.modules()) == 5
    assert w.check.passed, w.check


def test_norm_swap_keeps_trained_weights_and_handles_rmsnorm(fake_apex):
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.RMSNorm(8, eps=1e-6))
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 2.0)
        model[1].bias.uniform_(-1, 1)
        model[2].weight.uniform_(0.5, 2.0)
    x = torch.randn(3, 4)
    before = model(x)
    assert model_mod.swap_norms(model) == ["1", "2"]
    assert isinstance(model[1], FakeFusedLayerNorm) and isinstance(model[2], FakeFusedRMSNorm)
    assert model[2].eps == 1e-6
    torch.testing.assert_close(model(x), before)


def test_a_wrong_norm_swap_fails_the_check(fake_apex, monkeypatch):
    monkeypatch.setattr(FakeFusedLayerNorm, "wrong", True)  # a fused norm whose output is off by 50 %
    w = ModelWorkload(VIT, "fused_norms", "cpu", lr=1e-3, seed=0, steps=1)
    assert not w.check.norm_swap.passed and not w.check.passed


def test_norm_swap_of_a_model_without_norms_is_unavailable_and_fails_if_run(fake_apex, tmp_path, monkeypatch):
    f = tmp_path / "mlp.py"
    f.write_text("import torch\nfrom torch import nn\nfrom apextui import ModelSetup\n"
                 "def build():\n    return ModelSetup(model=nn.Linear(4, 1), make_batch=lambda d, g: "
                 "(torch.randn(2, 4, device=d, generator=g), torch.randn(2, 1, device=d, generator=g)), "
                 "loss_fn=nn.functional.mse_loss)\n")
    spec = f"{f}:build"
    facts = mp.probe(spec, "cpu")
    assert facts.norms == 0
    (p,) = mp.presets_for(spec, names=("fused_norms",))
    from apextui.core.availability import Availability

    # as on a GPU with Apex (a FAKE of the GPU-only Apex check): the model's lack of norms decides
    monkeypatch.setattr(mp, "availability", lambda preset, device: Availability(True))
    a = mp.model_availability(p, "cuda", facts)
    assert not a.ok and a.reason == "no module computes a LayerNorm or RMSNorm (no norm found)"
    assert mp.model_availability(mp.presets_for(spec, names=("bf16",))[0], "cuda", facts).ok
    with pytest.raises(ValueError, match="no module computes a LayerNorm or RMSNorm"):
        ModelWorkload(spec, "fused_norms", "cpu", lr=1e-3, seed=0, steps=1)


# ---- loss parity: a deliberately wrong variant is flagged ---------------------------------------------
def wrong_optimizer(params, lr):
    """A deliberately wrong "adamw_fused" (optimizer=fused): SGD with a huge learning rate."""
    return torch.optim.SGD(params, lr=50.0)


def test_a_wrong_variant_fails_loss_parity_and_the_advice_never_recommends_it(monkeypatch):
    from apextui.core.advise import Advisor

    monkeypatch.setattr(apply, "OPTIMIZERS", {**apply.OPTIMIZERS, "fused": wrong_optimizer})
    presets = mp.presets_for(GPT, names=("fp32", "adamw_fused"))
    advisor = Advisor("cpu", steps=4, repeats=1, workloads=("model",), presets=presets,
                      availability_fn=lambda p: mp.model_availability(p, "cpu"), env={"device": "cpu", "key": "t"})
    doc = advisor.run()
    [w] = doc["workloads"]
    rows = {p["label"]: p for p in w["presets"]}
    assert rows["adamw_fused"]["flagged"] and not rows["fp32"]["flagged"]
    parity = rows["adamw_fused"]["parity"]  # the check's numbers in advise --json
    assert parity["passed"] is False and parity["max_abs_err"] > parity["tolerance"] and parity["steps"] == 5
    assert parity["dropout"] == "disabled_for_check" and "at step" in parity["message"]  # GPT has dropout
    assert rows["fp32"]["parity"] is None
    [flag] = w["flags"]
    assert flag["kind"] == "check" and "loss-parity" in flag["text"] and parity["message"] in flag["text"]
    assert w["recommended"] != rows["adamw_fused"]["preset"]


# ---- the preset form: model = "..." ---------------------------------------------------------------
def test_a_model_preset_names_its_model_and_takes_its_amp_from_the_variant():
    p = parse({"workload": "model", "model": "examples/gpt.py:build", "variant": "bf16", "steps": 20}, "mine")
    assert (p.model, p.config.autocast, p.size, p.baseline) == ("examples/gpt.py:build", "bf16", {}, "fp32")


@pytest.mark.parametrize("data, field", [
    ({"workload": "model", "variant": "fp32", "steps": 5}, "'model': missing"),
    ({"workload": "model", "model": 3, "variant": "fp32", "steps": 5}, "'model': got 3"),
    ({"workload": "layer_norm", "model": "m.py:f", "variant": "layernorm", "steps": 5}, "'model': only the model"),
    ({"workload": "model", "model": "m.py:f", "variant": "bf16", "amp": "fp16", "steps": 20}, "'amp': got 'fp16'"),
    ({"workload": "model", "model": "m.py:f", "variant": "fp32", "steps": 20, "size": {}}, "'size': the model"),
])
def test_bad_model_presets_name_the_field(data, field):
    with pytest.raises(PresetError, match=field):
        parse(data, "bad")


def test_model_presets_one_a_variant_named_after_the_model():
    ps = mp.presets_for("examples/vit.py:build", steps=7)
    assert [p.config for p in ps] == [v.config for v in MODEL.points]
    assert ps[0].name == "vit:build/fp32" and all(p.model == "examples/vit.py:build" and p.steps == 7 for p in ps)
    with pytest.raises(user_model.ModelSpecError, match="expected FILE.py:FUNC"):
        mp.presets_for("examples/vit.py")


def test_the_example_in_docs_your_model_runs(tmp_path):
    import re

    code = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "your-model.md").read_text(), re.S)[0]
    (tmp_path / "doc_model.py").write_text(code)
    w = ModelWorkload(f"{tmp_path / 'doc_model.py'}:build", "bf16", "cpu", lr=1e-3, seed=0, steps=2)
    assert math.isfinite(float(w.step(NoMark())[0])) and w.check.passed


def test_a_package_module_spec_loads_like_a_file(tmp_path, monkeypatch):
    (tmp_path / "mymodels").mkdir()
    (tmp_path / "mymodels" / "__init__.py").write_text("")
    (tmp_path / "mymodels" / "tiny.py").write_text((ROOT / "examples" / "gpt.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = user_model.load_function("mymodels.tiny:build")
    assert user_model.takes_small(fn) and user_model.model_name("mymodels.tiny:build") == "tiny:build"
    setup = user_model.call_build(fn, "mymodels.tiny:build", small=True)
    assert isinstance(setup, apextui.ModelSetup)
    user_model.validate_static("mymodels.tiny:build")
    with pytest.raises(user_model.ModelSpecError, match="no module named 'mymodels.absent'"):
        user_model.load_function("mymodels.absent:build")
    with pytest.raises(user_model.ModelSpecError, match="has no function 'make'"):
        user_model.load_function("mymodels.tiny:make")


def test_a_compile_is_static_only_where_every_batch_has_one_shape():
    from apextui.core.workloads.model_workload import one_shape

    same = [(torch.zeros(2, 4), {"y": torch.zeros(2)}) for _ in range(3)]
    assert one_shape(same)
    assert not one_shape([*same, (torch.zeros(3, 4), {"y": torch.zeros(3)})])  # a shorter last batch, say
