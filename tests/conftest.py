"""Every test (and every CLI subprocess it starts) sees an empty user preset folder, its own ceilings
cache and its own data folder (run history, hang-up saves), whatever the developer keeps in
~/.config/apextui, ~/.cache/apextui and ~/.local/share/apextui; and no COLUMNS or LINES, as in a plain
`pytest` run without a terminal (pytest-xdist's workers have COLUMNS=80 and LINES=24 in their environment: the
text advice then wrapped at 80 columns under `-n auto` only)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

# One intra-op thread for torch, here and in every process a test starts (they inherit the environment): the
# tests' models are tiny, and on a small shared CPU two threads' spin-waits made their steps 10-30x slower
# (35x for fp32 on 2 busy cores). Set before torch is imported; a value the developer set is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported already (by a plugin): the variable came too late for it
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(scope="session")
def measured_ceilings(tmp_path_factory) -> Path | None:
    """This machine's CPU ceilings (core/analysis/ceilings.py), really measured, once for the whole run: the first
    xdist worker to ask measures them under a file lock, the others read its file (the workers' base temp folders
    share a parent). None if they cannot be measured here (each run then measures them itself, as before)."""
    from filelock import FileLock

    from apextui.core.analysis.ceilings import CACHE_FILE, CeilingsUnavailable, get_ceilings

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "measured-ceilings" / CACHE_FILE
    with FileLock(str(root / "measured-ceilings.lock")):
        if not path.exists():
            try:
                get_ceilings("cpu", path=path)
            except CeilingsUnavailable:
                return None
    return path


@pytest.fixture(autouse=True)
def _private_user_dirs(tmp_path_factory, monkeypatch, request):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(cache))
    # A run that ends ok fetches the ceilings: measuring them on this CPU takes ~14 s of CPU time (their bf16
    # matmuls), and with an empty cache every such test paid it again. A slow test (the ones that train) starts with
    # the run's measured ceilings in its own cache folder, as a machine that has run apextui before has them.
    if request.node.get_closest_marker("slow") is not None:
        measured = request.getfixturevalue("measured_ceilings")
        if measured is not None:
            shutil.copy(measured, cache / measured.name)
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
# test that uses one is slow, whichever test of its module happens to pay for it. Under xdist (`--dist loadgroup`)
# the tests that use one share an `xdist_group` named after it: one worker runs them all and builds the fixture once
# (handed out one test at a time, neighbours went to both workers, and each built it).
SLOW_FIXTURES = frozenset({"probes"})


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(name))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a CPU. Much of the suite waits on processes it started (a CLI run, torchrun's ranks,
    a hung step that its timeout or budget ends) rather than computing, and a second worker a core computes
    meanwhile: on a 2-core machine, cold caches, the whole suite took 9:07 with 2 workers, 8:38 with 3 and 7:35
    with 4 (2026-12-04). (Twice two workers a core were dropped for a test that failed beside two CPU burners: the
    first time two process tests timed out at load 8; the second, a torchrun TUI test waited out its 240 s for the
    ranks row, which the pane drew from whichever snapshot the UI took, and a loaded box took only the run's final
    one, which brings no step: the bridge keeps the row's interval now.) Counted on
    the CPUs this process may use (the affinity mask). $PYTEST_XDIST_AUTO_NUM_WORKERS still overrides it, as
    in xdist's own hook (a value that is not a whole number is warned of and ignored)."""
    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if wanted:
        try:
            return int(wanted)
        except ValueError:
            import warnings

            warnings.warn(f"PYTEST_XDIST_AUTO_NUM_WORKERS is not a whole number ({wanted!r}): ignored", stacklevel=1)
    return 2 * len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2 * (os.cpu_count() or 1)
