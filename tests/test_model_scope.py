"""The model's probe for the TUI's Advice screen (`core.model_scope`): in a worker process of its own (the TUI's
process never imports the user's model), with the facts, the usage errors and the raises the CLI's in-place probe
gives, and the Advisor arguments both front ends make from the facts."""

from __future__ import annotations

import pytest

from apextui.core.config.point import parse
from apextui.core.model_presets import config_preset, probe
from apextui.core.model_scope import ModelRaised, advisor_args, probe_model
from apextui.core.workloads.user_model import ModelSpecError
from helpers import TINY_MODEL

LOUD = TINY_MODEL.replace("def build(small=False):\n", "def build(small=False):\n    print('built it')\n")


def model(tmp_path, source: str) -> str:
    (tmp_path / "m.py").write_text(source)
    return f"{tmp_path / 'm.py'}:build"


@pytest.mark.slow
def test_the_probe_apart_finds_what_the_clis_probe_finds(tmp_path):
    spec = model(tmp_path, LOUD)  # its print goes to the worker's log, never to the TUI's terminal
    facts = probe_model(spec, "cpu", apart=True)
    assert facts is not None and facts.sdpa_calls == 0 and facts.traits == frozenset({"norms"})
    assert facts == probe(spec, "cpu")  # the CLI's, in this process


@pytest.mark.slow
@pytest.mark.parametrize("apart", [True, False], ids=["apart", "here"])
def test_the_probe_says_why_a_model_cannot_be_built_as_the_cli_does(tmp_path, apart):
    spec = model(tmp_path, "import no_such_module_here\n\ndef build(small=False):\n    pass\n")
    with pytest.raises(ModelSpecError, match="importing .* failed: ModuleNotFoundError") as usage:
        probe_model(spec, "cpu", apart=apart)
    assert "no_such_module_here" in usage.value.detail
    spec = model(tmp_path, "def build(small=False):\n    raise ValueError('no data here')\n")
    with pytest.raises(ModelRaised, match="your function raised ValueError: no data here") as raised:
        probe_model(spec, "cpu", apart=apart)
    assert "m.py" in raised.value.detail


def test_a_missing_file_is_said_without_a_process(tmp_path):
    with pytest.raises(ModelSpecError, match="does not exist"):
        probe_model(f"{tmp_path / 'absent.py'}:build", "cpu", apart=True, stopped=lambda: pytest.fail("a process"))


# the worker's build says where it runs (its pid, in a file), then sleeps
SLEEPS_ONCE_BUILDING = ("import os, time\n\ndef build(small=False):\n"
                        "    open({mark!r}, 'w').write(str(os.getpid()))\n    time.sleep(600)\n")


def gone(pid: int) -> bool:
    import psutil

    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_a_stop_while_the_model_builds_ends_its_worker(tmp_path):
    mark = tmp_path / "building"
    spec = model(tmp_path, SLEEPS_ONCE_BUILDING.format(mark=str(mark)))
    assert probe_model(spec, "cpu", apart=True, stopped=lambda: mark.exists() and mark.read_text() != "") is None
    assert gone(int(mark.read_text()))


@pytest.mark.slow
def test_a_build_past_the_deadline_is_ended_with_its_worker(tmp_path):
    import time

    from apextui.core.model_presets import ProbeTimeout

    mark = tmp_path / "building"
    spec = model(tmp_path, SLEEPS_ONCE_BUILDING.format(mark=str(mark)))
    while not (mark.exists() and mark.read_text()):  # the build under way: its deadline is now
        with pytest.raises(ProbeTimeout, match="had not returned after 3 s"):
            probe_model(spec, "cpu", apart=True, deadline=time.monotonic(), budget_s=3)
    assert gone(int(mark.read_text()))


def test_the_advisor_arguments_carry_the_models_traits(tmp_path):
    """A model without an SDPA call: its attention backends are unavailable with why (the search leaves them out by
    its traits), the values that apply are not; other presets keep the availability they had."""
    spec = model(tmp_path, TINY_MODEL)
    facts = probe(spec, "cpu")
    args = advisor_args(facts, "cpu", fallback=lambda p: pytest.fail(f"{p.name} is the model's"))
    assert args["model_traits"] == frozenset({"norms"}) and args["model_type"] == ""
    math = args["availability_fn"](config_preset(spec, parse("attention=math")))
    assert not math.ok and "does not apply" in math.reason and "scaled_dot_product_attention" in math.reason
    assert args["availability_fn"](config_preset(spec, parse("optimizer=fused"))).ok
