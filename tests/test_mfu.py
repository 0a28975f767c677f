"""MFU (measure/mfu.py, workloads/flop_count.py, analysis/peaks.py): the FLOPs a step counted on one forward and
backward and checked against a hand count, the spec-sheet peak table looked up by the names torch and NVML report,
`summary.mfu` in the `end` line (null with a reason on CPU; a value against a fake GPU peak), the count once per
model in a reused worker, and the advice's answer line."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from apextui.core import model_presets as mp
from apextui.core.advise.answer import answer_lines
from apextui.core.analysis import peaks
from apextui.core.config.point import BASELINE
from apextui.core.measure.mfu import Mfu, Peak, StepFlops, mfu
from apextui.core.measure.summary import Summary
from apextui.core.run import events, runner
from apextui.core.run.request import RunRequest
from apextui.core.workloads import flop_count
from apextui.core.workloads import model_workload as model_mod
from apextui.core.workloads.model_workload import ModelWorkload
from helpers import ROOT

# two Linear layers without bias, batch M: x (M, K) -> (M, N) -> (M, P)
M, K, N, P = 8, 16, 32, 4
TWO_LINEARS = f"""
import torch
from torch import nn
from apextui import ModelSetup

def build(small=False):
    model = nn.Sequential(nn.Linear({K}, {N}, bias=False), nn.Linear({N}, {P}, bias=False))
    return ModelSetup(model=model, loss_fn=nn.functional.mse_loss,
                      make_batch=lambda d, g: (torch.randn({M}, {K}, device=d, generator=g),
                                               torch.randn({M}, {P}, device=d, generator=g)))
"""
# by hand: a product of (m, k) by (k, n) is 2·m·k·n FLOPs. Forward: 2·M·K·N + 2·M·N·P. Backward: the second layer's
# weight gradient and its input's gradient, 2·M·N·P each; the first layer's weight gradient only (the batch needs no
# gradient), 2·M·K·N. The loss and the optimizer are no matrix products.
HAND_COUNT = (2 * M * K * N + 2 * M * N * P) + (2 * M * N * P + 2 * M * N * P + 2 * M * K * N)


@pytest.fixture
def two_linears(tmp_path):
    f = tmp_path / "two_linears.py"
    f.write_text(TWO_LINEARS)
    return f"{f}:build"


def _run(spec: str, steps: int = 6):
    preset = mp.config_preset(spec, BASELINE, steps=steps, warmup=2)
    return runner.Runner(RunRequest(preset, "cpu", steps), lambda s: None, analyse=False).run()


# ---- the count ----------------------------------------------------------------------------------------------
def test_the_count_of_a_step_is_the_hand_count_and_the_end_line_has_it_with_no_peak_on_cpu(two_linears):
    final = _run(two_linears)
    assert final is not None and final.status == "ok"
    end = events.end_event(final)
    got = end["summary"]["mfu"]
    assert got["flops_per_step"] == HAND_COUNT and got["flops_source"] == "FlopCounterMode"
    assert got["value"] is None and got["reason"].startswith("no peak on cpu")
    # the achieved TFLOP/s is there without a peak: the hand count over the median step
    assert got["tflops"] == pytest.approx(HAND_COUNT / (got["step_ms"] / 1e3) / 1e12, rel=1e-3)
    assert got["step_ms"] == pytest.approx(end["summary"]["median_ms"], rel=1e-3)
    assert Summary.from_dict(end["summary"]).mfu == Mfu.from_dict(got)


def test_against_a_fake_gpu_peak_the_end_line_says_the_fraction(two_linears, monkeypatch):
    """The peak is a GPU's (a FAKE here, GPU-only): MFU is the hand count over the median step over that peak."""
    fake = 1e-4  # TFLOP/s: a CPU's step of this tiny model is then a fraction of it, as a GPU's would be
    monkeypatch.setattr(runner, "peak", lambda device, name, precision: Peak(fake, precision, gpu="Fake GPU",
                                                                             source="https://example.invalid/spec"))
    final = _run(two_linears)
    got = events.end_event(final)["summary"]["mfu"]
    assert got["reason"] is None and got["precision"] == "fp32" and got["gpu"] == "Fake GPU"
    assert got["peak_tflops"] == fake
    assert got["value"] == pytest.approx(HAND_COUNT / (got["step_ms"] / 1e3) / 1e12 / fake, rel=2e-3)


def test_the_count_leaves_weights_buffers_gradients_and_the_random_stream_as_they_were():
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    x = torch.randn(4, 6)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    flops = flop_count.count_step_flops(model, lambda: model(x).sum(), "cpu")
    assert flops.flops == 2 * 4 * 6 * 8 + 2 * 4 * 8 * 2 + (2 * 4 * 8 * 2) * 2 + 2 * 4 * 6 * 8
    assert torch.equal(torch.get_rng_state(), rng)  # dropout drew from a forked stream
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm's running statistics put back
    assert all(p.grad is None for p in model.parameters())


def test_cpu_attention_is_counted_as_torchs_formula_counts_it_on_a_gpu():
    """torch's counter has no entry for the CPU's flash-attention kernel: counted by torch's own formula, 12·B·H·T²·Q
    forward and backward, the same as the math path (dropout on) counts through its matmuls."""
    b, h, t, q = 2, 4, 16, 8
    qkv = [torch.randn(b, h, t, q, requires_grad=True) for _ in range(3)]
    fused = flop_count.count_step_flops(nn.Module(), lambda: F.scaled_dot_product_attention(*qkv).sum(), "cpu")
    math_path = flop_count.count_step_flops(
        nn.Module(), lambda: F.scaled_dot_product_attention(*qkv, dropout_p=0.1).sum(), "cpu")
    assert fused.flops == math_path.flops == 12 * b * h * t * t * q


@pytest.mark.parametrize("example", ["gpt", "llama"])
def test_a_transformers_count_is_compared_with_nanogpts_estimate_in_a_note(example):
    spec = str(ROOT / "examples" / f"{example}.py") + ":build"
    w = ModelWorkload(spec, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
    note = w.step_flops.note
    assert note is not None and "6N + 12·L·H·Q·T" in note and "L 2, H 2, Q 16, T 16" in note
    ratio = float(note.rsplit("the count is ", 1)[1].split("x")[0])
    assert 0.9 < ratio < 1.1  # the same arithmetic, up to the norms' and biases' parameters in N


def test_a_model_without_attention_has_no_nanogpt_note(two_linears):
    w = ModelWorkload(two_linears, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
    assert w.step_flops.flops == HAND_COUNT and w.step_flops.note is None


def test_nanogpts_n_leaves_out_a_lookup_table_but_counts_a_tied_head():
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(10, 4), nn.Embedding(3, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.tok.weight

    assert flop_count.matmul_params(Tied()) == 40  # the tied table (the head's weight), not the positions'


def test_a_count_that_fails_is_the_reason_and_the_run_goes_on():
    flops = flop_count.counted(nn.Linear(2, 2), lambda: torch.ones(2, requires_grad=False).sum(), "cpu")
    assert flops.flops is None and flops.reason is not None and "RuntimeError" in flops.reason
    assert mfu(flops, 1.0, Peak(989.5, "bf16")).reason == flops.reason


def test_a_reused_worker_counts_each_model_once(two_linears, monkeypatch):
    calls = []
    real = flop_count.counted

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(flop_count, "counted", spy)
    model_mod.reuse_references(True)
    try:
        first = ModelWorkload(two_linears, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
        second = ModelWorkload(two_linears, "bf16", "cpu", lr=1e-3, seed=0, steps=1)
    finally:
        model_mod.reuse_references(False)
    assert len(calls) == 1 and first.step_flops == second.step_flops and first.step_flops.flops == HAND_COUNT
    ModelWorkload(two_linears, "fp32", "cpu", lr=1e-3, seed=0, steps=1)
    assert len(calls) == 2  # a process that runs one model a run counts each run's


# ---- the peak table -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reported, entry, bf16", [
    ("NVIDIA H200", "H200 SXM", 989.5),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.5),
    ("NVIDIA H100 NVL", "H100 NVL", 835.5),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM", 312),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM", 312),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", 312),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe", 312),
    ("NVIDIA L40S", "L40S", 362.05),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 165.2),
])
def test_the_peak_table_finds_a_gpu_by_the_name_torch_and_nvml_report(reported, entry, bf16):
    p = peaks.peak("cuda", reported, "bf16")
    assert (p.gpu, p.tflops, p.reason) == (entry, bf16, None)
    assert p.source is not None and p.source.startswith("https://") and p.device_name == reported


def test_the_peaks_are_dense_with_a_column_per_precision():
    h200 = peaks.entry("NVIDIA H200")
    assert h200 is not None
    # the spec sheet prints 1,979 bf16 TFLOP/s with sparsity; fp32 is the non-tensor rate
    assert dict(h200.tflops) == {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979}
    for g in peaks.TABLE:
        assert set(g.tflops) <= set(peaks.PRECISIONS) and g.source.startswith("https://")
        assert g.tflops["fp32"] <= g.tflops["tf32"] <= g.tflops["bf16"] == g.tflops["fp16"]


@pytest.mark.parametrize("device, name, precision, reason", [
    ("cpu", None, "bf16", "no peak on cpu"),
    ("cuda", "NVIDIA GeForce RTX 3090", "bf16", "NVIDIA GeForce RTX 3090 is not in apextui's peak table"),
    ("cuda", "NVIDIA GH200 480GB", "bf16", "NVIDIA GH200 480GB is not in apextui's peak table"),  # not an H200
    ("cuda", "NVIDIA L40", "bf16", "NVIDIA L40 is not in apextui's peak table"),  # not an L40S
    ("cuda", "NVIDIA GeForce RTX 4090 D", "bf16", "is not in apextui's peak table"),
    ("cuda", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16", "is a MIG slice"),
    ("cuda", "NVIDIA A100-SXM4-80GB", "fp8", "the A100 SXM has no fp8 tensor cores"),
    ("cuda", "NVIDIA H200", "int8", "no peak for precision 'int8'"),
    ("cuda", None, "bf16", "the GPU's name could not be read"),
])
def test_no_peak_is_null_with_a_reason(device, name, precision, reason):
    p = peaks.peak(device, name, precision)
    assert p.tflops is None and p.reason is not None and reason in p.reason
    got = mfu(StepFlops(1e12, "FlopCounterMode"), 10.0, p)
    assert got.value is None and got.reason == p.reason and got.tflops == pytest.approx(100.0)


# ---- the value ------------------------------------------------------------------------------------------------
def test_mfu_is_the_achieved_rate_over_the_peak_and_reads_as_the_answer_says_it():
    got = mfu(StepFlops(3.067e12, "FlopCounterMode"), 10.0, peaks.peak("cuda", "NVIDIA H200", "bf16"))
    assert got.tflops == pytest.approx(306.7) and got.value == pytest.approx(306.7 / 989.5)
    assert got.words() == "31 % of this GPU's bf16 peak"
    assert got.at(20.0).value == pytest.approx(got.value / 2)  # an advice's median of several runs
    again = Mfu.from_dict(got.to_dict())
    assert again is not None and again.to_dict() == got.to_dict()  # as a results file keeps it
    assert Mfu.from_dict({"value": "high", "reason": 3}) == Mfu()  # an odd file's: never raises
    assert Summary.from_dict({"median_ms": 1.0}).mfu is None  # an old summary has none


def test_the_advice_answer_line_says_the_fraction_of_the_peak():
    got = mfu(StepFlops(3.067e12, "FlopCounterMode"), 10.0, peaks.peak("cuda", "NVIDIA H200", "bf16"))
    trial = {"status": "ok"}
    doc = {"search": {"trials": [trial, trial], "spent_s": 10, "budget_s": 300, "stopped_by": "converged",
                      "method": "m"},
           "answer": {"is_baseline": False, "preset": "m/bf16+fused", "label": "bf16+fused",
                      "summary": "bf16 autocast + fused AdamW",
                      "speedup_vs_fp32_text": "2.0x", "best_single": None, "snippet": "", "mfu": got.to_dict()}}
    line = next(x for x in answer_lines(doc) if x.startswith("fastest configuration"))
    assert line == "fastest configuration: bf16+fused (bf16 autocast + fused AdamW) at 31 % of this GPU's bf16 peak"
    doc["answer"]["mfu"] = mfu(StepFlops(3.067e12, "FlopCounterMode"), 10.0, peaks.peak("cpu", None, "bf16")).to_dict()
    line = next(x for x in answer_lines(doc) if x.startswith("fastest configuration"))
    assert line == "fastest configuration: bf16+fused (bf16 autocast + fused AdamW)"  # no peak: nothing claimed


def test_a_measurements_mfu_is_at_its_median_over_its_runs():
    from apextui.core.advise.records import Measurement, RunResult

    one = mfu(StepFlops(1e12, "FlopCounterMode"), 10.0, Peak(200.0, "bf16", gpu="X"))
    runs = tuple(RunResult(i, "ok", Summary(median_ms=ms, measured_steps=20, timed_intervals=20, mfu=one.at(ms)))
                 for i, ms in enumerate((8.0, 10.0, 12.0)))
    m = Measurement("p", "model", runs=runs)
    assert m.median_ms == 10.0 and m.mfu is not None and m.mfu.value == pytest.approx(0.5)


def test_each_precision_has_its_own_column():
    assert peaks.peak("cuda", "NVIDIA H100 80GB HBM3", "tf32").tflops == 494.5
    assert peaks.peak("cuda", "NVIDIA H100 80GB HBM3", "fp32").tflops == 67
    assert peaks.peak("cuda", "NVIDIA L40S", "fp8").tflops == 733


@pytest.mark.parametrize("name", flop_count.FUSED_BACKWARD)
def test_every_fused_attention_backward_counts_the_models_four_products(name):
    """torch's formula counts a fused backward's recomputation of the scores as well (5 products); the model's
    FLOPs are 4: 8·B·H·T_q·T_k·Q. The kernels are GPU ones (but the CPU's): their formulas read only shapes."""
    op = getattr(torch.ops.aten, name, None)
    if op is None:
        pytest.skip(f"this torch has no {name}")
    b, h, s, d = 2, 4, 16, 8
    grad_out, q, k, v = (torch.empty(b, h, s, d, device="meta") for _ in range(4))
    count = flop_count._custom_mapping()[op]
    assert count(grad_out, q, k, v, None, None, None, None, s, s, out_val=None) == 8 * b * h * s * s * d
