"""`apextui.watch(...)` and `close(...)` given bad arguments (watch/options.py, watch/mfu_inputs.py): a monitoring
call never raises into the training program and never loses its run. Each bad value is one warning naming the
argument, what was given and what is allowed; the value is replaced by its default (or the feature is turned off:
no MFU); the run's stream and its `end` line are written, and `apextui attach --json` reads them back."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import apextui
from apextui.core.watch import reader
from apextui.core.watch.hook import Watch
from apextui.core.watch.stream import DEFAULT_MAX_BYTES
from helpers import cli_in_process

STEPS = 30


def train(mon: Watch) -> None:
    """A loop's calls, without a model: the stream's lines, not its timings, are what these tests read."""
    for i in range(STEPS):
        mon.step(loss=1.0 / (i + 1), tokens=64)


def events(mon: Watch) -> list[dict[str, Any]]:
    assert mon.path is not None, f"the run has no folder: {mon.failure}"
    follower = reader.Follower(mon.path)
    evs = follower.poll()
    assert follower.bad_lines == 0 and not follower.partial  # every line the hook wrote is one a reader takes
    return evs


def streamed(mon: Watch) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's `start` and `end` lines; the stream has every step, and the monitor never failed."""
    evs = events(mon)
    kinds = [e["event"] for e in evs]
    assert mon.failure is None
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("end") == 1 and "step" in kinds
    assert evs[-1]["summary"]["steps"] == STEPS
    return evs[0], evs[-1]


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "apextui.watch" and r.levelno >= logging.WARNING]


def watched(caplog: pytest.LogCaptureFixture, **options: Any) -> Watch:
    """A run with `options` through a whole loop, closed."""
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon = apextui.watch(**{"name": "args", **options})
        train(mon)
        mon.close()
    return mon


def one_warning(caplog: pytest.LogCaptureFixture, *parts: str) -> str:
    got = warned(caplog)
    assert len(got) == 1, got
    assert all(p in got[0] for p in parts), (parts, got[0])
    return got[0]


# ---- close(status=..., error=...) --------------------------------------------------------------------------------
def test_close_with_an_unknown_status_and_a_number_error_writes_a_failed_end_line_attach_reads(caplog):
    """Before: the writer thread took "weird" as no end at all: no `end` line, and attach called the run "ended
    without an end line" once its process was gone."""
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon = apextui.watch(name="weird-close")
        train(mon)
        mon.close(status="weird", error=12345)
    _, end = streamed(mon)
    assert end["status"] == "failed"
    assert end["error"] == "closed with status 'weird' (not one of ok, stopped, failed): 12345"
    got = warned(caplog)
    assert len(got) == 2, got  # one for each argument
    assert any("close(status='weird')" in w and "ok, stopped, failed" in w for w in got)
    assert any("close(error=12345)" in w and "string" in w for w in got)
    done = cli_in_process("attach", "--json", "--once", str(mon.path))
    assert done.returncode == 1  # a failed run
    last = json.loads(done.stdout.splitlines()[-1])
    assert last == end and "ended without an end line" not in done.stderr


@pytest.mark.parametrize("status", [None, 3, "OK", "crashed", ["ok"]])
def test_any_status_outside_ok_stopped_failed_ends_the_run_failed_with_it_in_the_error(status, caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon = apextui.watch(name="status")
        train(mon)
        mon.close(status=status)
    _, end = streamed(mon)
    assert end["status"] == "failed" and end["error"].startswith(f"closed with status {status!r}")
    one_warning(caplog, f"close(status={status!r})")


def test_an_exception_as_the_error_is_written_as_its_type_and_message_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon = apextui.watch(name="exc-error")
        train(mon)
        mon.close(status="stopped", error=KeyError("shard 3"))  # type: ignore[arg-type]
    _, end = streamed(mon)
    assert (end["status"], end["error"]) == ("stopped", "KeyError: 'shard 3'")
    assert warned(caplog) == []


# ---- flops_per_token, precision ----------------------------------------------------------------------------------
@pytest.mark.parametrize("flops, shown, why", [
    (10**400, "~1e400", "too large for a float"),  # before: OverflowError at step 1, no stream at all
    (10**5000, "~1e5000", "too large for a float"),  # its repr alone raises (more than 4,300 digits)
    (float("nan"), "nan", "not a positive number"),
    (float("inf"), "inf", "not a positive number"),
    (-3.0, "-3.0", "not a positive number"),
    ("6e9", "'6e9'", "is a str, not a number"),
], ids=["1e400", "1e5000", "nan", "inf", "negative", "str"])
def test_a_bad_flops_per_token_is_one_warning_and_no_mfu_and_the_run_is_streamed(flops, shown, why, caplog):
    mon = watched(caplog, flops_per_token=flops)
    _, end = streamed(mon)
    assert end["status"] == "ok"
    mfu = end["summary"]["mfu"]
    assert mfu["value"] is None and mfu["flops_per_step"] is None and f"flops_per_token={shown}" in mfu["reason"]
    one_warning(caplog, f"flops_per_token={shown}", why, "no MFU")


def test_a_numpy_flops_per_token_is_taken():
    """A count computed with NumPy (`np.prod` of a shape) is a number like any other."""
    mon = apextui.watch(name="np-flops", flops_per_token=np.int64(6_000_000))
    train(mon)
    mon.close()
    _, end = streamed(mon)
    assert end["summary"]["mfu"]["flops_per_step"] == 6e6 * 64


def test_a_precision_that_cannot_be_compared_is_one_warning_and_no_mfu(caplog):
    """Before: `precision in PRECISIONS` raised on an array (its truth is ambiguous) and the monitor failed at step
    1, with no stream."""
    mon = watched(caplog, flops_per_token=3e6, precision=np.array([16, 16]))
    _, end = streamed(mon)
    assert end["status"] == "ok" and end["summary"]["mfu"]["value"] is None
    one_warning(caplog, "precision=array([16, 16])", "fp32, tf32, bf16, fp16, fp8", "no MFU")


# ---- watch()'s own options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("warmup", ["x", float("nan"), float("inf"), 1.5, -1, True, pytest.param(10**400, id="1e400")])
def test_a_bad_warmup_is_one_warning_and_the_default(warmup, caplog):
    """Before: "x" and NaN raised into the training (ValueError), inf OverflowError; 10**400 went into the start
    line as a number no reader takes."""
    mon = watched(caplog, warmup=warmup)
    start, end = streamed(mon)
    assert mon.warmup == 10 and start["warmup"] == 10 and end["status"] == "ok"
    one_warning(caplog, "apextui.watch(warmup=", "whole number", "default 10")


@pytest.mark.parametrize("where", [5, b"runs", "", 1.5])
def test_a_bad_where_is_one_warning_and_the_default_folder(where, tmp_path, monkeypatch, caplog):
    """Before: 5 raised TypeError into the training; "" wrote the runs into the working directory."""
    monkeypatch.chdir(tmp_path)  # what "" would have written into
    default = tmp_path / "default"
    monkeypatch.setenv("APEXTUI_WATCH_DIR", str(default))
    mon = watched(caplog, where=where)
    streamed(mon)
    assert mon.path is not None and mon.path.parent.parent == default and mon.where is None
    assert not (tmp_path / "runs").exists()
    one_warning(caplog, f"apextui.watch(where={where!r})", "path", "default folder")


@pytest.mark.parametrize("name", [5, b"gpt", ["gpt"], pytest.param(np.array([1, 2]), id="array")])
def test_a_name_that_is_not_a_string_is_one_warning_and_the_scripts_name(name, caplog):
    """Before: the run folder could not be named: the monitor did not start, and there was no stream."""
    mon = watched(caplog, name=name)
    start, _ = streamed(mon)
    assert isinstance(mon.name, str) and start["watch"]["name"] == mon.name and mon.name != str(name)
    one_warning(caplog, f"apextui.watch(name={name!r})", "string")  # an array's truth raised before, too


@pytest.mark.parametrize("steps", ["x", float("nan"), -5, 0, 1.5, True, pytest.param(10**400, id="1e400")])
def test_bad_steps_are_one_warning_and_no_total(steps, caplog):
    """Before: passed as they were into the start line: a string, or a NaN or a 401-digit number that made the
    start line one no reader takes."""
    mon = watched(caplog, steps=steps)
    start, end = streamed(mon)
    assert mon.steps is None and start["steps"] is None and end["status"] == "ok"
    one_warning(caplog, "apextui.watch(steps=", "positive whole number")


def test_whole_steps_given_as_a_float_are_taken(caplog):
    mon = watched(caplog, steps=1e5)
    start, _ = streamed(mon)
    assert start["steps"] == 100_000 and type(start["steps"]) is int and warned(caplog) == []


@pytest.mark.parametrize("interval", ["x", 0, -1, float("nan"), 1e12])
def test_a_bad_sample_interval_is_one_warning_and_the_default(interval, caplog):
    """Before: "x" killed the sampler thread with a traceback, 0 and -1 made it a busy loop beside the training,
    1e12 overflowed its wait."""
    mon = watched(caplog, sample_interval=interval)
    streamed(mon)
    assert mon.sample_interval == 1.0
    one_warning(caplog, f"apextui.watch(sample_interval={interval!r})", "0.01 to 86400", "default 1 s")


@pytest.mark.parametrize("max_bytes", ["x", 0, -1, 1.5, float("inf")])
def test_a_bad_max_bytes_is_one_warning_and_the_default(max_bytes, caplog):
    """Before: "x" stopped the monitor before it began (no stream); 0 and -1 made a segment a line."""
    mon = watched(caplog, max_bytes=max_bytes)
    streamed(mon)
    assert mon.stream is not None and mon.stream.max_bytes == DEFAULT_MAX_BYTES
    one_warning(caplog, f"apextui.watch(max_bytes={max_bytes!r})", "positive whole number of bytes")


@pytest.mark.parametrize("rank", ["x", -1, 1.5])
def test_a_bad_rank_is_one_warning_and_no_rank(rank, caplog):
    """Before: written as given, into the folder's name (`-rankx`) and the start line."""
    mon = watched(caplog, rank=rank)
    start, _ = streamed(mon)
    assert start["watch"]["rank"] is None and "-rank" not in Path(str(mon.path)).name
    one_warning(caplog, f"apextui.watch(rank={rank!r})", "whole number")


def test_a_bad_rank_in_the_environment_is_one_warning_and_no_rank(monkeypatch, caplog):
    """Before: `int(os.environ["RANK"])` raised inside the start, and the monitor never started: no stream."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "zero")
    mon = watched(caplog)
    start, _ = streamed(mon)
    assert start["watch"]["rank"] is None
    one_warning(caplog, "RANK='zero'", "whole numbers")


def test_an_unknown_option_is_one_warning_and_ignored(caplog):
    """Before: TypeError into the training (a typo of `steps`)."""
    mon = watched(caplog, stpes=100)
    start, _ = streamed(mon)
    assert start["steps"] is None
    one_warning(caplog, "apextui.watch(stpes=100)", "no such option", "steps")


def test_every_bad_option_at_once_is_one_warning_each_and_the_run_is_streamed(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("APEXTUI_WATCH_DIR", str(tmp_path))
    mon = watched(caplog, name=5, steps="x", warmup="x", sample_interval=0, max_bytes="x", where=5, rank="x",
                  flops_per_token=10**400, precision=7, batch_size="x", stpes=1)
    with caplog.at_level(logging.WARNING, "apextui.watch"):
        mon.close(status="weird", error=math.pi)  # closed already: nothing more
    _, end = streamed(mon)
    assert end["status"] == "ok" and end["summary"]["mfu"]["value"] is None
    got = warned(caplog)
    for option in ("name", "steps", "warmup", "sample_interval", "max_bytes", "where", "rank", "stpes"):
        assert sum(f"apextui.watch({option}=" in w for w in got) == 1, (option, got)
    assert sum("flops_per_token=" in w for w in got) == 1 and sum("precision=7" in w for w in got) == 1
    assert sum("batch_size='x'" in w for w in got) == 1
    assert len(got) == 11, got
