"""Preset files: the shipped ones load, bad ones name the file and the field."""

from pathlib import Path

import pytest

from apextui.core import presets
from apextui.core.presets import PresetError, WORKLOADS

GOOD = """
workload = "norm"
variant = "layernorm"
steps = 10
warmup = 2
[size]
batch = 2
seq = 4
hidden = 8
[cpu_size]
batch = 1
seq = 4
hidden = 8
"""


def test_every_variant_has_a_shipped_preset_named_after_it():
    shipped = {p.name: p for p in presets.load_builtin()}
    expected = {v for variants in WORKLOADS.values() for v in variants}
    assert set(shipped) == expected
    for name, p in shipped.items():
        assert p.variant == name
        assert p.warmup < p.steps
        assert set(p.size) == set(presets.SIZE_KEYS[p.workload]) == set(p.cpu_size)


def test_apex_needs_and_baselines():
    by_name = {p.name: p for p in presets.load_builtin()}
    assert by_name["fused_adam"].needs_apex == ("FusedAdam",)
    assert by_name["fused_amp"].needs_apex == ("FusedAdam", "FusedLayerNorm")
    assert by_name["fused_amp"].amp == "fp16" and by_name["torch_amp"].amp == "bf16"
    assert by_name["torch_amp"].needs_apex == () and by_name["fp32"].needs_apex == ()
    assert by_name["fused_rmsnorm"].baseline == "layernorm"
    assert by_name["fused_adam"].baseline == "adamw"


def test_user_file_by_path(tmp_path: Path):
    f = tmp_path / "mine.toml"
    f.write_text(GOOD)
    p = presets.resolve(str(f))
    assert (p.name, p.workload, p.steps, p.warmup) == ("mine", "norm", 10, 2)
    assert p.size["hidden"] == 8


@pytest.mark.parametrize("mutation, field", [
    (lambda s: s.replace('variant = "layernorm"', 'variant = "fast"'), "variant"),
    (lambda s: s.replace('workload = "norm"', 'workload = "vision"'), "workload"),
    (lambda s: s.replace("steps = 10", "steps = -1"), "steps"),
    (lambda s: s.replace("warmup = 2", "warmup = 10"), "warmup"),
    (lambda s: s.replace("steps = 10", 'steps = 10\namp = "fp8"'), "amp"),
    (lambda s: s.replace("hidden = 8\n[cpu_size]", "hidden = 0\n[cpu_size]"), "size.hidden"),
    (lambda s: s.replace("seq = 4\nhidden = 8\n", "seq = 4\n", 1), "size.hidden"),
    (lambda s: s.replace("batch = 1", "batch = 1\nwidth = 3"), "cpu_size.width"),
    (lambda s: "colour = 1\n" + s, "colour"),
])
def test_invalid_files_name_the_file_and_field(tmp_path: Path, mutation, field):
    f = tmp_path / "bad.toml"
    f.write_text(mutation(GOOD))
    with pytest.raises(PresetError) as info:
        presets.load_file(f)
    message = str(info.value)
    assert str(f) in message
    assert f"field '{field}'" in message


def test_broken_toml_and_missing_file(tmp_path: Path):
    f = tmp_path / "broken.toml"
    f.write_text("workload = [")
    with pytest.raises(PresetError, match="not valid TOML"):
        presets.load_file(f)
    with pytest.raises(PresetError, match="no such preset file"):
        presets.resolve(str(tmp_path / "nothing.toml"))
    with pytest.raises(PresetError, match="unknown preset 'nope'.*adamw"):
        presets.resolve("nope")
