"""`apextui doctor`'s text output (rough edge 8): the longest extension names keep a space before their path;
the CPU fix names the same build variables as the README and the doctor."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "ui"))

from ui_fakes import gpu_report  # noqa: E402

from apextui.core.availability import availability  # noqa: E402
from apextui.core.presets import resolve  # noqa: E402
from apextui.core.apex.doctor_lines import render_lines  # noqa: E402

LONG = "fused_weight_gradient_mlp_cuda_and_more_x"  # 41 characters: past the old 34-column field


def test_long_extension_name_is_separated_from_its_path():
    report = gpu_report()
    ext = dataclasses.replace(report.extensions[0], name=LONG, path=f"/opt/apex/{LONG}.so")
    report = dataclasses.replace(report, extensions=(ext, *report.extensions[1:]))
    lines = ["".join(text for text, _style in line) for line in render_lines(report)]
    (row,) = [line for line in lines if LONG in line and ".so" in line]
    assert f"{LONG}  /opt/apex/{LONG}.so" in row
    paths = [line.index("/opt/apex/") for line in lines if line.startswith("  ok") and "/opt/apex/" in line]
    assert len(set(paths)) == 1, "the path column is not aligned"


def test_cpu_fix_names_the_build_variables():
    fix = availability(resolve("fused_adam"), "cpu").fix
    assert "APEX_CPP_EXT=1 APEX_CUDA_EXT=1" in fix and "--cuda_ext" not in fix
