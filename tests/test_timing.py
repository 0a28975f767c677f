"""CudaClock's batching logic, against a fake CUDA event timeline (no GPU on CI)."""

from __future__ import annotations

import math
import types

import pytest
import torch

from apextui.core.run.timing import CpuClock, CudaClock


class FakeTimeline:
    """Events complete when the test says the fake GPU has reached them."""

    def __init__(self) -> None:
        self.t = 0.0  # GPU clock in ms at the next record()
        self.done_upto = -1
        self.count = 0
        self.syncs = 0
        self.stream = object()  # the training thread's stream
        self.stream_lookups = 0
        self.streams: list[object] = []  # the stream each record() was given

    def make_event_class(self):
        timeline = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.t = None
                self.index = None

            def record(self, stream: object = None) -> None:
                timeline.streams.append(stream)
                self.t = timeline.t
                self.index = timeline.count
                timeline.count += 1

            def query(self) -> bool:
                return self.index <= timeline.done_upto

            def synchronize(self) -> None:
                timeline.syncs += 1
                timeline.done_upto = max(timeline.done_upto, self.index)

            def elapsed_time(self, end: "Event") -> float:
                assert self.query() and end.query(), "elapsed_time on an unfinished event"
                return end.t - self.t

        return Event


def fake_torch(timeline: FakeTimeline):
    def empty(shape, dtype, pin_memory=False):
        return torch.empty(shape, dtype=dtype)

    def current_stream():
        timeline.stream_lookups += 1
        return timeline.stream

    return types.SimpleNamespace(empty=empty, float32=torch.float32,
                                 cuda=types.SimpleNamespace(Event=timeline.make_event_class(),
                                                            current_stream=current_stream))


def test_cuda_clock_looks_the_stream_up_once_and_records_every_event_on_it():
    """`Event.record()` without a stream looks the current stream up on each call (most of its cost on a
    host-bound step): the clock looks it up at start and hands it to every record."""
    tl = FakeTimeline()
    clock = CudaClock(fake_torch(tl), ring=64, warmup=4, steps=40)
    clock.start()
    for step in range(1, 41):
        tl.t += 1.0
        clock.mark()
        clock.end_step(step, torch.tensor(1.0))
    clock.harvest(wait=True)
    assert tl.stream_lookups == 1
    assert len(tl.streams) > 20 and all(s is tl.stream for s in tl.streams)


def test_cuda_clock_reads_finished_steps_in_batches_without_syncing():
    tl = FakeTimeline()
    clock = CudaClock(fake_torch(tl), ring=64)
    clock.start()  # event 0 at t=0
    for step, dt in enumerate([5.0, 3.0, 4.0], start=1):
        tl.t += dt
        clock.mark()
        clock.end_step(step, torch.tensor(float(step * 10)), torch.tensor(65536.0))
    assert clock.harvest() == []  # nothing finished on the GPU yet
    tl.done_upto = 4  # start, mark1, end1, mark2, end2 finished
    first = clock.harvest()
    assert [r.step for r in first] == [1, 2]
    assert [r.ms for r in first] == [5.0, 3.0]
    assert [r.loss for r in first] == [10.0, 20.0]
    assert first[0].loss_scale == 65536.0 and first[0].opt_ms == 0.0
    assert clock.pending() == 1 and tl.syncs == 0
    rest = clock.harvest(wait=True)  # end of run: wait for the last event only
    assert [(r.step, r.ms) for r in rest] == [(3, 4.0)] and tl.syncs == 1


def test_cuda_clock_never_overwrites_an_unread_ring_slot():
    tl = FakeTimeline()
    clock = CudaClock(fake_torch(tl), ring=4)
    clock.start()
    for step in range(1, 4):
        tl.t += 1.0
        clock.end_step(step, torch.tensor(float(step)))
    assert tl.syncs == 1  # ring-1 pending: the oldest was waited for
    got = clock.harvest()
    assert [r.loss for r in got] == [1.0]


def test_cuda_clock_reuses_events_and_ring_slots_over_many_steps():
    tl = FakeTimeline()
    fake = fake_torch(tl)
    made = []

    class CountingEvent(fake.cuda.Event):
        def __init__(self, enable_timing: bool = False) -> None:
            super().__init__(enable_timing)
            made.append(self)

    fake.cuda.Event = CountingEvent
    clock = CudaClock(fake, ring=8)
    clock.start()
    got = []
    for step in range(1, 101):
        clock.mark()
        tl.t += step  # step i takes i ms
        loss = torch.tensor([float(step)]) if step % 7 == 0 else torch.tensor(float(step))  # (1,) or 0-d
        clock.end_step(step, loss, torch.tensor(2.0 ** (step % 5)))
        tl.done_upto = tl.count - 1  # the GPU keeps up
        got += clock.harvest()
    assert [r.step for r in got] == list(range(1, 101))
    assert [r.ms for r in got] == [float(i) for i in range(1, 101)]
    assert [r.opt_ms for r in got] == [float(i) for i in range(1, 101)]
    assert [r.loss for r in got] == [float(i) for i in range(1, 101)]
    assert [r.loss_scale for r in got] == [2.0 ** (i % 5) for i in range(1, 101)]
    assert len(made) == 3 and tl.syncs == 0  # start, one mark, one end: then recorded again and again


def test_cpu_clock_times_steps_back_to_back():
    clock = CpuClock()
    clock.start()
    clock.end_step(1, torch.tensor(2.0))
    clock.mark()
    clock.end_step(2, None)
    got = clock.harvest()
    assert [r.step for r in got] == [1, 2]
    assert got[0].loss == 2.0 and got[0].opt_ms is None
    assert got[1].loss is None and got[1].opt_ms is not None and got[1].opt_ms <= got[1].ms
    assert clock.harvest() == []


# ---- block timing of short steps (the monitor must not change the loop it times) ----------------------
from apextui.core.run import timing  # noqa: E402
from apextui.core.run.timing import BLOCK_TARGET_MS, MIN_BLOCKS, block_steps  # noqa: E402


@pytest.fixture(autouse=True)
def clock_work_costs_nothing(monkeypatch):
    """The clock's own work, which sets the block target, costs nothing here unless a test says so: the
    block rules below must not depend on how busy this machine is."""
    monkeypatch.setattr(timing, "cost_clock", lambda: 0.0)


def test_block_size_rule():
    assert block_steps(0.2, 10_000) == math.ceil(BLOCK_TARGET_MS / 0.2)  # 25 steps: a 5 ms block
    assert block_steps(BLOCK_TARGET_MS, 10_000) == 1 and block_steps(30.0, 10_000) == 1  # long steps: each
    assert block_steps(0.2, 100) == 100 // MIN_BLOCKS  # a short run keeps MIN_BLOCKS intervals
    assert block_steps(0.2, 5) == 1 and block_steps(math.nan, 10_000) == 1 and block_steps(0.0, 10_000) == 1


def counting_torch(tl: FakeTimeline):
    """A fake torch whose events and loss copies are counted."""
    fake = fake_torch(tl)
    counts = {"records": 0, "copies": 0}

    class CountingEvent(fake.cuda.Event):
        def record(self, stream: object = None) -> None:
            counts["records"] += 1
            super().record(stream)

    fake.cuda.Event = CountingEvent
    return fake, counts


def run_fake_gpu(clock, tl: FakeTimeline, steps: int, step_ms: float, loss_at=lambda n: float(n)):
    """`steps` steps of `step_ms` on the fake GPU (which keeps up), harvesting every 50 steps."""
    got = []
    clock.start()
    for step in range(1, steps + 1):
        clock.mark()
        tl.t += step_ms
        clock.end_step(step, torch.tensor(loss_at(step)))
        tl.done_upto = tl.count - 1
        if step % 50 == 0:
            got += clock.harvest()
    return got + clock.harvest(wait=True)


def test_short_steps_are_timed_in_blocks_after_the_warm_up():
    """0.2 ms steps: warm-up timed step by step, then blocks of 25 (>= 5 ms): one event and one loss copy a
    block, one record a block with the per-step mean; every step counted once; one synchronisation (the end
    of the warm-up, where the block size is set)."""
    tl = FakeTimeline()
    fake, counts = counting_torch(tl)
    warmup, steps = 30, 30 + 25 * 40
    clock = CudaClock(fake, warmup=warmup, steps=steps)
    got = run_fake_gpu(clock, tl, steps, 0.2)
    assert clock.schedule.block == 25
    assert [r.steps for r in got[:warmup]] == [1] * warmup
    assert [r.steps for r in got[warmup:]] == [25] * 40
    assert sum(r.steps for r in got) == steps and [r.step for r in got][-1] == steps
    assert all(r.ms == pytest.approx(0.2) for r in got)
    assert [r.loss for r in got[warmup:]] == [float(warmup + 25 * i) for i in range(1, 41)]  # the block's last
    # the monitor's GPU-side work: start + 2 calibration events + (mark + end) per interval, never per step
    intervals = warmup + 40
    assert counts["records"] == 1 + 2 + 2 * intervals
    assert tl.syncs <= 2  # calibration, and the final wait


def test_steps_of_5_ms_or_more_are_timed_one_by_one():
    tl = FakeTimeline()
    fake, counts = counting_torch(tl)
    clock = CudaClock(fake, warmup=10, steps=60)
    got = run_fake_gpu(clock, tl, 60, 8.0)
    assert clock.schedule.block == 1 and [r.step for r in got] == list(range(1, 61))
    assert all(r.steps == 1 and r.ms == pytest.approx(8.0) for r in got)


def costly_clock_run(monkeypatch, record_s: float, warmup: int, measured: int, step_ms: float):
    """A fake-GPU run whose clock reads its own work as `record_s` a timed record (mark + end: twice that an
    interval); (clock, records, the cost clock's readings so far)."""
    ticks = [0.0]

    def costly() -> float:  # each reading `record_s` after the last
        ticks[0] += record_s
        return ticks[0]

    monkeypatch.setattr(timing, "cost_clock", costly)
    tl = FakeTimeline()
    fake, _ = counting_torch(tl)
    clock = CudaClock(fake, warmup=warmup, steps=warmup + measured)
    return clock, run_fake_gpu(clock, tl, warmup + measured, step_ms), ticks


def test_a_costly_clock_times_even_long_steps_in_blocks(monkeypatch):
    """Where the clock's own work on an interval is expensive (the CUDA calls on a slow host), the block
    target grows so that this work stays CLOCK_SHARE of a block: here 0.2 ms an interval -> 80 ms blocks,
    so 8 ms steps are timed 10 at a time; the cost is read in the warm-up's second half only."""
    clock, got, ticks = costly_clock_run(monkeypatch, 0.0001, 10, 400, 8.0)
    assert clock.schedule.interval_cost_ms == pytest.approx(0.2)
    assert clock.schedule.target_ms == pytest.approx(0.2 / timing.CLOCK_SHARE)
    assert clock.schedule.block == 10 and [r.steps for r in got[10:]] == [10] * 40
    assert len(clock.schedule.costs_s) == 5 and ticks[0] == pytest.approx(0.0001 * 4 * 5)  # steps 6-10


def test_a_clock_waiting_in_a_full_launch_queue_keeps_blocks_under_the_cap(monkeypatch):
    """Where the clock's calls read slow because they wait for room in the launch queue (here 5 ms an interval
    on 34 ms steps), that wait is no cost to a GPU-bound loop: the target stops at MAX_TARGET_MS and a
    400-step run is timed in blocks of 8 (272 ms), not in 10 blocks of 38 steps."""
    clock, got, _ = costly_clock_run(monkeypatch, 0.0025, 20, 380, 34.0)
    assert clock.schedule.interval_cost_ms == pytest.approx(5.0)
    assert clock.schedule.target_ms == timing.MAX_TARGET_MS
    assert clock.schedule.block == 8 and sum(r.steps for r in got) == 400
    assert all(r.ms == pytest.approx(34.0) for r in got)


def test_a_run_stopped_inside_a_block_keeps_its_steps():
    tl = FakeTimeline()
    fake, _ = counting_torch(tl)
    clock = CudaClock(fake, warmup=10, steps=10_000)
    clock.start()
    for step in range(1, 10 + 25 + 7 + 1):  # warm-up, one block of 25, 7 steps into the next
        tl.t += 0.2
        clock.end_step(step, torch.tensor(1.0))
        tl.done_upto = tl.count - 1
    clock.close()
    got = clock.harvest(wait=True)
    assert [r.steps for r in got][-2:] == [25, 7] and got[-1].step == 42 and got[-1].ms == pytest.approx(0.2)
    assert got[-1].loss == 1.0  # the open block's last loss, read when it is closed
    clock.close()
    assert clock.harvest() == []  # nothing open: nothing more


def test_cpu_clock_blocks_short_steps_too(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    clock = CpuClock(warmup=20, steps=20 + 500)
    clock.start()
    calls = 0
    for step in range(1, 521):
        now[0] += 0.0001  # 0.1 ms steps
        clock.end_step(step, torch.tensor(float(step)))
    got = clock.harvest()
    calls = len(got)
    assert clock.schedule.block == 50 and calls == 20 + 10
    assert sum(r.steps for r in got) == 520 and all(r.ms == pytest.approx(0.1) for r in got)
