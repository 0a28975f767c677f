"""The memory estimate and the refusal before anything is allocated (issue: presets within the size limits
took over 6 GiB in seconds)."""

from __future__ import annotations

import dataclasses

import pytest

from apextui.core import memory, presets
from apextui.core.workloads import builders

from helpers import run_cli


@pytest.mark.parametrize("name", ["adamw", "layernorm", "fp32"])
def test_the_estimate_counts_the_parameters_the_workload_really_has(name):
    preset = presets.resolve(name)
    est = memory.estimate(preset, preset.cpu_size, 10)
    built = builders.build(preset, "cpu", preset.cpu_size, 10)
    assert est.parts["params"] == 4 * built.params and est.parts["gradients"] == 4 * built.params
    if preset.workload in ("optimizer", "transformer"):  # a norm benchmark steps no optimizer
        assert est.parts["optimizer state"] == 8 * built.params  # AdamW: exp_avg and exp_avg_sq


def test_the_transformer_counts_its_markov_chain_on_the_host_and_the_token_pool():
    preset = presets.resolve("fp32")
    size = dict(preset.size, vocab=32768, branching=4)
    est = memory.estimate(preset, size, 400)
    assert est.host == 40 * 32768**2  # ~40 GiB: a vocab x vocab matrix and its solve, whatever the device
    assert est.parts["data"] == 400 * size["batch"] * (size["seq"] + 1) * 8


def big_optimizer():
    preset = presets.resolve("adamw")
    return dataclasses.replace(preset, name="big", cpu_size={"layers": 1024, "width": 2048, "batch": 16})


def test_a_preset_that_does_not_fit_is_refused_with_the_estimate_and_a_smaller_size(monkeypatch):
    monkeypatch.setattr(memory, "free_bytes", lambda device: 8 * 2**30)
    text = memory.refusal(big_optimizer(), "cpu", 100)
    assert text is not None and text.startswith("preset 'big' needs about 64.3 GiB of host memory")
    assert "8.0 GiB is free" in text and "try a smaller [cpu_size] (layers = 64)" in text
    assert text.endswith("or --force to run anyway")
    fit = memory.smaller(big_optimizer(), big_optimizer().cpu_size, 100, "cpu", 8 * 2**30, 8 * 2**30)
    assert memory._fits(memory.estimate(big_optimizer(), fit, 100), "cpu", 8 * 2**30, 8 * 2**30)


def test_a_preset_that_fits_or_unknown_free_memory_is_not_refused(monkeypatch):
    assert memory.refusal(presets.resolve("adamw"), "cpu", 100) is None  # the real free memory
    monkeypatch.setattr(memory, "free_bytes", lambda device: None)
    assert memory.refusal(big_optimizer(), "cpu", 100) is None


@pytest.mark.slow
def test_headless_refuses_before_building_and_force_overrides(monkeypatch, capsys):
    from apextui.cli import json_run
    from apextui.core.run.request import RunRequest

    monkeypatch.setattr(memory, "free_bytes", lambda device: 1)  # nothing fits
    assert json_run.run(RunRequest(presets.resolve("adamw"), "cpu", 3)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("apextui: error: preset 'adamw' needs about") and err.count("\n") == 1
    assert json_run.run(RunRequest(presets.resolve("adamw"), "cpu", 3, force=True)) == 0
    assert '"event": "end"' in capsys.readouterr().out


@pytest.mark.slow
def test_cli_refuses_a_user_preset_too_big_for_this_machine_in_one_line(tmp_path):
    """A real subprocess and the real free memory: 256 layers of d_model 16384 with AdamW need about 12 TiB."""
    path = tmp_path / "huge.toml"
    size = "vocab = 64\nd_model = 16384\nlayers = 256\nheads = 16\nseq = 32\nbatch = 8\nbranching = 4\n"
    path.write_text(f'workload = "transformer"\nvariant = "fp32"\nsteps = 10\nwarmup = 2\n'
                    f'[size]\n{size}[cpu_size]\n{size}')
    proc = run_cli("--preset", str(path), "--json", "--device", "cpu", "--steps", "2", timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    preset = presets.load_file(path)
    need = (memory.estimate(preset, preset.cpu_size, 2).device + 40 * 64**2) / 2**30
    assert proc.stderr.startswith(f"apextui: error: preset 'huge' needs about {need:.1f} GiB of host memory")
    assert "or --force to run anyway" in proc.stderr and proc.stderr.count("\n") == 1
