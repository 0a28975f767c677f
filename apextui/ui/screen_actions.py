"""The actions that open a screen: a (advice), d (doctor), ? / F1 (help), i / enter (run details), o (worker
output), ctrl+p (the command palette), and p (an SVG screenshot) (a mixin of `ApexTuiApp`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable

from .app_base import AppBase
from .results_actions import saved_message
from .widgets.comparison_table import ComparisonTable


class ScreenActions(AppBase):
    """Each screen is imported when first opened: the main screen starts without them."""

    def _show_advice_measuring(self) -> None:
        """Once a second: while the advice measures in the background, the run pane's subtitle says so."""
        job = self.advice_job
        text = ""
        if job is not None and job.running:
            _latest, done, total, _lines = job.state()
            text = f"advice measuring · {done}/{total or '…'} runs · a: show"
        if self.measuring() == "interleaved":
            text = self.interleaved_job.progress_line()
        try:
            live = self.live
        except NoMatches:  # a tick as the app exits: Textual takes the panes down before it stops the timers
            return
        if (live.border_subtitle or "") != text:
            live.border_subtitle = text

    def action_advise(self) -> None:
        from .screens.advise_screen import open_advice

        open_advice(self)

    def action_doctor(self) -> None:
        from .screens.report_screen import ReportScreen

        self.push_screen(ReportScreen(self.report, self.report_error))

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """p: an SVG of the screen, apextui-YYYYmmdd-HHMMSS.svg in the start folder unless named."""
        save_svg(self, self.save_dir, filename, path)

    def action_help(self) -> None:
        from .screens.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands that apextui has no own of (theme, maximize), then every action of apextui and
        start <preset>: Textual's Quit, Keys and Screenshot beside "Quit apextui", "Help" and "SVG screenshot"
        read as two ways of doing one thing (and Textual's Quit skips the save of unsaved runs)."""
        from .commands import REPLACED_SYSTEM_COMMANDS, app_commands

        yield from (c for c in super().get_system_commands(screen) if c.title not in REPLACED_SYSTEM_COMMANDS)
        yield from app_commands(self)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a comparison row: its full record."""
        if isinstance(event.data_table, ComparisonTable):
            self.show_details(event.cursor_row)

    def action_details(self) -> None:
        self.show_details(self.table.cursor_row)

    def show_details(self, index: int) -> None:
        from .screens.run_details_screen import RunDetailsScreen

        rows = self.table.rows_data
        row = self.table.row_at(index)  # the screen row's run (the table may be sorted, paged, rows hidden)
        if row is None:
            self.notify("no finished runs yet: their details appear here once they end", timeout=3)
            return
        self.push_screen(RunDetailsScreen(row, rows))

    def action_log(self) -> None:
        from .screens.log_screen import LogScreen

        self.push_screen(LogScreen(lambda: self.run_logs))


def save_svg(app: Any, save_dir: Path, filename: str | None = None, path: str | None = None) -> None:
    """An SVG of `app`'s screen, apextui-YYYYmmdd-HHMMSS.svg in `save_dir` unless named; a toast says where (or why
    not). The main app's p and `apextui attach`'s."""
    filename = filename or f"apextui-{time.strftime('%Y%m%d-%H%M%S')}.svg"
    try:
        path = app.save_screenshot(filename=filename, path=path or str(save_dir))
    except OSError as exc:
        app.notify(f"could not save the screenshot: {exc}", severity="error", timeout=10)
        return
    app.notify(saved_message("saved the screenshot", [Path(str(path))]), title="SVG saved", timeout=8, markup=False)
