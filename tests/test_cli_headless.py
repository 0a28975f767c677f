"""`apextui --preset NAME --json`: the JSON-lines contract, exit codes 0/2/3/130, `apextui list`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apextui.cli import command as cli
from apextui.core import presets
from apextui.core.presets import MAX_STEPS, load_builtin
from apextui.core.monitor.sampler import METRIC_UNITS

from helpers import ROOT, cli_env, cli_in_process, json_lines, run_cli

# torch presets that run on any CPU; the torch.compile / CUDA-graph ones (`Value.needs`) are tested in
# test_compile_presets.py
TORCH_PRESETS = [p.name for p in load_builtin() if not p.needs_apex and not p.config.needs]
APEX_PRESETS = [p.name for p in load_builtin() if p.needs_apex]
COMPILE_PRESETS = [p.name for p in load_builtin() if not p.needs_apex and p.config.needs]
NUM = (int, float)


def check_start(e: dict, preset: str) -> None:
    assert e["event"] == "start" and e["preset"] == preset and e["schema"] == 2
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
    assert e["gpu_util_pct"] is None and e["gpus"] == []  # CPU run: no GPU of the run
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
@pytest.mark.slow
def test_every_torch_preset_runs_headless_and_follows_the_schema(preset):
    # in this process (`cli.main`, the same path as `python -m apextui` once the interpreter is up): what a fresh
    # process adds (signals, a closed stdout, the exit status) has tests of its own below and in test_cli_edges
    proc = cli_in_process("--preset", preset, "--json", "--steps", "6", "--device", "cpu")
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
@pytest.mark.slow
def test_apex_presets_are_unavailable_on_cpu_with_reason_and_fix(preset):
    proc = cli_in_process("--preset", preset, "--json", "--steps", "3", "--device", "cpu")
    assert proc.returncode == 3
    (event,) = json_lines(proc.stdout)
    assert event["event"] == "unavailable" and event["preset"] == preset
    assert "Apex" in event["reason"] and "CPU" in event["reason"]
    assert event["fix"]
    assert "unavailable" in proc.stderr and "fix:" in proc.stderr


@pytest.mark.slow
def test_device_cuda_without_a_gpu_exits_3():
    proc = cli_in_process("--preset", "adamw", "--json", "--device", "cuda")
    assert proc.returncode == 3
    (event,) = json_lines(proc.stdout)
    assert event["event"] == "unavailable" and "--device cuda" in event["reason"]
    assert event["fix"] == "use --device auto or --device cpu"
    assert "--device cuda was asked for but" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["--preset", "nope", "--json"], "unknown preset 'nope'"),
    (["--json"], "--json needs --preset"),
    (["--preset", "adamw", "--json", "--steps", "0"], "--steps: must be a whole number from 1 to 10000000, got 0"),
    (["--preset", "adamw", "--json", "--device", "tpu"], "invalid choice: 'tpu'"),
])
@pytest.mark.slow
def test_usage_errors_exit_2_with_a_message(args, needle):
    proc = cli_in_process(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


BAD_STEPS = ["0", "-1", "abc", "1.5", "", str(10**12), str(MAX_STEPS + 1), "1" + "0" * 5000]
BAD_INTERVALS = ["0", "-1", "nan", "inf", "-inf", "abc", "", "0.001", "1e9"]


def main_exit(capsys, *args: str) -> tuple[int, str, str]:
    """`apextui ARGS` in this process: (exit code, stdout, stderr); argparse's SystemExit becomes a code."""
    capsys.readouterr()
    try:
        code = cli.main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("value", BAD_STEPS)
def test_bad_steps_exit_2_naming_the_allowed_range(capsys, value):
    code, out, err = main_exit(capsys, "--preset", "adamw", "--json", "--device", "cpu", "--steps", value)
    assert code == 2 and out == ""
    assert f"argument --steps: must be a whole number from 1 to {MAX_STEPS}, got" in err
    assert len(err) < 2000  # a 5000-digit value is not echoed back whole


def test_steps_limit_is_the_presets_limit():
    assert cli.build_parser().parse_args(["--steps", str(MAX_STEPS)]).steps == MAX_STEPS == presets.LIMITS["steps"][1]


@pytest.mark.parametrize("value", BAD_INTERVALS)
def test_bad_sample_interval_exits_2_naming_the_allowed_range(capsys, value):
    code, out, err = main_exit(capsys, "--preset", "adamw", "--json", f"--sample-interval={value}")
    assert code == 2 and out == ""
    assert "argument --sample-interval: must be a number of seconds from 0.01 to 86400, got" in err


def test_sample_interval_bounds_are_accepted():
    parse = cli.build_parser().parse_args
    assert parse(["--sample-interval", "0.01"]).sample_interval == 0.01
    assert parse(["--sample-interval", "3600"]).sample_interval == 3600  # benchmarks/overhead.py uses it


def test_bad_device_names_the_choices(capsys):
    code, out, err = main_exit(capsys, "--preset", "adamw", "--json", "--device", "tpu")
    assert code == 2 and "invalid choice: 'tpu'" in err and "cpu" in err and "cuda" in err


@pytest.mark.parametrize("args, needle", [
    (["--preset", "nope", "--json"], "unknown preset 'nope'; choose one of: adamw,"),
    (["--preset", "nope"], "unknown preset 'nope'"),  # the TUI: refused before the app starts
    (["--preset", "/no/such/dir/p.toml", "--json"], "/no/such/dir/p.toml: no such preset file"),
    (["--preset", "/", "--json"], "/: is a directory, not a preset file"),
])
def test_bad_presets_exit_2_in_process(capsys, args, needle):
    code, out, err = main_exit(capsys, *args)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_bad_preset_file_in_tui_mode_exits_2_before_the_app(capsys, tmp_path: Path):
    bad = tmp_path / "huge.toml"
    bad.write_text((ROOT / "presets" / "fp32.toml").read_text().replace("vocab = 1024", f"vocab = {10**12}"))
    code, out, err = main_exit(capsys, "--preset", str(bad))
    assert code == 2
    assert f"{bad}: field 'size.vocab': got {10**12}; must be an integer from 1 to 32768" in err


def test_list_device_cuda_without_a_gpu_exits_3(capsys):
    code, out, err = main_exit(capsys, "list", "--device", "cuda")
    assert code == 3 and out == "" and "--device cuda was asked for" in err


GOOD_USER = (ROOT / "presets" / "layernorm.toml").read_text().replace("hidden = 256", "hidden = 16")


@pytest.fixture
def user_presets(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "user"
    d.mkdir()
    (d / "tiny_norm.toml").write_text(GOOD_USER)
    (d / "broken.toml").write_text("steps = [")
    (d / "huge.toml").write_text(GOOD_USER.replace("steps = 300", f"steps = {10**12}"))
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(d))
    return d


def test_list_shows_user_presets_and_reports_bad_files_exit_0(capsys, user_presets: Path):
    code, out, err = main_exit(capsys, "list", "--json", "--device", "cpu")
    assert code == 0  # the shipped presets are fine: a bad user file is reported, not fatal
    data = json.loads(out)
    rows = {r["name"]: r for r in data["presets"]}
    assert rows["tiny_norm"]["source"] == "user" and rows["tiny_norm"]["available"]
    assert rows["tiny_norm"]["path"] == str(user_presets / "tiny_norm.toml")
    assert rows["fp32"]["source"] == "builtin" and set(TORCH_PRESETS) <= set(rows)
    assert data["user_dir"] == str(user_presets)
    errors = {Path(e["path"]).name: e["message"] for e in data["errors"]}
    assert set(errors) == {"broken.toml", "huge.toml"}
    assert "not valid TOML" in errors["broken.toml"]
    assert f"field 'steps': got {10**12}; must be an integer from 1 to {MAX_STEPS}" in errors["huge.toml"]
    assert err.count("apextui: warning: skipped a user preset: ") == 2
    code, out, err = main_exit(capsys, "list", "--device", "cpu")
    assert code == 0
    user_file = re.escape(str(user_presets / 'tiny_norm.toml'))
    assert re.search(rf"\n    tiny_norm +available \(user: {user_file}\)\n", out), out
    assert out.index("tiny_norm") < out.index("transformer")  # in its workload's group
    assert f"2 user preset files in {user_presets} could not be loaded" in out


@pytest.mark.slow
def test_a_user_preset_runs_by_name(user_presets: Path):
    env = {**cli_env(), "APEXTUI_PRESET_DIR": str(user_presets)}
    proc = subprocess.run([sys.executable, "-m", "apextui", "--preset", "tiny_norm", "--json", "--steps", "3",
                           "--device", "cpu"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    assert events[0]["preset"] == "tiny_norm" and events[0]["preset_file"] == str(user_presets / "tiny_norm.toml")
    assert events[-1]["event"] == "end" and events[-1]["status"] == "ok"


@pytest.mark.slow
def test_invalid_preset_file_exits_2_naming_file_and_field(tmp_path: Path):
    bad = tmp_path / "typo.toml"
    bad.write_text((ROOT / "presets" / "adamw.toml").read_text().replace("steps = 300", "steps = 'many'"))
    proc = run_cli("--preset", str(bad), "--json")
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "field 'steps'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_users_own_preset_file_runs(tmp_path: Path):
    mine = tmp_path / "tiny_norm.toml"
    mine.write_text((ROOT / "presets" / "layernorm.toml").read_text().replace("hidden = 256", "hidden = 16"))
    proc = run_cli("--preset", str(mine), "--json", "--steps", "4", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    assert events[0]["preset"] == "tiny_norm" and events[0]["size_params"]["hidden"] == 16
    check_end(events[-1], "ok", 4)


@pytest.mark.parametrize("sig, code, word", [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "terminated (SIGTERM)"),
])
@pytest.mark.slow
def test_a_signal_prints_the_end_line_and_exits_128_plus_its_number(sig, code, word):
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
    proc.send_signal(sig)
    out = proc.stdout.read()  # not communicate(): it would skip lines readline() already buffered
    err = proc.stderr.read()
    proc.wait(timeout=60)
    events = [json.loads(line) for line in lines + out.splitlines()]
    assert proc.returncode == code, err
    end = events[-1]
    assert end["event"] == "end" and end["status"] == "stopped"
    assert [e["event"] for e in events].count("end") == 1
    # every step covered once: a line is a step, or a block of steps (its "steps") where the clock's own cost
    # makes blocks worth it (docs/timing.md)
    steps = [i for e in events if e["event"] == "step" for i in range(e["step"] - e["steps"] + 1, e["step"] + 1)]
    assert steps == list(range(1, len(steps) + 1)) and end["summary"]["steps"] == len(steps)
    assert 25 <= len(steps) < 100000
    assert end["summary"]["median_ms"] > 0 and end["summary"]["measured_steps"] == len(steps) - 20
    assert f"{word}: stopping after the current step" in err and "Traceback" not in err


@pytest.mark.slow
def test_list_shows_every_preset_with_availability():
    proc = run_cli("list", "--json", "--device", "cpu")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    rows = {r["name"]: r for r in data["presets"]}
    assert set(rows) == set(TORCH_PRESETS) | set(APEX_PRESETS) | set(COMPILE_PRESETS)
    assert all(rows[n]["available"] for n in TORCH_PRESETS)
    for n in APEX_PRESETS:
        assert rows[n]["available"] is False and rows[n]["reason"] and rows[n]["fix"]
        assert rows[n]["needs_apex"]
    human = run_cli("list", "--device", "cpu")
    assert human.returncode == 0
    assert "fused_amp" in human.stdout and "unavailable" in human.stdout and "transformer" in human.stdout


@pytest.mark.slow
def test_list_text_lines_up_the_status_column():
    human = run_cli("list", "--device", "cpu")
    rows = [re.match(r"    (\S+) +((?:un)?available)", line) for line in human.stdout.splitlines()
            if line.startswith("    ")]
    assert len(rows) >= 14 and all(rows), human.stdout
    assert len({m.start(2) for m in rows}) == 1, human.stdout  # one column, however long a name
