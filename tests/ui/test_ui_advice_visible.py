"""Rough edge 10: the advice's "not run" lines pushed its progress off-screen, and the main screen showed no
sign that the advice was measuring in the background."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ui_fakes import gpu_app, until_ready, wait_for

from apextui.ui.screens.advise_screen import render_lines

NOT_RUN = [f"optimizer p{i}: not run: needs NVIDIA Apex (FusedAdam), whose fused kernels run on CUDA only"
           for i in range(8)]


def test_not_run_presets_take_one_line():
    text = render_lines([*NOT_RUN, "optimizer adamw: 3.01 ms/step"]).plain
    lines = text.strip().splitlines()
    assert len(lines) == 3
    assert "optimizer adamw: 3.01 ms/step" in lines[1]
    assert lines[2] == "not run (8): " + ", ".join(f"p{i}" for i in range(8))


@pytest.mark.asyncio
@pytest.mark.slow
async def test_main_screen_says_the_advice_is_measuring():
    app = gpu_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        job = SimpleNamespace(running=True, state=lambda: (None, 2, 12, []), shutdown=lambda timeout: True)
        app.advice_job = job
        await wait_for(pilot, lambda: "advice measuring" in (app.live.border_subtitle or ""), what="the badge")
        assert "2/12" in app.live.border_subtitle and "a: show" in app.live.border_subtitle
        job.running = False
        await wait_for(pilot, lambda: not app.live.border_subtitle, what="the badge to go")
