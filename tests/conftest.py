"""Every test (and every CLI subprocess it starts) sees an empty user preset folder, its own ceilings
cache and its own data folder (run history, hang-up saves), whatever the developer keeps in
~/.config/apextui, ~/.cache/apextui and ~/.local/share/apextui; and no COLUMNS or LINES, as in a plain
`pytest` run without a terminal (pytest-xdist's workers have COLUMNS=80 and LINES=24 in their environment: the
text advice then wrapped at 80 columns under `-n auto` only)."""

from __future__ import annotations

import os
import sys

import pytest

# One intra-op thread for torch, here and in every process a test starts (they inherit the environment): the
# tests' models are tiny, and on a small shared CPU two threads' spin-waits made their steps 10-30x slower
# (35x for fp32 on 2 busy cores). Set before torch is imported; a value the developer set is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported already (by a plugin): the variable came too late for it
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _private_user_dirs(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _signals_unsettled():
    """A headless run in this process (test_runner's JsonLinePrinter) settles the process's signal handling for
    good (`cli.signals.settle`: signals after the end line change nothing); each test starts unsettled, as a new
    process does, whatever ran before it in this worker."""
    from apextui.cli import signals

    signals._settled = False
    yield
    signals._settled = False


# Fixtures that take over ~1.5 s once (test_doctor's `probes`: every fake Apex tree probed in child processes): a
# test that uses one is slow, whichever test of its module happens to pay for it.
SLOW_FIXTURES = frozenset({"probes"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
