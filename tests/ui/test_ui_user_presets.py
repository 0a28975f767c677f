"""User presets in the TUI: good files join the picker, bad ones are shown as errors and the app runs on."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from textual.widgets._toast import Toast
from ui_fakes import FakeEngine, fake_probe, highlight, no_gpu_report, provider, until_ready, wait_for

from apextui.ui.app import make_app
from apextui.ui.widgets.comparison_table import ComparisonTable
from apextui.ui.widgets.preset_picker import PresetPicker

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s

ROOT = Path(__file__).resolve().parents[2]
SIZE = (140, 45)


def toast_text(app) -> str:
    """What the toasts show on the terminal (from the SVG screenshot): each screen line's part right of a
    toast's "▌" edge, less the borders of the panes under it, without whitespace, so that text wrapped over
    several lines still reads as one."""
    text = html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot()))
    parts = [line.split("▌", 1)[1].rstrip("─╮╯│ ") for line in text.splitlines() if "▌" in line]
    return "".join("".join(parts).split())


def shown(app, text: str) -> bool:
    return "".join(text.split()) in toast_text(app)


@pytest.fixture
def user_presets(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "presets"
    d.mkdir()
    good = (ROOT / "presets" / "layernorm.toml").read_text().replace("hidden = 256", "hidden = 16")
    (d / "tiny_norm.toml").write_text(good)
    huge = (ROOT / "presets" / "fp32.toml").read_text().replace("vocab = 64", f"vocab = {10**12}")
    (d / "huge.toml").write_text(huge)
    (d / "broken.toml").write_text("[size\n")
    (d / "no_cpu.toml").write_text(good.split("[cpu_size]")[0])
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(d))
    return d


async def test_bad_user_presets_are_shown_and_the_app_runs_a_good_one(user_presets: Path):
    engine = FakeEngine()
    app = make_app(device="cpu", report_provider=provider(no_gpu_report()), probe=fake_probe("cpu"),
                   runner_factory=engine)
    assert [Path(p).name for p, _ in app.preset_errors] == ["broken.toml", "huge.toml", "no_cpu.toml"]
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until_ready(pilot, app)
        errors = [n for n in app._notifications if n.severity == "error"]
        assert len(errors) == 3 and all(n.title == "preset file skipped" for n in errors)
        huge = next(n.message for n in errors if "huge.toml" in n.message)
        assert huge == (f"{user_presets / 'huge.toml'}: field 'cpu_size.vocab': got {10**12}; "
                        "must be an integer from 1 to 32768")
        assert "not valid TOML" in next(n.message for n in errors if "broken.toml" in n.message)
        await pilot.pause()
        toasts = [t for t in app.screen.query(Toast) if t.has_class("-error")]
        assert len(toasts) == 3 and all(t.region.area > 0 for t in toasts)
        for n in errors:
            assert shown(app, n.message), n.message  # every message whole on screen
        assert shown(app, "preset file skipped")
        assert shown(app, "must be an integer from 1 to 32768")
        assert shown(app, "missing table [cpu_size] with keys")  # the message is text, not Textual markup

        # the app is alive: the good user preset is in the picker and runs
        picker = app.query_one(PresetPicker)
        assert picker.preset("tiny_norm") is not None and picker.preset("huge") is None
        await highlight(pilot, app, "tiny_norm")
        await pilot.press("enter")
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: len(table.rows_data) == 1, what="tiny_norm row")
        assert (table.rows_data[0].preset, table.rows_data[0].status) == ("tiny_norm", "ok")


async def test_no_user_folder_means_no_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path / "absent"))
    app = make_app(device="cpu", report_provider=provider(no_gpu_report()), probe=fake_probe("cpu"),
                   runner_factory=FakeEngine())
    assert app.preset_errors == []
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        assert not [n for n in app._notifications if n.severity == "error"]


async def test_a_fifo_in_the_preset_folder_is_skipped_at_start_up(tmp_path: Path, monkeypatch):
    """Issue 15 §2: a FIFO named *.toml used to block the app's start-up forever; now it is a skipped file."""
    import os

    d = tmp_path / "presets"
    d.mkdir()
    (d / "tiny_norm.toml").write_text((ROOT / "presets" / "layernorm.toml").read_text())
    os.mkfifo(d / "pipe.toml")
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(d))
    app = make_app(device="cpu", report_provider=provider(no_gpu_report()), probe=fake_probe("cpu"),
                   runner_factory=FakeEngine())
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        (error,) = [n for n in app._notifications if n.severity == "error"]
        assert error.title == "preset file skipped"
        assert error.message == f"{d / 'pipe.toml'}: not a regular file (a FIFO); a preset file must be a regular file"
        assert app.query_one(PresetPicker).preset("tiny_norm") is not None


async def test_a_probe_or_doctor_result_landing_as_the_app_exits_is_kept_not_drawn():
    """Quit during start-up: the device probe's and the doctor's results come from their threads as messages, and
    one that lands once the app has stopped found its panes gone (NoMatches raised out of the app, seen beside two
    CPU burners). Their handlers keep what came and draw nothing once the app is not running."""
    from apextui.ui.messages import DoctorFailed, DoctorReady, ProbeDone, ProbeFailed

    app = make_app(device="cpu", report_provider=provider(no_gpu_report()), probe=fake_probe("cpu"),
                   runner_factory=FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        probe, report = app.probe, app.report
    assert not app.is_running
    app.on_doctor_ready(DoctorReady(report))
    app.on_probe_done(ProbeDone(probe))
    app.on_doctor_failed(DoctorFailed("late"))
    app.on_probe_failed(ProbeFailed("late"))
    assert app.report is report and app.probe is probe and app.report_error == "late" and app.probe_error == "late"
