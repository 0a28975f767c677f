"""The threaded runner on CPU: real training steps, stop, slow consumers, failures."""

from __future__ import annotations

import threading
import time

import pytest

from apextui.core import presets
from apextui.core.workloads import builders
from apextui.core.workloads.base import Workload
from apextui.core.run.runner import Runner
from apextui.core.run.snapshot import Snapshot
from apextui.core.run.request import RunRequest


def run(name: str, steps: int, callback=None, **kw) -> tuple[Runner, list[Snapshot]]:
    snaps: list[Snapshot] = []

    def collect(s: Snapshot) -> None:
        snaps.append(s)
        if callback:
            callback(s)

    runner = Runner(RunRequest(presets.resolve(name), "cpu", steps), collect, **kw).start()
    assert runner.join(timeout=600)  # a bound on a hang only: a loaded box makes real steps slow
    return runner, snaps


def steps_of(snaps: list[Snapshot]) -> list[int]:
    """Every step the delivered intervals cover (a block of k steps ending at n covers n-k+1..n)."""
    return [i for s in snaps for r in s.new_steps for i in range(r.step - r.steps + 1, r.step + 1)]


@pytest.mark.slow
def test_snapshots_deliver_every_step_once_in_order():
    runner, snaps = run("adamw", steps=25)
    assert steps_of(snaps) == list(range(1, 26))
    final = snaps[-1]
    assert final is runner.result and final.status == "ok" and final.steps_done == 25
    assert [s.status for s in snaps[:-1]].count("ok") == 0
    assert final.stats.steps == 25 - runner.warmup
    assert final.info.size_name == "cpu" and dict(final.info.size) == dict(presets.resolve("adamw").cpu_size)
    recs = [r for s in snaps for r in s.new_steps]
    # opt_ms is the block's last optimizer step alone, ms the block's mean step: within the block's total
    # (a block's last optimizer step can outlast its mean step on a loaded machine)
    assert all(r.ms > 0 and r.loss is not None and 0 < r.opt_ms < r.ms * r.steps for r in recs)
    assert final.throughput == pytest.approx(16 * 1000 / final.stats.median_ms)


@pytest.mark.slow
def test_transformer_loss_falls_toward_the_entropy_floor():
    runner, snaps = run("fp32", steps=150)
    losses = [r.loss for s in snaps for r in s.new_steps]
    floor = runner.result.info.loss_floor
    assert floor is not None and 0 < floor < losses[0]
    late = sum(losses[-20:]) / 20
    assert late < losses[0] - 1.0, (losses[0], late)
    assert late > floor - 0.1  # the expected loss cannot go below the entropy rate (a batch can, by noise)


@pytest.mark.slow
def test_stop_from_another_thread_is_prompt_and_keeps_what_was_measured():
    started = threading.Event()

    def on_snapshot(s: Snapshot) -> None:
        if s.steps_done >= 3:
            started.set()

    snaps: list[Snapshot] = []
    runner = Runner(RunRequest(presets.resolve("fp32"), "cpu", 100_000),
                    lambda s: (snaps.append(s), on_snapshot(s))).start()
    assert started.wait(300)
    runner.stop()
    assert runner.join(timeout=60)  # a bound on a hang; that the stop took is in the steps below
    final = runner.result
    assert final.status == "stopped"
    assert 3 <= final.steps_done < 100_000
    assert steps_of(snaps) == list(range(1, final.steps_done + 1))


@pytest.mark.slow
def test_a_slow_consumer_does_not_hold_up_training():
    """The consumer blocks until training has finished: training must not wait for it."""
    release = threading.Event()
    deliveries = []

    def slow(s: Snapshot) -> None:
        deliveries.append(time.monotonic())
        release.wait(600)  # held from the first delivery until training has ended (bounds a hang only)

    snaps: list[Snapshot] = []
    runner = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 200),
                    lambda s: (snaps.append(s), slow(s))).start()
    runner._train.join(300)  # a bound on a hang: training that waited for the consumer would wait 600 s
    train_done = time.monotonic()
    assert not runner._train.is_alive(), "training waited for a consumer that was still busy"
    assert runner._deliver.is_alive(), "the consumer still has a backlog"
    release.set()
    assert runner.join(timeout=300)
    assert deliveries[-1] > train_done
    assert steps_of(snaps) == list(range(1, 201))  # and nothing is lost


class Exploding(Workload):
    units, units_per_step = "samples", 1

    def __init__(self) -> None:
        self.n = 0

    def step(self, clock):
        import torch

        self.n += 1
        if self.n == 4:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return torch.tensor(1.0 / self.n), None


@pytest.mark.slow
def test_a_failing_step_reports_failed_and_keeps_earlier_steps(monkeypatch, capsys):
    monkeypatch.setattr(builders, "build", lambda preset, device, size, steps: Exploding())
    runner, snaps = run("adamw", steps=10)
    final = runner.result
    assert final.status == "failed"
    assert final.error.startswith("RuntimeError: CUDA error")
    assert final.error.endswith("was encountered (at step 4)")  # the failing step is named
    assert steps_of(snaps) == [1, 2, 3]
    assert final.final_loss == pytest.approx(1 / 3)
    assert "Traceback" in capsys.readouterr().err


def test_short_runs_keep_measured_steps():
    preset = presets.resolve("adamw")
    runner = Runner(RunRequest(preset, "cpu", 5), lambda s: None)
    assert runner.warmup == 1  # the preset's 30 would leave nothing to measure
    assert Runner(RunRequest(preset, "cpu"), lambda s: None).warmup == preset.warmup
    with pytest.raises(ValueError):
        Runner(RunRequest(preset, "cpu", 0), lambda s: None)


def test_run_trains_in_the_calling_thread_and_delivers_everything(monkeypatch):
    seen_threads: set[str] = set()
    snaps: list[Snapshot] = []
    original = builders.build

    class Spy(Workload):
        def __init__(self, inner):
            self.inner = inner
            self.units, self.units_per_step = inner.units, inner.units_per_step

        def step(self, clock):
            seen_threads.add(threading.current_thread().name)
            return self.inner.step(clock)

    monkeypatch.setattr(builders, "build", lambda *a: Spy(original(*a)))
    runner = Runner(RunRequest(presets.resolve("adamw"), "cpu", 12), snaps.append)
    final = runner.run()
    assert seen_threads == {threading.current_thread().name}
    assert final is runner.result and final.status == "ok"
    assert steps_of(snaps) == list(range(1, 13))
    assert runner.join(timeout=5) and not runner.is_alive()


def test_fast_steps_cost_the_monitor_one_interval_a_block(monkeypatch):
    """A step far below 5 ms (here one that does nothing): after the warm-up the clock records one interval
    a block and the JSON printer prints one step line a block, not one a step -- the monitor's work per
    second is bounded whatever the step time. The summary still counts every measured step."""
    import io
    import json
    import math

    from apextui.core.run.timing import MIN_BLOCKS, CpuClock
    from apextui.cli.json_lines import JsonLinePrinter

    import types

    from apextui.core.run import timing

    now = [0.0]  # the clock's time: each step takes 2 µs, whatever the machine's load

    class Nothing(Workload):
        units_per_step = 1

        def step(self, clock):
            now[0] += 2e-6
            return None, None

    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(builders, "build", lambda *a: Nothing())
    recorded: list[int] = []
    original = CpuClock._record
    monkeypatch.setattr(CpuClock, "_record",
                        lambda self, step, n, *a: (recorded.append(n), original(self, step, n, *a)))
    out = io.StringIO()
    runner = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 20_000), JsonLinePrinter(out), analyse=False)
    final = runner.run()
    warmup = runner.warmup
    assert final.status == "ok" and final.steps_done == 20_000
    block = final.stats.block_steps  # 5 ms / 2 µs = 2500, capped so that 10 blocks remain
    assert block == (20_000 - warmup) // MIN_BLOCKS and sum(recorded) == 20_000
    assert len(recorded) == warmup + math.ceil((20_000 - warmup) / block)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    steps = [e for e in lines if e["event"] == "step"]
    assert len(steps) == len(recorded) and sum(e["steps"] for e in steps) == 20_000
    summary = lines[-1]["summary"]
    assert summary["measured_steps"] == 20_000 - warmup and summary["block_steps"] > 1
    assert summary["timed_intervals"] == len(recorded) - warmup
    assert summary["median_low_ms"] <= summary["median_ms"] <= summary["median_high_ms"]


def test_a_distributed_presets_world_of_one_ends_with_its_run():
    """DDP and FSDP2 presets outside torchrun train on a world of one made for the run; it ends with the run, or the
    next run in this process would train under DDP and the next distributed preset could not make its own."""
    import torch.distributed as dist

    for name in ("ddp_adamw_fused", "fsdp2_adamw_fused", "ddp_adamw_fused"):
        final = Runner(RunRequest(presets.resolve(name), "cpu", 3), lambda s: None, analyse=False).run()
        assert final is not None and final.status == "ok", (name, final and final.error)
        assert not dist.is_initialized(), name
