"""Keys that said nothing, toasts that stacked or broke a file name, saves that duplicated loaded runs
(rough edges 5, 7, 9, 12)."""

from __future__ import annotations

import html
import json
import re

import pytest
from ui_fakes import FakeEngine, gpu_app, until_ready, wait_for

from apextui.ui.screens.report_screen import ReportScreen

pytestmark = pytest.mark.asyncio


def saving_app(tmp_path, engine: FakeEngine | None = None):
    return gpu_app(engine, save_dir=tmp_path)


def toasts(app) -> list[str]:
    return [n.message for n in app._notifications]


def screen_lines(app) -> list[str]:
    """The screen's text, line by line, from an SVG screenshot (what a user sees, toasts included)."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return ["".join(t for _x, t in sorted(rows[y])).replace("\xa0", " ") for y in sorted(rows)]


@pytest.mark.slow
async def test_w_and_s_with_nothing_to_do_say_so(tmp_path):
    app = saving_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        app.clear_notifications()
        await pilot.press("w")
        await pilot.press("s")
        await pilot.pause()
        assert any("no finished runs" in m for m in toasts(app))
        assert "nothing is running" in toasts(app)


@pytest.mark.slow
async def test_p_on_the_doctor_screen_saves_a_screenshot(tmp_path):
    app = saving_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen)
        await pilot.press("p")
        await pilot.pause()
        assert list(tmp_path.glob("apextui-*.svg")), "no screenshot saved from the doctor screen"


@pytest.mark.slow
async def test_repeated_keys_do_not_stack_identical_toasts(tmp_path):
    app = saving_app(tmp_path, FakeEngine(hold={"fp32": 50}))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app.active is not None, what="fp32 running")
        app.clear_notifications()
        for _ in range(5):
            app.start_preset("fp32")  # what Enter does on the picker
        await pilot.pause()
        assert len(toasts(app)) == 1 and "fp32 is running" in toasts(app)[0]
        # the toast is drawn after a refresh: wait for it on screen, then count it once more after another pause
        await wait_for(pilot, lambda: any("fp32 is running" in line for line in screen_lines(app)), what="the toast")
        await pilot.pause()
        assert sum("fp32 is running" in line for line in screen_lines(app)) == 1


@pytest.mark.slow
async def test_save_toast_keeps_the_file_name_on_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = saving_app(tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32 row")
        app.clear_notifications()
        await pilot.press("w")
        await wait_for(pilot, lambda: any(tmp_path.glob("apextui-results-*.json")), what="the saved file")
        (saved,) = tmp_path.glob("apextui-results-*.json")
        # a name cut across two lines never shows whole: the wait times out and the test fails
        await wait_for(pilot, lambda: any(saved.name in line for line in screen_lines(app)),
                       what=f"{saved.name} on one line of the screen")


async def test_w_after_l_saves_only_this_sessions_runs_and_l_twice_adds_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = saving_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32 row")
        await pilot.press("w")
        await pilot.pause()
        (first,) = tmp_path.glob("apextui-results-*.json")
        assert app.load_results(first) == 1 and len(app.table.rows_data) == 2
        assert app.load_results(first) == 0 and len(app.table.rows_data) == 2  # the same file again
        first.rename(tmp_path / "first.json")
        await pilot.press("w")
        await pilot.pause()
        (second,) = tmp_path.glob("apextui-results-*.json")
        assert len(json.loads(second.read_text())["runs"]) == 1  # the loaded row is not saved again
