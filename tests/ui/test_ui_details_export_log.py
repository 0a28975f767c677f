"""Run details (enter / i on a comparison row), export (e), the worker output log (o) and the run history in
the load screen (l)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ui_fakes import FakeRunner, gpu_app, until_ready, wait_for, wait_for_screen

from apextui.core.results import results_document
from apextui.ui import history
from apextui.ui.export import to_csv, to_markdown
from apextui.ui.screens.load_screen import LoadScreen
from apextui.ui.screens.log_screen import LogScreen, log_text
from apextui.ui.screens.run_details_screen import RunDetailsScreen, flatten, sections
from apextui.ui.widgets.comparison_table import ComparisonTable

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s

SIZE = (100, 30)


def append(path, text: str) -> None:
    """What the worker does: append to its log file."""
    with open(path, "a") as fh:
        fh.write(text)


async def two_runs(pilot, app) -> None:
    await until_ready(pilot, app)
    for n, name in enumerate(("layernorm", "fused_layernorm"), 1):
        app.start_preset(name)
        await wait_for(pilot, lambda n=n: len(app.table.rows_data) == n, what=name)


async def test_enter_on_a_comparison_row_shows_everything_the_json_has():
    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await two_runs(pilot, app)
        table = app.query_one(ComparisonTable)
        table.focus()
        table.move_cursor(row=1)
        await pilot.press("enter")  # the table's RowSelected bubbles to the app, which pushes the screen after
        screen = await wait_for_screen(pilot, app, RunDetailsScreen, "the run's details")
        assert screen.row is app.table.rows_data[1]
        assert "fused_layernorm run 1" in str(screen.query_one("#details-scroll").border_title)
        shown = dict(pair for _title, pairs in sections(screen.entry) for pair in pairs)
        entry = results_document(app.table.rows_data)["runs"][1]
        for key, value in entry.items():  # every field of the saved JSON is on the screen
            if key != "summary":
                for k, _v in flatten(key, value):
                    assert k in shown, k
        for key, value in entry["summary"].items():
            for k, _v in flatten(key, value):
                assert k in shown, k
        assert shown["check.passed"] == "yes" and shown["status"] == "ok" and "gpu" in {
            k.split(".")[0] for k in shown}  # the environment (the probe's env)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("i")  # i on the highlighted row: the same
        await pilot.pause()
        assert isinstance(app.screen, RunDetailsScreen)


async def test_details_without_runs_says_so():
    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("i")
        await pilot.pause()
        assert not isinstance(app.screen, RunDetailsScreen)
        assert any("no finished runs yet" in n.message for n in app._notifications)


async def test_e_exports_csv_and_markdown(tmp_path: Path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("e")  # nothing yet
        assert not list(tmp_path.iterdir())
        await two_runs(pilot, app)
        await pilot.press("e")
        await pilot.pause()
        rows = app.table.rows_data
        csv_file, = tmp_path.glob("apextui-results-*.csv")
        md_file, = tmp_path.glob("apextui-results-*.md")
        assert csv_file.read_text() == to_csv(rows) and md_file.read_text() == to_markdown(rows)
        assert "fused_layernorm" in md_file.read_text().splitlines()[3]


class LoggingRunner(FakeRunner):
    """A fake worker that writes to a log file as ProcessRunner's worker does, and deletes it at the end."""

    def __init__(self, *args, log_dir: Path, **kw) -> None:
        super().__init__(*args, **kw)
        self.log_path = str(log_dir / f"apextui-worker-{self.preset.name}.log")
        Path(self.log_path).write_text(f"compiling {self.preset.name}...\n")

    def _end(self, status: str) -> None:
        with open(self.log_path, "a") as fh:
            fh.write("UserWarning: apex.normalization is deprecated\n")
        super()._end(status)
        os.unlink(self.log_path)  # as ProcessRunner does after a run that did not fail


async def test_o_shows_the_worker_output_while_running_and_after_the_log_is_deleted(tmp_path: Path):
    def factory(request, callback):
        return LoggingRunner(request, callback, log_dir=tmp_path, hold_at=50 if request.preset.name == "fp32" else None)

    app = gpu_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        assert "no run yet" in log_text(app.run_logs).plain
        app.start_preset("layernorm")  # ends at once: its log is deleted
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="layernorm")
        app.start_preset("fp32")  # held at step 50: its log is still being written
        await wait_for(pilot, lambda: app.active is not None and app.active.preset.name == "fp32", what="fp32 runs")
        append(tmp_path / "apextui-worker-fp32.log", "FutureWarning: torch.cuda.amp.GradScaler is deprecated\n")
        await wait_for(pilot, lambda: "GradScaler" in log_text(app.run_logs).plain, what="the new line on screen")
        text = log_text(app.run_logs).plain
        assert "── layernorm run 1 · ended ──\ncompiling layernorm...\nUserWarning" in text
        assert "── fp32 run 1 · running ──\ncompiling fp32...\nFutureWarning" in text
        assert not (tmp_path / "apextui-worker-layernorm.log").exists()
        app.screen.refresh_log()
        redraws = app.screen.redraws
        app.screen.refresh_log()
        assert app.screen.redraws == redraws  # nothing new: no redraw
        app.action_stop()
        await wait_for(pilot, lambda: app.active is None, what="fp32 stopped")
        await wait_for(pilot, lambda: "fp32 run 1 · ended" in log_text(app.run_logs).plain, what="ended")


async def test_l_offers_recent_results_from_the_history(tmp_path: Path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LoadScreen) and not app.screen.recent
        assert app.screen.focused is app.screen.query_one("#load-path")  # no history: type a path
        await pilot.press("escape")
        await two_runs(pilot, app)
        await pilot.press("w")
        saved = history.recent_results()
        assert len(saved) == 1 and saved[0].path.parent == history.history_dir()
        await pilot.press("l")
        await pilot.pause()
        assert [f.path.name for f in app.screen.recent] == [saved[0].path.name]  # the copy in cwd: listed once
        await pilot.press("enter")  # the list's selection reaches the app as a message: the rows come after
        await wait_for(pilot, lambda: len(app.table.rows_data) == 4, what="the loaded runs")
        rows = app.table.rows_data
        assert Path(rows[2].source) == saved[0].path
