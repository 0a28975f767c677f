"""Contention detection (apextui/core/monitor/contention.py): other processes' CPU time against the cores the run
may use, other processes on the run's GPU, the GPU's clocks held down; on fake psutil and NVML readings, and once
against a real busy-loop process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import namedtuple

import pytest
from nvml_fakes import MIB, fake_nvml

from apextui.core.monitor import contention
from apextui.core.monitor.contention import ContentionProbe, ContentionTally, RunContention, competing, describe, \
    level_of
from apextui.core.monitor.nvml import Nvml
from apextui.core.monitor.sampler import Sampler
from apextui.core.run import events

CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal")
ProcTimes = namedtuple("ProcTimes", "user system children_user children_system")


class FakePsutil:
    """Per-CPU busy seconds and this process's CPU seconds that a test moves on between reads."""

    def __init__(self, cpus: int) -> None:
        self.busy = [0.0] * cpus
        self.own = 0.0
        self.names = {4242: "other_trainer"}

    def cpu_times(self, percpu: bool = False):
        return [CpuTimes(b, 0, 0, 1000.0, 0, 0, 0, 0) for b in self.busy]

    def cpu_count(self) -> int:
        return len(self.busy)

    def Process(self, pid: int):  # noqa: N802 - psutil's name
        fake = self

        class P:
            def __init__(self) -> None:
                self.pid = pid

            def cpu_times(self):
                return ProcTimes(fake.own, 0.0, 0.0, 0.0)

            def children(self, recursive: bool = False):
                return []

            def parents(self):
                return []

            def name(self):
                return fake.names.get(pid, "python3")

        return P()


CLOCK = [100.0]


@pytest.fixture
def cores(monkeypatch):
    """The run may use CPUs 0 and 1 (a 2-core box), whatever this machine has; the probe's clock is a test's."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(contention.time, "monotonic", lambda: CLOCK[0])


def advance(ps: FakePsutil, monkeypatch, seconds: float, busy_per_cpu: float, own: float) -> None:
    CLOCK[0] += seconds
    ps.busy = [b + busy_per_cpu * seconds for b in ps.busy]
    ps.own += own * seconds


def test_other_processes_using_the_cores_make_a_busy_record(cores, monkeypatch):
    ps = FakePsutil(2)
    probe = ContentionProbe(None, psutil_module=ps)
    first = probe.read()
    assert first.other_cpu_cores is None and "measuring" in first.na["other_cpu_cores"]
    advance(ps, monkeypatch, 1.0, busy_per_cpu=1.0, own=1.0)  # both cores busy; the run used one of them
    c = probe.read()
    assert c.other_cpu_cores == pytest.approx(1.0) and c.own_cpu_cores == pytest.approx(1.0) and c.cores == 2
    assert c.level == "busy" and c.competing and "other processes used 1.0 of 2 CPU cores" in c.reasons[0]
    assert c.na["gpu_processes"] == "no GPU in use"


def test_the_run_alone_on_its_cores_is_quiet(cores, monkeypatch):
    ps = FakePsutil(2)
    probe = ContentionProbe(None, psutil_module=ps)
    probe.read()
    advance(ps, monkeypatch, 1.0, busy_per_cpu=0.55, own=1.0)  # the run's own core and a little else
    c = probe.read()
    assert c.other_cpu_cores == pytest.approx(0.1) and c.level == "quiet" and not c.competing


def test_another_process_on_the_runs_gpu_is_busy_and_named(cores, monkeypatch):
    fake = fake_nvml(2)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    ps = FakePsutil(2)
    fake.processes[0] = [(os.getpid(), 900 * MIB), (4242, 30_000 * MIB)]  # ours, and someone else's
    fake.processes[1] = [(5555, MIB)]  # another GPU: not the run's
    c = ContentionProbe(Nvml(0), psutil_module=ps, pid=os.getpid()).read()
    assert [(p.pid, p.name, p.mem_mb) for p in c.gpu_processes] == [(4242, "other_trainer", 30_000)]
    assert c.level == "busy" and "1 other process on the run's GPU" in c.reasons


def test_thermal_slowdown_is_throttled_and_a_power_cap_alone_is_not(cores, monkeypatch):
    fake = fake_nvml(1)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    ps = FakePsutil(2)
    fake.clock_events[0] = 0x4  # software power cap: normal at full load
    capped = ContentionProbe(Nvml(0), psutil_module=ps).read()
    assert capped.level == "quiet" and capped.throttle == ("power cap",)
    fake.clock_events[0] = 0x4 | 0x40
    hot = ContentionProbe(Nvml(0), psutil_module=ps).read()
    assert hot.level == "throttled" and "hardware thermal slowdown" in hot.reasons[0]
    assert hot.throttle == ("power cap", "hardware thermal slowdown")


def test_nothing_readable_is_unknown_never_an_error(monkeypatch):
    class Broken:
        def cpu_times(self, percpu=False):
            raise OSError("no /proc")

    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not importable
    c = ContentionProbe(Nvml(0), psutil_module=Broken()).read()
    assert c.level == "unknown" and "no /proc" in c.na["other_cpu_cores"]
    assert "not importable" in c.na["gpu_processes"]
    assert level_of(None, None, None, 0, None) == ("unknown", ())


def test_a_run_is_busy_when_a_tenth_of_its_samples_were():
    tally = ContentionTally()
    quiet = contention.Contention("quiet", 0.1, 1.0, 2)
    busy = contention.Contention("busy", 1.9, 1.0, 2, reasons=("other processes used 1.9 of 2 CPU cores",))
    for c in [quiet] * 9:
        tally.add(c)
    assert tally.level == "quiet" and not competing(tally.record())
    tally.add(busy)
    r = tally.record()
    assert r.level == "busy" and r.busy_samples == 1 and r.samples == 10
    assert r.other_cpu_cores_max == 1.9 and r.other_cpu_cores_mean == pytest.approx(0.28)
    assert competing(r) and describe(r) == "busy: other processes used 1.9 of 2 CPU cores"
    assert RunContention.from_dict(r.to_dict()) == r  # what a results file holds reads back the same


def test_the_sampler_puts_it_in_every_reading_and_the_json_fields(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(1))
    s = Sampler(gpu=True, gpu_index=0)
    s.sample()
    r = s.sample()
    assert r.contention is not None and r.run_contention is not None and r.run_contention.samples == 2
    fields = events.monitor_fields(r)
    assert fields["contention"] == r.contention.level and fields["other_gpu_processes"] == 0
    assert events.monitor_fields(None)["contention"] is None


@pytest.mark.slow
def test_a_real_busy_loop_process_is_seen_as_other_cpu_time():
    """One real process spinning on the run's cores: the probe counts about one core of other work."""
    cpus = sorted(os.sched_getaffinity(0))
    spin = f"import os\nos.sched_setaffinity(0, {{{cpus[0]}}})\nwhile True: pass"
    # started through a parent that exits at once: the burner is no child of this process (the user's other work)
    starter = subprocess.run([sys.executable, "-c", "import subprocess, sys\n"
                              f"print(subprocess.Popen([sys.executable, '-c', {spin!r}], stdout=subprocess.DEVNULL, "
                              "stderr=subprocess.DEVNULL).pid)"],
                             capture_output=True, text=True, check=True, timeout=30)
    pid = int(starter.stdout)
    try:
        time.sleep(0.3)  # it is spinning
        probe = ContentionProbe(None)
        probe.read()
        time.sleep(1.0)
        c = probe.read()
    finally:
        os.kill(pid, 9)
    assert c.other_cpu_cores is not None and c.other_cpu_cores >= 0.7, c
    assert c.own_cpu_cores is not None and c.own_cpu_cores < 0.3  # this test mostly slept
    if len(cpus) <= 4:  # one spinning core of 4 or fewer is a quarter or more: busy
        assert c.level == "busy"


def test_the_run_alone_on_its_gpu_walks_no_process_tree(cores, monkeypatch):
    fake = fake_nvml(1)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    fake.processes[0] = [(os.getpid(), 900 * MIB)]  # only this process: nothing to tell apart, every sample
    probe = ContentionProbe(Nvml(0), psutil_module=FakePsutil(2), pid=os.getpid())
    walks = []
    monkeypatch.setattr(probe, "_our_pids", lambda: walks.append(1) or frozenset({os.getpid()}))
    c = probe.read()
    assert c.gpu_processes == () and walks == []
    fake.processes[0] = [(os.getpid(), 900 * MIB), (4242, MIB)]  # another one: the walk tells whose it is
    assert [p.pid for p in probe.read().gpu_processes] == [4242] and walks == [1]


def test_a_run_that_fills_every_core_by_itself_is_not_busy_but_one_squeezed_by_others_is():
    """A compile on a 2-core box used both cores itself with 0.0 cores of other work and was marked busy ('other
    processes used 0.0 of 2 CPU cores'): the headroom rule counts only where other work took at least the quarter
    core it squeezes out."""
    assert level_of(0.03, 1.98, 2, 0, None) == ("quiet", ())
    assert level_of(0.11, 1.9, 2, 0, None) == ("quiet", ())  # one sample's blip (the pipe reading the run's JSON)
    level, why = level_of(0.3, 1.8, 2, 0, None)  # under the share rule's half a core, but nothing left free
    assert level == "busy" and why == ("other processes used 0.3 of 2 CPU cores, the run 1.8: 0.0 left free",)
    assert level_of(0.3, 1.5, 2, 0, None)[1] == ("other processes used 0.3 of 2 CPU cores, the run 1.5: 0.2 left free",)
    assert level_of(1.0, 0.5, 2, 0, None) == ("busy", ("other processes used 1.0 of 2 CPU cores",))
    assert level_of(0.3, 0.5, 2, 0, None) == ("quiet", ())  # room left: a daemon's 0.3 cores is no contention


def test_a_run_that_started_busy_ends_with_that_sample_in_its_verdict(monkeypatch):
    """`--preset adamw_fused --json`: the `start` line said `busy` (and stderr warned), the `end` summary `unknown` (one
    sample of its own, unread): one run, one verdict: the start's sample is the run's first."""
    from apextui.cli import json_run
    from apextui.core.run.request import RunRequest
    from apextui.core import presets

    busy = contention.Contention("busy", 1.9, 0.1, 2, reasons=("other processes used 1.9 of 2 CPU cores",))
    monkeypatch.setattr(json_run, "start_contention", lambda device: busy)
    lines: list[dict] = []
    monkeypatch.setattr(json_run.JsonLinePrinter, "emit", lambda self, *objs: lines.extend(objs))
    json_run.run(RunRequest(presets.resolve("adamw"), "cpu", 12, sample_interval=60.0))
    start, end = lines[0], lines[-1]
    assert start["contention"]["level"] == "busy"
    assert end["summary"]["contention"]["level"] == "busy", end["summary"]["contention"]
    assert end["summary"]["contention"]["samples"] >= 1
