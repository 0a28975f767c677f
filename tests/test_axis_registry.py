"""An axis is its registry entries alone: a throwaway axis added through `axes.register`, its apply entry
(`apply.register`, at the stage it acts) and its snippet lines (`snippet.register`) is a point's, is offered to the
search, runs in a real CPU run and is written into the answer's code, with nothing else changed (CONTRIBUTING.md's
recipe for an axis names these three files)."""

from __future__ import annotations

import pytest
import torch

from apextui.core import model_presets as mp
from apextui.core.config import axes, snippet
from apextui.core.config.axes import Stage
from apextui.core.config.point import BASELINE, Config, parse, single_changes
from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner
from apextui.core.measure.marker import NoMark
from apextui.core.workloads import apply
from apextui.core.workloads.builders import build
from apextui.core.workloads.stages import Build
from helpers import TINY_MODEL

FROZEN_LINE = "for name, p in model.named_parameters(): p.requires_grad_(not name.endswith('bias'))"


def _freeze_biases(value: axes.Value, build: Build) -> None:
    if value == "frozen":
        for name, p in build.target().named_parameters():
            if name.endswith("bias"):
                p.requires_grad_(False)


@pytest.fixture
def bias_axis():
    """The throwaway axis: whether the model's biases train; it acts on the model's layers."""
    axes.register(axes.Axis("biases", "whether the model's biases train", (
        axes.Value("train", "biases train", ""), axes.Value("frozen", "biases frozen", "frozen_biases"))))
    apply.register("biases", {Stage.LAYERS: _freeze_biases})
    snippet.register("biases", {Stage.LAYERS: {"frozen": [FROZEN_LINE]}})
    yield
    for registry in (snippet, apply, axes):
        registry.unregister("biases")


def test_a_registered_axis_is_every_points_and_the_searchs(bias_axis):
    point = parse("precision=bf16,biases=frozen")
    assert point.biases == "frozen" and point.label == "bf16+frozen_biases"
    assert parse(point.spec()) == point and parse(point.as_dict()) == point
    assert BASELINE.biases == "train" and Config() == BASELINE  # a point made before it reads the default
    assert BASELINE.with_("biases", "frozen") in single_changes(BASELINE, "model")


def test_a_registered_axis_runs_at_its_stage_in_a_real_run(bias_axis, tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(TINY_MODEL)
    preset = mp.config_preset(f"{path}:build", parse("biases=frozen"), steps=6, warmup=1)
    workload = build(preset, "cpu", {}, 6)
    biases = [p for n, p in workload.model.named_parameters() if n.endswith("bias")]
    before = [p.detach().clone() for p in workload.model.parameters()]
    for _ in range(3):
        workload.step(NoMark())
    assert biases and not any(p.requires_grad for p in biases)
    trained = [q for group in workload.opt.param_groups for q in group["params"]]
    assert not any(p is q for p in biases for q in trained)
    after = dict(zip((n for n, _ in workload.model.named_parameters()), workload.model.parameters(), strict=True))
    for (name, now), old in zip(after.items(), before, strict=True):
        assert torch.equal(now, old) == name.endswith("bias"), name  # the biases alone stay where they were
    snaps = []
    runner = Runner(RunRequest(preset, "cpu", 6), snaps.append).start()
    assert runner.join(timeout=120), "the run did not finish"
    assert snaps[-1].status == "ok", snaps[-1].error


def test_a_registered_axis_is_written_into_the_answers_code_at_its_stage(bias_axis):
    code = snippet.snippet(parse("precision=fp8,optimizer=fused,biases=frozen"), device="cpu")
    lines = code.splitlines()
    fp8, frozen, optimizer = (next(i for i, line in enumerate(lines) if text in line)
                              for text in ("convert_to_float8_training(model", FROZEN_LINE, "optimizer = "))
    # the layers stage, after precision's own (the registry's order), before the optimizer
    assert fp8 < frozen < optimizer


def test_the_stages_apply_in_their_declared_order_only():
    build = Build(BASELINE, "cpu").apply(Stage.PROCESS)
    with pytest.raises(RuntimeError, match="out of order: kernels is next"):
        build.apply(Stage.OPTIMIZER, params=[torch.nn.Parameter(torch.zeros(1))])
    build.through(Stage.STEP, model=torch.nn.Linear(2, 2), params=[torch.nn.Parameter(torch.zeros(1))])
    assert isinstance(build.optimizer, torch.optim.AdamW) and build.step.autocast_dtype is None
    with pytest.raises(RuntimeError, match="out of order: compile is next"):
        build.apply(Stage.STEP)


def test_a_shipped_axis_cannot_be_taken_away():
    for registry in (axes, apply, snippet):
        with pytest.raises(ValueError, match="shipped"):
            registry.unregister("precision")


def test_a_registered_axis_changes_no_named_points_name_nor_its_hash(bias_axis):
    """Registering an axis changed every point's hash: the named points' table missed, `fused_amp` read
    `fp16+fused_adam+fused_norms` and `adamw_fused` `fused` (preset names changed)."""
    import pickle

    assert Config(precision="fp16", optimizer="apex", norms="apex").label == "fused_amp"
    assert Config(optimizer="fused").label == "adamw_fused"
    point = parse("precision=bf16,optimizer=fused")
    again = pickle.loads(pickle.dumps(point))
    assert again == point and hash(again) == hash(point)
    # a point off the registered axis's default pickles by its values off the defaults: a process that has not
    # registered the axis reads back every point that leaves it at its default
    assert pickle.loads(pickle.dumps(point)).as_dict()["biases"] == "train"
