"""The TUI's data-parallel runs (`apextui --nproc N`): a real run on 2 gloo ranks shows each rank's ms/step and the
slowest rank in the run pane. Slow: it starts torchrun's launcher and two ranks."""

from __future__ import annotations

import pytest
from ui_fakes import cpu_probe_no_apex, no_gpu_report, provider, static_text, wait_for

from apextui.core.presets import resolve
from apextui.core.run.launched import launched_factory
from apextui.ui.app import make_app

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


async def test_a_run_on_two_ranks_shows_every_rank_and_the_slowest() -> None:
    app = make_app(preset=resolve("fp32"), device="cpu", steps=60, runner_factory=launched_factory(2),
                   report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex())
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: static_text(app, "#ranks-row").startswith("2 ranks"), timeout=240,
                           what="the ranks row")
            text = static_text(app, "#ranks-row")
            assert "0: " in text and "1: " in text and "slowest rank " in text
            assert app.query_one("#ranks-row").display
            # the run ended while the app is whole: an update posted during run_test's teardown reached a run pane
            # whose widgets were gone (NoMatches '#run-timing', on a loaded box)
            app.shutdown_runs(60)
            await pilot.pause()
    finally:
        app.shutdown_runs(60)
