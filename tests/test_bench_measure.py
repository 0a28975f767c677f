"""benchmarks/benchlib/measure.py: the host-use account behind the monitor budget, and the budget's arithmetic."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from helpers import benchmarks_on_path

benchmarks_on_path()
from benchlib.measure import HostUse, geomean_ci, gil_handoff_s, monitor_budget  # noqa: E402 - after the path

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="switches and run-queue wait read /proc")


def spin(seconds: float) -> None:
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass


def test_another_threads_cpu_counts_as_others_and_not_as_the_callers():
    before = HostUse.now()
    worker = threading.Thread(target=spin, args=(0.15,))
    worker.start()
    worker.join()  # ended before the second reading: its time must still count
    use = HostUse.now() - before
    assert use.others_cpu_s >= 0.12, use
    assert use.thread_cpu_s < use.others_cpu_s, use


def test_the_callers_own_cpu_is_not_others():
    before = HostUse.now()
    spin(0.1)
    use = HostUse.now() - before
    assert use.thread_cpu_s >= 0.09 and use.others_cpu_s < 0.05, use


@linux
def test_the_monitor_threads_are_read_apart_from_the_caller():
    """A live Python thread's CPU time counts in `py_threads_cpu_s` (the monitor's threads); the caller's own
    does not."""
    go, used, stop = threading.Event(), threading.Event(), threading.Event()

    def busy() -> None:
        go.wait()
        t0 = time.thread_time()
        while not stop.is_set():
            spin(0.001)
            if time.thread_time() - t0 >= 0.06:
                used.set()  # 0.06 s of CPU since the first reading, however long a loaded machine took to give it

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        before = HostUse.now()
        go.set()
        assert used.wait(60), "the busy thread got no 0.06 s of CPU in 60 s"
        theirs = HostUse.now() - before
    finally:
        go.set()
        stop.set()
        worker.join()
    before = HostUse.now()
    spin(0.1)
    mine = HostUse.now() - before
    assert theirs.py_threads_cpu_s >= 0.05, theirs
    assert mine.thread_cpu_s >= 0.09 and mine.py_threads_cpu_s < 0.02, mine


@linux
def test_a_wait_counts_as_a_voluntary_switch():
    before = HostUse.now()
    for _ in range(5):
        time.sleep(0.002)
    assert (HostUse.now() - before).switches >= 5


def test_a_gil_hand_over_is_measured_per_hop_as_the_median_of_the_repeats(monkeypatch):
    """The arithmetic on a fake clock (each ping-pong reads it twice: 0.2, 0.9, 0.4 s for 200 hops); the real
    hand-over only has to be measured at all (how long it takes depends on the machine's load)."""
    from benchlib import measure

    ticks = iter([0.0, 0.2, 1.0, 1.9, 2.0, 2.4])
    with monkeypatch.context() as m:
        m.setattr(measure, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
        assert gil_handoff_s(hops=200, repeats=3) == pytest.approx(0.4 / 200)
    assert 0 < gil_handoff_s(hops=200, repeats=3) < 1


def test_the_budget_adds_the_clock_the_other_threads_and_the_extra_waits():
    bare = HostUse(wall_s=1.0, thread_cpu_s=0.9, process_cpu_s=0.95, switches=40, runq_s=0.01)
    monitored = HostUse(wall_s=1.0, thread_cpu_s=0.9, process_cpu_s=0.97, switches=60, runq_s=0.03)
    b = monitor_budget(monitored, bare, clock_s=0.001, handoff_s=50e-6)
    # others 0.07 - 0.05 = 0.02 s; 20 extra waits x 50 us = 0.001 s; clock 0.001 s; of a 1 s block
    assert b["gil"] == pytest.approx(0.021) and b["clock"] == pytest.approx(0.001)
    assert b["total"] == pytest.approx(0.022) and b["extra_switches"] == 20
    assert b["runq"] == pytest.approx(0.02)
    quieter = HostUse(wall_s=1.0, thread_cpu_s=0.9, process_cpu_s=0.9, switches=30, runq_s=0.0)
    assert monitor_budget(quieter, bare, 0.0, 50e-6)["total"] == 0  # never below nothing


def test_the_budget_counts_the_monitors_python_threads_not_torchs_where_they_were_read():
    """torch's autograd thread (not a Python thread) used 0.2 s more in the monitored block; the monitor's
    Python threads 0.003 s: only those are the monitor's."""
    bare = HostUse(wall_s=1.0, thread_cpu_s=0.9, process_cpu_s=1.3, switches=40, runq_s=0.0, py_threads_cpu_s=0.0)
    monitored = HostUse(wall_s=1.0, thread_cpu_s=0.9, process_cpu_s=1.5, switches=40, runq_s=0.0,
                        py_threads_cpu_s=0.003)
    assert monitor_budget(monitored, bare, 0.0, 50e-6)["gil"] == pytest.approx(0.003)


def test_geomean_ci_is_the_geometric_mean_inside_its_interval():
    g, lo, hi = geomean_ci([1.0, 1.21, 1.1, 1.1])
    assert g == pytest.approx(1.1, rel=1e-3) and lo <= g <= hi and lo >= 1.0 and hi <= 1.21
