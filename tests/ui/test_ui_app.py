"""Pilot tests of the app with a fake doctor report, a fake device probe and a scripted engine (fast)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from ui_fakes import (
    FakeEngine,
    cpu_app,
    fake_probe,
    gpu_app,
    gpu_report,
    highlight,
    no_gpu_report,
    provider,
    static_text,
    until_ready,
    wait_for,
)

from apextui.core.measure.compare import format_speedup
from apextui.ui.widget_format import verdict_mark
from apextui.core.env import DeviceUnavailable
from apextui.core.presets import load_builtin, resolve
from apextui.core.results import comparison
from apextui.ui.app import make_app
from apextui.ui.screens.load_screen import LoadScreen
from apextui.ui.screens.report_screen import ReportScreen
from apextui.ui.widgets.comparison_table import ComparisonTable
from apextui.ui.widgets.preset_picker import PresetPicker

pytestmark = pytest.mark.asyncio

SIZE = (100, 30)


async def test_probing_then_report_and_availability():
    gate = threading.Event()
    app = make_app(device="cpu", report_provider=provider(no_gpu_report(), gate),
                   probe=fake_probe("cpu", {"fused_adam": "needs Apex"}, gate), runner_factory=FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        body = static_text(app, "#status-body")
        assert "probing…" in body
        assert app.query_one(PresetPicker).border_subtitle == "probing…"
        gate.set()
        await until_ready(pilot, app)
        body = " ".join(static_text(app, "#status-body").split())  # wrapped to the pane's width
        assert "probing" not in body
        assert "NOT INSTALLED" in body
        assert "✗ FusedAdam" in body and "NVIDIA Apex is not installed" in body
        picker = app.query_one(PresetPicker)
        assert not picker.is_available("fused_adam") and picker.is_available("adamw")
        total = len(app.presets)
        assert total >= 11 and f"{total - 1}/{total} runnable on cpu" in str(picker.border_subtitle)


@pytest.mark.slow
async def test_enter_runs_highlighted_preset_and_table_row():
    engine = FakeEngine()
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await highlight(pilot, app, "fp32")
        await pilot.press("enter")
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: len(table.rows_data) == 1, what="fp32 row")
        await highlight(pilot, app, "fused_amp")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(table.rows_data) == 2, what="fused_amp row")
        fp32, amp = table.rows_data
        assert (fp32.preset, fp32.status, amp.preset, amp.status) == ("fp32", "ok", "fused_amp", "ok")
        cells = [str(c) for c in table.get_row_at(1)]
        sp = table.get_column_index("speedup")
        assert cells[0] == "fused_amp"
        # speed-up against fp32, with its 95 % interval (core.measure.compare), green: beyond noise
        c = comparison(amp, table.rows_data)
        assert cells[sp] == "▲" + format_speedup(c)
        assert cells[sp].startswith(f"▲{fp32.median_ms / amp.median_ms:.2f}× (")
        assert c.verdict == "faster" and table.get_row_at(1)[sp].style == "bold green"
        assert str(table.get_row_at(0)[sp]) == "base"
        assert [r.steps for r in engine.runners] == [400, 400]
        last = app.last_result()  # the headless `end` summary of the last run, for scripts
        assert last["status"] == "ok" and last["preset"] == "fused_amp" and last["median_ms"] == round(amp.median_ms, 4)


async def test_stop_key_stops_the_run():
    engine = FakeEngine(hold={"fp32": 120})
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app.latest_view is not None and app.latest_view.snapshot.steps_done == 120,
                       what="120 steps")
        assert "120/400" in static_text(app, "#run-steps")
        # the floor bounds the expected loss: the pane sets it against the smoothed loss, the batch's below
        view = app.latest_view
        assert static_text(app, "#loss-value") == f"avg {view.smooth_loss:.4f}\nbatch {view.last_loss:.4f}"
        assert static_text(app, "#loss-floor") == "floor 1.0475"
        await pilot.press("s")
        await wait_for(pilot, lambda: app.active is None, what="stopped")
        assert engine.runners[0].stopped
        row = app.query_one(ComparisonTable).rows_data[-1]
        assert row.status == "stopped" and row.summary.steps == 120
        assert "■" in str(app.query_one(ComparisonTable).get_row_at(0)[0])


async def test_a_stopped_baseline_is_not_used_and_the_table_says_why():
    engine = FakeEngine(hold={"fp32": 43})
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        table = app.query_one(ComparisonTable)
        app.start_preset("fp32")
        await wait_for(pilot, lambda: app.latest_view is not None and app.latest_view.snapshot.steps_done == 43,
                       what="43 steps")
        await pilot.press("s")
        await wait_for(pilot, lambda: app.active is None, what="stopped")
        app.start_preset("torch_amp")
        await wait_for(pilot, lambda: len(table.rows_data) == 2, what="torch_amp row")
        assert str(table.get_row_at(1)[table.get_column_index("speedup")]) == "—"  # none against a stopped run
        assert table.border_subtitle.startswith("no speed-up: fp32 run 1 stopped after 43 steps: not a baseline")
        engine.hold.clear()
        app.start_preset("fp32")
        await wait_for(pilot, lambda: len(table.rows_data) == 3, what="the second fp32 row")
        assert table.border_subtitle == ("vs fp32 run 2; fp32 run 1 stopped after 43 steps: not a baseline · "
                                         "transformer on cuda: single runs, one after another: drift unknown · "
                                         "▲ faster ▼ slower ≈ within noise")
        sp = table.get_column_index("speedup")
        assert str(table.get_row_at(2)[sp]) == "base"
        amp = table.rows_data[1]
        c = comparison(amp, table.rows_data)
        assert str(table.get_row_at(1)[sp]) == verdict_mark(c.verdict) + format_speedup(c) != "—"


async def test_a_second_start_is_refused_while_running():
    engine = FakeEngine(hold={"fp32": 50})
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        assert app.start_preset("fp32")
        assert not app.start_preset("adamw")
        assert len(engine.runners) == 1
        await pilot.pause()
        assert any("press s to stop" in n.message for n in app._notifications)
        engine.runners[0].release()
        await wait_for(pilot, lambda: app.active is None, what="run end")


async def test_unavailable_preset_is_refused_with_reason_and_fix():
    app = cpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await highlight(pilot, app, "fused_adam")
        title = static_text(app, "#run-title")
        assert "CUDA only" in title and "fix:" in title  # the full reason and the fix
        await pilot.press("enter")
        await pilot.pause()
        assert app.active is None
        messages = [n.message for n in app._notifications]
        assert any("fused_adam cannot run here" in m for m in messages)


async def test_starts_with_neither_gpu_nor_apex_and_says_so():
    engine = FakeEngine(hold={"layernorm": 50})
    app = cpu_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_ready(pilot, app)
        assert "No GPU" in static_text(app, "#status-body")
        assert any("No GPU here" in n.message for n in app._notifications)
        picker = app.query_one(PresetPicker)
        runnable = [p.name for p in picker.presets if picker.is_available(p.name)]
        assert runnable == [p.name for p in load_builtin() if not p.needs_apex]
        app.start_preset("layernorm")
        await wait_for(pilot, lambda: app._drawn_view is not None, what="layernorm drawn")
        await pilot.pause()
        assert engine.runners[0].device == "cpu"
        assert "GPU n/a: running on CPU" in static_text(app, "#gpu-na")  # while the run lasts
        engine.runners[0].release()
        await wait_for(pilot, lambda: app.query_one(ComparisonTable).rows_data, what="layernorm row")


async def test_cli_preset_is_preselected_and_started_after_the_probe():
    engine = FakeEngine()
    gate = threading.Event()
    app = make_app(preset=resolve("adamw_fused"), device="cuda", steps=25, report_provider=provider(gpu_report()),
                   probe=fake_probe("cuda", event=gate), runner_factory=engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.query_one(PresetPicker).highlighted_preset.name == "adamw_fused"
        assert not engine.runners  # nothing starts before the device is known
        gate.set()
        # 5 s timed out once under load
        await wait_for(pilot, lambda: app.query_one(ComparisonTable).rows_data, what="autostarted run")
        assert engine.runners[0].preset.name == "adamw_fused" and engine.runners[0].steps == 25


async def test_device_cuda_unavailable_exits_3():
    def probe(requested, presets):
        raise DeviceUnavailable("--device cuda was asked for but no CUDA GPU is visible")

    app = make_app(device="cuda", report_provider=provider(gpu_report()), probe=probe, runner_factory=FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.return_code is not None, what="exit")
    assert app.return_code == 3


async def test_quit_stops_the_active_run_and_waits():
    engine = FakeEngine(hold={"fp32": 30})
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await pilot.press("q")
        await pilot.pause()
    runner = engine.runners[0]
    assert runner.stopped and runner.joined and not runner.is_alive()


@pytest.mark.slow
async def test_doctor_key_opens_full_report():
    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen)
        body = static_text(app.screen, "#report-body")
        assert "Features" in body and "FusedLayerNorm" in body
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ReportScreen)


async def test_doctor_failure_is_shown():
    def broken():
        raise RuntimeError("child process died")

    app = make_app(report_provider=broken, probe=fake_probe("cuda"), runner_factory=FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.report_error is not None, what="doctor error")
        assert "doctor failed: RuntimeError: child process died" in static_text(app, "#status-body")


@pytest.mark.slow
async def test_save_load_and_screenshot_keys(tmp_path):
    app = gpu_app(save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("w")  # nothing to save yet
        assert not list(tmp_path.glob("*.json"))
        app.start_preset("layernorm")
        app.query_one(PresetPicker).focus()
        await wait_for(pilot, lambda: app.active is None and app.query_one(ComparisonTable).rows_data, what="run")
        app.start_preset("fused_layernorm")
        await wait_for(pilot, lambda: len(app.query_one(ComparisonTable).rows_data) == 2, what="second run")
        await pilot.press("w")
        saved = list(tmp_path.glob("apextui-results-*.json"))
        assert len(saved) == 1
        doc = json.loads(saved[0].read_text())
        assert doc["kind"] == "apextui-results"
        assert [r["preset"] for r in doc["runs"]] == ["layernorm", "fused_layernorm"]
        assert doc["runs"][1]["summary"]["check"]["passed"] is True and doc["runs"][1]["speedup"] > 1

        await pilot.press("p")
        await pilot.pause()
        shots = list(tmp_path.glob("apextui-*.svg"))
        assert len(shots) == 1 and shots[0].read_text().lstrip().startswith("<svg")

        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LoadScreen)
        app.screen.query_one("#load-path").value = str(saved[0])  # typing a long tmp path key by key is slow
        app.screen.query_one("#load-path").focus()  # the recent files list has the focus first
        await pilot.press("enter")  # the input's Submitted reaches the screen as a message: the rows come after
        await wait_for(pilot, lambda: len(app.query_one(ComparisonTable).rows_data) == 4, what="the loaded runs")
        rows = app.query_one(ComparisonTable).rows_data
        assert rows[2].source == str(saved[0])
        assert str(app.query_one(ComparisonTable).get_row_at(2)[0]) == "layernorm f1"


async def test_load_at_start_and_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all\n")
    app = gpu_app(load=[bad])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.query_one(ComparisonTable).rows_data
        assert any("cannot load results" in (n.title or "") for n in app._notifications)


async def test_load_survives_every_file_the_loader_refuses(tmp_path):
    """Issue 15 §2-3: `--load` (and `l`) of a file Python's json refuses, a FIFO, a device, a huge file or
    output with no finished run: one error notification each, the app keeps running and loads a good file."""
    import os

    from apextui.core.results import MAX_RESULTS_BYTES

    digits = tmp_path / "digits.json"
    digits.write_text('{"kind": "apextui-results", "schema": 1, "runs": [' + "1" * 5000 + "]}")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_RESULTS_BYTES + 1)
    no_runs = tmp_path / "no_runs.jsonl"
    no_runs.write_text('{"event": "start", "preset": "p", "workload": "norm", "variant": "layernorm", '
                       '"device": "cpu"}\n')
    bad = [digits, fifo, Path(os.devnull), huge, no_runs]
    app = gpu_app(load=bad)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        errors = [n.message for n in app._notifications if n.title == "cannot load results"]
        assert len(errors) == len(bad) and all(m.startswith(f"{p}: ") for m, p in zip(errors, bad, strict=True))
        assert "a JSON value Python cannot read" in errors[0] and "not a regular file (a FIFO)" in errors[1]
        assert "no finished runs" in errors[4]
        assert not app.query_one(ComparisonTable).rows_data
        good = tmp_path / "good.jsonl"
        good.write_text(no_runs.read_text() + '{"event": "end", "status": "ok", "summary": {"median_ms": 2.0}}\n')
        assert app.load_results(good) == 1 and app.is_running


@pytest.mark.slow
async def test_updates_are_coalesced_and_rate_limited():
    """A flood of snapshots from another thread: one message in flight at a time, at most one redraw per
    refresh_interval."""
    import time

    engine = FakeEngine(hold={"adamw": 0})
    app = gpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("adamw")
        runner = engine.runners[0]
        bridge = app.active.bridge
        runner.batch = 1
        t0 = time.monotonic()

        def produce() -> None:  # ~1.5 s of 1 kHz snapshots, then a burst
            for step in range(1, 1501):
                runner._advance(step)
                time.sleep(0.001)
            runner._advance(3000)

        flood = threading.Thread(target=produce)
        flood.start()
        while flood.is_alive():
            await pilot.pause(0.05)
        runner.release()
        await wait_for(pilot, lambda: app.active is None, what="end")
        elapsed = time.monotonic() - t0
        assert app.latest_view.snapshot.steps_done == 3000
        posted = app.latest_view.updates  # snapshots folded in
        assert posted >= 3000
        assert app.renders <= elapsed / app.refresh_interval + 3, (app.renders, elapsed)
        # never one message per snapshot
        assert bridge.posted <= elapsed / app.refresh_interval + 3, (bridge.posted, elapsed)
        print(f"snapshots {posted}, messages {bridge.posted}, redraws {app.renders} in {elapsed:.2f} s")
        assert len(app.latest_view.step_ms) <= 240 and len(app.latest_view.losses) <= 256


async def test_runs_wait_for_the_doctor():
    """The doctor's CUDA smoke tests must not overlap a measured run: enter queues until it is done."""
    gate = threading.Event()
    engine = FakeEngine()
    app = make_app(device="cuda", report_provider=provider(gpu_report(), gate), probe=fake_probe("cuda"),
                   runner_factory=engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, what="probe")
        assert not app.start_preset("fp32")
        await pilot.pause()
        assert not engine.runners and any("Apex doctor finishes" in n.message for n in app._notifications)
        gate.set()
        await wait_for(pilot, lambda: app.table.rows_data, what="the queued run")
        assert engine.runners[0].preset.name == "fp32"


async def test_a_broken_probe_is_reported_and_runs_refused():
    def probe(requested, presets):
        raise OSError("libcudart.so.12: cannot open shared object file")

    engine = FakeEngine()
    app = make_app(report_provider=provider(gpu_report()), probe=probe, runner_factory=engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.probe_error is not None, what="probe error")
        assert "libcudart" in static_text(app, "#status-body")
        assert not app.start_preset("fp32") and not engine.runners
        assert app.return_code is None  # only an unusable --device cuda ends the app


async def test_preset_file_from_the_command_line_joins_the_picker(tmp_path):
    src = Path(resolve("fp32").path).read_text()
    path = tmp_path / "my_fp32.toml"
    path.write_text(src.replace("Transformer, vanilla fp32", "my own fp32"))
    engine = FakeEngine()
    app = gpu_app(engine, preset=resolve(str(path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.table.rows_data, what="the preset file's run")
        picker = app.query_one(PresetPicker)
        names = [p.name for p in picker.presets]
        last_transformer = max(i for i, n in enumerate(names) if n != "my_fp32"
                               and picker.presets[i].workload == "transformer")
        assert names.index("my_fp32") == last_transformer + 1  # with the other transformer presets
        assert engine.runners[0].preset.path == str(path)
        assert app.table.rows_data[0].preset == "my_fp32"


async def test_the_advice_subtitle_tick_after_the_run_pane_is_gone_does_nothing():
    """The once-a-second subtitle tick (`_show_advice_measuring`) can fire as the app exits, after Textual has taken
    the panes down: it raised NoMatches, which failed whichever test was exiting then (seen under load)."""
    from apextui.ui.widgets.live_run import LiveRun

    app = gpu_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await app.query_one(LiveRun).remove()
        app._show_advice_measuring()
        assert not app.query(LiveRun)
