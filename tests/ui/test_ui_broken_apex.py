"""An Apex whose import raises (SystemExit, RuntimeError, a broken extension): the real doctor reports it
and the app keeps working; nothing is imported from it in the app's process."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from ui_fakes import FakeEngine, highlight, wait_for

from apextui.ui.app import make_app
from apextui.ui.widgets.comparison_table import ComparisonTable

pytestmark = pytest.mark.slow  # each test over ~1.5 s

DIST = {
    "apex-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: apex\nVersion: 0.1\n"
                                   "Summary: PyTorch Extensions written by NVIDIA\n",
    "apex-0.1.dist-info/top_level.txt": "apex\n",
    "apex/optimizers/__init__.py": "",  # NVIDIA's layout, so it is not taken for PyPI's unrelated 'apex'
    "apex/normalization/__init__.py": "",
}
BROKEN = {  # kind -> (files, what the doctor must report as the import error)
    "system_exit": ({**DIST, "apex/__init__.py": "raise SystemExit(3)\n"}, "SystemExit: 3"),
    "runtime_error": ({**DIST, "apex/__init__.py": "raise RuntimeError('built against another torch')\n"},
                      "RuntimeError: built against another torch"),
    "bad_extension": ({**DIST, "apex/__init__.py": "import amp_C\n",
                       "amp_C.py": "raise OSError('libc10_cuda.so: cannot open shared object file')\n"},
                      "OSError: libc10_cuda.so"),
}


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_the_doctor_reports_a_raising_apex_and_the_app_keeps_running(kind, tmp_path, monkeypatch):
    files, error = BROKEN[kind]
    monkeypatch.syspath_prepend(str(tree(tmp_path, files)))
    engine = FakeEngine()
    app = make_app(device="cpu", runner_factory=engine)  # the real probe and the real doctor
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.doctor_done and app.probe is not None, 240, "probe and doctor")
        assert app.report is not None and app.report_error is None, app.report_error
        apex = app.report.to_dict()["apex"]
        assert apex["location"] == str(tmp_path / "apex") and apex["import_ok"] is False
        assert error in apex["import_error"] and apex["status"] != "not_nvidia", apex
        assert not app.picker.is_available("fused_adam")
        assert "apex" not in sys.modules  # the app's process never imported it
        await highlight(pilot, app, "adamw")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.query_one(ComparisonTable).rows_data) == 1, what="the adamw run")
        assert engine.runners[0].preset.name == "adamw"
