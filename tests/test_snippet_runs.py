"""The answer's code runs as measured (issue 37, item 6): pasted into a training loop on CPU it calls the model as
the engine did (a tuple batch and a loss_fn, a model that returns its loss from positional inputs, a Hugging Face
model from a dict batch with its `.loss`), under autocast on the device measured (`device_type="cpu"`, enabled
inside the step, not disabled with a warning), with `GradScaler("cpu")` for fp16; and it trains the same losses
as apextui's own run of the same configuration (same weights, batches and random stream)."""

from __future__ import annotations

import pytest
import torch

from apextui.core.config.calling import Calling, recorded
from apextui.core.config.point import parse
from apextui.core.config.snippet import snippet
from apextui.core.workloads import user_model
from apextui.core.measure.details import CorrectnessCheck
from apextui.core.measure.marker import NoMark
from apextui.core.workloads.model_workload import ModelWorkload
from helpers import ROOT, one_torch_thread  # noqa: F401 - the fixture, used by name below

EX = ROOT / "examples"
GPT, LLAMA, VIT = (f"{EX / name}.py:build" for name in ("gpt", "llama", "vit"))
HF_GPT2 = f"{EX / 'hf.py'}:gpt2"
STEPS = 3
SEED = 11  # the random stream (dropout) both loops start from


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def engine_losses(w: ModelWorkload) -> list[float]:
    torch.manual_seed(SEED)
    return [float(w.step(NoMark())[0]) for _ in range(STEPS)]


def pasted_losses(spec: str, code: str, w: ModelWorkload) -> tuple[list[float], list[bool], dict]:
    """The snippet pasted into a loop: its set-up once on a model built as apextui built it, its step on each of the
    run's first batches; the losses, and whether CPU autocast was on inside each forward."""
    setup, _, rest = code.partition("# each step")
    step = rest.partition("\n")[2]
    built = user_model.build(spec, small=True, seed=0)
    model = built.model
    model.train()
    autocast_on: list[bool] = []
    model.register_forward_pre_hook(lambda m, args: autocast_on.append(torch.is_autocast_enabled("cpu")))
    ns: dict = {"model": model, "lr": w.lr, "loss_fn": built.loss_fn}
    exec(compile(setup, "<snippet set-up>", "exec"), ns)
    torch.manual_seed(SEED)
    losses = []
    for batch in w.batches[:STEPS]:
        ns["batch"] = batch
        exec(compile(step, "<snippet step>", "exec"), ns)
        losses.append(float(ns["loss"].detach()))
    return losses, autocast_on, ns


def run_case(spec: str, text: str) -> tuple[str, dict, list[float], list[float], list[bool], Calling | None]:
    """apextui's own run of the configuration (its first steps) and the answer's code for it, pasted."""
    config = parse(text)
    w = ModelWorkload(spec, config, "cpu", lr=1e-3, seed=0, steps=STEPS)
    assert w.check is not None and w.check.passed, w.check
    calling = recorded([w.check])
    code = snippet(config, calling=calling, device="cpu")
    mine = engine_losses(w)
    pasted, autocast_on, ns = pasted_losses(spec, code, w)
    return code, ns, mine, pasted, autocast_on, calling


CASES = [  # (spec, configuration, the calling convention the run records, the line that computes the loss)
    (GPT, "precision=bf16", Calling("one", "loss_fn"), "loss = loss_fn(model(inputs), targets)"),
    (LLAMA, "precision=fp16,optimizer=fused", Calling("one", "loss_fn"), "loss = loss_fn(model(inputs), targets)"),
    (VIT, "precision=bf16,optimizer=foreach", Calling("positional", "returned"), "loss = model(*batch)"),
]


@pytest.mark.parametrize(("spec", "text", "calling", "line"), CASES, ids=["gpt-bf16", "llama-fp16", "vit-bf16"])
def test_the_pasted_code_trains_the_examples_as_apextui_did(spec, text, calling, line):
    code, ns, mine, pasted, autocast_on, recorded_calling = run_case(spec, text)
    assert recorded_calling == calling and line in code, code
    assert pasted == pytest.approx(mine, rel=1e-5, abs=1e-6)
    assert autocast_on and all(autocast_on), "autocast was not on inside the pasted step"


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "text"), [(VIT, "memory_format=channels_last"), (GPT, "attention=math"),
                                            (LLAMA, "attention=flash,precision=bf16")],
                         ids=["vit-channels_last", "gpt-sdpa_math", "llama-sdpa_flash"])
def test_the_pasted_layout_and_attention_backend_train_as_apextui_did(spec, text):
    """channels_last (the model's weights and each batch's 4-D tensors) and an SDPA backend (the forward under
    `sdpa_kernel`, torch's CPU flash kernel for the dropout-free Llama example) run on CPU: pasted, they train the
    losses apextui's own run trained, with the model's convolution in channels_last."""
    from torch.nn.attention import SDPBackend

    config = parse(text)
    code, ns, mine, pasted, _, _ = run_case(spec, text)
    assert pasted == pytest.approx(mine, rel=1e-5, abs=1e-6)
    if config.channels_last:
        assert "batch = to_channels_last(batch)" in code and "apextui" not in code
        assert ns["model"].embed.weight.is_contiguous(memory_format=torch.channels_last)
        assert ns["batch"][0].is_contiguous(memory_format=torch.channels_last)  # the last batch, as the step moved it
    else:
        assert ns["SDPBackend"] is SDPBackend and f"sdpa_kernel(SDPBackend.{config.attention.name.upper()}" in code
    assert 'device_type="cuda"' not in code and 'GradScaler("cuda")' not in code
    if "fp16" in text:
        assert 'scaler = GradScaler("cpu")' in code
        assert isinstance(ns["scaler"], torch.amp.GradScaler) and ns["scaler"]._device == "cpu"


@pytest.mark.slow
@pytest.mark.parametrize("text", ["precision=bf16,optimizer=fused", "precision=fp16"])
def test_the_pasted_code_trains_a_hugging_face_model_from_its_dict_batch_with_its_own_loss(text):
    """transformers' GPT-2 (built from a config, CPU size): a dict batch with labels, a ModelOutput with `.loss`.
    The old snippet said `loss = loss_fn(compiled(inputs), targets)`: there is no loss_fn, and no (inputs, targets)."""
    code, ns, mine, pasted, autocast_on, calling = run_case(HF_GPT2, text)
    assert calling == Calling("keyword", "attribute")
    assert "loss = model(**batch).loss" in code and "loss_fn" not in code, code
    assert pasted == pytest.approx(mine, rel=1e-5, abs=1e-6)
    assert autocast_on and all(autocast_on)
    assert ("GradScaler(\"cpu\")" in code) == ("fp16" in text)


DICT_LOSS = '''
class Net(nn.Module):
    """Returns a plain dict with its loss, from keyword inputs."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
    def forward(self, x, y):
        return {"loss": F.mse_loss(self.fc(x), y), "pred": self.fc(x)}

def build(small=False):
    return ModelSetup(model=Net(), make_batch=lambda d, g: {"x": torch.randn(8, 4, device=d, generator=g),
                                                            "y": torch.randn(8, 1, device=d, generator=g)})
'''


def test_a_model_that_returns_a_dict_gets_its_loss_entry(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
                 "from apextui import ModelSetup\n" + DICT_LOSS)
    code, _, mine, pasted, autocast_on, calling = run_case(f"{f}:build", "precision=bf16")
    assert calling == Calling("keyword", "key")
    assert 'loss = model(**batch)["loss"]' in code
    assert pasted == pytest.approx(mine, rel=1e-5, abs=1e-6) and all(autocast_on)


def test_the_snippet_writes_each_calling_convention_and_the_device():
    c = parse("precision=fp16,compile=default")
    lines = {calling: snippet(c, calling=calling, device="cpu") for calling in
             (Calling("keyword", "attribute"), Calling("positional", "loss_fn"), Calling("one", "returned"))}
    assert "loss = compiled(**batch).loss" in lines[Calling("keyword", "attribute")]
    assert "inputs, targets = batch\n" in lines[Calling("positional", "loss_fn")]
    assert "loss = loss_fn(compiled(*inputs), targets)" in lines[Calling("positional", "loss_fn")]
    assert "loss = compiled(batch)\n" in lines[Calling("one", "returned")]
    for code in lines.values():
        compile(code, "<snippet>", "exec")
        assert 'torch.autocast(device_type="cpu", dtype=torch.float16)' in code
        assert 'GradScaler("cpu")' in code
    # nothing recorded (only fp32 ran, or a shipped workload): the ModelSetup's documented loss_fn form, on CUDA
    plain = snippet(parse("precision=bf16"))
    assert "loss = loss_fn(model(inputs), targets)" in plain and 'device_type="cuda"' in plain
    assert Calling.from_dict({"inputs": "keyword", "loss": "nope"}) is None
    assert recorded([None, CorrectnessCheck()]) is None


def test_the_advice_writes_the_calling_its_runs_recorded_and_the_device_it_measured_on():
    """The answer is written in the process that ran the advice (the TUI's never imports the model): the calling
    convention comes from the runs' check records, the device from the advice."""
    from dataclasses import replace

    from apextui.core.advise import Advisor
    from apextui.core.availability import Availability
    from apextui.core.config.point import BASELINE
    from apextui.core.model_presets import config_preset
    from test_advise import ENV, Scripted, ScriptedRunner

    def recording(request, cb):  # a scripted run whose info carries the check: fp32 has none (it is the reference)
        runner = ScriptedRunner(engine, request, cb)
        scripted = runner._info

        def info():
            check = None if runner.preset.config == BASELINE else CorrectnessCheck(
                kind="loss_parity", passed=True, calling=Calling("keyword", "attribute"))
            return replace(scripted(), check=check)

        runner._info = info
        return runner

    presets = [config_preset("m.py:build", BASELINE), config_preset("m.py:build", parse("precision=bf16"))]
    engine = Scripted({presets[0].name: [10.0], presets[1].name: [4.0]})
    doc = Advisor("cpu", steps=10, repeats=2, workloads=("model",), presets=presets, env=ENV,
                  availability_fn=lambda p: Availability(True),
                  runner_factory=recording).run()
    code = doc["answer"]["snippet"]
    assert doc["answer"]["label"] == "bf16", doc["answer"]
    assert "loss = model(**batch).loss" in code and 'device_type="cpu"' in code, code
