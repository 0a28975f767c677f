"""advise marks a run measured while other work competed (issue 27 §1): the run's record carries the contention
level, the preset's entry says so, and the speed-up of any comparison involving it has ⚠ beside it."""

from __future__ import annotations

from apextui.core import advise
from apextui.core.advise import Measurement, RunResult, overall_apex, verdict
from apextui.core.measure.summary import Summary
from apextui.core.monitor.contention import RunContention


def runs(medians, busy=False):
    return tuple(RunResult(i + 1, "ok", Summary(steps=30, measured_steps=24, timed_intervals=24, median_ms=v,
                                                median_low_ms=v * 0.99, median_high_ms=v * 1.01,
                                                contention=RunContention("busy") if busy else None))
                 for i, v in enumerate(medians))


def test_a_busy_run_is_marked_beside_every_speedup_it_is_in():
    base = Measurement("adamw", "adamw", "optimizer", runs=runs([30.0, 30.5]), planned=2)
    fused = Measurement("adamw_fused", "adamw_fused", "optimizer", runs=runs([10.0, 10.2], busy=True), planned=2)
    quiet = Measurement("adamw_foreach", "adamw_foreach", "optimizer", runs=runs([20.0, 20.2]), planned=2)
    assert fused.runs[0].competed and fused.runs[0].to_dict()["contention"] == {"level": "busy"}
    v = verdict("optimizer", [base, fused, quiet]).to_dict()
    entries = {p["preset"]: p for p in v["presets"]}
    assert entries["adamw_fused"]["competed"] and entries["adamw_fused"]["speedup_competed"]
    assert not entries["adamw_foreach"]["competed"] and not entries["adamw_foreach"]["speedup_competed"]
    doc = {"device": "cpu", "environment": {}, "settings": {"steps": 30, "repeats": 2}, "measured_at": "now",
           "elapsed_s": 1, "workloads": [v], "apex": overall_apex([v])}
    rows = {r.preset: r for r in advise.view(doc).workloads[0].rows}
    assert rows["adamw_fused"].vs_base.endswith(" ⚠") and not rows["adamw_foreach"].vs_base.endswith("⚠")
    text = advise.format_text(doc)
    assert "⚠" in text and "(⚠ other work competed with a run of that row or of the baseline" in text  # explained
    quiet_doc = {**doc, "workloads": [verdict("optimizer", [base, quiet]).to_dict()]}
    assert "⚠" not in advise.format_text(quiet_doc)  # and the legend only where a row has the mark
    from apextui.ui.screens.advise_screen import render_doc  # the TUI's advise screen says the same

    assert advise.view(doc).competed_legend in render_doc(advise.view(doc)).plain
    assert "⚠" not in render_doc(advise.view(quiet_doc)).plain
