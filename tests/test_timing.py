"""CudaClock's batching logic, against a fake CUDA event timeline (no GPU on CI)."""

from __future__ import annotations

import types

import pytest
import torch

from apextui.core.timing import CpuClock, CudaClock


class FakeTimeline:
    """Events complete when the test says the fake GPU has reached them."""

    def __init__(self) -> None:
        self.t = 0.0  # GPU clock in ms at the next record()
        self.done_upto = -1
        self.count = 0
        self.syncs = 0

    def make_event_class(self):
        timeline = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.t = None
                self.index = None

            def record(self) -> None:
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

    return types.SimpleNamespace(empty=empty, float32=torch.float32,
                                 cuda=types.SimpleNamespace(Event=timeline.make_event_class()))


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
