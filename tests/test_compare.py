"""The one noise rule (apextui/core/measure/compare.py) on hand-made timings: each verdict, the floor, unknown
intervals, several repeats, the formatter, the JSON fields and the baseline rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apextui.core.measure.compare import (
    MIN_BASELINE_STEPS,
    NOISE_FLOOR,
    Comparison,
    Timing,
    baseline_problem,
    compare,
    compare_paired,
    fields,
    format_speedup,
    from_fields,
    timing_from_runs,
)
from apextui.core.measure.stats import StepStats
from apextui.core.measure.summary import Summary

BASE = Timing(10.0, 9.8, 10.2, n=40)


def test_clearly_faster_with_its_interval():
    c = compare(Timing(8.0, 7.9, 8.1), BASE)
    assert c.verdict == "faster" and c.speedup == pytest.approx(1.25)
    assert c.low == pytest.approx(9.8 / 8.1) and c.high == pytest.approx(10.2 / 7.9)
    assert format_speedup(c) == "1.25× (1.21–1.29)" and format_speedup(c, compact=True) == "1.25×"


def test_clearly_slower():
    c = compare(Timing(12.5, 12.3, 12.7), BASE)
    assert c.verdict == "slower" and c.speedup == pytest.approx(0.8) and c.high < 1
    assert format_speedup(c) == "0.80× (0.77–0.83)"


def test_an_interval_that_straddles_1_is_noise_however_large_the_speedup():
    """The busy 2-core box: a median of 1.42 ms with an interval up to 75 ms against a 26.9 ms baseline."""
    c = compare(Timing(1.42, 0.811, 75.4), Timing(26.9, 26.0, 28.0))
    assert c.speedup == pytest.approx(18.94, abs=0.01) and c.low < 1 < c.high
    assert c.verdict == "within_noise" and c.within_noise
    # an interval over 10x wide is no figure to show (issue: "0.03–101×" on a busy box)
    assert format_speedup(c).startswith("unmeasurable (spread >10×)")
    narrower = compare(Timing(1.42, 1.0, 2.0), Timing(26.9, 26.0, 28.0))
    assert format_speedup(narrower) == "18.94× (13.0–28.0)"
    assert c.noise == pytest.approx(c.speedup - c.low) and c.difference <= c.noise


def test_below_the_floor_is_noise_even_with_a_narrow_interval():
    c = compare(Timing(9.9, 9.899, 9.901), Timing(10.0, 9.999, 10.001))
    assert c.low > 1 and c.verdict == "within_noise" and c.noise == NOISE_FLOOR
    assert format_speedup(c) == "≈1.01× (1.01–1.01)"
    # the floor is symmetric: the same pair the other way round is noise too
    assert compare(Timing(10.0, 9.999, 10.001), Timing(9.9, 9.899, 9.901)).verdict == "within_noise"
    # and just beyond it, with a narrow interval, it is a difference
    assert compare(Timing(9.7, 9.69, 9.71), Timing(10.0, 9.99, 10.01)).verdict == "faster"


def test_an_unknown_interval_leaves_only_the_floor():
    old = Timing(8.0)  # e.g. a results file from before the intervals
    c = compare(old, BASE)
    assert c.low is None and c.high is None and c.verdict == "faster" and c.noise == NOISE_FLOOR
    assert format_speedup(c) == "1.25×"
    assert compare(Timing(9.9), Timing(10.0)).verdict == "within_noise"
    assert compare(BASE, old).verdict == "slower" and compare(BASE, old).low is None


def test_a_custom_floor():
    assert compare(Timing(9.0), Timing(10.0), floor=0.2).verdict == "within_noise"
    assert compare(Timing(9.0), Timing(10.0), floor=0.05).verdict == "faster"


def test_format_none():
    assert format_speedup(None) == "—"


def test_a_summarys_timing():
    t = Summary(median_ms=5.0, median_low_ms=4.9, median_high_ms=5.2, timed_intervals=30, measured_steps=300).timing
    assert t == Timing(5.0, 4.9, 5.2, n=30, runs=1)
    old = Summary.from_dict({"median_ms": 5.0, "measured_steps": 40}).timing  # a file written before intervals
    assert old is not None and not old.known and old.n == 40
    assert Summary(median_ms=None).timing is None and Summary.from_dict({}).timing is None
    assert Summary(median_ms=0.0).timing is None
    # an interval that does not hold the median is unknown, not trusted
    assert not Summary(median_ms=5.0, median_low_ms=5.1, median_high_ms=5.3).timing.known


def test_statistics_timing_is_the_summarys():
    """A run's live statistics (`Stats`, what a data-parallel run's scaling efficiency reads) and its summary give
    the noise rule the same timing: one reading of a median and its interval."""
    acc = StepStats(warmup=0)
    acc.extend([10.0 + (i % 7) * 0.1 for i in range(60)])
    st = acc.read()
    assert st is not None and st.timing is not None and st.timing.known and st.timing.n == 60
    s = Summary(median_ms=st.median_ms, median_low_ms=st.median_low_ms, median_high_ms=st.median_high_ms,
                timed_intervals=st.count, measured_steps=st.steps)
    assert s.timing == st.timing


def test_timing_refuses_nonsense():
    with pytest.raises(ValueError):
        Timing(0.0)
    with pytest.raises(ValueError):
        Timing(5.0, 4.0, None)
    with pytest.raises(ValueError):
        Timing(5.0, 5.5, 6.0)


def test_timing_from_runs_takes_the_median_and_the_hull():
    runs = [Timing(10.0, 9.9, 10.1, n=20), Timing(10.6, 10.5, 10.8, n=20), Timing(10.2, 10.1, 10.3, n=20)]
    t = timing_from_runs(runs)
    assert t.median_ms == 10.2 and (t.low_ms, t.high_ms) == (9.9, 10.8) and t.n == 60 and t.runs == 3
    # the run-to-run spread widens the interval beyond each run's own: here it decides
    single = compare(Timing(10.6, 10.5, 10.8), Timing(11.2, 11.1, 11.3))
    pooled = compare(timing_from_runs([Timing(10.6, 10.5, 10.8), Timing(11.3, 11.2, 11.4)]),
                     timing_from_runs([Timing(11.2, 11.1, 11.3), Timing(10.9, 10.8, 11.0)]))
    assert single.verdict == "faster" and pooled.verdict == "within_noise"
    assert timing_from_runs([]) is None and timing_from_runs([runs[0]]) == runs[0]
    # one run without an interval: the hull is unknown, not the medians' zero-width range
    mixed = timing_from_runs([Timing(10.0), Timing(10.0, 9.9, 10.1)])
    assert mixed.median_ms == 10.0 and not mixed.known and mixed.runs == 2


def test_fields_round_trip_and_old_documents():
    c = compare(Timing(8.0, 7.9, 8.1), BASE)
    d = fields(c)
    assert d == {"speedup": 1.25, "speedup_low": round(9.8 / 8.1, 4), "speedup_high": round(10.2 / 7.9, 4),
                 "speedup_verdict": "faster"}
    back = from_fields(d)
    assert back.verdict == "faster" and format_speedup(back) == format_speedup(c)
    assert fields(None, "x") == {"x": None, "x_low": None, "x_high": None, "x_verdict": None}
    assert from_fields({"speedup": None}) is None
    assert from_fields({"speedup": 1.01}).verdict == "within_noise"  # no interval stored: the floor decides
    assert from_fields({"vs": 1.3}, "vs") == Comparison.of(1.3)


def test_baseline_rule():
    ok = Summary(steps=400, median_ms=12.0, measured_steps=390)
    assert baseline_problem("ok", ok) is None
    assert baseline_problem("stopped", replace(ok, steps=43)) == "stopped after 43 steps"
    assert baseline_problem("failed", replace(ok, steps=5)) == "failed after 5 steps"
    short = baseline_problem("ok", replace(ok, measured_steps=MIN_BASELINE_STEPS - 1))
    assert short == f"has only {MIN_BASELINE_STEPS - 1} measured steps (a baseline needs {MIN_BASELINE_STEPS})"
    assert baseline_problem("ok", replace(ok, measured_steps=MIN_BASELINE_STEPS)) is None
    assert baseline_problem("ok", replace(ok, median_ms=None)) == "has no measured steps"


def test_imports_neither_torch_nor_textual():
    import subprocess
    import sys

    from helpers import ROOT, cli_env

    code = ("import sys, apextui.core.measure.compare, apextui.core.measure.summary, apextui.core.measure.stats; "
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                         timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


# ---- the drift between runs made one after another (issue 27 §1) ----------------------------------------------

from apextui.core.measure.compare import UNKNOWN_DRIFT, Drift  # noqa: E402
from apextui.core.results import ResultRow, RunIndex  # noqa: E402
from helpers import named  # noqa: E402


def _run(preset: str, median: float, low: float, high: float) -> ResultRow:
    return ResultRow(preset=preset, workload="optimizer", config=named("optimizer", preset), device="cpu",
                     size="cpu", status="ok",
                     summary=Summary.from_dict({"steps": 60, "measured_steps": 50, "timed_intervals": 50,
                                           "median_ms": median, "median_low_ms": low, "median_high_ms": high}))


def test_the_same_preset_twice_on_drifting_timings_is_within_noise():
    """The busy 2-core box: adamw, adamw_fused, adamw again. Each run's own interval is narrow; the host drifted
    between them (65.3 ms, then 36.6 ms). The old rule called adamw 0.56× (0.37–0.80) slower than itself."""
    first, again = Timing(65.3, 62.0, 68.0), Timing(36.6, 35.9, 37.4)
    assert compare(first, again).verdict == "slower"  # without the drift: the wrong answer
    c = compare(first, again, drift=Drift())
    assert c.verdict == "within_noise" and c.basis == "drift_unknown" and c.low < 1 < c.high
    rows = [_run("adamw", 65.3, 62.0, 68.0), _run("adamw_fused", 14.4, 14.0, 14.8), _run("adamw", 36.6, 35.9, 37.4)]
    index = RunIndex(rows)
    assert index.is_base(rows[2]) and index.comparison(rows[2]) is None  # the base: no speed-up against itself
    same = index.comparison(rows[0])
    assert same is not None and same.verdict == "within_noise" and same.basis == "drift_seen"
    assert index.drift(rows[0]).ratio == pytest.approx(65.3 / 36.6 - 1)
    # the drift seen (78 %) is in adamw_fused's interval too: still faster (2.54×), but with an interval that
    # reaches the 4.55× the same run measured against the first adamw
    fused = index.comparison(rows[1])
    assert fused is not None and fused.verdict == "faster" and fused.low < 1.4 and fused.high > 4.55


def test_the_baseline_is_the_fastest_undisturbed_baseline_run_not_the_latest():
    """BASELINE_CHOICE: a layernorm run at a flat 24.0 ms after runs of 0.13 ms is not the baseline (the latest run
    was, and gave fused_layernorm ≈189×); nor is a faster run other work competed with."""
    def norm(variant: str, median: float,
             **extra) -> ResultRow:
        return ResultRow(preset=variant, workload="layer_norm", config=named("norm", variant), device="cpu",
                         size="cpu", status="ok",
                         summary=Summary.from_dict({"steps": 60, "measured_steps": 50,
                                                                 "timed_intervals": 50, "median_ms": median,
                                                                 "median_low_ms": median * 0.98,
                                                                 "median_high_ms": median * 1.02, **extra}))

    busy = {"contention": {"level": "busy", "samples": 4, "busy_samples": 4}}
    rows = [norm("layernorm", 0.13), norm("layernorm", 0.12, **busy), norm("fused_layernorm", 0.127),
            norm("layernorm", 24.0)]
    index = RunIndex(rows)
    assert index.baseline(rows[2]) is rows[0] and index.is_base(rows[0]) and not index.is_base(rows[3])
    assert index.comparison(rows[2]).speedup == pytest.approx(0.13 / 0.127)
    assert index.label(index.baseline(rows[2])) == "layernorm run 1"
    quiet = [rows[0], rows[3], norm("layernorm", 0.13)]  # equals: the latest of them
    assert RunIndex(quiet).baseline(quiet[0]) is quiet[2]


def test_a_real_3x_difference_is_still_found_with_drift_unknown_or_seen():
    base, fast = Timing(30.0, 29.4, 30.6), Timing(10.0, 9.8, 10.2)
    c = compare(fast, base, drift=Drift())
    assert c.verdict == "faster" and c.basis == "drift_unknown"
    assert c.low == pytest.approx(29.4 / 10.2 / (1 + UNKNOWN_DRIFT))
    seen = compare(fast, base, drift=Drift(0.3, 1))
    assert seen.verdict == "faster" and seen.basis == "drift_seen" and seen.low == pytest.approx(29.4 / 10.2 / 1.3)
    rows = [_run("adamw", 30.0, 29.4, 30.6), _run("adamw_fused", 10.0, 9.8, 10.2), _run("adamw", 31.0, 30.4, 31.6)]
    got = RunIndex(rows).comparison(rows[1])
    assert got is not None and got.verdict == "faster" and got.basis == "drift_seen"


def test_pooled_repeats_already_hold_their_spread():
    """Interleaved repeats pooled by timing_from_runs (as advise does): no second widening."""
    a = timing_from_runs([Timing(10.0, 9.9, 10.1), Timing(10.4, 10.3, 10.5)])
    b = timing_from_runs([Timing(20.0, 19.8, 20.2), Timing(21.0, 20.8, 21.2)])
    assert a is not None and b is not None and a.runs == 2
    c = compare(a, b, drift=Drift(0.5, 1))
    assert c.basis == "runs" and c == compare(a, b)


def test_drift_is_the_largest_spread_of_a_configuration_run_more_than_once():
    d = Drift.of([[Timing(10.0), Timing(11.0)], [Timing(5.0)], [Timing(4.0), Timing(4.2), Timing(4.1)]])
    assert d.ratio == pytest.approx(0.1) and d.configurations == 2 and d.factor == pytest.approx(1.1)
    assert not Drift.of([[Timing(1.0)], []]).known and Drift().factor == 1 + UNKNOWN_DRIFT


def test_the_basis_round_trips_through_the_json_fields():
    c = compare(Timing(8.0, 7.9, 8.1), BASE, drift=Drift())
    d = fields(c, basis=True)
    back = from_fields(d)
    assert d["speedup_basis"] == "drift_unknown" and back is not None
    assert (back.basis, back.verdict, back.low) == (c.basis, c.verdict, pytest.approx(c.low, abs=1e-4))
    assert "speedup_basis" not in fields(c)
    assert from_fields({**d, "speedup_basis": "nonsense"}).basis == "runs"


def _t(ms: float, width: float = 0.01) -> Timing:
    return Timing(ms, ms * (1 - width), ms * (1 + width), n=40)


def test_faster_in_every_round_of_a_drifting_host_is_faster_paired_and_noise_pooled():
    """The ViT example on the H200, bf16 against bf16 + compile: the host's speed moved by 1.8x between rounds
    (bf16 31.5, 23.9, 43.0 ms), the compiled point was faster in each (22.5, 22.3, 23.8). Pooled over the drift, the
    hulls overlap: within noise. Round by round, every ratio is above 1."""
    bf16 = [_t(31.5), _t(23.9), _t(43.0)]
    compiled = [_t(22.5), _t(22.3), _t(23.8)]
    pooled = compare(timing_from_runs(compiled), timing_from_runs(bf16))  # type: ignore[arg-type]
    assert pooled.verdict == "within_noise"
    paired = compare_paired(timing_from_runs(compiled), timing_from_runs(bf16),  # type: ignore[arg-type]
                            dict(enumerate(compiled)), dict(enumerate(bf16)))
    assert paired is not None and paired.basis == "paired" and paired.verdict == "faster"
    assert paired.speedup == pytest.approx(31.5 / 22.5)  # the medians' ratio, as the unpaired rule's
    # the one rule's entry point takes the rounds and decides by them, whatever the drift
    rounds = (dict(enumerate(compiled)), dict(enumerate(bf16)))
    assert compare(timing_from_runs(compiled), timing_from_runs(bf16), drift=Drift(), rounds=rounds) == paired  # type: ignore[arg-type]
    assert paired.low == pytest.approx(23.9 * 0.99 / (22.3 * 1.01))
    assert paired.high == pytest.approx(43.0 * 1.01 / (23.8 * 0.99))


def test_the_same_configuration_paired_under_a_steady_drift_is_within_noise():
    """A/A in ABBA order while the host slows down steadily: A1 B1 | B2 A2 at 10, 11, 12, 13 ms. The rounds' ratios
    fall on both sides of 1, so their hull holds it."""
    a, b = [_t(10.0), _t(13.0)], [_t(11.0), _t(12.0)]
    c = compare_paired(timing_from_runs(a), timing_from_runs(b), dict(enumerate(a)), dict(enumerate(b)))  # type: ignore[arg-type]
    assert c is not None and c.verdict == "within_noise" and c.low < 1 < c.high


def test_paired_needs_two_rounds_with_known_intervals():
    five, ten = _t(5.0), _t(10.0)
    assert compare_paired(five, ten, {1: five, 2: five}, {1: ten, 3: ten}) is None  # one round in common
    assert compare_paired(five, ten, {1: Timing(5.0), 2: five}, {1: ten, 2: ten}) is None  # an unknown interval
    assert compare_paired(Timing(5.0), ten, {1: five, 2: _t(5.1)}, {1: ten, 2: ten}) is None
    c = compare_paired(five, ten, {1: five, 2: _t(5.1), 3: _t(9.0)}, {1: ten, 2: ten})  # round 3: candidate's only
    assert c is not None and c.speedup == 2.0 and c.basis == "paired"
    assert c.low == pytest.approx(9.9 / 5.151) and c.high == pytest.approx(2.0 * 1.01 / 0.99)


def test_a_pooled_ratio_outside_the_rounds_stays_inside_its_interval():
    """A search's point has runs outside the rounds (its first run): the medians' ratio can fall outside the rounds'
    ratios, and the interval still holds it."""
    c = compare_paired(_t(4.0), _t(10.0), {1: _t(5.0), 2: _t(5.0)}, {1: _t(10.0), 2: _t(10.5)})
    assert c is not None and c.speedup == 2.5 and c.low < 2.0 and c.high == 2.5


def test_an_interval_over_ten_times_wide_is_no_measurement_whichever_side_of_1_it_lies():
    c = compare(Timing(1.0, 0.5, 1.5), Timing(20.0, 10.0, 100.0))  # 6.7x..200x: excludes 1, but 30x wide
    assert c.low > 1 and c.verdict == "within_noise" and format_speedup(c) == "unmeasurable (spread >10×)"
    assert compare(Timing(1.0, 0.9, 1.1), Timing(20.0, 19.0, 21.0)).verdict == "faster"
