"""advise marks a run measured while other work competed (issue 27 §1): the run's record carries the contention
level, the preset's entry says so, and the speed-up of any comparison involving it has ⚠ beside it."""

from __future__ import annotations

import dataclasses

from apextui.core import advise
from apextui.core.advise import Measurement, RunResult, overall_apex, verdict
from apextui.core.config.point import Config
from apextui.core.measure.summary import Summary
from apextui.core.monitor.contention import RunContention


def runs(medians, busy=False):
    return tuple(RunResult(i + 1, "ok", Summary(steps=30, measured_steps=24, timed_intervals=24, median_ms=v,
                                                median_low_ms=v * 0.99, median_high_ms=v * 1.01,
                                                p10_ms=v * 0.95, p90_ms=v * 1.05,
                                                contention=RunContention("busy") if busy else None))
                 for i, v in enumerate(medians))


def test_a_busy_run_is_marked_beside_every_speedup_it_is_in():
    base = Measurement("adamw", "optimizer", runs=runs([30.0, 30.5]), planned=2, config=Config())  # the baseline
    fused = Measurement("adamw_fused", "optimizer", runs=runs([10.0, 10.2], busy=True), planned=2)
    quiet = Measurement("adamw_foreach", "optimizer", runs=runs([20.0, 20.2]), planned=2)
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


def test_a_left_out_run_gives_none_of_its_presets_timing_figures():
    """Every timing figure of a preset comes from the runs its comparisons read: a busy run left out of the median
    is left out of p10/p90 and is never the run whose bottleneck and roofline stand for the preset."""
    quiet = runs([10.0, 12.0])
    busy = runs([11.0], busy=True)[0]
    busy = RunResult(3, "ok", dataclasses.replace(busy.summary, p10_ms=1.0, p90_ms=99.0))
    m = Measurement("adamw", "optimizer", runs=(*quiet, busy), planned=3)
    assert [r.repeat for r in m.kept_runs] == [1, 2] and m.median_ms == 11.0
    assert m.p10_ms == 11.0 * 0.95 and m.p90_ms == 11.0 * 1.05  # the quiet runs' p10/p90 (the rows below set them)
    assert m.representative is not None and m.representative.repeat != 3


def test_n_counts_the_runs_the_figures_use_and_a_note_names_the_ones_left_out():
    """fp32 ran 219.7, 4.43 and 90.0 ms; the table said `4.43 … n 3`, and nothing said two runs were left out."""
    slow_first, quiet, slow_last = runs([219.7], busy=True)[0], runs([4.43])[0], runs([90.0], busy=True)[0]
    fp32 = Measurement("fp32", "transformer", planned=3, runs=(
        slow_first, RunResult(2, "ok", quiet.summary), RunResult(3, "ok", slow_last.summary)))
    other = Measurement("torch_amp", "transformer", runs=runs([2.0, 2.1, 2.05]), planned=3)
    v = verdict("transformer", [fp32, other]).to_dict()
    doc = {"device": "cpu", "environment": {}, "settings": {"steps": 30, "repeats": 3}, "measured_at": "now",
           "elapsed_s": 1, "workloads": [v], "apex": overall_apex([v])}
    rows = {r.preset: r for r in advise.view(doc).workloads[0].rows}
    assert rows["fp32"].median == "4.43" and rows["fp32"].repeats == 1 and rows["torch_amp"].repeats == 3
    text = advise.format_text(doc)
    assert ("fp32: left out of its figures: run 1 (220 ms/step: other work competed with it); run 3 (90.0 ms/step: "
            "other work competed with it)") in " ".join(text.split())
