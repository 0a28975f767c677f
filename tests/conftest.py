"""Every test (and every CLI subprocess it starts) sees an empty user preset folder, its own ceilings
cache and its own data folder (run history, hang-up saves), whatever the developer keeps in
~/.config/apextui, ~/.cache/apextui and ~/.local/share/apextui."""

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



# Tests under tests/ui/ that take over ~1.5 s (a Textual app driven by its pilot, real runs), marked `slow` here, by
# path: file name -> the slow test functions in it, or None for all of them (those files carry no marker of their own).
# `pytest -m "not slow"` leaves them out; CI runs everything.
SLOW_UI: dict[str, frozenset[str] | None] = {
    "test_ui_advise.py": None,
    "test_ui_app.py": frozenset({"test_updates_are_coalesced_and_rate_limited",
                                 "test_enter_runs_highlighted_preset_and_table_row",
                                 "test_save_load_and_screenshot_keys", "test_doctor_key_opens_full_report"}),
    "test_ui_advice_visible.py": frozenset({"test_main_screen_says_the_advice_is_measuring"}),
    "test_ui_axis_chart.py": frozenset({"test_loss_chart_in_the_app_uses_its_whole_width_at_80x24"}),
    "test_ui_big_terminals.py": None,
    "test_ui_broken_apex.py": None,
    "test_ui_compile_state.py": None,
    "test_ui_details_export_log.py": None,
    "test_ui_feedback.py": frozenset({"test_repeated_keys_do_not_stack_identical_toasts",
                                      "test_p_on_the_doctor_screen_saves_a_screenshot",
                                      "test_w_and_s_with_nothing_to_do_say_so",
                                      "test_save_toast_keeps_the_file_name_on_one_line"}),
    "test_ui_help_palette_quit.py": frozenset({"test_command_palette_has_every_action_and_starts_a_preset",
                                               "test_help_lists_every_key_and_pane",
                                               "test_ctrl_c_stops_the_run_and_saves_unsaved_runs_to_the_history",
                                               "test_ctrl_c_quits_at_once_without_runs",
                                               "test_quit_after_w_saves_nothing_more"}),
    "test_ui_hangup_and_churn.py": None,
    "test_ui_memory.py": None,
    "test_ui_picker_view.py": None,
    "test_ui_real_runs.py": None,
    "test_ui_scrollbars.py": None,
    "test_ui_snapshots.py": None,
    "test_ui_stop_while_compiling.py": None,
    "test_ui_table_keys.py": None,
    "test_ui_user_presets.py": None,
}


# Fixtures that take over ~1.5 s once (test_doctor's `probes`: every fake Apex tree probed in child processes): a
# test that uses one is slow, whichever test of its module happens to pay for it.
SLOW_FIXTURES = frozenset({"probes"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.path.parent.name != "ui" or item.path.name not in SLOW_UI:
            continue
        names = SLOW_UI[item.path.name]
        if names is None or getattr(item, "originalname", item.name) in names:
            item.add_marker(pytest.mark.slow)
