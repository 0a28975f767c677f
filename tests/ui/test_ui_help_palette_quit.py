"""Help (? and F1), the command palette (ctrl+p) and quitting (q, ctrl+c) with unsaved runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ui_fakes import FakeEngine, gpu_app, until_ready, wait_for

from apextui.ui import history
from apextui.ui.commands import ACTIONS
from apextui.ui.screens.help_screen import KEYS, HelpScreen

pytestmark = pytest.mark.asyncio

SIZE = (100, 30)


@pytest.mark.parametrize("key", ["question_mark", "f1"])
@pytest.mark.slow
async def test_help_lists_every_key_and_pane(key):
    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        app.screen.query_one("#help-body")
        for binding in app.BINDINGS:  # every key of the main screen is explained
            shown = {"question_mark": "?"}.get(binding.key, binding.key)
            assert any(shown in k.split() for k, _ in KEYS), binding.key
        await pilot.press(key)  # the same key closes it
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.slow
async def test_ctrl_c_quits_at_once_without_runs():
    """Not Textual's "press ctrl+q to quit" hint: ctrl+c quits, even from a modal screen."""
    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.return_code is not None, what="exit")  # set by app.exit()
    assert app.return_code == 0 and app.quit_saved is None
    assert history.recent_results() == []  # nothing to save: no file


@pytest.mark.slow
async def test_ctrl_c_stops_the_run_and_saves_unsaved_runs_to_the_history(tmp_path):
    engine = FakeEngine(hold={"fused_amp": 30})
    app = gpu_app(engine, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("fused_amp")
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert engine.runners[1].stopped and engine.runners[1].joined
    assert app.quit_saved is not None and app.quit_saved.parent == history.history_dir()
    doc = json.loads(app.quit_saved.read_text())
    assert [(r["preset"], r["status"]) for r in doc["runs"]] == [("fp32", "ok"), ("fused_amp", "stopped")]
    assert "saved 2 run(s) of this session to" in app.hangup_message  # printed once the terminal is back
    assert not list(tmp_path.iterdir())  # the start folder is left alone


@pytest.mark.slow
async def test_quit_after_w_saves_nothing_more(tmp_path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        await pilot.press("w")
        saved = list(tmp_path.glob("apextui-results-*.json"))
        assert len(saved) == 1
        # the copy in the run history
        assert [f.path.name for f in history.recent_results()] == [saved[0].name]
        await pilot.press("q")
        await pilot.pause()
    assert app.quit_saved is None and len(history.recent_results()) == 1


@pytest.mark.slow
async def test_command_palette_has_every_action_and_starts_a_preset():
    engine = FakeEngine()
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title, _help, action in ACTIONS:
            assert title in titles and hasattr(app, f"action_{action}"), action
        assert {f"start {p.name}" for p in app.presets} <= set(titles)
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "start fused_amp":
            await pilot.press("space" if ch == " " else ch)
        await wait_for(pilot, lambda: palette_top(app) == "start fused_amp", what="the palette's search")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fused_amp via the palette")
        assert app.table.rows_data[0].preset == "fused_amp"
        await pilot.press("ctrl+p")  # an action by name: the run's details
        await pilot.pause()
        for ch in "Run details":
            await pilot.press("space" if ch == " " else ch)
        await wait_for(pilot, lambda: palette_top(app) == "Run details", what="the palette's search")
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RunDetailsScreen", what="details via the palette")


def palette_top(app: Any) -> str:
    """The title of the command palette's first result, once its list shows (it searches in a worker and shows
    results in batches: an `enter` before then is lost, or picks the top result of a shorter prefix)."""
    from textual.command import CommandList, CommandPalette

    screen = app.screen
    if not isinstance(screen, CommandPalette) or not screen._list_visible:
        return ""
    results = screen.query_one(CommandList)
    if not results.option_count:
        return ""
    prompt = results.get_option_at_index(0).prompt  # its title, then its help on the next line
    return str(getattr(prompt, "plain", prompt)).split("\n")[0]


async def test_help_says_what_quitting_does():
    app = gpu_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await until_ready(pilot, app)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(f"{k} {w}" for k, w in KEYS)
        assert "ctrl+c" in text and "saved automatically to the run history" in text


async def test_docs_key_table_and_help_name_every_binding():
    """docs/tui.md's key table and the help screen list every key of the main screen."""
    from pathlib import Path

    from apextui.ui.app import ApexTuiApp

    doc = (Path(__file__).resolve().parents[2] / "docs" / "tui.md").read_text()
    table = doc.split("## Keys", 1)[1].split("\n\n", 2)[1]
    doc_keys = {k for line in table.splitlines() if line.startswith("| ") for k in line.split("|")[1].split()}
    help_keys = {k for keys, _ in KEYS for k in keys.split()}
    for binding in ApexTuiApp.BINDINGS:
        key = {"question_mark": "?", "f1": "F1"}.get(binding.key, binding.key)
        assert key in doc_keys, key
        assert key.lower() in {k.lower() for k in help_keys}, key
