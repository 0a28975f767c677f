"""A stop asked while the user's model is set up (the loss-parity check trains fp32's steps and the variant's first)
is honoured after the check's current step: it waited for the whole check (about 10 s with 1 s steps)."""

from __future__ import annotations

import builtins
import threading

import pytest

from helpers import TINY_MODEL

from apextui.core.config.point import BASELINE
from apextui.core.model_presets import config_preset
from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner
from apextui.core.workloads.model_workload import PARITY_STEPS

# each forward counts itself; the third (inside the check's fp32 steps) says so and waits to be let go
WAITS_IN_THE_CHECK = TINY_MODEL.replace("def build(small=False):", '''import builtins


class Counted(nn.Sequential):
    def forward(self, x):
        hooks = builtins.APEXTUI_TEST_HOOKS
        hooks["calls"] += 1
        if hooks["calls"] == 3:
            hooks["reached"].set()
            hooks["go"].wait(60)
        return super().forward(x)


def build(small=False):''').replace("model=nn.Sequential(", "model=Counted(")


@pytest.fixture
def hooks():
    h = {"calls": 0, "reached": threading.Event(), "go": threading.Event()}
    builtins.APEXTUI_TEST_HOOKS = h  # type: ignore[attr-defined]
    yield h
    h["go"].set()
    del builtins.APEXTUI_TEST_HOOKS  # type: ignore[attr-defined]


def test_a_stop_during_the_loss_parity_check_ends_the_run_after_the_checks_current_step(tmp_path, hooks):
    path = tmp_path / "m.py"
    path.write_text(WAITS_IN_THE_CHECK)
    point = BASELINE.with_("optimizer", "fused")  # not fp32: its set-up checks its losses against fp32's
    finals = []
    runner = Runner(RunRequest(config_preset(f"{path}:build", point, steps=20, warmup=1), "cpu", 20),
                    lambda s: finals.append(s) if s.finished else None, analyse=False).start()
    assert hooks["reached"].wait(120), "the check never reached its third forward"
    runner.stop()
    hooks["go"].set()
    assert runner.join(120)
    final = finals[-1]
    assert final.status == "stopped" and final.error is None and final.steps_done == 0
    # the FLOP count's forward and two of the check's fp32 steps, then the one it was in: not the check's 2 x 5
    assert hooks["calls"] < 1 + 2 * PARITY_STEPS, hooks["calls"]
