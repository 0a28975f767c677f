"""`apextui.watch` against issue 41's faults: bad values (a non-scalar loss, a string, NaN tokens, ...), a forked
child, a warm-up slower than the steps after it, a writer backlog at `close()`, a full disk. Each: the training
goes on, the bad value is left out with one warning, the stream ends with its `end` line."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import apextui
from apextui.core.watch import reader, store, stream
from apextui.core.watch.hook import Watch
from helpers import ROOT, cli_env


def stream_events(mon: Watch) -> list[dict]:
    follower = reader.Follower(mon.path)
    evs = follower.poll()
    assert follower.bad_lines == 0 and not follower.partial
    return evs


def loop(mon: Watch, steps: int, **per_step) -> None:
    """A real (tiny) training loop on CPU with `mon.step(loss=..., **per_step)`; a callable value is called with
    the step's loss tensor and its index."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for i in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        args = {k: v(loss.detach(), i) if callable(v) else v for k, v in per_step.items()}
        args.setdefault("loss", loss.detach())
        mon.step(**args)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "apextui.watch" and r.levelno >= logging.WARNING]


# ---- row 1: a non-scalar tensor loss ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["4 elements", "only the last", "0 elements"])
def test_a_non_scalar_loss_is_left_out_with_one_warning_and_the_run_ends_ok(case, caplog):
    bad = {"4 elements": lambda t, i: torch.ones(4), "0 elements": lambda t, i: torch.ones(0),
           "only the last": lambda t, i: torch.ones(4) if i == 99 else t}[case]
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon = apextui.watch(name="vec")
        loop(mon, 100, loss=bad)
        mon.close()
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "elements" in warned[0] and "left out" in warned[0], warned
    evs = stream_events(mon)
    end = evs[-1]
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["steps"] == 100
    steps = [e for e in evs if e["event"] == "step"]
    assert steps[-1]["step"] == 100 and steps[-1]["loss"] is None
    if case == "only the last":
        assert steps[0]["loss"] is not None


# ---- row 15: bad values of every kind -----------------------------------------------------------------------------
BAD_LOSSES = {
    "str": "0.5x", "list": [1.0, 2.0], "numpy 2 elements": np.array([1.0, 2.0]), "big int": 10**400,
    "complex": complex(1, 2), "numpy complex": np.complex128(1 + 2j), "meta tensor": torch.ones((), device="meta"),
    "complex tensor": torch.tensor(1 + 2j), "None-like object": object(),
}
BAD_METRICS = {
    "numpy 2 elements": np.array([1.0, 2.0]), "np.str_": np.str_("abc"), "big int": 10**400, "str": "x",
    "tensor 3 elements": torch.ones(3), "meta tensor": torch.ones((), device="meta"), "list": [1, 2],
    "complex": 1j,
}
BAD_TOKENS = {"nan": float("nan"), "inf": float("inf"), "0": 0, "-5": -5, "big int": 10**400,
              "numpy nan": np.float64("nan"), "str": "64", "tensor": torch.tensor(64)}


@pytest.mark.parametrize("kind", list(BAD_LOSSES))
def test_a_bad_loss_is_left_out_with_one_warning_and_the_monitor_goes_on(kind, caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        with apextui.watch(name="bad-loss", warmup=4) as mon:
            loop(mon, 50, loss=BAD_LOSSES[kind], lr=0.01)
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "loss" in warned[0] and "left out" in warned[0], warned
    assert mon.live is False and mon.failure is None
    evs = stream_events(mon)
    assert evs[-1]["event"] == "end" and evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 50
    assert all(e["loss"] is None for e in evs if e["event"] == "step")
    assert [e for e in evs if e["event"] == "metric"][-1]["values"] == {"lr": 0.01}  # the rest goes on


@pytest.mark.parametrize("kind", list(BAD_METRICS))
def test_a_bad_metric_is_left_out_with_one_warning_and_the_monitor_goes_on(kind, caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        with apextui.watch(name="bad-metric", warmup=4) as mon:
            loop(mon, 50, lr=0.01, bad=BAD_METRICS[kind])
            mon.log(score=0.5, bad=BAD_METRICS[kind])
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "'bad'" in warned[0] and "left out" in warned[0], warned
    evs = stream_events(mon)
    assert evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 50
    metrics = [e["values"] for e in evs if e["event"] == "metric"]
    assert metrics and all("bad" not in v for v in metrics) and {"lr": 0.01} in metrics and {"score": 0.5} in metrics
    assert all(e["loss"] is not None for e in evs if e["event"] == "step")


@pytest.mark.parametrize("kind", list(BAD_TOKENS))
def test_bad_tokens_are_left_out_with_one_warning_and_give_no_throughput(kind, caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        with apextui.watch(name="bad-tokens", warmup=4) as mon:
            loop(mon, 50, tokens=BAD_TOKENS[kind])
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "tokens=" in warned[0], warned
    evs = stream_events(mon)
    end = evs[-1]
    assert end["status"] == "ok" and end["summary"]["steps"] == 50
    assert end["summary"]["throughput_unit"] != "tokens/s"
    assert all(e.get("units") != "tokens" for e in evs if e["event"] == "setup")


def test_tokens_that_turn_bad_are_left_out_and_the_good_ones_count(caplog):
    """Good counts, then NaN and 0 now and then: the throughput is from the good counts alone."""
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        with apextui.watch(name="some-bad-tokens", warmup=4) as mon:
            loop(mon, 60, tokens=lambda t, i: (float("nan"), 0, 128)[i % 3])
    assert len(warnings_of(caplog)) == 2  # one a kind of problem: not finite, not positive
    setups = [e for e in stream_events(mon) if e["event"] == "setup"]
    assert setups[-1]["units"] == "tokens" and setups[-1]["units_per_step"] == 128


# ---- row 2: a forked child --------------------------------------------------------------------------------------
FORKED = """
import json, os, sys
from pathlib import Path
import apextui
from apextui.core.watch import store

where = Path(sys.argv[1])
mon = apextui.watch(name="forked", where=where, warmup=2)
for i in range(30):
    mon.step(loss=1.0 / (i + 1))
pid = os.fork()
if pid == 0:  # the child: a few steps of its own (ignored), then it ends as the argument says
    for i in range(30):
        mon.step(loss=2.0)
    if sys.argv[2] == "close":
        mon.close()
    sys.exit(0)  # its exit handlers run (the parent's atexit close among them)
_, status = os.waitpid(pid, 0)
live = [m.path for m in store.live_runs(where)]
for i in range(30):
    mon.step(loss=1.0)
mon.close()
print(json.dumps({"child": status, "live": live, "path": str(mon.path)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit", "close"])
def test_a_forked_child_that_exits_leaves_the_parents_run_live(how, tmp_path):
    proc = subprocess.run([sys.executable, "-c", FORKED, str(tmp_path), how], capture_output=True, text=True,
                          env=cli_env(), cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["child"] == 0 and got["live"] == [got["path"]]  # still live while the parent trains
    evs = reader.Follower(Path(got["path"])).poll()
    assert [e["event"] for e in evs].count("end") == 1
    assert evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 60  # the parent's steps alone
    assert store.live_runs(tmp_path) == []


# ---- row 7: a warm-up slower than the steps after it ----------------------------------------------------------------
class FakeClock:
    """The monitor's host clock, moved by the test alone: the step times below are exact, whatever the load."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def fake_steps(mon: Watch, fake: FakeClock, n: int, step_s: float) -> None:
    for _ in range(n):
        mon.step(loss=1.0)
        fake.t += step_s


def test_fast_steps_after_a_slow_warm_up_are_timed_in_blocks_and_the_line_rate_stays_bounded():
    """15 steps of 60 ms (the warm-up sizes blocks of one step), then 50,000 steps of 10 us: the blocks grow, so
    the step lines stay at about 200 a (fake) second, not one a step."""
    fake = FakeClock()
    with apextui.watch(name="slow-warm-up", now=fake) as mon:
        fake_steps(mon, fake, 15, 0.060)
        fake_steps(mon, fake, 50_000, 10e-6)
    steps = [e for e in stream_events(mon) if e["event"] == "step"]
    assert sum(e["steps"] for e in steps) == 50_014  # every step is in a line (the first starts the clock)
    fast_lines = len(steps) - 14
    assert fast_lines <= 64 + 2 * 200 * 0.5, fast_lines  # before a block grows, then <= 200 a second (0.5 s)
    assert steps[-2]["ms"] == pytest.approx(0.01) and steps[-2]["steps"] >= 500  # 5 ms blocks of 10 us steps


def test_slow_steps_after_fast_ones_shrink_the_blocks_again():
    """Blocks sized for 10 us steps, then steps of 50 ms: after one long block the steps are timed one by one."""
    fake = FakeClock()
    with apextui.watch(name="slowing-down", now=fake) as mon:
        fake_steps(mon, fake, 20_000, 10e-6)
        fake_steps(mon, fake, 2_000, 0.050)
    steps = [e for e in stream_events(mon) if e["event"] == "step"]
    assert sum(e["steps"] for e in steps) == 21_999
    slow = [e for e in steps if e["ms"] == pytest.approx(50.0)]
    assert len(slow) > 1000 and all(e["steps"] == 1 for e in slow[-1000:])


# ---- row 8: a writer backlog at close() ----------------------------------------------------------------------------
def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def written(mon: Watch) -> bytes:
    return b"".join(p.read_bytes() for _, p in stream.segments(mon.path))


@pytest.mark.slow
def test_close_while_threads_log_in_a_loop_writes_the_end_line(caplog):
    mon = apextui.watch(name="busy-log", warmup=2)
    loop(mon, 30)
    stop, errors = threading.Event(), []

    def spam() -> None:
        try:
            while not stop.is_set():
                mon.log(score=1.0)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=spam) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        steps = 30
        while b'"score"' not in written(mon):  # the loop goes on (log() lines go out with its hand-overs)
            assert steps < 100_000
            loop(mon, 10)
            steps += 10
        with caplog.at_level(logging.WARNING, "apextui.watch"):
            mon.close()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors and warnings_of(caplog) == []
    evs = stream_events(mon)  # every line whole and JSON
    assert evs[-1]["event"] == "end" and evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == steps


def test_a_writer_that_falls_behind_drops_and_counts_lines_and_still_writes_the_end(monkeypatch):
    """The writer thread held inside a write (a slow disk) while the loop goes on and log() is called 500 times:
    the metric lines beyond the bound are dropped, the step records beyond theirs are merged (their steps and
    time kept), and the end line, written once the writer is free, counts what was dropped."""
    from apextui.core.watch import hook

    from apextui.core.watch import writer
    monkeypatch.setattr(writer, "MAX_EXTRAS", 100)
    monkeypatch.setattr(hook, "MAX_BACKLOG", 20, raising=False)
    fake = FakeClock()
    mon = apextui.watch(name="backlog", warmup=2, now=fake)
    fake_steps(mon, fake, 10, 0.060)
    wait_for(lambda: b'"step"' in written(mon))
    held, entered = threading.Event(), threading.Event()
    real = mon.stream.write

    def slow_write(lines):
        entered.set()
        held.wait(60)
        return real(lines)

    monkeypatch.setattr(mon.stream, "write", slow_write)
    fake_steps(mon, fake, 10, 0.060)  # a hand-over: the writer enters the held write
    wait_for(entered.is_set)
    fake_steps(mon, fake, 280, 0.060)
    for i in range(500):
        mon.log(score=float(i))
    held.set()
    mon.close()
    evs = stream_events(mon)
    end, steps = evs[-1], [e for e in evs if e["event"] == "step"]
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["steps"] == 300
    assert sum(e["steps"] for e in steps) == 299 and len(steps) < 299
    scores = [e for e in evs if e["event"] == "metric" and "score" in e["values"]]
    assert len(scores) == 100
    assert end["watch"]["dropped_lines"] == 400 + (299 - len(steps))


# ---- row 17: a full disk --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def tmpfs(folder: Path, size: str):
    """A small tmpfs at `folder` (a real full disk: ENOSPC from the kernel); the test is skipped where mounting is not
    allowed (not root, no CAP_SYS_ADMIN)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


FILLS_THE_DISK = """
import json, sys
from pathlib import Path
import apextui

mon = apextui.watch(name="full-disk", where=Path(sys.argv[1]))
metrics = {f"metric_with_a_long_name_{i:03d}": 0.001 * i for i in range(200)}
steps = 0
while mon.stream.failed is None and steps < 2_000_000:  # until the disk is full
    mon.step(loss=1.0, **metrics)
    steps += 1
for _ in range(3000):  # and on: the training goes on
    mon.step(loss=0.5, **metrics)
    steps += 1
mon.close()
print(json.dumps({"path": str(mon.path), "steps": steps, "failed": mon.stream.failed}), flush=True)
if sys.argv[2] == "alive":  # the run has ended, its process lives on (a notebook) until the test says
    sys.stdin.readline()
"""


@pytest.mark.slow
@pytest.mark.parametrize("process", ["gone", "alive"])
def test_a_full_disk_keeps_the_runs_own_end_and_says_where_the_stream_stopped(process, tmp_path):
    with tmpfs(tmp_path / "small", "300k") as where:
        train = subprocess.Popen([sys.executable, "-c", FILLS_THE_DISK, str(where), process], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT)
        try:
            got = json.loads(train.stdout.readline())
            if process == "gone":
                assert train.wait(60) == 0
            attach = subprocess.run([sys.executable, "-m", "apextui", "attach", got["path"], "--json"],
                                    capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60)
            last = reader.last_end(Path(got["path"]))  # what the table of runs reads
            steps = [e["step"] for e in reader.Follower(Path(got["path"])).poll() if e.get("event") == "step"]
        finally:
            if train.poll() is None:
                train.communicate("\n", timeout=60)
    assert got["failed"] == "No space left on device"
    assert attach.returncode == 0, attach.stderr
    printed = [json.loads(line) for line in attach.stdout.splitlines()]
    notes = [e["message"] for e in printed if e["event"] == "note"]
    end = printed[-1]
    assert end["event"] == "end" and end["status"] == "ok" and end["summary"]["steps"] == got["steps"]
    stopped = end["watch"]["stream_stopped"]
    assert stopped["reason"] == "disk full" and 0 < stopped["step"] < got["steps"]
    assert notes[-1].startswith(f"stream stopped: disk full at step {stopped['step']}")
    # no line of the stream is past the step the note names (it named the last batch written whole: re-runs on the
    # merged code found steps 60-550 past it)
    assert steps and max(steps) <= stopped["step"]
    assert "in the middle of writing" not in attach.stderr
    assert last == end
