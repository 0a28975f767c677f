"""The presets' Apex check on CUDA (`list`, headless runs, the TUI's probe) when `import apex` segfaults, hangs or
calls sys.exit: the command lives on and says so, because the import runs in a child process.

The "CUDA machine" is a stand-in torch that sees one GPU (tests/test_doctor.py's FAKE_CUDA_TORCH) next to a fake
NVIDIA Apex whose every core extension imports but whose `apex/__init__.py` misbehaves, first on PYTHONPATH of a
real `python -m apextui` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_doctor import ALL_OK, FAKE_CUDA_TORCH, NVIDIA_PY, build_tree

from apextui.core.apex import probe as apex_probe

pytestmark = pytest.mark.slow  # every test here takes over ~1.5 s (a subprocess, a real run)

REPO = Path(__file__).resolve().parents[1]
INITS = {
    "segfault": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "hang": "import time\ntime.sleep(1000)\n",
    "exit": "raise SystemExit(3)\n",
}


def apextui(tmp_path: Path, init: str, *args: str) -> subprocess.CompletedProcess[str]:
    tree = build_tree(tmp_path / "site", {**NVIDIA_PY, **FAKE_CUDA_TORCH, **ALL_OK, "apex/__init__.py": INITS[init]})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)]),
           apex_probe.TIMEOUT_ENV: "3", "APEXTUI_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "apextui", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=120)


@pytest.mark.parametrize("init, reason, fix", [
    ("segfault", "import apex crashed: the interpreter was killed by SIGSEGV", "rebuild Apex against the installed"),
    ("hang", "import apex hung: did not finish within 3 s", "check the GPU and driver (nvidia-smi)"),
    ("exit", "import apex fails: SystemExit: 3", "rebuild Apex with its C++/CUDA extensions"),
])
def test_headless_run_of_an_apex_preset_says_why_import_apex_fails(tmp_path, init, reason, fix):
    proc = apextui(tmp_path, init, "--preset", "fused_adam", "--json", "--device", "cuda")
    assert proc.returncode == 3, proc.stderr
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["event"] == "unavailable" and event["reason"] == f"needs Apex FusedAdam: {reason}", event
    assert event["fix"].startswith(fix)
    assert "Traceback" not in proc.stderr and f"unavailable on cuda: needs Apex FusedAdam: {reason}" in proc.stderr
    cache = tmp_path / "cache" / apex_probe.CACHE_FILE
    assert cache.exists() == (init != "hang")  # a hang is asked again at the next start


def test_list_with_an_apex_that_hangs_on_import(tmp_path):
    """Every Apex preset is unavailable with the hang; the others are available."""
    proc = apextui(tmp_path, "hang", "list", "--json", "--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)["presets"]}
    apex_rows = [r for r in rows.values() if r["needs_apex"]]
    assert apex_rows and all(not r["available"] and "import apex hung: did not finish within 3 s" in r["reason"]
                             for r in apex_rows)
    assert rows["adamw"]["available"] and rows["layernorm"]["available"]


def test_distributed_fused_adam_without_its_opt_in_extension_is_unavailable_with_the_build_flag(tmp_path):
    """Apex builds distributed_adam_cuda only with APEX_DISTRIBUTED_ADAM=1: a build without it (every core
    extension present) makes that preset unavailable, and the fix names the flag."""
    tree = build_tree(tmp_path / "site", {**NVIDIA_PY, **FAKE_CUDA_TORCH, **ALL_OK})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)]),
           apex_probe.TIMEOUT_ENV: "10", "APEXTUI_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "apextui", "--preset", "distributed_fused_adam", "--json",
                           "--device", "cuda"], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["reason"] == ("needs Apex DistributedFusedAdam: compiled extension distributed_adam_cuda is not "
                               "installed (Apex builds it only with APEX_DISTRIBUTED_ADAM=1)"), event
    assert "APEX_DISTRIBUTED_ADAM=1" in event["fix"] and event["fix"].startswith("rebuild Apex")
