"""A non-editable install ships the presets inside the wheel and finds them there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

# every test here takes over ~1.5 s (a subprocess, a real run); one xdist worker builds the wheel once (two builds
# at once in the one source tree would share its build/ folder)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("apextui-*.whl")
    return whl


def test_wheel_contains_presets_styles_and_entry_point(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("apextui/presets/") and n.endswith(".toml")}
    assert shipped == {p.name for p in (ROOT / "presets").glob("*.toml")}
    assert any(n.startswith("apextui/ui/") and n.endswith(".tcss") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "apextui = apextui.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_wheel_finds_its_presets_away_from_the_source_tree(wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    code = ("import apextui.core.presets as p; d = p.builtin_dir(); "
            "print(d); print(len(p.load_builtin()))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, count = proc.stdout.split()
    assert Path(where).is_relative_to(site)
    assert int(count) == len(list((ROOT / "presets").glob("*.toml")))
