"""`advise --model` against functions that never return or raise oddly: the budget bounds loading and building the
model too (a build that loops held `advise --budget 2` for minutes), the probe's one forward waits no longer than
the budget, and whatever the function raises is one line naming it, exit 1, no traceback of apextui's."""

from __future__ import annotations

import json
import threading
import time

import pytest

from helpers import TINY_MODEL, run_cli

from apextui.core import model_presets
from apextui.core.exits import EXIT_FAILED

pytestmark = pytest.mark.slow

SLEEPS = "import time\n\ndef build(small=False):\n    while True:\n        time.sleep(0.05)\n"
SPINS = "def build(small=False):\n    while True:\n        pass\n"
# torch's own threads at work when the wait ends: a thread left computing while the interpreter shut down aborted it
COMPUTES = ("import torch\n\ndef build(small=False):\n    a = torch.randn(256, 256)\n    while True:\n"
            "        a = a @ a / 256\n")


@pytest.mark.parametrize("source", [SLEEPS, SPINS, COMPUTES], ids=["sleeps", "spins", "computes"])
def test_a_build_that_never_returns_ends_with_the_budget(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_text(source)
    proc = run_cli("advise", "--model", f"{path}:build", "--device", "cpu", "--budget", "2", "--json",
                   timeout=300)  # before: still running at 397 s
    assert proc.returncode == EXIT_FAILED, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("apextui: error:")]
    assert "had not returned after 2 s, the whole budget" in line and "nothing was measured" in line
    assert proc.stdout == "" and "Traceback" not in proc.stderr


@pytest.mark.parametrize("raised, words", [
    ("class Boom(BaseException):\n    pass\n\n\ndef build(small=False):\n    raise Boom('out of here')\n",
     "your function raised Boom: out of here"),
    ("class Mute(Exception):\n    def __str__(self):\n        raise RuntimeError('no words')\n\n\n"
     "def build(small=False):\n    raise Mute('kept')\n", "your function raised Mute: Mute('kept')"),
], ids=["base-exception", "str-raises"])
def test_what_a_build_raises_is_one_line_naming_it(tmp_path, raised, words):
    path = tmp_path / "m.py"
    path.write_text(raised)
    # a budget no load uses up: the probe's worker answers as soon as the build raises
    proc = run_cli("advise", "--model", f"{path}:build", "--device", "cpu", "--budget", "300", "--json", timeout=300)
    assert proc.returncode == EXIT_FAILED, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("apextui: error:")]
    assert words in line, proc.stderr
    assert "Traceback (most recent call last)" not in proc.stderr and "apextui/" not in proc.stderr


def test_the_probes_forward_waits_no_longer_than_the_budget(tmp_path):
    """A `make_batch` that blocks: the probe waited its 15 s whatever the budget; with the budget's end already
    reached it returns at once, the model's traits the forward would have found left unknown."""
    release = threading.Event()
    path = tmp_path / "blocks.py"
    path.write_text(TINY_MODEL.replace("make_batch=lambda d, g:", "make_batch=lambda d, g: __import__('builtins')"
                                       ".RELEASE.wait() and"))
    import builtins

    builtins.RELEASE = release  # type: ignore[attr-defined]
    try:
        facts = model_presets.probe(f"{path}:build", "cpu", deadline=time.monotonic())
        assert not release.is_set() and facts.sdpa_calls is None  # it returned while the forward was blocked
    finally:
        release.set()
        del builtins.RELEASE  # type: ignore[attr-defined]


def test_the_advices_time_counts_loading_and_building_the_model(tmp_path):
    """`elapsed_s` read 0.004 after a 60 s build: it counted from the search's start."""
    path = tmp_path / "slow.py"
    path.write_text(TINY_MODEL.replace("def build(small=False):\n", "def build(small=False):\n"
                                       "    import time; time.sleep(1.5)\n"))
    proc = run_cli("advise", "--model", f"{path}:build", "--device", "cpu", "--budget", "20", "--json", timeout=300)
    doc = json.loads(proc.stdout)
    s = doc["search"]
    assert s["setup_s"] >= 1.5 and doc["elapsed_s"] >= s["spent_s"], (doc["elapsed_s"], s["setup_s"], s["spent_s"])


def test_a_model_on_the_meta_device_is_a_usage_error_that_says_so(tmp_path):
    """It read "your function raised RuntimeError: Tensor.item() cannot be called on meta tensors": apextui's own
    probe raised, not the user's function."""
    path = tmp_path / "meta.py"
    path.write_text(TINY_MODEL.replace("model=nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 1))",
                                       "model=nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 1)).to('meta')"))
    proc = run_cli("advise", "--model", f"{path}:build", "--device", "cpu", "--budget", "300", "--json", timeout=300)
    assert proc.returncode == 2, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("apextui: error:")]
    assert "4 of the model's 4 parameters are on the meta device" in line and "your function raised" not in line
