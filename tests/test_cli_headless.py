"""`apextui --preset NAME --json`: the JSON-lines contract, exit codes 0/2/3/130, `apextui list`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apextui.core.presets import load_builtin
from apextui.core.sampler import METRIC_UNITS

from helpers import ROOT, cli_env, json_lines, run_cli

TORCH_PRESETS = [p.name for p in load_builtin() if not p.needs_apex]
APEX_PRESETS = [p.name for p in load_builtin() if p.needs_apex]
NUM = (int, float)


def check_start(e: dict, preset: str) -> None:
    assert e["event"] == "start" and e["preset"] == preset and e["schema"] == 1
    assert e["device"] == "cpu" and e["size"] == "cpu" and "small" in e["note"]
    assert isinstance(e["steps"], int) and isinstance(e["warmup"], int) and e["warmup"] < e["steps"]
    env = e["env"]
    for key in ("python", "torch", "torch_cuda", "cuda_available", "gpu", "apex"):
        assert key in env
    assert env["cuda_available"] is False


def check_step(e: dict, n: int) -> None:
    assert e["event"] == "step" and e["step"] == n
    assert isinstance(e["ms"], NUM) and e["ms"] > 0
    assert e["loss"] is None or isinstance(e["loss"], NUM)
    for key in ("opt_ms", "loss_scale", *METRIC_UNITS):
        assert key in e and (e[key] is None or isinstance(e[key], NUM)), key
    assert e["gpu_util_pct"] is None  # CPU run
    assert isinstance(e["rss_mb"], NUM)


def check_end(e: dict, status: str, steps: int) -> None:
    assert e["event"] == "end" and e["status"] == status
    s = e["summary"]
    assert s["steps"] == steps
    for key in ("median_ms", "p10_ms", "p90_ms"):
        assert isinstance(s[key], NUM) and s[key] > 0
    assert s["p10_ms"] <= s["median_ms"] <= s["p90_ms"]
    assert s["measured_steps"] == steps - s["warmup"]
    assert isinstance(s["throughput"], NUM) and s["throughput_unit"] in ("samples/s", "tokens/s")


@pytest.mark.parametrize("preset", TORCH_PRESETS)
def test_every_torch_preset_runs_headless_and_follows_the_schema(preset):
    proc = run_cli("--preset", preset, "--json", "--steps", "6", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    check_start(events[0], preset)
    assert events[1]["event"] == "setup" and events[1]["units_per_step"] > 0
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 6
    for i, e in enumerate(steps, start=1):
        check_step(e, i)
    check_end(events[-1], "ok", 6)
    assert len(events) == 2 + 6 + 1
    summary = events[-1]["summary"]
    workload = events[0]["workload"]
    if workload == "transformer":
        assert isinstance(summary["final_loss"], float) and summary["loss_floor"] > 0
        assert events[1]["loss_floor"] == summary["loss_floor"]
    if workload == "optimizer":
        assert all(isinstance(e["opt_ms"], float) for e in steps)
        assert 0 < summary["opt_median_ms"] < summary["median_ms"]
    else:
        assert summary["opt_median_ms"] is None
    if workload == "norm":
        assert summary["final_loss"] is None


@pytest.mark.parametrize("preset", APEX_PRESETS)
def test_apex_presets_are_unavailable_on_cpu_with_reason_and_fix(preset):
    proc = run_cli("--preset", preset, "--json", "--steps", "3", "--device", "cpu")
    assert proc.returncode == 3
    (event,) = json_lines(proc.stdout)
    assert event["event"] == "unavailable" and event["preset"] == preset
    assert "Apex" in event["reason"] and "CPU" in event["reason"]
    assert event["fix"]
    assert "unavailable" in proc.stderr and "fix:" in proc.stderr


def test_device_cuda_without_a_gpu_exits_3():
    proc = run_cli("--preset", "adamw", "--json", "--device", "cuda")
    assert proc.returncode == 3
    (event,) = json_lines(proc.stdout)
    assert event["event"] == "unavailable" and "--device cuda" in event["reason"]


@pytest.mark.parametrize("args, needle", [
    (["--preset", "nope", "--json"], "unknown preset 'nope'"),
    (["--json"], "--json needs --preset"),
    (["--preset", "adamw", "--json", "--steps", "0"], "--steps: must be a whole number >= 1"),
    (["--preset", "adamw", "--json", "--device", "tpu"], "invalid choice: 'tpu'"),
])
def test_usage_errors_exit_2_with_a_message(args, needle):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


def test_invalid_preset_file_exits_2_naming_file_and_field(tmp_path: Path):
    bad = tmp_path / "typo.toml"
    bad.write_text((ROOT / "presets" / "adamw.toml").read_text().replace("steps = 300", "steps = 'many'"))
    proc = run_cli("--preset", str(bad), "--json")
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "field 'steps'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_users_own_preset_file_runs(tmp_path: Path):
    mine = tmp_path / "tiny_norm.toml"
    mine.write_text((ROOT / "presets" / "layernorm.toml").read_text().replace("hidden = 256", "hidden = 16"))
    proc = run_cli("--preset", str(mine), "--json", "--steps", "4", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    assert events[0]["preset"] == "tiny_norm" and events[0]["size_params"]["hidden"] == 16
    check_end(events[-1], "ok", 4)


def test_ctrl_c_prints_the_end_line_and_exits_130():
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--preset", "fp32", "--json", "--steps", "100000",
                             "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(), cwd=ROOT)
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        lines.append(line)
        if json.loads(line)["event"] == "step" and json.loads(line)["step"] >= 25:  # past warm-up
            break
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()  # not communicate(): it would skip lines readline() already buffered
    err = proc.stderr.read()
    proc.wait(timeout=60)
    events = [json.loads(line) for line in lines + out.splitlines()]
    assert proc.returncode == 130, err
    end = events[-1]
    assert end["event"] == "end" and end["status"] == "stopped"
    steps = [e["step"] for e in events if e["event"] == "step"]
    assert steps == list(range(1, len(steps) + 1)) and end["summary"]["steps"] == len(steps)
    assert end["summary"]["median_ms"] > 0
    assert "interrupted" in err and "Traceback" not in err


def test_list_shows_every_preset_with_availability():
    proc = run_cli("list", "--json", "--device", "cpu")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    rows = {r["name"]: r for r in data["presets"]}
    assert set(rows) == set(TORCH_PRESETS) | set(APEX_PRESETS)
    assert all(rows[n]["available"] for n in TORCH_PRESETS)
    for n in APEX_PRESETS:
        assert rows[n]["available"] is False and rows[n]["reason"] and rows[n]["fix"]
        assert rows[n]["needs_apex"]
    human = run_cli("list", "--device", "cpu")
    assert human.returncode == 0
    assert "fused_amp" in human.stdout and "unavailable" in human.stdout and "transformer" in human.stdout
