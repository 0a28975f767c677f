"""The TUI refuses a preset whose memory estimate does not fit, with the estimate, and keeps running."""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, fake_probe, gpu_report, provider, wait_for

from apextui.core import memory
from apextui.ui.app import make_app

pytestmark = pytest.mark.asyncio


async def test_a_preset_too_big_for_the_free_memory_is_not_started(monkeypatch):
    free = {"bytes": 1}  # nothing fits
    monkeypatch.setattr(memory, "free_bytes", lambda device: free["bytes"])
    engine = FakeEngine()
    app = make_app(runner_factory=engine, report_provider=provider(gpu_report()), probe=fake_probe("cuda"),
                   device="cuda")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None and app.report is not None, 10, "probe and report")
        assert app.start_preset("fp32") is False and not engine.runners and app.active is None
        await wait_for(pilot, lambda: any(n.title == "does not fit" for n in app._notifications), 5, "notice")
        notes = [n for n in app._notifications if n.title == "does not fit"]
        assert notes and "needs about" in notes[0].message and "of GPU memory" in notes[0].message
        assert "--force" not in notes[0].message  # a CLI flag: no use in the TUI
        free["bytes"] = 2**50  # the memory is free now: it starts
        assert app.start_preset("fp32") is True and engine.runners
