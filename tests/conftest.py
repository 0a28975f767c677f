"""Every test (and every CLI subprocess it starts) sees an empty user preset folder, its own ceilings
cache and its own data folder (run history, hang-up saves), whatever the developer keeps in
~/.config/apextui, ~/.cache/apextui and ~/.local/share/apextui."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_user_dirs(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))



# Tests under tests/ui/ that take over ~1.5 s (a Textual app driven by its pilot, real runs), marked `slow` here, by
# path: file name -> the slow test functions in it, or None for all of them (those files carry no marker of their own).
# `pytest -m "not slow"` leaves them out; CI runs everything.
SLOW_UI: dict[str, frozenset[str] | None] = {
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name != "ui" or item.path.name not in SLOW_UI:
            continue
        names = SLOW_UI[item.path.name]
        if names is None or getattr(item, "originalname", item.name) in names:
            item.add_marker(pytest.mark.slow)
