"""Unit tests of the UI's non-widget parts: the bridge, results files, doctor condensing, formatting."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from apextui.core.measure.compare import UNKNOWN_DRIFT
from ui_fakes import FakeRunner, gpu_report, no_gpu_report

from apextui.core.presets import resolve
from apextui.core.results import (
    ResultRow,
    ResultsError,
    RunIndex,
    comparison,
    load_results,
    results_document,
    row_from_snapshot,
    save_session,
)
from apextui.core.run import events
from apextui.ui import doctor_view, widget_format as fmt
from apextui.ui.bridge import Downsampled, LossAverage, RunBridge
from apextui.ui.messages import RunUpdated
from apextui.core.run.request import RunRequest

ROOT = Path(__file__).resolve().parents[2]


# ---- bridge -----------------------------------------------------------------------------------


def test_downsampled_keeps_whole_series_bounded():
    d = Downsampled(64)
    for i in range(10_000):
        d.add(float(i))
    values = d.snapshot()
    assert len(values) <= 64
    assert values[0] < 200 and values[-1] > 9_700  # first and last parts of the run are both there
    assert abs(sum(d.values) / len(d.values) - 4_999.5) < 200


def snapshots(name: str = "fp32", steps: int = 50, device: str = "cuda") -> list:
    out: list = []
    runner = FakeRunner(RunRequest(resolve(name), device, steps), out.append)
    runner.start()
    return out


def test_bridge_posts_when_idle_and_marks_dirty_while_busy():
    posted: list = []
    bridge = RunBridge(1, posted.append, min_interval=60.0)
    snaps = snapshots()
    bridge(snaps[0])
    assert len(posted) == 1 and isinstance(posted[0], RunUpdated) and posted[0].bridge is bridge
    for s in snaps[1:-1]:
        bridge(s)
    assert len(posted) == 1  # a message is still pending
    view = bridge.take()
    assert view.snapshot is snaps[-2] and view.updates == len(snaps) - 1
    assert not bridge.dirty
    bridge(snaps[-2])
    assert len(posted) == 1 and bridge.dirty  # within min_interval of the take: the UI pulls it
    bridge(snaps[-1])  # the final snapshot is always posted
    assert len(posted) == 2
    final = bridge.take()
    assert final.finished and final.snapshot.status == "ok"


def test_bridge_histories():
    bridge = RunBridge(1, lambda m: None)
    for s in snapshots("fused_amp", steps=60):
        bridge(s)
    view = bridge.take()
    warmup = view.snapshot.info.warmup
    assert len(view.step_ms) == 60 - warmup  # warm-up steps are left out of the step-time sparkline
    assert len(view.losses) == 60 and view.first_loss > view.last_loss
    assert view.loss_scale == 32768.0
    assert len(view.monitor["gpu_util_pct"]) == len({s.monitor.time for s in snapshots("fused_amp", steps=60)})


def test_loss_average_counts_a_block_as_its_steps():
    """A record of a block of 5 steps (its last step's loss) moves the average as 5 steps at that loss."""
    one, block = LossAverage(20), LossAverage(20)
    for avg in (one, block):
        avg.add(2.0)
    for _ in range(5):
        one.add(1.0)
    block.add(1.0, steps=5)
    assert block.value == pytest.approx(one.value) == pytest.approx(1.0 + (1 - 2 / 21) ** 5)


def test_bridge_smoothed_loss_against_the_batches():
    bridge = RunBridge(1, lambda m: None)
    snaps = snapshots("fp32", steps=200)
    for s in snaps:
        bridge(s)
    view = bridge.take()
    losses = [r.loss for s in snaps for r in s.new_steps]
    expect = LossAverage()
    for x in losses:
        expect.add(x)
    assert view.smooth_loss == pytest.approx(expect.value) and view.last_loss == losses[-1]
    # the batches wobble (±0.03) around the trend, the average far less
    tail = losses[-40:]
    assert max(tail) - min(tail) > 0.05 and abs(view.smooth_loss - sum(tail[-20:]) / 20) < 0.02


def test_bridge_survives_a_closed_app():
    def post(message):
        raise RuntimeError("Event loop is closed")

    bridge = RunBridge(1, post)
    snaps = snapshots(steps=20)
    bridge(snaps[0])  # must not raise into the runner's delivery thread
    for s in snaps[1:]:
        bridge(s)
    bridge.close()
    bridge(snaps[-1])


# ---- results ----------------------------------------------------------------------------------


def finished_row(name: str, device: str = "cuda", source: str = "session", steps: int = 60) -> ResultRow:
    snaps = snapshots(name, steps=steps, device=device)
    row = row_from_snapshot(snaps[-1], resolve(name), device)
    return ResultRow(**{**row.__dict__, "source": source})


def stopped_row(name: str, at: int, steps: int = 400) -> ResultRow:
    """A run stopped by the user after `at` steps."""
    out: list = []
    runner = FakeRunner(RunRequest(resolve(name), "cuda", steps), out.append, hold_at=at)
    runner.start()
    runner.stop()
    return row_from_snapshot(out[-1], resolve(name), "cuda")


def test_speedup_pairs_with_the_baseline_of_the_same_workload_device_and_source():
    fp32, amp = finished_row("fp32"), finished_row("fused_amp")
    adam = finished_row("fused_adam")
    amp_cpu = finished_row("fused_amp", device="cpu")
    amp_file = finished_row("fused_amp", source="old.json")
    rows = [fp32, amp, adam, amp_cpu, amp_file]
    assert comparison(fp32, rows) is None  # the base: shown as `base`, never a speed-up against itself
    c = comparison(amp, rows)
    assert c.speedup == pytest.approx(fp32.median_ms / amp.median_ms) and c.verdict == "faster"
    # single runs, one after another, none repeated: the assumed drift is in the interval
    assert c.basis == "drift_unknown"
    assert c.low == pytest.approx(fp32.summary.median_low_ms / amp.summary.median_high_ms / (1 + UNKNOWN_DRIFT))
    assert comparison(adam, rows) is None  # no adamw run yet
    assert comparison(amp_cpu, rows) is None  # the fp32 baseline ran on cuda
    assert comparison(amp_file, rows) is None  # another file, maybe another machine


def test_a_stopped_or_short_baseline_is_never_used_silently():
    """A stopped 43-step fp32 run once became the baseline of a later torch_amp run (0.79×)."""
    stopped = stopped_row("fp32", at=43)
    assert stopped.status == "stopped" and stopped.median_ms is not None
    amp = finished_row("torch_amp")
    rows = [stopped, amp]
    assert RunIndex(rows).baseline(amp) is None and comparison(amp, rows) is None
    assert RunIndex(rows).notes() == ["no speed-up: fp32 run 1 stopped after 43 steps: not a baseline"]
    short = finished_row("fp32", steps=30)  # 20 warm-up steps: 10 measured
    rows = [stopped, amp, short]
    assert RunIndex(rows).baseline(amp) is None
    assert RunIndex(rows).notes() == [("no speed-up: fp32 run 1 stopped after 43 steps: not a baseline; fp32 run 2 "
                                    "has only 10 measured steps (a baseline needs 20): not a baseline")]
    ok = finished_row("fp32")
    rows = [stopped, amp, ok]
    assert RunIndex(rows).baseline(amp) is ok
    assert comparison(amp, rows).speedup == pytest.approx(ok.median_ms / amp.median_ms)
    assert RunIndex(rows).notes() == ["vs fp32 run 2; fp32 run 1 stopped after 43 steps: not a baseline"]
    runs = results_document(rows)["runs"]
    assert runs[1]["baseline_run"] == "fp32 run 2" and runs[1]["speedup_verdict"] == "faster"
    assert runs[1]["speedup"] == round(ok.median_ms / amp.median_ms, 4)
    assert runs[1]["speedup_low"] < runs[1]["speedup"] < runs[1]["speedup_high"]
    assert runs[1]["baseline_note"] == "vs fp32 run 2; fp32 run 1 stopped after 43 steps: not a baseline"
    assert runs[2]["baseline_run"] == "fp32 run 2" and runs[2]["run"] == "fp32 run 2" and runs[2]["speedup"] is None
    only_stopped = results_document([stopped, amp])["runs"][1]
    assert only_stopped["speedup"] is None and only_stopped["baseline_run"] is None
    assert only_stopped["speedup_verdict"] is None and "not a baseline" in only_stopped["baseline_note"]


def test_save_and_load_round_trip(tmp_path):
    rows = [finished_row("layernorm"), finished_row("fused_layernorm")]
    path = save_session(rows, tmp_path, env={"gpu": "NVIDIA H200"}).path
    doc = json.loads(path.read_text())
    assert doc["kind"] == "apextui-results" and doc["env"] == {"gpu": "NVIDIA H200"}
    assert doc["runs"][0]["summary"] == rows[0].summary.to_dict()
    assert doc["runs"][1]["summary"]["check"]["passed"] is True
    loaded = load_results(path)
    assert [r.preset for r in loaded] == ["layernorm", "fused_layernorm"]
    assert all(r.source == str(path) for r in loaded)
    # the figures as the file has them: rounded there (to 0.1 µs), never before, with the step times behind them
    assert loaded[1].max_error == rows[1].max_error and loaded[0].median_ms == round(rows[0].median_ms, 4)
    again, live = comparison(loaded[1], loaded), comparison(rows[1], rows)
    assert live is not None and again.verdict == live.verdict and again.speedup == pytest.approx(live.speedup, rel=1e-3)


def test_load_headless_json_lines(tmp_path):
    lines = []
    for name in ("adamw", "fused_adam"):
        preset = resolve(name)
        snaps = snapshots(name, steps=30)
        lines.append(events.start_event(preset, "cuda", 30, snaps[-1].info.warmup, {"gpu": "H200"}))
        lines.append(events.setup_event(snaps[-1].info))
        lines.append(events.end_event(snaps[-1]))
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = load_results(path)
    assert [(r.preset, r.device, r.status) for r in rows] == [("adamw", "cuda", "ok"), ("fused_adam", "cuda", "ok")]
    assert comparison(rows[1], rows).speedup > 1


@pytest.mark.parametrize("content, error", [
    (None, "no such results file"), ("", "empty file"), ("hello\n", "not JSON"),
    ('{"event": "step"}\n', "no finished runs"),  # events but no start/end pair: nothing to load is an error
    ('{"kind": "apextui-results", "schema": 1, "runs": 3}', "'runs' must be a list"),
    ('{"kind": "apextui-results", "schema": 1, "runs": [{"preset": "x"}]}', r"runs\[0\]: missing field 'workload'"),
])
def test_load_errors_name_the_file(tmp_path, content, error):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ResultsError, match=error) as info:
        load_results(path)
    assert str(path) in str(info.value)


# ---- doctor view ------------------------------------------------------------------------------


def test_condensed_report_from_object_and_dict_agree():
    for report in (gpu_report(), no_gpu_report()):
        as_object = [t.plain for t in doctor_view.feature_lines(doctor_view.as_dict(report))]
        as_dict = [t.plain for t in doctor_view.feature_lines(json.loads(report.to_json()))]
        assert as_object == as_dict
        names = [f.name for f in report.features]
        named = [n for line in as_object for n in line[2:].split(": ")[0].split(", ")]  # after the ✓/✗ mark
        assert sorted(named) == sorted(names)  # every feature once
    lines = [t.plain for t in doctor_view.feature_lines(no_gpu_report().to_dict())]
    # one reason, said once (at 80 columns each line's copy of it was cut off)
    assert lines[0].startswith("✗ FusedAdam, FusedLAMB") and lines[0].endswith(": NVIDIA Apex is not installed")
    assert sum("NVIDIA Apex is not installed" in line for line in lines) == 1
    assert lines[-1] == "✗ apex.amp: apex.amp was removed from NVIDIA Apex"
    assert doctor_view.apex_line(gpu_report().to_dict()).plain == "Apex COMPLETE 0.1"
    assert "2 problems" in doctor_view.problems_line(no_gpu_report().to_dict()).plain


def test_full_report_uses_the_doctors_renderer_and_falls_back_to_json():
    text = "\n".join(t.plain for t in doctor_view.full_report_lines(gpu_report()))
    assert "Compiled extensions" in text and "NVIDIA H200" in text
    text = "\n".join(t.plain for t in doctor_view.full_report_lines({"apex": {"status": "complete"}}))
    assert '"status": "complete"' in text
    with pytest.raises(TypeError):
        doctor_view.as_dict(42)


# ---- formatting -------------------------------------------------------------------------------


def test_formatting():
    assert [fmt.ms(v) for v in (0.11612, 7.123, 71.23, 712.3, None, float("nan"))] == \
        ["0.116", "7.12", "71.2", "712", "—", "—"]
    assert fmt.si(1_634_000, "tokens/s") == "1.63 M tokens/s" and fmt.si(512) == "512"
    assert fmt.mib(2310) == "2310 MiB" and fmt.mib(20480) == "20.0 GiB"
    assert fmt.seconds(7.5) == "7.5 s" and fmt.seconds(80) == "1:20 min"


# ---- packaging --------------------------------------------------------------------------------


def test_pyproject_ships_every_ui_package_and_stylesheet():
    """The wheel lists packages explicitly: a new UI package or .tcss must be added to pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(config["packages"])
    ui = ROOT / "apextui" / "ui"
    for init in ui.rglob("__init__.py"):
        name = ".".join(init.parent.relative_to(ROOT).parts)
        assert name in packages, f"add {name!r} to [tool.setuptools] packages in pyproject.toml"
    data = config["package-data"]
    for tcss in ui.rglob("*.tcss"):
        package = ".".join(tcss.parent.relative_to(ROOT).parts)
        assert "*.tcss" in data.get(package, []), f"add *.tcss for {package!r} to package-data"
