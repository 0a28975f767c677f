"""Big terminals use their room (the doctor pane grows), and the full doctor report keeps one report line on
one screen line (rough edge 8: it wrapped to column 0 and split the fix command)."""

from __future__ import annotations

import pytest
from ui_fakes import cpu_app, static_text, until_ready, wait_for

from apextui.ui import doctor_view
from apextui.ui.widgets.status_pane import StatusPane

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s


async def test_doctor_pane_is_not_truncated_at_200_columns():
    app = cpu_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await until_ready(pilot, app)
        await pilot.pause()
        pane = app.query_one(StatusPane)
        body = app.query_one("#status-body")
        lines = static_text(app, "#status-body").splitlines()
        assert pane.size.width >= 55 and body.size.width <= pane.content_size.width
        # a line wider than the pane wraps at words (issue 27): every wrapped line has its row, none is cut
        from rich.text import Text

        rows = sum(len(Text(line).wrap(app.console, body.size.width)) for line in lines)
        assert body.size.height == rows, "a doctor line is cut"


async def test_full_report_lines_are_wrapped_once_by_the_screen_only():
    """doctor_view.wrap_report wraps at words (issue 27); the body then lays out one screen line per wrapped line
    (nowrap: a fix command is never split again) and is as wide as its widest line (the box scrolls to it)."""
    app = cpu_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.press("d")

        def laid_out() -> bool:  # wrapped to the screen after a refresh, then laid out a line a wrapped line
            body = app.screen.query_one("#report-body")
            return app.screen._wrapped_at > 0 and body.size.height == len(str(body.content).splitlines())

        await wait_for(pilot, laid_out, what="the report wrapped and laid out")
        body = app.screen.query_one("#report-body")
        lines = str(body.content).splitlines()
        assert len(lines) > len(doctor_view.full_report_lines(app.report))  # some wrapped at 80 columns
        assert body.size.height == len(lines)
        assert body.size.width >= max(len(line) for line in lines)
