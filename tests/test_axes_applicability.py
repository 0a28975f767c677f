"""The memory format, attention backend and loss axes, Liger's norms and coordinate-descent tuning (issue 39): each new
value's availability on CPU and on a faked CUDA device (with its reason), what the model must have for a value to
apply (a 2-D convolution, an SDPA call in one forward, a causal LM's own loss) and the search's values pruned by it,
Liger's swap by the norm finder with a stand-in for Liger (it is Triton/CUDA only), its family patch undone for the
next run, and the values that run on CPU run for real (channels_last, the flash and math SDPA kernels)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from apextui.core import model_presets as mp
from apextui.core.availability import availability
from apextui.core.config import needs
from apextui.core.config.axes import Scope, axis
from apextui.core.config.point import BASELINE, parse, single_changes
from apextui.core.workloads import apply, liger, norm_swap, traits
from apextui.core.workloads.model_workload import ModelWorkload, UserCodeError
from helpers import ROOT

EX = ROOT / "examples"
GPT, LLAMA, VIT = (f"{EX / name}.py:build" for name in ("gpt", "llama", "vit"))
HF_LLAMA = f"{EX / 'hf.py'}:llama"


def on(device: str, text: str):
    return availability(mp.config_preset("m.py:build", parse(text)), device)


# ---- availability: CPU, and a faked CUDA device -------------------------------------------------------------------
@pytest.mark.parametrize("text", ["memory_format=channels_last", "attention=flash", "attention=math"])
def test_the_values_torch_runs_on_cpu_are_available_there(text):
    assert on("cpu", text).ok


@pytest.mark.parametrize("text, says", [
    ("attention=efficient", "memory-efficient attention kernel is CUDA only"),
    ("attention=cudnn", "cuDNN attention is a CUDA kernel"),
    ("norms=liger", "Liger-Kernel's kernels are Triton kernels for CUDA GPUs"),
    ("loss=liger_flce", "Liger-Kernel's kernels are Triton kernels for CUDA GPUs"),
    ("compile=coordinate-descent", "tunes inductor's Triton kernels (CUDA); on CPU"),
])
def test_the_cuda_only_values_say_why_on_cpu(text, says):
    a = on("cpu", text)
    assert not a.ok and says in a.reason and a.fix and "\n" not in a.reason


@pytest.fixture
def fake_cuda(monkeypatch):
    """A CUDA device as the checks see it: its compute capability and cuDNN version are the test's to set."""
    gpu = types.SimpleNamespace(capability=(9, 0), cudnn=91000)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: gpu.capability)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: gpu.cudnn)
    return gpu


def test_on_cuda_the_attention_backends_need_what_the_gpu_has(fake_cuda):
    for text in ("attention=flash", "attention=cudnn", "attention=efficient"):
        assert needs.needs_availability(parse(text).needs, "cuda").ok, text
    fake_cuda.capability = (7, 5)
    flash = needs.needs_availability(parse("attention=flash").needs, "cuda")
    assert not flash.ok and "compute capability >= 8.0; this one is 7.5" in flash.reason and "efficient" in flash.fix
    assert needs.needs_availability(parse("attention=efficient").needs, "cuda").ok  # the one a Turing GPU has
    fake_cuda.capability, fake_cuda.cudnn = (9, 0), 8907
    cudnn = needs.needs_availability(parse("attention=cudnn").needs, "cuda")
    assert not cudnn.ok and "needs cuDNN 9 or newer; this torch has cuDNN 8.9" in cudnn.reason


def test_flash_and_cudnn_attention_need_half_precision_on_cuda_only():
    assert parse("attention=flash").conflict("cpu") is None  # torch's CPU flash kernel takes fp32
    for text in ("attention=flash", "attention=cudnn"):
        why = parse(text).conflict("cuda")
        assert why is not None and "fp16 or bf16 inputs only on cuda; this point runs precision=fp32" in why
        assert parse(f"{text},precision=bf16").conflict("cuda") is None
        assert parse(f"{text},precision=fp8").conflict("cuda") is None  # fp8 runs under bf16 autocast
    assert parse("attention=efficient").conflict("cuda") is None


def test_liger_on_cuda_needs_its_package_and_says_how_to_install_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "liger_kernel" else real(name))
    missing = needs.liger_availability("cuda")
    assert not missing.ok and "not installed" in missing.reason and "pip install liger-kernel" in missing.fix
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "liger_kernel" else real(name))
    assert needs.liger_availability("cuda").ok and needs.triton_availability("cuda").ok


# ---- what the model has: an SDPA call, a 2-D convolution -----------------------------------------------------------
class Attends(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()


def test_an_sdpa_call_is_counted_however_the_model_makes_it():
    x = torch.randn(2, 5, 8)
    with traits.count_sdpa() as direct:
        Attends()(x)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)  # inside nn.MultiheadAttention's own function
    with traits.count_sdpa() as inside:
        nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).train()(x)
    with traits.count_sdpa() as none:
        nn.Sequential(nn.Linear(8, 8), nn.GELU())(x)
    assert (direct.calls, inside.calls, none.calls) == (1, 2, 0)
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention  # put back


def test_2d_convolutions_are_counted_and_1d_ones_are_not():
    assert traits.count_convs(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 1))) == 2
    assert traits.count_convs(nn.Sequential(nn.Conv1d(3, 4, 3), nn.Linear(4, 4))) == 0


@pytest.mark.slow
def test_the_probe_finds_each_examples_traits_and_availability_says_what_does_not_apply():
    vit, gpt = mp.probe(VIT, "cpu"), mp.probe(GPT, "cpu")
    assert vit.traits == {"conv2d", "sdpa", "norms"} and vit.convs == 1 and vit.sdpa_calls == 2
    assert gpt.traits == {"sdpa", "norms"} and gpt.convs == 0 and gpt.sdpa_calls == 2
    no_conv = mp.model_availability(mp.config_preset(GPT, parse("memory_format=channels_last")), "cpu", gpt)
    assert not no_conv.ok and "no 2-D convolution" in no_conv.reason
    assert mp.model_availability(mp.config_preset(VIT, parse("memory_format=channels_last")), "cpu", vit).ok
    flce = mp.model_availability(mp.config_preset(GPT, parse("loss=liger_flce")), "cpu", gpt)
    assert not flce.ok  # on CPU Liger is unavailable first; off CPU, the loss's form (a loss_fn) rules it out
    assert not needs.applies_availability(parse("loss=liger_flce").values(), gpt.traits).ok


@pytest.mark.slow
def test_a_hugging_face_causal_lm_computing_its_own_loss_takes_ligers_fused_loss():
    pytest.importorskip("transformers")
    facts = mp.probe(HF_LLAMA, "cpu")
    assert facts.traits == {"sdpa", "norms", "causal_lm_loss"} and facts.model_type == "llama"
    assert needs.applies_availability(parse("loss=liger_flce").values(), facts.traits).ok


def test_the_search_never_tries_a_value_that_does_not_apply_to_the_model():
    gpt = frozenset({"sdpa", "norms"})
    on_gpu = single_changes(BASELINE, Scope("model", gpt, "cuda"))
    changed = {(a, getattr(c, a).name) for c in on_gpu for a in c.changes()}
    assert ("memory_format", "channels_last") not in changed and ("loss", "liger_flce") not in changed
    # flash and cuDNN at fp32 on CUDA cannot run: not a single change there (the ascent tries them on bf16 points)
    assert {("attention", "efficient"), ("attention", "math")} <= changed
    assert not {("attention", "flash"), ("attention", "cudnn")} & changed
    assert [v.name for v in axis("attention").values_for(Scope("model", frozenset({"conv2d"})))] == ["default"]
    assert "channels_last" in axis("memory_format").values_for(Scope("model", frozenset({"conv2d"}))).__repr__()
    unknown = single_changes(BASELINE, "model")  # the TUI's search: the model's traits are not known
    assert len(unknown) == len(single_changes(BASELINE, Scope("model", None, "")))
    assert any(c.memory_format == "channels_last" for c in unknown)


# ---- Liger's norms: the finder's swap with a stand-in, the family patch undone ---------------------------------
class LlamaRMSNorm(nn.Module):
    """transformers' own RMSNorm as it is written: `weight` and `variance_epsilon`."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


class LlamaLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList(nn.ModuleDict({"input_layernorm": LlamaRMSNorm(8, 1e-5), "mlp": nn.Linear(8, 8)})
                                    for _ in range(2))
        self.norm = LlamaRMSNorm(8, 1e-5)
        self.head_norm = nn.LayerNorm(8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = x + layer["mlp"](layer["input_layernorm"](x))
        return self.head_norm(self.norm(x)).sum()


@pytest.fixture
def stand_in_liger(monkeypatch):
    """Liger-Kernel as far as the swap reads it, in torch (Liger itself is Triton kernels for CUDA): LigerRMSNorm and
    LigerLayerNorm with Liger's constructors, and its table of family patches (`table`, empty until a test fills it)."""
    class LigerRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones", in_place=True,
                     row_mode=None, elementwise_affine=True):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size)) if elementwise_affine else None
            self.variance_epsilon = eps

        def forward(self, x):
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.variance_epsilon)

    class LigerLayerNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6, bias=False, init_fn="ones"):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.bias = nn.Parameter(torch.zeros(hidden_size))
            self.variance_epsilon = eps

        def forward(self, x):
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.variance_epsilon)

    transformers_mod = types.ModuleType("liger_kernel.transformers")
    transformers_mod.LigerRMSNorm, transformers_mod.LigerLayerNorm = LigerRMSNorm, LigerLayerNorm
    monkey = types.ModuleType("liger_kernel.transformers.monkey_patch")
    monkey.MODEL_TYPE_TO_APPLY_LIGER_FN = {}
    for name, module in (("liger_kernel", types.ModuleType("liger_kernel")),
                         ("liger_kernel.transformers", transformers_mod),
                         ("liger_kernel.transformers.monkey_patch", monkey)):
        monkeypatch.setitem(sys.modules, name, module)
    return types.SimpleNamespace(rms=LigerRMSNorm, layer=LigerLayerNorm, table=monkey.MODEL_TYPE_TO_APPLY_LIGER_FN)


def test_ligers_norms_replace_an_hf_llama_like_models_norms_found_by_what_they_compute(stand_in_liger):
    torch.manual_seed(0)
    model = LlamaLike()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # weights that are not ones: a swap that dropped them would show
    ids = torch.randint(0, 16, (2, 5))
    before = model(ids)
    names = norm_swap.swap_norms(model, kernels="liger")
    assert sorted(names) == ["head_norm", "layers.0.input_layernorm", "layers.1.input_layernorm", "norm"]
    assert isinstance(model.norm, stand_in_liger.rms) and isinstance(model.head_norm, stand_in_liger.layer)
    assert model.norm.variance_epsilon == 1e-5 and model.head_norm.variance_epsilon == 1e-5
    assert torch.allclose(model(ids), before, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="kernels='triton': allowed: apex, liger"):
        norm_swap.swap_norms(model, kernels="triton")  # type: ignore[arg-type]


def test_ligers_family_patch_is_used_for_an_hf_model_and_undone_for_the_next_run(stand_in_liger):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    calls: list[dict] = []

    def apply_liger_kernel_to_llama(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, rms_norm=True,
                                    swiglu=True, model=None):
        calls.append(dict(rope=rope, cross_entropy=cross_entropy, flce=fused_linear_cross_entropy,
                          rms_norm=rms_norm, swiglu=swiglu, model=model))
        modeling_llama.apply_rotary_pos_emb = lambda *a, **k: None  # as Liger rebinds names in transformers' module

    stand_in_liger.table["llama"] = apply_liger_kernel_to_llama
    rope = modeling_llama.apply_rotary_pos_emb
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        vocab_size=32))
    names = norm_swap.swap_norms(model, kernels="liger")
    assert len(names) == 3 and calls[-1] == dict(rope=True, cross_entropy=False, flce=False, rms_norm=True,
                                                  swiglu=True, model=model)
    liger.fused_linear_cross_entropy(model)
    assert calls[-1]["flce"] and not calls[-1]["rms_norm"] and not calls[-1]["rope"]
    assert modeling_llama.apply_rotary_pos_emb is not rope
    apply.undo_patches()  # what ModelWorkload does before it builds anything
    assert modeling_llama.apply_rotary_pos_emb is rope
    with pytest.raises(ValueError, match="Liger-Kernel has no patch for LlamaLike"):
        liger.fused_linear_cross_entropy(LlamaLike())


# ---- the values that run on CPU, for real --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("text", ["memory_format=channels_last", "attention=math", "attention=flash"])
def test_the_values_that_run_on_cpu_pass_the_check_on_a_model_they_apply_to(text):
    spec = VIT if "memory" in text else LLAMA  # the Llama example has no dropout, which the CPU flash kernel lacks
    w = ModelWorkload(spec, parse(text), "cpu", lr=1e-3, seed=0, steps=2)
    assert w.check is not None and w.check.passed, w.check
    if "memory" in text:
        assert w.model.embed.weight.is_contiguous(memory_format=torch.channels_last)
        assert torch.backends.cudnn.benchmark
        ModelWorkload(spec, "fp32", "cpu", lr=1e-3, seed=0, steps=2)  # the next run in this process
        assert not torch.backends.cudnn.benchmark


@pytest.mark.slow
def test_a_value_that_does_not_apply_fails_the_run_with_why():
    with pytest.raises(ValueError, match="memory_format=channels_last does not apply: the model has no 2-D conv"):
        ModelWorkload(GPT, parse("memory_format=channels_last"), "cpu", lr=1e-3, seed=0, steps=2)


@pytest.mark.slow
@pytest.mark.parametrize("text, why", [
    ("attention=efficient", "No viable backend"),  # CUDA only: on CPU torch has no kernel of it at all
    ("attention=flash", "Flash attention kernel not used because: Both fused kernels do not support non-zero dropout"),
])
def test_a_backend_torch_has_no_kernel_of_fails_with_one_clear_line_and_torchs_reasons(text, why):
    """The GPT example's attention has dropout, which torch's CPU flash kernel does not take."""
    value = parse(text).attention.name
    with pytest.raises(apply.NotApplicable) as e:  # the configuration's limit, not the user's code failing
        ModelWorkload(GPT, parse(text), "cpu", lr=1e-3, seed=0, steps=2)
    assert not isinstance(e.value, UserCodeError)
    said = str(e.value)
    assert said.startswith(f"attention={value}: torch's {value} SDPA kernel cannot take this model's attention call")
    assert why in said and "Traceback" not in said and "\n" not in said and "attention=default" in said


def test_coordinate_descent_is_an_option_of_its_compile_alone(monkeypatch):
    """torch.compile gets inductor's option for that compile (mode and options exclude each other), never the global
    config a later run in the same process would inherit."""
    import torch._inductor.config as inductor

    seen: list[dict] = []
    monkeypatch.setattr(torch, "compile", lambda module, **kw: seen.append(kw) or module)
    apply.compiled(nn.Linear(2, 2), parse("compile=coordinate-descent"), dynamic=False)
    apply.compiled(nn.Linear(2, 2), parse("compile=default"))
    assert seen == [{"options": {"coordinate_descent_tuning": True}, "dynamic": False}, {"mode": "default"}]
    assert not inductor.coordinate_descent_tuning
    assert apply.compile_mode(parse("compile=coordinate-descent")) == "default"


def test_channels_last_moves_every_4d_tensor_of_a_batch_and_nothing_else():
    images, ids = torch.randn(2, 3, 4, 4), torch.zeros(2, 3, dtype=torch.long)
    moved = apply.channels_last({"pixel_values": images, "labels": ids, "pair": (images, [images])})
    assert moved["pixel_values"].is_contiguous(memory_format=torch.channels_last)
    assert moved["labels"] is ids and all(t.is_contiguous(memory_format=torch.channels_last)
                                          for t in (moved["pair"][0], moved["pair"][1][0]))
    assert torch.equal(moved["pixel_values"], images)  # the layout, not the values


def test_a_forward_that_hangs_never_holds_up_the_probe(tmp_path, monkeypatch):
    """The probe's one forward runs in a thread of its own and is given `PROBE_FORWARD_S`: a model whose forward never
    returns leaves its SDPA calls unknown (the attention axis is not ruled out) instead of hanging advise before its
    budget starts to count the runs (tests/test_advise_budget_cli.py's hung step)."""
    flag = tmp_path / "release"
    (tmp_path / "hung.py").write_text(f'''import time
from pathlib import Path

import torch
from torch import nn

from apextui import ModelSetup


class Hung(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        while not Path({str(flag)!r}).exists():
            time.sleep(0.05)
        return self.lin(x).mean()


def build(small=False):
    return ModelSetup(model=Hung(), make_batch=lambda device, g: torch.randn(2, 4, device=device, generator=g))
''')
    monkeypatch.setattr(mp, "PROBE_FORWARD_S", 0.5)
    try:
        facts = mp.probe(f"{tmp_path / 'hung.py'}:build", "cpu")
    finally:
        flag.write_text("")  # the probe's thread returns and ends
    assert facts.sdpa_calls is None and facts.traits is not None and "sdpa" in facts.traits
