"""The user's model's correctness check and its norm finder (issue 26): the check runs fp32 and the variant on the
same random stream, so dropout draws the same masks (or is off for the check where it cannot), puts BatchNorm's
running stats back, still fails a wrong variant and names the cause; the norm finder recognises norms by what
they compute; the errors users hit with real models (a loss of None, every parameter frozen)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from apextui.core.measure.details import CorrectnessCheck
from apextui.core import model_presets as mp
from apextui.core.workloads import model_workload as model_mod
from apextui.core.workloads import norm_swap
from apextui.core.workloads.model_workload import ModelWorkload, UserCodeError
from apextui.core.workloads.user_model import ModelSpecError
from helpers import ROOT, cli_in_process, json_lines

GPT = str(ROOT / "examples" / "gpt.py") + ":build"
LLAMA = str(ROOT / "examples" / "llama.py") + ":build"


def model_file(tmp_path, body: str, name: str = "m.py") -> str:
    f = tmp_path / name
    f.write_text("import torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
                 "from apextui import ModelSetup\n" + body)
    return f"{f}:build"


# ---- the check: same random stream, dropout, BatchNorm, a wrong variant ------------------------------------
@pytest.mark.parametrize("variant", ["bf16", "fp16", "adamw_fused", "adamw_foreach"])
def test_the_check_passes_a_model_with_dropout_on_the_same_masks(variant):
    w = ModelWorkload(GPT, variant, "cpu", lr=1e-3, seed=0, steps=1)
    assert w.check.passed, w.check
    assert w.check.dropout == "same_masks" and w.check.note is None
    # the same masks: the first step's loss (before any optimizer step) is fp32's up to the arithmetic
    assert abs(w.check.losses[0] - w.check.baseline_losses[0]) <= w.check.tolerance / 10


def test_the_check_is_the_same_whatever_random_numbers_were_drawn_before():
    a = ModelWorkload(GPT, "adamw_fused", "cpu", lr=1e-3, seed=0, steps=1)
    torch.rand(1000)  # as another run in the same process (advise) would
    b = ModelWorkload(GPT, "adamw_fused", "cpu", lr=1e-3, seed=0, steps=1)
    assert a.check.losses == b.check.losses and a.check.baseline_losses == b.check.baseline_losses


def test_the_check_does_not_change_the_random_stream_of_the_measured_steps():
    torch.manual_seed(5)
    ModelWorkload(GPT, "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    after_check = torch.rand(3)
    torch.manual_seed(5)
    ModelWorkload(GPT, "fp32", "cpu", lr=1e-3, seed=0, steps=1)  # no check at all
    assert torch.equal(after_check, torch.rand(3))


BN = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn, self.drop, self.out = nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.2), nn.Linear(8, 1)
    def forward(self, x):
        return self.out(self.drop(torch.relu(self.bn(self.fc(x)))))

def build(small=False):
    return ModelSetup(model=Net(), make_batch=lambda d, g: (torch.randn(8, 4, device=d, generator=g),
                      torch.randn(8, 1, device=d, generator=g)), loss_fn=F.mse_loss)
'''


def test_batchnorm_running_stats_are_put_back_after_the_check(tmp_path):
    spec = model_file(tmp_path, BN)
    plain = ModelWorkload(spec, "fp32", "cpu", lr=1e-3, seed=0, steps=1)  # no check: the stats as built
    checked = ModelWorkload(spec, "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    assert checked.check.passed and checked.check.dropout == "same_masks", checked.check
    for (k, a), (_, b) in zip(plain.model.state_dict().items(), checked.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert int(checked.model.bn.num_batches_tracked) == 0


WRONG_UNDER_AUTOCAST = '''
class Net(nn.Module):
    """A model whose reduced-precision path is wrong: under autocast its output is off by 2."""
    def __init__(self):
        super().__init__()
        self.fc, self.drop, self.out = nn.Linear(4, 16), nn.Dropout(0.1), nn.Linear(16, 1)
    def forward(self, x):
        y = self.out(self.drop(torch.relu(self.fc(x))))
        return y + 2.0 if torch.is_autocast_enabled(x.device.type) else y

def build(small=False):
    return ModelSetup(model=Net(), make_batch=lambda d, g: (torch.randn(8, 4, device=d, generator=g),
                      torch.randn(8, 1, device=d, generator=g) * 3), loss_fn=F.mse_loss)
'''


def test_a_wrong_variant_still_fails_and_the_message_names_the_step_and_the_tolerance(tmp_path):
    w = ModelWorkload(model_file(tmp_path, WRONG_UNDER_AUTOCAST), "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    c = w.check
    assert not c.passed and c.max_abs_err > c.tolerance
    # with dropout on it failed, so it was checked again with dropout off: still wrong, so arithmetic is blamed
    assert c.dropout == "disabled_for_check" and c.note is None
    assert "at step 1" in c.message and "tolerance 0.05 x scale" in c.message, c.message
    assert "dropout off for the check" in c.message


OTHER_MASKS = '''
class Net(nn.Module):
    """Right arithmetic, but under autocast it draws one extra random number first: other dropout masks."""
    def __init__(self):
        super().__init__()
        self.fc, self.drop, self.out = nn.Linear(4, 64), nn.Dropout(0.5), nn.Linear(64, 1)
    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):
            torch.rand(1, device=x.device)
        return self.out(self.drop(torch.relu(self.fc(x))))

def build(small=False):
    return ModelSetup(model=Net(), make_batch=lambda d, g: (torch.randn(8, 4, device=d, generator=g),
                      torch.zeros(8, 1, device=d)), loss_fn=F.mse_loss)
'''


def test_a_variant_that_draws_other_masks_passes_with_dropout_off_and_the_record_says_so(tmp_path):
    w = ModelWorkload(model_file(tmp_path, OTHER_MASKS), "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    c = w.check
    assert c.passed and c.dropout == "disabled_for_check", c
    assert c.same_masks_max_abs_err > c.tolerance and "other dropout masks" in c.note
    # its JSON as the check has always written it: the retry's note last, after the error with the same masks
    assert list(c.to_dict())[-2:] == ["same_masks_max_abs_err", "note"] and CorrectnessCheck.from_dict(c.to_dict()) == c
    assert w.model.drop.p == 0.5  # the measured steps keep the user's dropout


def test_a_model_without_dropout_says_none_found(tmp_path):
    spec = model_file(tmp_path, BN.replace("nn.Dropout(0.2)", "nn.Identity()"))
    assert ModelWorkload(spec, "bf16", "cpu", lr=1e-3, seed=0, steps=1).check.dropout == "none_found"


def test_dropout_disabled_for_the_check_is_put_back():
    from apextui.core.workloads import dropout

    model = ModelWorkload(GPT, "fp32", "cpu", lr=1e-3, seed=0, steps=1).model
    assert dropout.has_dropout(model)
    with dropout.disabled(model):
        assert not dropout.has_dropout(model)
        assert model.blocks[0].attn_dropout == 0.0 and model.drop.p == 0.0
    assert model.blocks[0].attn_dropout == 0.1 and model.drop.p == 0.1


@pytest.mark.slow  # a CLI run (in this process)
def test_a_failed_check_is_an_error_in_json_and_exit_4(tmp_path):
    spec = model_file(tmp_path, WRONG_UNDER_AUTOCAST)
    proc = cli_in_process("--model", spec, "--variant", "bf16", "--json", "--device", "cpu", "--steps", "3")
    assert proc.returncode == 4, proc.stderr
    end = json_lines(proc.stdout)[-1]
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["median_ms"] is not None
    assert end["check_error"].startswith("failed the correctness check against fp32: the loss differs from fp32's")
    assert "failed the correctness check" in proc.stderr and "Traceback" not in proc.stderr


# ---- the norm finder --------------------------------------------------------------------------------------
class HandRMSNorm(nn.Module):
    """What LLM codebases write."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaRMSNormLike(nn.Module):
    """As HF's LlamaRMSNorm: fp32 compute, cast back, `variance_epsilon`."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight, self.variance_epsilon = nn.Parameter(torch.ones(hidden)), eps

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(dtype)


class T5LayerNormLike(LlamaRMSNormLike):
    """As HF's T5LayerNorm (an RMSNorm by another name, weight cast to half precision where it is)."""

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class OnePlusWeightNorm(HandRMSNorm):
    """A look-alike (as Gemma's): weight and eps, but it scales by 1 + weight; a ones weight would hide it."""

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight)


class ScaleByWeight(nn.Module):
    """Weight and eps, no normalisation at all."""

    def __init__(self, dim):
        super().__init__()
        self.weight, self.epsilon = nn.Parameter(torch.ones(dim)), 1e-5

    def forward(self, x):
        return x * self.weight + self.epsilon


def test_the_finder_recognises_norms_by_what_they_compute():
    model = nn.Sequential(nn.LayerNorm(8), nn.RMSNorm(8), HandRMSNorm(8), LlamaRMSNormLike(8), T5LayerNormLike(8),
                          OnePlusWeightNorm(8), ScaleByWeight(8), nn.LayerNorm(8, bias=False), nn.Linear(8, 8),
                          nn.BatchNorm1d(3), nn.LayerNorm(8, elementwise_affine=False))
    before = [p.detach().clone() for p in model.parameters()]
    report, kinds = norm_swap.find_norms(model)
    c = report.classes
    assert (c["LayerNorm"].found, c["LayerNorm"].swappable, c["LayerNorm"].left_alone) == (3, 2, 1)
    assert "without bias" in c["LayerNorm"].reasons[0]
    for name in ("RMSNorm", "HandRMSNorm", "LlamaRMSNormLike", "T5LayerNormLike"):
        assert (c[name].found, c[name].swappable) == (1, 1), name
    for name in ("OnePlusWeightNorm", "ScaleByWeight"):
        assert (c[name].swappable, c[name].left_alone) == (0, 1) and "matches neither" in c[name].reasons[0]
    assert [kinds[id(model[i])] for i in (0, 1, 2, 3, 4)] == ["layer_norm", "rms_norm", "rms_norm", "rms_norm",
                                                               "rms_norm"]
    assert report.swappable == norm_swap.count_norms(model) == model_mod.count_norms(model) == 6
    for a, b in zip(before, model.parameters(), strict=True):  # the probe never touches the model's weights
        assert torch.equal(a, b)
    assert "1 HandRMSNorm found, 1 swappable" in report.description()


def test_no_norm_names_what_it_saw():
    report, _ = norm_swap.find_norms(nn.Sequential(nn.Linear(4, 4), nn.GroupNorm(2, 4)))
    assert report.swappable == 0
    assert report.unavailable_reason() == "no module computes a LayerNorm or RMSNorm (no norm found; saw: GroupNorm)"


class FakeFusedRMSNorm(nn.Module):
    """A FAKE of apex.normalization.FusedRMSNorm (Apex is GPU-only and not installed here), computed by torch."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape, self.eps = (normalized_shape,), eps
        self.weight = nn.Parameter(torch.ones(normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class FakeFusedLayerNorm(FakeFusedRMSNorm):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine)
        self.bias = nn.Parameter(torch.zeros(normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


@pytest.fixture
def fake_apex(monkeypatch):
    try:
        import apex.normalization  # noqa: F401
        pytest.skip("Apex is installed: tests/test_gpu_model.py swaps the real one")
    except ImportError:
        pass
    apex = types.ModuleType("apex")
    norms = types.ModuleType("apex.normalization")
    norms.FusedLayerNorm, norms.FusedRMSNorm = FakeFusedLayerNorm, FakeFusedRMSNorm
    apex.normalization = norms
    monkeypatch.setitem(sys.modules, "apex", apex)
    monkeypatch.setitem(sys.modules, "apex.normalization", norms)


def test_the_swap_replaces_hand_written_rmsnorms_and_leaves_the_look_alike(fake_apex):
    model = nn.Sequential(LlamaRMSNormLike(8), nn.Linear(8, 8), OnePlusWeightNorm(8))
    with torch.no_grad():
        model[0].weight.uniform_(0.5, 2.0)
        model[2].weight.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 8)
    before = model(x)
    report, _ = norm_swap.find_norms(model)
    assert norm_swap.swap_norms(model, report) == ["0"]
    assert isinstance(model[0], FakeFusedRMSNorm) and isinstance(model[2], OnePlusWeightNorm)
    assert model[0].eps == 1e-6
    torch.testing.assert_close(model(x), before)
    assert report.swapped == {"LlamaRMSNormLike": 1}
    assert report.as_dict()["classes"]["OnePlusWeightNorm"]["left_alone"] == 1


def test_the_llama_example_gets_its_rmsnorms_swapped_and_checked(fake_apex):
    w = ModelWorkload(LLAMA, "fused_norms", "cpu", lr=1e-3, seed=0, steps=1)
    swap = w.check.norm_swap
    assert swap.passed and swap.modules == 5 and swap.norms.classes["RMSNorm"].swapped == 5
    assert w.check.passed, w.check


def test_the_snippets_norm_swap_swaps_the_llama_examples_own_rmsnorms_as_advise_did(fake_apex):
    """The answer's code for norms=apex swapped only `type(m) is nn.LayerNorm / nn.RMSNorm`: on a model with its own
    RMSNorm class (the Llama example's) the pasted code changed nothing. It now calls the swap advise measured."""
    from apextui.core.config.point import parse
    from apextui.core.config.snippet import snippet
    from apextui.core.workloads.user_model import build

    model = build(LLAMA, small=True, seed=0).model
    assert {type(m).__name__ for m in model.modules()} >= {"RMSNorm"}
    setup = snippet(parse("precision=bf16,optimizer=fused,norms=apex")).split("# each step")[0]
    exec(compile(setup, "<snippet>", "exec"), {"model": model, "lr": 1e-3})
    kinds = [type(m).__name__ for m in model.modules()]
    assert "RMSNorm" not in kinds and kinds.count("FakeFusedRMSNorm") == 5


def test_list_model_finds_the_llama_examples_rmsnorms():
    proc = cli_in_process("list", "--model", LLAMA, "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "5 norms Apex could swap (5 RMSNorm found, 5 swappable)" in proc.stdout
    facts = mp.probe(LLAMA, "cpu")
    assert facts.norms == 5 and facts.norm_report["classes"]["RMSNorm"]["found"] == 5


# ---- errors users hit with real models --------------------------------------------------------------------
HF_NO_LABELS = '''
class Out:
    def __init__(self, logits, loss=None):
        self.logits, self.loss = logits, loss

class Net(nn.Module):
    """As a Hugging Face model: a loss only when the batch has labels."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
    def forward(self, input_ids, labels=None):
        logits = self.fc(input_ids)
        return Out(logits, None if labels is None else F.cross_entropy(logits, labels))

def build(small=False):
    return ModelSetup(model=Net(), make_batch=lambda d, g: {"input_ids": torch.randn(2, 4, device=d, generator=g)})
'''


def test_a_loss_of_none_says_to_give_labels_or_a_loss_fn(tmp_path):
    with pytest.raises(UserCodeError, match="loss is None") as info:
        ModelWorkload(model_file(tmp_path, HF_NO_LABELS), "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    assert "`labels` entry, or a loss_fn" in str(info.value) and "\n" not in str(info.value)


FROZEN = '''
def build(small=False):
    model = nn.Linear(4, 1).requires_grad_(False)
    return ModelSetup(model=model, make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                      torch.randn(2, 1, device=d, generator=g)), loss_fn=F.mse_loss)
'''


def test_a_model_with_every_parameter_frozen_is_one_line_at_set_up_and_in_list(tmp_path):
    spec = model_file(tmp_path, FROZEN)
    with pytest.raises(ModelSpecError, match="every parameter of the model is frozen"):
        ModelWorkload(spec, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
    proc = cli_in_process("list", "--model", spec, "--device", "cpu")
    assert proc.returncode == 2 and "every parameter of the model is frozen" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
