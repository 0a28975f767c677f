"""Step statistics against hand-computed values."""

import pytest

from apextui.core.measure.stats import StepStats, percentile


def test_percentile_interpolates_between_ranks():
    values = [1.0, 2.0, 3.0, 4.0]
    # position (n-1)*q: 0.3 -> 1.3 ; 1.5 -> 2.5 ; 2.7 -> 3.7
    assert percentile(values, 10) == pytest.approx(1.3)
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0


def test_percentile_rejects_bad_input():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_warmup_steps_are_excluded():
    # two slow warm-up steps, then 1..9 ms (unsorted on purpose)
    times = [100.0, 50.0, 5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0]
    acc = StepStats(warmup=2)
    acc.extend(times)
    s = acc.read()
    assert s.count == 9
    assert s.median_ms == 5.0
    assert s.p10_ms == pytest.approx(1.8)  # (9-1)*0.1 = 0.8 -> 1 + 0.8*(2-1)
    assert s.p90_ms == pytest.approx(8.2)
    assert s.mean_ms == pytest.approx(5.0)
    assert (s.min_ms, s.max_ms) == (1.0, 9.0)
    assert s.throughput(units_per_step=10) == pytest.approx(2000.0)  # 10 units / 5 ms


def test_no_stats_while_warming_up():
    acc = StepStats(warmup=3)
    for v in (1.0, 2.0, 3.0):
        acc.add(v)
    assert acc.read() is None
    acc.add(10.0)
    assert acc.read().median_ms == 10.0
