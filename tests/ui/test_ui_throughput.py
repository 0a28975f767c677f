"""The throughput a user compares with their trainer's: over the measured steps' whole time, slow steps included
(an HF Trainer said 115.6 samples/s where apextui, at the median step, said 591); the median step's rate is kept,
labelled as such (the `end` line's `throughput`, the details)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ui_fakes import static_text, wait_for

import apextui
from apextui.core.measure.stats import StepStats
from apextui.core.watch import store
from apextui.core.watch.stream import segments
from apextui.ui.attach_app import AttachApp

FAST_S, SLOW_S, SAMPLES = 0.300, 3.0, 8  # every tenth step is slow (an evaluation, a data stall)


class FakeClock:
    """The monitor's host clock, moved by the test alone: the step times are exact, whatever the load."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def uneven_run(name: str, steps: int = 120) -> store.RunMeta:
    fake = FakeClock()
    mon = apextui.watch(name=name, warmup=4, now=fake)
    for i in range(steps):
        mon.step(loss=1.0, samples=SAMPLES)
        fake.t += SLOW_S if i % 10 == 9 else FAST_S
    mon.close()
    assert mon.path is not None
    return store.load_meta(mon.path)


def test_the_wall_throughput_counts_the_slow_steps_and_the_median_rate_does_not():
    stats = StepStats(warmup=0)
    for i in range(100):
        stats.add(SLOW_S * 1000 if i % 10 == 9 else FAST_S * 1000)
    st = stats.read()
    assert st is not None
    assert st.throughput(SAMPLES) == pytest.approx(SAMPLES / FAST_S)  # the typical step: 26.7 samples/s
    assert st.wall_throughput(SAMPLES) == pytest.approx(SAMPLES / (0.9 * FAST_S + 0.1 * SLOW_S))  # 14.0 samples/s


@pytest.mark.asyncio
async def test_the_run_pane_shows_the_wall_throughput_and_the_end_line_both():
    meta = uneven_run("uneven")
    last_segment = segments(Path(meta.path))[-1][1]
    end = next(json.loads(line) for line in reversed(last_segment.read_text().splitlines()) if '"end"' in line)
    summary = end["summary"]
    assert summary["throughput"] == pytest.approx(SAMPLES / FAST_S, rel=0.01)
    assert summary["wall_throughput"] == pytest.approx(SAMPLES / (0.9 * FAST_S + 0.1 * SLOW_S), rel=0.05)
    app = AttachApp(meta, poll_s=0.05, refresh_s=0.1, table_s=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the run read")
        rate = static_text(app, "#run-rate")
        assert "14" in rate and "26" not in rate, rate
