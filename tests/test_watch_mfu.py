"""MFU of a watched run (`apextui.watch(flops_per_token=..., model=..., precision=...)`, watch/mfu_inputs.py): the
FLOPs a step from the user's figure or 6N times `mon.step(tokens=...)`, the reason where either is missing, and
`apextui attach` reading it back from the stream (its `--json` and its run pane)."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import apextui
from apextui.cli import main
from apextui.core.watch import mfu_inputs, reader
from apextui.core.watch.replay import Replay
from apextui.core.workloads.flop_count import matmul_params
from helpers import WATCHED_TOKENS, train_watched, watched_on_a_fake_gpu

def _lines(mon) -> tuple[dict, dict]:
    evs = reader.Follower(mon.path).poll()
    return [e for e in evs if e["event"] == "setup"][-1], evs[-1]  # the setup once the tokens a step are known


def test_flops_per_token_and_the_tokens_a_step_give_the_achieved_rate_and_on_cpu_no_peak():
    with apextui.watch(name="mfu-given", flops_per_token=3e6) as mon:
        train_watched(mon)
    setup, end = _lines(mon)
    got = end["summary"]["mfu"]
    assert setup["model_flops"]["flops"] == 3e6 * WATCHED_TOKENS and got["flops_source"] == "flops_per_token"
    assert got["flops_per_step"] == 3e6 * WATCHED_TOKENS and got["value"] is None
    assert got["reason"].startswith("no peak on cpu") and got["precision"] == "bf16"  # the default
    assert got["tflops"] == pytest.approx(3e6 * WATCHED_TOKENS / (got["step_ms"] / 1e3) / 1e12, rel=1e-3)


def test_a_model_gives_6n_a_token():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))  # the user's
    with apextui.watch(name="mfu-6n", model=model) as mon:
        train_watched(mon)
    got = _lines(mon)[1]["summary"]["mfu"]
    assert got["flops_source"] == "6N" and got["flops_per_step"] == 6 * matmul_params(model) * WATCHED_TOKENS
    assert "attention's 12·L·H·Q·T is left out" in got["note"]


@pytest.mark.parametrize("options, count, reason", [
    ({}, {"tokens": WATCHED_TOKENS}, mfu_inputs.NOT_GIVEN),
    ({"flops_per_token": 3e6}, {"samples": 64}, "MFU needs the tokens a step: mon.step(tokens=...)"),
])
def test_without_a_count_or_tokens_mfu_is_null_with_the_reason(options, count, reason):
    with apextui.watch(name="mfu-missing", **options) as mon:
        train_watched(mon, **count)
    got = _lines(mon)[1]["summary"]["mfu"]
    assert got["value"] is None and got["tflops"] is None and got["reason"] == reason


@pytest.mark.parametrize("options, warned", [
    ({"flops_per_token": -1}, "flops_per_token=-1 is not a positive number"),
    ({"flops_per_token": 3e6, "precision": "bf8"}, "precision='bf8' is not one of fp32, tf32, bf16, fp16, fp8"),
])
def test_a_bad_option_is_one_warning_and_no_mfu_never_an_error_in_the_training(options, warned, caplog):
    with caplog.at_level(logging.WARNING, logger="apextui.watch"), apextui.watch(name="mfu-bad", **options) as mon:
        train_watched(mon)
    assert sum(warned in r.getMessage() for r in caplog.records) == 1
    assert _lines(mon)[1]["status"] == "ok"


def test_the_precision_defaults_to_the_models_16_bit_parameters():
    warn = lambda key, message: None  # noqa: E731
    assert mfu_inputs.precision_of(None, torch.nn.Linear(2, 2).to(torch.float16), warn) == "fp16"
    assert mfu_inputs.precision_of(None, torch.nn.Linear(2, 2), warn) == "bf16"
    assert mfu_inputs.precision_of("tf32", torch.nn.Linear(2, 2), warn) == "tf32"


def test_attach_json_reads_the_mfu_back_from_the_stream(monkeypatch, capfd):
    _, end = _lines(watched_on_a_fake_gpu(monkeypatch, "mfu-gpu"))
    got = end["summary"]["mfu"]
    assert got["value"] == pytest.approx(100 * WATCHED_TOKENS / (got["step_ms"] / 1e3) / 1e12 / 1e-3, rel=2e-3)
    capfd.readouterr()
    assert main(["attach", "mfu-gpu", "--json"]) == 0
    printed = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    replay = Replay()
    replay.add(printed)
    info = replay.snapshot().info
    assert info is not None and info.mfu(replay.snapshot().stats.median_ms).value == pytest.approx(got["value"],
                                                                                                    rel=2e-3)
