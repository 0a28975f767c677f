"""`apextui.watch`: the hook in a real (tiny) training loop, its stream on disk, `apextui attach --json`, and every
fault of issue 29 (another thread, a float / 0-d / NaN loss, SIGKILL mid-write, a full disk, a tiny size cap, a
missing name, two runs of one name, a fault of the monitor's own)."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import apextui
from apextui.cli import main
from apextui.core.run import events
from apextui.core.run.timing import StepRecord
from apextui.core.watch import reader, store, stream
from apextui.core.watch.hook import Watch
from apextui.core.watch.replay import Replay
from helpers import ROOT, cli_env, killed_watched_run


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05), torch.randn(64, 16), torch.randn(64, 1)


def train(mon: Watch, steps: int, loss_as=lambda t: t) -> list[float]:
    """A real training loop with `mon.step` in it; the losses it computed."""
    model, opt, x, y = _model()
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        mon.step(loss=loss_as(loss.detach()), tokens=64 * 16, lr=0.05, grad_norm=torch.tensor(1.5))
    return losses


def stream_events(mon: Watch) -> list[dict]:
    return reader.Follower(mon.path).poll()


def kinds(evs: list[dict]) -> list[str]:
    return [e["event"] for e in evs]


@pytest.mark.slow
def test_a_training_loop_streams_the_json_shapes_and_attach_json_reads_them_back(capfd):
    with apextui.watch(name="tiny-mlp") as mon:
        losses = train(mon, 300)
    evs = stream_events(mon)
    assert kinds(evs)[:2] == ["start", "setup"] and kinds(evs)[-1] == "end"
    start, end = evs[0], evs[-1]
    assert start["workload"] == "watch" and start["preset"] == "tiny-mlp" and start["device"] == "cpu"
    assert start["watch"]["pid"] == os.getpid()
    steps = [e for e in evs if e["event"] == "step"]
    # the same keys as a preset's --json lines
    assert set(steps[0]) == set(events.step_event(StepRecord(1, 1.0), events.monitor_fields(None)))
    assert sum(e["steps"] for e in steps) == 299  # every call but the first, which starts the clock
    assert steps[-1]["step"] == 300 and steps[-1]["loss"] == pytest.approx(losses[-1], abs=1e-6)
    assert end["status"] == "ok" and end["summary"]["steps"] == 300 and end["summary"]["throughput_unit"] == "tokens/s"
    metrics = [e for e in evs if e["event"] == "metric"]
    assert metrics and metrics[-1]["values"] == {"lr": 0.05, "grad_norm": 1.5} and metrics[-1]["step"] == 300
    assert store.live_runs() == []  # closed: out of the index

    capfd.readouterr()
    assert main(["attach", "tiny-mlp", "--json"]) == 0
    printed = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert printed == evs
    replay = Replay()
    replay.add(printed)
    assert replay.snapshot().stats.median_ms == pytest.approx(end["summary"]["median_ms"], rel=1e-3)


def test_short_steps_are_timed_in_blocks_once_the_warm_up_is_in():
    with apextui.watch(name="blocks", warmup=10) as mon:
        train(mon, 3000)
    steps = [e for e in stream_events(mon) if e["event"] == "step"]
    assert [e["steps"] for e in steps[:10]] == [1] * 10  # the warm-up, one by one
    assert max(e["steps"] for e in steps) > 1  # sub-ms CPU steps: blocks of >= 5 ms
    assert sum(e["steps"] for e in steps) == 2999


@pytest.mark.parametrize("kind", ["float", "0-d", "nan"])
def test_a_float_a_0d_tensor_and_a_nan_loss_are_all_taken(kind):
    as_loss = {"float": lambda t: float(t), "0-d": lambda t: t.reshape(()),
               "nan": lambda t: torch.tensor(float("nan"))}[kind]
    with apextui.watch(name=f"loss-{kind}") as mon:
        losses = train(mon, 40, as_loss)
    evs = stream_events(mon)
    steps = [e for e in evs if e["event"] == "step"]
    notes = [e["message"] for e in evs if e["event"] == "note"]
    if kind == "nan":
        assert all(e["loss"] is None for e in steps)
        assert len(notes) == 1 and "nan at step 2" in notes[0]
        assert evs[-1]["status"] == "ok"  # the monitor reports, it never stops the training
    else:
        assert steps[-1]["loss"] == pytest.approx(losses[-1], abs=1e-6) and not notes
        assert all(e["loss"] is not None for e in steps)


def test_step_from_another_thread_is_ignored_with_one_warning(caplog):
    mon = apextui.watch(name="threads")
    train(mon, 20)
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        t = threading.Thread(target=lambda: [mon.step(loss=1.0) for _ in range(5)])
        t.start()
        t.join()
    train(mon, 20)
    mon.close()
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "called from thread" in caplog.records[0].message and len(caplog.records) == 1
    evs = stream_events(mon)
    assert evs[-1]["summary"]["steps"] == 40 and mon.live is False


def test_step_before_any_cuda_work_on_a_cpu_machine_times_with_the_host_clock():
    mon = apextui.watch(name="early")
    mon.step()  # before the model exists: no loss, no CUDA
    train(mon, 20)
    mon.close()
    evs = stream_events(mon)
    assert evs[0]["device"] == "cpu" and evs[-1]["status"] == "ok" and evs[-1]["summary"]["steps"] == 21


class FullDisk:
    """A file whose writes fail as on a full file system (ENOSPC) after `room` bytes."""

    def __init__(self, path: Path, room: int) -> None:
        self.f, self.room = open(path, "a"), room

    def write(self, text: str) -> int:
        if len(text) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(text)
        return self.f.write(text)

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def test_a_full_disk_stops_the_stream_with_one_warning_and_training_goes_on(caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        with apextui.watch(name="full", opener=lambda p: FullDisk(p, 3000)) as mon:
            losses = train(mon, 400)
    assert len(losses) == 400  # the loop ran to its end
    warned = [r.message for r in caplog.records]
    assert len(warned) == 1 and "No space left on device" in warned[0] and "training goes on" in warned[0]
    assert mon.stream.failed == os.strerror(errno.ENOSPC)
    written = (mon.path / "events-000001.jsonl").read_text()
    assert len(written) <= 3000 and written.endswith("\n") and '"end"' not in written


def test_a_tiny_size_cap_keeps_the_newest_lines_and_the_reader_says_what_rotated_away():
    cap = 32 * 1024
    with apextui.watch(name="capped", max_bytes=cap) as mon:
        for _ in range(20):  # the bytes a step writes vary (the clock times steps in blocks whose size it picks):
            train(mon, 500)  # train until the oldest segments have rotated away (1,000 steps once filled only 7)
            found = stream.segments(mon.path)
            if found and found[0][0] > 1:
                break
    found = stream.segments(mon.path)
    assert len(found) == stream.SEGMENTS and found[0][0] > 1
    header = len((mon.path / found[0][1]).read_text().splitlines()[0]) * 2  # start and setup, repeated
    assert all(p.stat().st_size <= cap // stream.SEGMENTS + header for _, p in found)
    follower = reader.Follower(mon.path)
    evs = follower.poll()
    assert kinds(evs)[0] == "start" and kinds(evs)[-1] == "end" and kinds(evs).count("start") == 1
    assert "rotated away" in follower.notes[0]


def test_a_fault_inside_the_monitor_is_logged_once_and_the_hook_becomes_a_no_op(caplog, monkeypatch):
    mon = apextui.watch(name="broken")
    train(mon, 5)

    def boom(*a, **k):
        raise RuntimeError("clock broke")

    monkeypatch.setattr(mon._clock, "end_step", boom)
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        train(mon, 20)  # never raises
    mon.close()
    assert len(caplog.records) == 1 and "clock broke" in caplog.records[0].message
    evs = stream_events(mon)
    assert evs[-1]["status"] == "stopped" and "the monitor stopped at step" in evs[-1]["error"]
    assert any(e["event"] == "note" and "clock broke" in e["message"] for e in evs)


def test_attach_to_a_missing_name_lists_the_live_runs(capfd):
    mon = apextui.watch(name="alive")
    try:
        assert main(["attach", "nope", "--json"]) == 2
        err = capfd.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no watched run named 'nope'" in err[0]
        assert f"alive (pid {os.getpid()}" in err[0]
    finally:
        mon.close()


def test_two_runs_with_the_same_name_get_two_folders_and_attach_says_which_it_follows(capfd):
    first, second = apextui.watch(name="twin"), apextui.watch(name="twin")
    train(second, 5)
    second.close()
    try:
        assert first.path != second.path and {m.path for m in store.live_runs()} == {str(first.path)}
        capfd.readouterr()
        assert main(["attach", "twin", "--json", "--once"]) == 0  # the live one, first (no steps yet)
        err = capfd.readouterr().err
        assert "2 runs are named 'twin'" in err and f"following twin (pid {os.getpid()}" in err
        assert str(first.path) in err.split("following")[1].split(";")[0]
    finally:
        first.close()


@pytest.mark.slow
def test_a_run_killed_mid_write_ends_without_an_end_line_and_its_partial_line_is_skipped(capfd):
    folder, pid = killed_watched_run()
    last = stream.segments(folder)[-1][1]
    with open(last, "a") as f:  # what a kill in the middle of a write leaves: a line without its end
        f.write('{"event": "step", "step": 99999, "ste')
    assert store.live_runs() == []  # its process is gone: not live any more
    capfd.readouterr()
    assert main(["attach", str(folder), "--json"]) == 1
    out, err = capfd.readouterr()
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed[0]["event"] == "start" and any(e["event"] == "step" for e in printed)
    end = printed[-1]
    assert end["event"] == "end" and end["status"] == "failed" and end["watch"]["ended_without_end"] is True
    assert "ended without an end line" in end["error"] and f"process {pid} is gone" in end["error"]
    assert end["summary"]["steps"] > 0
    assert "skipped a partial last line" in err and all(e.get("step") != 99999 for e in printed)


def test_under_torchrun_each_rank_writes_its_own_run_and_attach_follows_rank_0():
    rank0 = apextui.watch(name="ddp", rank=0)
    rank1 = apextui.watch(name="ddp", rank=1)  # newer, but rank 0 stands for the run
    try:
        assert rank0.path.name.endswith("-rank0") and rank1.path.name.endswith("-rank1")
        chosen, others = store.find("ddp")
        assert chosen.rank == 0 and [m.rank for m in others] == [1]
    finally:
        rank1.close()
        rank0.close()


def test_finished_watched_runs_compare_against_the_oldest_by_the_one_noise_rule_and_the_baseline_can_move():
    from apextui.core.results import RunIndex
    from apextui.core.watch import rows

    runs = []
    for name in ("mlp", "mlp"):
        with apextui.watch(name=name, warmup=2) as mon:
            train(mon, 60)
        runs.append(str(mon.path))
    found = rows.Table().rows()
    assert [m.path for m, _ in found] == runs
    table = [r for _, r in found]
    index = RunIndex(table)
    assert index.baseline(table[1]) is table[0] and table[0].picked_baseline and not table[1].picked_baseline
    assert index.comparison(table[1]).verdict in ("faster", "slower", "within_noise")
    moved = [r for _, r in rows.Table().rows(baseline=runs[1])]
    assert RunIndex(moved).baseline(moved[0]) is moved[1]
    live = apextui.watch(name="mlp", warmup=2)  # a live run joins with its figures so far, never as the baseline
    try:
        train(live, 60)
        time.sleep(0.3)
        live.step(loss=0.5)  # past the hand-over interval: the blocks so far go to the writer thread
        deadline = time.monotonic() + 20  # the writer thread's lines reach the disk late on a loaded box
        while True:
            table = [r for _, r in rows.Table().rows()]
            if len(table) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert [r.preset.split()[-1] for r in table][-1] == rows.LIVE_MARK and len(table) == 3
        index = RunIndex(table)
        assert index.baseline(table[2]) is table[0] and index.comparison(table[2]) is not None
    finally:
        live.close()


def test_a_watched_run_is_compared_only_with_runs_of_its_own_name():
    """An HF GPT-2 run was shown ≈0.62× against an MLP loop marked base: runs of other names are not compared, and a
    run alone under its name has no baseline and no speed-up."""
    from apextui.core.results import RunIndex
    from apextui.core.watch import rows

    for name in ("mlp", "gpt2", "mlp"):
        with apextui.watch(name=name, warmup=2) as mon:
            train(mon, 40)
    table = [r for _, r in rows.Table().rows()]
    index = RunIndex(table)
    mlp, gpt2, mlp_again = table
    assert index.is_base(mlp) and index.baseline(mlp_again) is mlp and index.comparison(mlp_again) is not None
    assert index.baseline(gpt2) is None and index.comparison(gpt2) is None and not index.is_base(gpt2)


@pytest.mark.slow
def test_import_apextui_and_a_loop_without_torch_load_neither_textual_nor_torch():
    code = ("import sys, apextui\nwith apextui.watch(name='plain') as mon:\n"
            "    for i in range(30): mon.step(loss=1 / (i + 1))\n"
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_the_reader_gets_a_segments_last_lines_written_just_before_the_next_segment(tmp_path, monkeypatch):
    """The writer's last lines to a segment, then the next segment, both between the reader's read and its look
    for a newer segment: the reader reads the old one to its end before it moves on."""
    line = lambda **e: json.dumps(e) + "\n"  # noqa: E731
    start = line(event="start", preset="r")
    stream.segment_path(tmp_path, 1).write_text(start)
    follower = reader.Follower(tmp_path)
    assert kinds(follower.poll()) == ["start"]
    real = reader.segments

    def racing(folder):
        if not stream.segment_path(tmp_path, 2).exists():
            with open(stream.segment_path(tmp_path, 1), "a") as f:
                f.write(line(event="step", step=2))
            stream.segment_path(tmp_path, 2).write_text(start + line(event="step", step=3))
        return real(folder)

    monkeypatch.setattr(reader, "segments", racing)
    assert [e.get("step") for e in follower.poll()] == [2, 3]


def test_without_a_warm_up_the_blocks_are_still_sized():
    """warmup=0 (allowed): the first timed step sizes the blocks; before, no step was in the calibration window,
    so every step stayed its own interval and every step harvested the clock."""
    with apextui.watch(name="no-warmup", warmup=0) as mon:
        for _ in range(2000):  # steps of microseconds: blocks of many steps
            mon.step(loss=1.0)
    steps = [e for e in stream_events(mon) if e["event"] == "step"]
    assert max(e["steps"] for e in steps) > 1 and sum(e["steps"] for e in steps) == 1999


def test_a_program_that_dies_of_an_exception_without_close_ends_its_run_failed(tmp_path):
    """The README's plain loop (no `with`, no close) raising: closed at exit, `failed` with the error, not `ok`."""
    code = (f"import apextui\nmon = apextui.watch(name='crash', where=r'{tmp_path}')\n"
            "for i in range(30): mon.step(loss=1 / (i + 1))\nraise RuntimeError('CUDA out of memory')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 1 and "CUDA out of memory" in proc.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    end = reader.last_end(folder)
    assert end is not None and end["status"] == "failed" and end["error"] == "RuntimeError: CUDA out of memory"


def test_a_damaged_stream_of_other_shapes_is_read_without_a_traceback(tmp_path, capfd):
    """Lines that are JSON but not of the stream's shapes (a list where an object goes) are skipped, as lines that
    are not JSON are: attach --json, the replay and the comparison rows give no traceback."""
    from apextui.core.watch.rows import Table

    meta = store.new_run("damaged", where=tmp_path)
    lines = [{"event": "start", "preset": "damaged", "warmup": 0}, {"event": "setup", "device": "cpu"},
             {"event": "step", "step": 2, "ms": 1.0, "gpus": 3}, {"event": "metric", "step": 2, "values": [1, 2]},
             {"event": "end", "status": "ok", "summary": [1]}]
    stream.segment_path(Path(meta.path), 1).write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert main(["attach", meta.path, "--json"]) == 0
    assert "Traceback" not in capfd.readouterr().err
    replay = Replay()
    replay.add(lines)
    assert replay.snapshot().steps_done == 2 and replay.metrics == {}  # step 2: two steps done
    assert [r.status for _, r in Table(tmp_path).rows()] == ["ok"]


def test_at_exit_an_error_from_before_the_run_is_not_the_runs(monkeypatch):
    """An interactive session keeps its last error in sys.last_value: one from before the run does not make the
    never-closed run `failed`; one that came during it does."""
    monkeypatch.setattr(sys, "last_value", ValueError("an earlier cell's error"), raising=False)
    runs = []
    for name in ("earlier", "during"):
        mon = apextui.watch(name=name)
        for i in range(20):
            mon.step(loss=1.0 / (i + 1))
        if name == "during":
            monkeypatch.setattr(sys, "last_value", RuntimeError("diverged"))
        mon._at_exit()
        runs.append(stream_events(mon)[-1])
    assert [(e["status"], e["error"]) for e in runs] == [("ok", None), ("failed", "RuntimeError: diverged")]


def test_a_watched_start_line_has_every_key_of_a_preset_runs_start_line(tmp_path):
    """lines.start_event writes the `--json` start shape out again (plus `watch`): a key added to one and not the
    other would make a watched stream read differently from a preset's."""
    from apextui.core.presets import load_builtin
    from apextui.core.watch import lines

    preset = next(iter(load_builtin()))
    meta = store.new_run("shape", where=tmp_path)
    watched = lines.start_event(meta, "cpu", None, 10, {})
    assert set(watched) - {"watch"} == set(events.start_event(preset, "cpu", 100, 10, {}))


def test_the_monitors_own_set_up_is_not_in_the_first_timed_interval(monkeypatch):
    """The first call sets the monitor up (sampler, environment, writer thread); the clock starts after that, so
    step 2 (a measured step when warmup=0) is the loop's own time. The environment probe is made slow here (2 s: a
    step of this loop that long on its own would take a machine stalled for seconds)."""
    from apextui.core import env

    real = env.describe

    def slow(device):
        time.sleep(2.0)
        return real(device)

    monkeypatch.setattr(env, "describe", slow)
    with apextui.watch(name="set-up", warmup=0) as mon:
        for _ in range(50):
            mon.step(loss=1.0)
    steps = [e for e in stream_events(mon) if e["event"] == "step"]
    assert steps[0]["step"] == 2 and steps[0]["ms"] < 2000  # the probe alone took 2000


def test_600_steps_read_back_as_600_done_and_599_timed(capfd):
    """The first `mon.step` starts the clock: it is done (counted) but never timed. The end line, `attach --json`
    read back into the run pane's snapshot (its progress `600/600`) all count it."""
    with apextui.watch(name="six-hundred", steps=600) as mon:
        train(mon, 600)
    evs = stream_events(mon)
    steps = [e for e in evs if e["event"] == "step"]
    assert sum(e["steps"] for e in steps) == 599 and steps[-1]["step"] == 600  # 599 timed
    end = evs[-1]
    assert end["summary"]["steps"] == 600 and end["summary"]["measured_steps"] == 599 - end["summary"]["warmup"]
    capfd.readouterr()
    assert main(["attach", "six-hundred", "--json"]) == 0
    replay = Replay()
    replay.add([json.loads(line) for line in capfd.readouterr().out.splitlines()])
    snap = replay.snapshot()
    assert (snap.steps_done, snap.info.steps) == (600, 600)
