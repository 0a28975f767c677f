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
