"""The TUI's data-parallel runs (`apextui --nproc N`): a run on 2 ranks shows each rank's ms/step and the slowest
rank in the run pane. The runner is a fake here: the real one (`LaunchedRunner`, torchrun's launcher and two gloo
ranks) is tested in tests/test_distributed.py, down to the merged records with every rank's time that this pane
shows."""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, FakeRunner, cpu_app, static_text, wait_for

from apextui.core.presets import resolve
from apextui.core.run.merge import MergedRecord
from apextui.core.run.timing import StepRecord

pytestmark = pytest.mark.asyncio


class TwoRanks(FakeRunner):
    """A fake data-parallel run: every record is merged from 2 ranks, rank 1 the slower by 1 ms."""

    def _record(self, step: int) -> StepRecord:
        one = super()._record(step)
        return MergedRecord(step=one.step, ms=one.ms + 1.0, loss=one.loss, rank_ms=(one.ms, one.ms + 1.0),
                            slowest_rank=1)


class TwoRanksEngine(FakeEngine):
    def __call__(self, request, callback):  # type: ignore[no-untyped-def]
        runner = TwoRanks(request, callback)
        self.runners.append(runner)
        return runner


async def test_the_ranks_row_outlives_a_final_snapshot_that_brings_no_step() -> None:
    """The fake run delivers every snapshot, the final one (no new step) last, before the UI takes any: the row
    comes from the last interval that had each rank's time (once it came from the snapshot taken, and a loaded box
    taking only the final one never showed the row)."""
    engine = TwoRanksEngine()
    app = cpu_app(engine, preset=resolve("fp32"), device="cpu", steps=30)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(engine.runners) and engine.runners[0].finished, what="the fake run's end")
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.finished, what="its final view")
        text = static_text(app, "#ranks-row")
        assert text.startswith("2 ranks") and "slowest rank 1" in text and app.query_one("#ranks-row").display


async def test_a_run_of_one_process_leaves_the_ranks_row_hidden() -> None:
    engine = FakeEngine()
    app = cpu_app(engine, preset=resolve("fp32"), device="cpu", steps=30)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app._drawn_view is not None and app._drawn_view.finished, what="its final view")
        assert app._drawn_view.last_ranks is None and not app.query_one("#ranks-row").display
