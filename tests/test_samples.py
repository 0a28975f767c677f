"""A run's step times kept (`measure/samples.py`): its statistics come from them, repeats pool them, the search's
side-by-side rounds read the pooled times, and figures are rounded at the JSON edge only."""

from __future__ import annotations

import random

import pytest

from apextui.core.advise.search_record import Outcome, SearchResult, Trial
from apextui.core.config.point import BASELINE
from apextui.core.measure.compare import Timing, timing_from_runs
from apextui.core.measure.samples import SKETCH_SIZE, Samples, median_interval, percentile
from apextui.core.measure.stats import StepStats
from apextui.core.measure.summary import Summary
from helpers import named


def times(n: int, centre: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return sorted(centre * (1 + 0.05 * rng.random()) for _ in range(n))


def test_a_short_run_keeps_every_time_and_its_statistics_are_theirs():
    values = times(100, 2.0)
    s = Samples.of(values)
    assert s.exact and s.count == 100 and list(s.values) == values
    assert s.median == percentile(values, 50) and s.median_interval() == median_interval(values)
    assert s.timing.median_ms == s.median and s.timing.n == 100 and s.timing.samples is s


def test_a_long_run_keeps_a_sketch_whose_median_and_interval_are_within_a_step_of_rank_of_the_exact_ones():
    values = times(20_000, 5.0, seed=1)
    s = Samples.of(values)
    assert not s.exact and len(s.values) == SKETCH_SIZE and s.count == 20_000
    step = (values[-1] - values[0]) / (SKETCH_SIZE - 1) * 2  # values are spread evenly: two sketch steps of ms
    assert abs(s.median - percentile(values, 50)) <= step
    low, high = median_interval(values)
    got_low, got_high = s.median_interval()
    assert abs(got_low - low) <= step and abs(got_high - high) <= step and got_low < s.median < got_high


def test_pooling_weighs_each_run_by_the_intervals_it_stands_for():
    small = Samples.of([1.0] * 10)
    large = Samples.of(times(10_000, 3.0))  # a sketch of 512 values standing for 10,000
    pooled = Samples.pool([small, large])
    assert pooled.count == 10_010 and len(pooled.values) == SKETCH_SIZE
    assert pooled.median > 2.9  # 10 fast steps beside 10,000 slow ones do not move the median
    both = Samples.pool([Samples.of([1.0, 2.0]), Samples.of([1.5, 3.0])])
    assert both.exact and both.values == (1.0, 1.5, 2.0, 3.0)


def test_repeats_pool_their_times_where_each_kept_them_and_keep_the_run_to_run_spread_in_the_interval():
    runs = [Samples.of([1.0] * 9 + [1.1]).timing, Samples.of([2.0] * 9 + [2.1]).timing,
            Samples.of([3.0] * 99 + [3.1]).timing]
    pooled = timing_from_runs(runs)
    assert pooled.median_ms == 3.0 and pooled.samples.count == 120  # the steps' median, not the medians' (2.0)
    assert pooled.low_ms <= 1.0 and pooled.high_ms >= 3.0  # every run's median inside: the drift between them too
    old = timing_from_runs([Timing(1.0, 0.9, 1.1), Timing(2.0, 1.9, 2.1), Timing(3.0, 2.9, 3.1)])
    assert old.median_ms == 2.0 and old.samples is None  # runs from a file without times: the median of medians


def test_the_search_compares_side_by_side_on_the_pooled_times():
    fast, slow = BASELINE.with_("precision", "bf16"), BASELINE
    record = SearchResult()
    for rnd, (f_times, s_times) in enumerate([([1.0] * 5, [2.0] * 5), ([1.2] * 45, [2.4] * 45)]):
        for config, values in ((slow, s_times), (fast, f_times)):
            record.trials.append(Trial(len(record.trials), "race", config, "",
                                       Outcome("ok", Samples.of(values).timing), 0.0, round=rnd))
    c = record.paired(fast, slow)
    assert c is not None and c.basis == "paired"
    # the pooled times' medians (1.2 and 2.4: nine in ten steps ran in the second round), not the medians' (1.1, 2.2)
    assert record.timing(fast).median_ms == 1.2 and c.speedup == pytest.approx(2.0)


def test_the_last_statistics_of_a_run_keep_its_times_and_the_live_ones_do_not():
    st = StepStats(warmup=2)
    for v in [9.0, 9.0, 1.0, 3.0, 2.0]:
        st.add(v)
    assert st.read().samples is None  # every snapshot's read: no copy
    final = st.read(samples=True)
    assert final.samples.values == (1.0, 2.0, 3.0) and final.timing.samples is final.samples
    assert final.samples.median == final.median_ms


def test_figures_are_held_unrounded_and_rounded_at_the_json_edge():
    s = Summary(median_ms=1.23456789, throughput=1234.5678, final_loss=0.123456789,
                samples=Samples.of([1.23456789, 1.3]))
    d = s.to_dict()
    assert s.median_ms == 1.23456789 and d["median_ms"] == 1.2346 and d["throughput"] == 1234.6
    assert d["final_loss"] == 0.123457 and d["samples"] == {"count": 2, "steps": 2, "ms": [1.2346, 1.3]}
    assert Summary.from_dict(d).samples == Samples.of([1.2346, 1.3])
    assert "samples" not in Summary(median_ms=1.0).to_dict()  # there only when kept (an old file's run has none)


@pytest.mark.parametrize("bad", [{"count": 2}, {"count": "2", "ms": [1.0]}, {"count": 1, "ms": [1.0, 2.0]},
                                 {"count": 2, "ms": [2.0, 1.0]}, {"count": 1, "ms": [-1.0]},
                                 {"count": 1, "ms": [True]}])
def test_malformed_samples_in_a_file_are_left_out(bad):
    assert Samples.from_dict(bad) is None
    assert Summary.from_dict({"median_ms": 1.0, "samples": bad}).samples is None


def test_runs_pool_by_the_steps_they_measured_not_the_blocks_they_timed_them_in():
    # an H100's optimizer preset timed 70 steps in 10 blocks in one repeat and in 18 in the next (2026-12-06)
    slow = Samples.of([10.0] * 10, steps=70)  # 70 steps in blocks of 7
    fast = Samples.of([8.0] * 18, steps=60)  # 60 steps in shorter blocks
    pooled = Samples.pool([slow, fast])
    assert pooled.median == 10.0 and pooled.count == 28 and pooled.steps == 130  # by intervals it would be 8.0
    assert Samples.from_dict(pooled.to_dict()) == pooled
    assert Samples.from_dict({"count": 2, "ms": [1.0, 2.0]}).steps == 2  # a file without steps: its intervals


def test_a_pooled_sketch_picks_the_nearest_time_at_each_rank_as_a_runs_own_sketch_does():
    a, b = Samples.of([float(x) for x in range(1, 101)]), Samples.of([float(x) for x in range(101, 201)])
    assert a.exact and b.exact
    pooled = Samples.pool([a, b])  # 200 times, over the sketch's size: order statistics at equal steps of rank
    assert not pooled.exact and pooled.values == Samples.of([float(x) for x in range(1, 201)]).values


def test_a_file_claiming_many_times_with_a_handful_of_values_is_no_sketch():
    assert Samples.from_dict({"count": 1000, "ms": [1.0, 2.0, 3.0]}) is None
    sketch = Samples.of(times(5000, 2.0))
    assert Samples.from_dict(sketch.to_dict()).count == 5000


def test_a_results_file_keeps_each_runs_times_on_one_line_and_reads_them_back(tmp_path):
    from apextui.core.results import ResultRow, load_results, results_text

    kept = Samples.of(times(1000, 3.0))
    row = ResultRow(preset="fp32", workload="transformer", config=named("transformer", "fp32"), device="cuda",
                    size="default",
                    status="ok", error="shape [2,3] did not fit", summary=Summary(median_ms=kept.median, samples=kept))
    text = results_text([row])
    (line,) = [x for x in text.splitlines() if '"ms": [' in x]
    assert line.strip().startswith('"ms": [') and line.rstrip().endswith("]")  # the whole list on its line
    assert '"shape [2,3] did not fit"' in text  # a string's brackets are left as they are
    path = tmp_path / "r.json"
    path.write_text(text)
    (back,) = load_results(path)
    assert back.summary.samples == Samples.from_dict(kept.to_dict()) and back.error == row.error
    assert len(text) < 4000  # a saved run with its times: a history of thousands still loads (MAX_RESULTS_BYTES)
