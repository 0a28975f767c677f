"""The core never imports Textual; headless runs never load the UI."""

from __future__ import annotations

import pytest
import subprocess
import sys

from helpers import ROOT, cli_env

CHECK = r"""
import io, sys, contextlib
import apextui.core.presets, apextui.core.run.runner, apextui.core.run.events, apextui.core.monitor.sampler
import apextui.core.availability, apextui.core.env, apextui.core.apex.doctor, apextui.core.workloads
import apextui.cli.command, apextui.cli.json_run
assert "textual" not in sys.modules, "importing the core loaded textual"
from apextui.core.presets import resolve
from apextui.cli import json_run
from apextui.core.run.request import RunRequest
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = json_run.run(RunRequest(resolve("layernorm"), "cpu", steps=3))
assert rc == 0, rc
assert '"event": "end"' in out.getvalue()
loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual.") or m.startswith("apextui.ui"))
assert not loaded, loaded
print("clean")
"""


@pytest.mark.slow
def test_core_and_a_headless_run_leave_textual_unloaded():
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=cli_env(),
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("clean")


def test_no_core_module_mentions_textual():
    offenders = [p.relative_to(ROOT) for p in (ROOT / "apextui" / "core").rglob("*.py")
                 if "import textual" in p.read_text() or "from textual" in p.read_text()]
    assert offenders == []


def exit_code_definitions(root=ROOT) -> list[str]:
    """`path:line NAME` for every module-level assignment of an integer to an `EXIT_*` name (the exit codes)."""
    import ast

    found = []
    for path in sorted([*(root / "apextui").rglob("*.py"), *(root / "tools").rglob("*.py")]):
        for node in ast.parse(path.read_text(), str(path)).body:
            if not isinstance(node, ast.Assign):
                continue
            names = [t for target in node.targets
                     for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            for name in names:
                if isinstance(name, ast.Name) and name.id.startswith("EXIT_") and not name.id.endswith("_S"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name.id}")
    return found


def test_exit_codes_are_defined_in_one_module():
    """docs/cli.md documents the codes once; each is defined once, in apextui/core/exits.py (it was 11 modules)."""
    elsewhere = [d for d in exit_code_definitions() if not d.startswith("apextui/core/exits.py:")]
    assert not elsewhere, elsewhere
    assert len([d for d in exit_code_definitions() if d.startswith("apextui/core/exits.py:")]) >= 9
