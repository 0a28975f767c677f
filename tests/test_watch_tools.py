"""The hook's cost benchmark (benchmarks/watch_overhead.py) and the attach screenshot tool
(tools/attach_screenshot.py) run on CPU at tiny sizes: the GPU commands in docs/watch.md rest on them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT, cli_env


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=cli_env(),
                          cwd=ROOT)


@pytest.mark.slow
def test_watch_overhead_runs_both_loops_interleaved_and_prints_ratios_with_intervals(tmp_path):
    proc = run(str(ROOT / "benchmarks" / "watch_overhead.py"), "--device", "cpu", "--quick", "--out",
               str(tmp_path / "o.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc == json.loads((tmp_path / "o.json").read_text()) and doc["device"] == "cpu"
    assert [r["loop"] for r in doc["loops"]] == ["gpt", "small"]
    for r in doc["loops"]:
        assert r["ratio_low"] <= r["ratio"] <= r["ratio_high"] and len(r["ratios"]) == r["rounds"] == 2
        assert r["bare_ms"] > 0 and r["watched_ms"] > 0 and r["watch_median_ms"] > 0
        assert r["target"] == {"gpt": 1.01, "small": 1.02}[r["loop"]]


@pytest.mark.slow
def test_watch_overhead_refuses_bad_arguments():
    proc = run(str(ROOT / "benchmarks" / "watch_overhead.py"), "--loops", "resnet", "--device", "cpu")
    assert proc.returncode == 2 and "--loops takes gpt,small" in proc.stderr


@pytest.mark.slow
def test_attach_screenshot_follows_a_live_gpt_loop_and_saves_an_svg(tmp_path):
    out = tmp_path / "attach.svg"
    proc = run(str(ROOT / "tools" / "attach_screenshot.py"), "--device", "cpu", "--small", "--at-step", "30",
               "--size", "100x32", "--out", str(out), "--timeout", "120")
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["steps_shown"] >= 30 and "running" in seen["title"] and "gpt-example" in seen["title"]
    svg = out.read_text()
    assert svg.startswith("<svg") and "gpt-example" in svg and "tokens/s" in svg
