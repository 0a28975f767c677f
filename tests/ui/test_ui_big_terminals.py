"""Big terminals use their room (the doctor pane grows), and the full doctor report keeps one report line on
one screen line (rough edge 8: it wrapped to column 0 and split the fix command)."""

from __future__ import annotations

import pytest
from ui_fakes import cpu_app, static_text, until_ready

from apextui.ui import doctor_view
from apextui.ui.widgets.status_pane import StatusPane

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s


async def test_doctor_pane_is_not_truncated_at_200_columns():
    app = cpu_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await until_ready(pilot, app)
        await pilot.pause()
        pane = app.query_one(StatusPane)
        lines = static_text(app, "#status-body").splitlines()
        assert pane.size.width >= 55
        assert max(len(line) for line in lines) <= pane.content_size.width, "a doctor line is cut"


async def test_full_report_lines_are_not_wrapped():
    app = cpu_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.press("d")
        await pilot.pause()
        body = app.screen.query_one("#report-body")
        lines = doctor_view.full_report_lines(app.report)
        assert body.size.height == len(lines)  # one screen line per report line: nothing wrapped
        assert body.size.width >= max(line.cell_len for line in lines)
