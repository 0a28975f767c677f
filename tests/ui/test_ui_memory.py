"""The TUI refuses a preset whose memory estimate does not fit, with the estimate, and keeps running."""

from __future__ import annotations

import pytest
from ui_fakes import FakeEngine, gpu_app, until_ready, wait_for

from apextui.core import memory

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s


async def test_a_preset_too_big_for_the_free_memory_is_not_started(monkeypatch):
    free = {"bytes": 1}  # nothing fits
    monkeypatch.setattr(memory, "free_bytes", lambda device: free["bytes"])
    engine = FakeEngine()
    app = gpu_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_ready(pilot, app)
        assert app.start_preset("fp32") is False and not engine.runners and app.active is None
        await wait_for(pilot, lambda: any(n.title == "does not fit" for n in app._notifications), what="notice")
        notes = [n for n in app._notifications if n.title == "does not fit"]
        assert notes and "needs about" in notes[0].message and "of GPU memory" in notes[0].message
        assert "--force" not in notes[0].message  # a CLI flag: no use in the TUI
        free["bytes"] = 2**50  # the memory is free now: it starts
        assert app.start_preset("fp32") is True and engine.runners
