"""The one noise rule (apextui/core/compare.py) on hand-made timings: each verdict, the floor, unknown
intervals, several repeats, the formatter, the JSON fields and the baseline rule."""

from __future__ import annotations

import pytest

from apextui.core.compare import (
    MIN_BASELINE_STEPS,
    NOISE_FLOOR,
    Comparison,
    Timing,
    baseline_problem,
    compare,
    fields,
    format_speedup,
    from_fields,
    timing_from_runs,
    timing_from_summary,
)

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
    assert format_speedup(c).startswith("≈18.94× (0.34–")
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


def test_timing_from_summary():
    t = timing_from_summary({"median_ms": 5.0, "median_low_ms": 4.9, "median_high_ms": 5.2, "timed_intervals": 30,
                             "measured_steps": 300})
    assert t == Timing(5.0, 4.9, 5.2, n=30, runs=1)
    old = timing_from_summary({"median_ms": 5.0, "measured_steps": 40})
    assert old is not None and not old.known and old.n == 40
    assert timing_from_summary({"median_ms": None}) is None and timing_from_summary({}) is None
    assert timing_from_summary({"median_ms": 0.0}) is None
    # an interval that does not hold the median is unknown, not trusted
    assert not timing_from_summary({"median_ms": 5.0, "median_low_ms": 5.1, "median_high_ms": 5.3}).known


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
    ok = {"steps": 400, "median_ms": 12.0, "measured_steps": 390}
    assert baseline_problem("ok", ok) is None
    assert baseline_problem("stopped", dict(ok, steps=43)) == "stopped after 43 steps"
    assert baseline_problem("failed", dict(ok, steps=5)) == "failed after 5 steps"
    short = baseline_problem("ok", dict(ok, measured_steps=MIN_BASELINE_STEPS - 1))
    assert short == f"has only {MIN_BASELINE_STEPS - 1} measured steps (a baseline needs {MIN_BASELINE_STEPS})"
    assert baseline_problem("ok", dict(ok, measured_steps=MIN_BASELINE_STEPS)) is None
    assert baseline_problem("ok", dict(ok, median_ms=None)) == "has no measured steps"


def test_imports_neither_torch_nor_textual():
    import subprocess
    import sys

    from helpers import ROOT, cli_env

    code = ("import sys, apextui.core.compare; "
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                         timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
