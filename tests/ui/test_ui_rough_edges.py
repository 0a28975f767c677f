"""Issue 27's rough edges of the TUI: the palette, the history after w and quit, the save messages, the footer and
the process pane with nothing running, toasts clear of the table, r and n, the run details' times, the Load
picker's folders, the legend after a load, the doctor report at 80 columns, the marks that tell faster from
slower without colour."""

from __future__ import annotations

import json
from pathlib import Path
import time

import pytest
from ui_fakes import FakeEngine, cpu_app, gpu_app, static_text, until_ready, wait_for, wait_for_screen

from apextui.ui import history

pytestmark = pytest.mark.asyncio


async def fp32_saved(pilot, app) -> None:
    """fp32 run, then saved with w."""
    await until_ready(pilot, app)
    app.start_preset("fp32")
    await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
    await pilot.press("w")


async def test_the_palette_has_no_textual_twins_of_apextuis_commands():
    """Textual's Quit (which skips the save of unsaved runs), Keys and Screenshot beside apextui's own."""
    app = gpu_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
    assert not {"Quit", "Keys", "Screenshot"} & set(titles)
    assert {"Quit apextui", "Help", "SVG screenshot", "Theme", "Run again"} <= set(titles)


@pytest.mark.slow
async def test_w_then_more_runs_then_quit_lists_each_run_once_in_the_history(tmp_path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await fp32_saved(pilot, app)
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 2, what="fused_amp")
        await pilot.press("w")  # a second save: its copy replaces the first one's
        assert len(history.recent_results()) == 1
        app.start_preset("fused_fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 3, what="fused_fp32")
        await pilot.press("q")
        await pilot.pause()
    assert app.quit_saved is not None
    files = history.recent_results()
    runs = [r["preset"] for f in files for r in json.loads(f.path.read_text())["runs"]]
    assert sorted(runs) == ["fp32", "fused_amp", "fused_fp32"]  # each once: no copy of an earlier w left
    assert len(list(tmp_path.glob("apextui-results-*.json"))) == 2  # w's own files are never touched


@pytest.mark.slow
async def test_w_e_and_p_name_their_files_by_full_path(tmp_path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        for key in "wep":
            await pilot.press(key)
        await pilot.pause()
        messages = [n.message for n in app._notifications]
    for start in ("saved 1 run to\n", "exported 1 run as CSV and Markdown to\n", "saved the screenshot to\n"):
        (message,) = [m for m in messages if m.startswith(start)]
        paths = message.split("\n")[1:]
        assert paths and all(p.startswith(str(tmp_path.resolve())) for p in paths), message


async def test_idle_footer_has_no_stop_and_the_process_pane_no_stale_readings():
    app = cpu_app(FakeEngine(hold={"fp32": 50}))
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        footer = lambda: [getattr(k, "action", None) for k in app.query("FooterKey")]  # noqa: E731
        await pilot.pause()
        assert "stop" not in footer()
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app._drawn_view is not None, what="fp32 drawn")
        await pilot.pause()
        assert "stop" in footer()
        assert "CPU" in static_text(app, "#m-cpu_pct .metric-value")
        app.active.runner.release()
        await wait_for(pilot, lambda: app.active is None, what="fp32 ended")
        await pilot.pause()
        assert "stop" not in footer()
        assert not app.query_one("#host-grid").display  # no CPU/RSS of a run that has ended
        assert "no run now" in static_text(app, "#gpu-na")
        await pilot.press("s")  # the key still answers
        await pilot.pause()


async def test_toasts_stay_clear_of_the_comparison_table():
    for size in ((80, 24), (120, 40), (60, 20)):
        app = gpu_app()
        async with app.run_test(size=size, notifications=True) as pilot:
            await until_ready(pilot, app)
            app.notify("saved 1 run to\n/home/someone/work/apextui-results-20261202-011500.json", title="saved")
            app.notify("a second one")
            await wait_for(pilot, lambda app=app: len(app.query("Toast")) == 2  # mounted, laid out after a refresh
                           and all(t.region.area > 0 for t in app.query("Toast")), what="the two toasts drawn")
            toasts = list(app.query("Toast"))
            table = app.table.region
            assert all(t.region.bottom <= table.y for t in toasts), (size, [t.region for t in toasts], table)


async def test_r_runs_the_highlighted_rows_preset_again_and_n_sets_the_steps():
    from apextui.ui.screens.steps_screen import StepsScreen

    engine = FakeEngine()
    app = gpu_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        app.start_preset("fused_amp")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 2, what="fused_amp")
        await pilot.press("r")  # the cursor is on the run that just ended
        await wait_for(pilot, lambda: len(app.table.rows_data) == 3, what="fused_amp again")
        assert [r.preset for r in app.table.rows_data] == ["fp32", "fused_amp", "fused_amp"]
        app.table.move_cursor(row=0)
        await pilot.press("n")
        await wait_for_screen(pilot, app, StepsScreen, "the steps dialog")
        for key in ("ctrl+u", "x", "enter"):  # not a number: refused with what is allowed
            await pilot.press(key)
        await wait_for(pilot, lambda: "whole number" in static_text(app.screen, "#steps-error"), what="the refusal")
        assert isinstance(app.screen, StepsScreen)
        for key in ("ctrl+u", "1", "2", "0", "enter"):
            await pilot.press(key)
        await wait_for(pilot, lambda: app.settings.steps == 120 and not isinstance(app.screen, StepsScreen),
                       what="the steps taken and the dialog closed")
        await pilot.press("r")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 4, what="fp32 again")
    assert engine.runners[-1].preset.name == "fp32" and engine.runners[-1].steps == 120
    assert engine.runners[1].steps != 120


async def test_run_details_show_times_as_dates():
    from apextui.ui.screens.run_details_screen import flatten

    when = 1796151131
    ((key, value),) = flatten("roofline", {"ceilings": {"measured_at": when}})
    assert key == "roofline.ceilings.measured_at"
    assert value == f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))} ({when})"
    assert list(flatten("steps", 400)) == [("steps", "400")]


async def test_the_load_picker_shows_each_files_folder_whole_at_120_columns(tmp_path, monkeypatch):
    """On one line the folder came last and was cut, even at 120 columns; narrow, it loses its start, not its
    end (the folder's own name)."""
    from apextui.ui.screens.load_screen import LoadScreen

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "apextui-results-20261201-034012.json").write_text("{}")
    monkeypatch.chdir(folder)
    for size in ((120, 40), (60, 20)):
        app = gpu_app(save_dir=folder)
        async with app.run_test(size=size) as pilot:
            await until_ready(pilot, app)
            await pilot.press("l")
            await pilot.pause()
            assert isinstance(app.screen, LoadScreen)
            recent = app.screen.query_one("#load-recent")
            lines = recent.get_option_at_index(0).prompt.plain.splitlines()
            room = recent.scrollable_content_region.width
        assert lines[0].endswith("apextui-results-20261201-034012.json  1 KiB") and len(lines[0]) <= 120 - 8
        if size[0] == 120:
            assert lines[1] == f"  in {folder}" and len(lines[1]) <= room
        else:
            assert lines[1].startswith("  in …") and lines[1].endswith("/results") and len(lines[1]) <= room


@pytest.mark.slow
async def test_loading_a_file_keeps_the_tables_legend(tmp_path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await fp32_saved(pilot, app)
        (saved,) = tmp_path.glob("apextui-results-*.json")
        assert app.load_results(saved) == 1
        await pilot.pause()
        subtitle = str(app.table.border_subtitle)
    assert "▲ faster ▼ slower ≈ within noise" in subtitle and f"f1 {saved.name}" in subtitle


async def test_faster_and_slower_speed_ups_differ_by_a_symbol_as_well_as_colour():
    from apextui.ui import widget_format as fmt

    app = gpu_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until_ready(pilot, app)
        for name in ("fp32", "fused_amp"):
            app.start_preset(name)
            await wait_for(pilot, lambda n=name: app.table.rows_data and app.table.rows_data[-1].preset == n, what=name)
        await pilot.pause()
        cell = str(app.table.get_cell_at((1, [c.key for c in app.table.columns.values()].index("speedup"))))
    assert cell.startswith(fmt.VERDICT_MARK["faster"]) and fmt.verdict_mark("slower") == "▼"
    assert fmt.verdict_mark("within_noise") == ""  # its ≈ says it


async def test_the_doctor_report_at_80_columns_wraps_at_words_fix_lines_too():
    """The box's edge cut lines mid-word ("git clone h"); then a fix line kept whole took about 90 presses of → at
    80 columns. Every line is wrapped at words now, a fix line's pieces ending in a shell continuation (` \\`), so
    nothing but a single word longer than the room is wider than the box."""
    import dataclasses

    from ui_fakes import no_gpu_report, provider

    from apextui.ui import doctor_view

    fix = ("install NVIDIA Apex from source with its extensions: git clone https://github.com/NVIDIA/apex && cd apex "
           "&& APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation .")
    base = no_gpu_report()
    report = dataclasses.replace(base, problems=(dataclasses.replace(base.problems[1], fix=fix),))
    app = cpu_app(report_provider=provider(report))
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        await pilot.press("d")
        await wait_for(pilot, lambda: "fix:" in str(app.screen.query_one("#report-body").content)
                       and app.screen._wrapped_at > 0, what="the report, wrapped to the screen (after a refresh)")
        box = app.screen.scroll_box
        text = str(app.screen.query_one("#report-body").content)
        width = box.size.width - box.styles.gutter.width - 1
        subtitle = str(box.border_subtitle)
    lines = text.splitlines()
    assert width < 80 and all(len(line) <= width or len(line.split()) == 1 for line in lines), \
        [line for line in lines if len(line) > width]
    words = [w for w in text.split() if w != "\\"]
    whole = " ".join(t.plain for t in doctor_view.full_report_lines(report))
    assert words == whole.split()  # the same words in the same order: none cut in two
    at = next(i for i, line in enumerate(lines) if "fix: install NVIDIA Apex" in line)
    pieces = []
    for line in lines[at:]:
        pieces.append(line.strip().removesuffix(" \\"))
        if not line.endswith(" \\"):
            break
    assert len(pieces) > 1 and " ".join(pieces) == f"fix: {fix}"  # continued to its end: one shell command
    assert len(subtitle) <= 76  # whole in the border at 80 columns


def _overlaps(a, b) -> bool:
    return a.x < b.right and b.x < a.right and a.y < b.bottom and b.y < a.bottom


async def test_at_80x24_the_no_gpu_toast_stays_clear_of_the_preset_list():
    from apextui.ui.widgets.preset_picker import PresetPicker

    app = cpu_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until_ready(pilot, app)
        await wait_for(pilot, lambda: any("No GPU" in str(t.render()) or "no GPU" in str(t.render())
                                          for t in app.screen.query("Toast")), 30, "the no GPU toast")
        await pilot.pause()
        picker = app.query_one(PresetPicker).region
        toasts = [t.region for t in app.screen.query("Toast")]
        assert toasts and not any(_overlaps(t, picker) for t in toasts), (toasts, picker)


async def test_at_80x24_a_dialog_opens_clear_of_the_toasts_before_it(tmp_path):
    """The Steps input opened under the "SVG saved" toast; Run details under "next runs: 100 steps"."""
    from apextui.ui.screens.steps_screen import StepsScreen

    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until_ready(pilot, app)
        await pilot.press("p")  # an SVG: its toast says where
        await wait_for(pilot, lambda: bool(app.screen.query("Toast")), 30, "the SVG saved toast")
        await pilot.press("n")
        await wait_for_screen(pilot, app, StepsScreen, "the steps dialog", 30)
        await pilot.pause()
        assert not app.screen.query("Toast") and not app._notifications
        app.notify("what the dialog says shows")
        await wait_for(pilot, lambda: bool(app.screen.query("Toast")), 30, "a toast of the dialog's own")


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_doctor_pane_never_cuts_a_sentence_without_an_ellipsis(size):
    """At 80x24 the pane's wrapped lines were cut at its bottom edge ("DistributedFusedAdam: NVIDIA"); what does
    not fit now ends in "…" on the last row shown; where everything fits (200x60), nothing is cut."""
    from apextui.ui.widgets.status_pane import StatusPane

    app = cpu_app()
    async with app.run_test(size=size) as pilot:
        await until_ready(pilot, app)
        pane = app.query_one(StatusPane)
        await wait_for(pilot, lambda: "Apex" in static_text(app, "#status-body") and pane.size.height > 2, 30,
                       "the report in the pane")
        await pilot.pause()
        lines = static_text(app, "#status-body").splitlines()
        assert len(lines) <= pane.size.height, (lines, pane.size.height)  # every row in view: none cut off
        if size == (200, 60):
            assert "d: full report" in lines[-1] and not any("…" in line for line in lines), lines
        else:
            assert lines[-1].endswith("…"), lines


@pytest.mark.parametrize("size, hidden", [((80, 24), {"screenshot"}), ((120, 40), set()), ((60, 20), {"export"})])
async def test_the_export_key_is_in_the_footer_wherever_there_is_room_for_it(size, hidden):
    """`e` (CSV + Markdown of the table) worked and was in `?`, but not in the footer: from 80 columns it is, and
    from 80 to 99 `p SVG` gives it its room; under 80 the footer keeps the keys that matter."""
    app = cpu_app(FakeEngine())
    async with app.run_test(size=size) as pilot:
        await until_ready(pilot, app)
        await pilot.pause()
        shown = {getattr(k, "action", None) for k in app.query("FooterKey")}
        assert ("export" in shown) == (size[0] >= 80), shown
        assert not hidden & shown and {"help", "quit", "save"} <= shown, shown
        assert ("screenshot" in shown) == (size[0] >= 100), shown


@pytest.mark.parametrize("git_work_tree", [True, False])
async def test_e_and_p_never_leave_files_in_a_git_work_tree(tmp_path, monkeypatch, git_work_tree):
    """Started in a source checkout, `e` (CSV + Markdown) and `p` (SVG) wrote into its work tree: there they go to the
    folder that keeps every session's results, elsewhere to the start folder; the toast names where."""
    start = tmp_path / "checkout"
    (start / "src").mkdir(parents=True)
    if git_work_tree:
        (start / ".git").mkdir()
    monkeypatch.chdir(start / "src")
    app = cpu_app(FakeEngine())
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1, what="fp32")
        for key in "ep":
            await pilot.press(key)
        await pilot.pause()
        messages = [n.message for n in app._notifications]
    left = sorted(p.name for p in start.rglob("apextui-*"))
    expected = history.history_dir().resolve() if git_work_tree else (start / "src").resolve()
    written = [Path(p) for m in messages if m.startswith(("exported", "saved the screenshot"))
               for p in m.split("\n")[1:]]
    assert len(written) == 3 and all(p.resolve().parent == expected for p in written), messages
    assert (left == []) == git_work_tree, left


async def test_the_no_gpu_toast_goes_when_the_first_run_starts():
    """It sat over the run pane and its loss chart for more than 10 s, through the first run."""
    app = cpu_app(FakeEngine(hold={"fp32": 50}))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until_ready(pilot, app)
        no_gpu = lambda: [t for t in app.screen.query("Toast") if "no GPU" in str(t.render())]  # noqa: E731
        await wait_for(pilot, lambda: bool(no_gpu()), 30, "the no GPU toast")
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app._drawn_view is not None, what="fp32 drawn")
        await wait_for(pilot, lambda: not no_gpu(), 5, "the toast gone once the run started")
        assert app.probe.device == "cpu" and app.device_toast is None
        app.active.runner.release()
