"""The search's rules, each on a small timing table replayed on a fake clock (`advise.table_replay`): the recipe
first, moves only on side-by-side evidence (a 0.1 % difference never moves it), a value removed where it hurts
the point it is in, ties to the simpler point, costs that learn from what compiles cost, a budget that bounds the
wall time and a larger one that explores no less, failures excluded with their reasons."""

from __future__ import annotations

import pytest

from apextui.core.advise.costs import CostModel
from apextui.core.advise.recipe import recipe
from apextui.core.advise.answer import answer_lines
from apextui.core.advise.table_replay import TableReplay
from apextui.core.config.axes import Scope
from apextui.core.config.needs import Availability
from apextui.core.config.point import BASELINE, Config, parse

SCOPE = Scope("model", frozenset({"norms"}), "cuda")  # a model whose one trait is its norms, on CUDA
RECIPE = parse("precision=bf16,optimizer=fused,compile=default")


def table(points: dict[str, tuple[float, ...] | str], *, eager_s: float = 4.0, compile_s: float = 12.0,
          cold_s: float = 45.0, spread: float = 0.002) -> dict:
    """A recorded table of these points ('axis=value,...' -> (ms,) or (ms, run wall s), or a failure's reason):
    two runs each, the first compiled point's compile cold, every other's through warm caches, reruns 1 s."""
    out: dict = {"schema": 1, "model": "test", "device": "cuda", "steps": 50, "machine": {}, "points": {}}
    order = 0
    first = True
    for spec, what in points.items():
        c = parse(spec) if spec else BASELINE
        entry: dict = {"config": c.as_dict(), "runs": []}
        if isinstance(what, str):
            status = "unavailable" if what.startswith("unavailable") else "failed"
            entry.update(status=status, reason=what)
            if status == "failed":
                order += 1
                entry["runs"].append({"order": order, "status": "failed", "reason": what, "wall_s": 20.0})
            out["points"][c.label] = entry
            continue
        ms = what[0]
        wall = what[1] if len(what) > 1 else eager_s
        for k in range(2):
            order += 1
            comp = None
            if c.compile != "none":
                comp = (cold_s if first else compile_s) * c.compile.setup_cost if k == 0 else 1.0
            m = ms * (1 + (spread if k else -spread))
            entry["runs"].append({"order": order, "status": "ok", "median_ms": m, "low_ms": m * 0.998,
                                  "high_ms": m * 1.002, "wall_s": wall + (comp or 0.0), "compile_s": comp})
        if c.compile != "none":
            first = False
        entry["status"] = "ok"
        out["points"][c.label] = entry
    return out


def search(t: dict, budget: float = 300.0, seed: int = 0, scope: Scope = SCOPE, **kw):
    replay = TableReplay(t, seed, **kw)
    lines: list[str] = []
    return replay.run_search(budget, scope, scope.device, on_progress=lines.append), replay, lines


GPT_LIKE = {  # HF GPT-2 on an H100 (the search 2), Liger's norms 0.1 % faster eager, 1.9x slower compiled
    "": (175.0, 10.0), "precision=bf16,optimizer=fused": (64.82,), "precision=bf16,optimizer=fused,norms=liger":
    (64.75,), "precision=bf16,optimizer=fused,compile=default": (27.5,),
    "precision=bf16,optimizer=fused,norms=liger,compile=default": (52.5,),
    "precision=bf16,compile=default": (28.4,), "optimizer=fused,compile=default": (60.0,),
    "precision=bf16,optimizer=fused,compile=reduce-overhead": (27.2,),
}


def test_the_recipe_runs_first_beside_the_model_as_written_and_is_the_floor():
    r, replay, lines = search(table(GPT_LIKE))
    assert [t.phase for t in r.trials[:4]] == ["baseline", "recipe", "recipe", "baseline"]
    assert [t.round for t in r.trials[:4]] == [1, 1, 2, 2]  # side by side: ABBA
    assert r.recipe == RECIPE and r.moves[0][:2] == (BASELINE, RECIPE)
    assert replay.median_of(r.winner) <= replay.median_of(RECIPE) * 1.02
    assert r.to_dict()["recipe"] == "bf16+fused+compile"


def test_a_move_of_a_tenth_of_a_percent_is_refused_and_liger_is_judged_on_the_compiled_point():
    r, _, _ = search(table(GPT_LIKE))
    assert r.winner.norms == "torch"  # never Liger: 1.9x slower where it would be used
    liger = parse("precision=bf16,optimizer=fused,norms=liger,compile=default")
    [ran] = [x for x in r.trials if x.config == liger]  # dropped after one round: 1.9x slower beside the recipe
    assert ran.outcome.ok and ran.round is not None and not any(x.config == liger.with_("compile", "none")
                                                                 for x in r.trials)
    # reduce-overhead is 1.1 % faster: within the floor, so the simpler recipe stays
    assert r.winner == RECIPE


def test_a_value_that_helps_eager_and_hurts_compiled_leaves_the_answer():
    """channels_last, in the recipe for a convolutional model, is faster eager and slower compiled: the search takes
    it out of the compiled recipe, a removal move."""
    conv = Scope("model", frozenset({"conv2d"}), "cuda")
    t = table({"": (150.0,), "precision=bf16,optimizer=fused,compile=default,memory_format=channels_last": (30.0,),
               "precision=bf16,optimizer=fused,compile=default": (25.0,),
               "precision=bf16,optimizer=fused,memory_format=channels_last": (50.0,),
               "precision=bf16,optimizer=fused": (60.0,)})
    r, _, lines = search(t, budget=2000, scope=conv)
    assert r.recipe is not None and r.recipe.channels_last
    assert r.winner == RECIPE
    assert any("memory_format=channels_last removed" in line for line in lines)
    assert r.moves[-1][:2] == (r.recipe, RECIPE) and "faster beside it" in r.moves[-1][2]


def test_a_tie_goes_to_fewer_changes_and_to_torch_over_liger():
    t = table({"": (100.0,), "precision=bf16,optimizer=fused,compile=default": (30.0,),
               "precision=bf16,compile=default": (30.1,),  # fused AdamW buys nothing here
               "precision=bf16,norms=liger,compile=default": (29.9,)})  # Liger's norms: 0.3 %, within the floor
    r, _, _ = search(t, budget=2000)
    assert r.winner == parse("precision=bf16,compile=default")
    assert "simpler" in r.moves[-1][2]
    liger = parse("precision=bf16,norms=liger,compile=default")
    assert any(x.config == liger and x.outcome.ok for x in r.trials)  # raced beside it, and not taken


def test_a_recipe_part_that_fails_is_taken_out_and_the_answer_says_why():
    t = table({"": (100.0,), "precision=bf16,optimizer=fused,compile=default": "inductor failed: test",
               "precision=bf16,optimizer=fused": (50.0,)})
    r, _, lines = search(t)
    assert r.recipe == parse("precision=bf16,optimizer=fused")
    assert r.recipe_left_out and r.recipe_left_out[0][0] == "compile=default" and "inductor" in r.recipe_left_out[0][1]
    assert r.winner is not None and r.winner.compile == "none"
    assert any(e["label"] == "bf16+fused+compile" for e in r.to_dict()["excluded"])


def test_a_failed_baseline_ends_the_search_with_no_winner():
    t = table({"": "out of memory", "precision=bf16,optimizer=fused,compile=default": (30.0,)})
    r, _, _ = search(t)
    assert r.stopped_by == "baseline failed" and r.winner is None
    assert "baseline failed" in "\n".join(answer_lines({"search": r.to_dict(), "answer": None}))


def test_the_wall_time_stays_within_the_budget_and_one_run_and_a_larger_budget_explores_no_less():
    t = table({**GPT_LIKE, "precision=fp16,optimizer=fused,compile=default": (28.0,),
               "precision=bf16,optimizer=fused,compile=coordinate-descent": (27.4,)})
    explored = []
    for budget in (60, 120, 200, 300, 600):
        r, replay, _ = search(t, budget=budget)
        assert replay.now <= budget + replay.longest_run_s, budget
        explored.append(len({x.config for x in r.trials if x.outcome.status != "unavailable"}))
    assert explored == sorted(explored), explored


def test_a_compiles_cost_is_learnt_from_the_compiles_that_ran_here():
    costs = CostModel("cuda")
    eager, first, other = BASELINE, RECIPE, RECIPE.with_("precision", "fp16")
    costs.record(eager, 10.0, None)
    assert costs.estimate(first) == pytest.approx(10.0 + 45.0)  # the prior, before any compile ran
    costs.record(first, 53.0, 50.9)  # cold
    costs.record(first, 3.1, 1.0)  # its recompile through warm caches
    costs.record(other, 12.6, 10.5)  # a new graph through warm caches
    third = RECIPE.with_("norms", "liger")
    assert costs.compile_s(third) == pytest.approx(10.5)  # a new graph: the warm one's cost, not the first's 50.9
    assert costs.compile_s(first.with_("optimizer", "adamw")) == pytest.approx(1.0)  # same graph: a recompile
    ro = RECIPE.with_("compile", "reduce-overhead")
    assert costs.compile_s(ro) == pytest.approx(10.5 * ro.compile.setup_cost)
    assert costs.deadline_s(third) < 60  # a runaway compile is stopped near its estimate, not at the budget


def test_a_run_that_overstays_its_estimate_is_stopped_with_that_reason():
    t = table({**GPT_LIKE, "precision=bf16,optimizer=fused,compile=coordinate-descent": (27.0, 200.0)})
    r, replay, _ = search(t, budget=600)
    cd = parse("precision=bf16,optimizer=fused,compile=coordinate-descent")
    [trial] = [x for x in r.trials if x.config == cd][:1]
    assert trial.outcome.status == "failed" and "overstayed its estimate" in trial.outcome.reason
    assert replay.now <= 600 + 30


def test_the_recipe_on_cpu_is_fused_adamw_and_on_cuda_the_practitioners():
    assert recipe("cpu", Scope("model", frozenset(), "cpu")).point == parse("optimizer=fused")
    conv = Scope("model", frozenset({"conv2d"}), "cuda")
    assert recipe("cuda", conv).point == parse("precision=bf16,optimizer=fused,compile=default,"
                                               "memory_format=channels_last")

    def no_bf16(c: Config) -> Availability:
        return Availability(c.precision != "bf16", "bf16 needs sm80")

    r = recipe("cuda", SCOPE, no_bf16)
    assert r.point.precision == "fp16" and r.left_out == (("precision=bf16", "bf16 needs sm80"),)


def test_a_stop_ends_the_search_after_the_current_run():
    replay = TableReplay(table(GPT_LIKE), 0)
    calls = []
    measured = replay.measure

    def measure(config, why, round=None):
        calls.append(config)
        if len(calls) == 3:
            replay.search.stop()
        return measured(config, why, round)

    replay.measure = measure  # type: ignore[method-assign]
    r = replay.run_search(300, SCOPE, "cuda")
    assert len(calls) == 3 and r.stopped_by == "stopped" and not r.confirmed


def test_a_search_log_is_named_by_its_date_and_only_the_newest_are_kept(tmp_path, monkeypatch):
    from apextui.core.advise import search_log

    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path))
    folder = tmp_path / search_log.FOLDER
    folder.mkdir()
    for k in range(search_log.KEEP + 5):
        (folder / f"2026-01-{k + 1:02d}-000000-search.log").write_text("x\n")
    path = search_log.new_path(0.0)
    assert path.parent == folder and path.name.endswith("-search.log") and not path.exists()
    left = sorted(p.name for p in folder.glob("*-search.log"))
    assert len(left) == search_log.KEEP - 1 and left[0] == "2026-01-07-000000-search.log"  # the oldest six went
    path.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1\nUserWarning: w\nplain\n")
    s = search_log.summarise(path)
    assert s is not None and s.lines == 4
    assert dict(s.kinds) == {"tracebacks": 2, "Python warnings": 1, "other output": 1}
    assert s.words()[0].startswith("the search's runs printed 4 lines, kept in ")


def test_cpu_runs_take_the_cores_other_work_leaves_and_threads_that_sleep_while_they_wait():
    from apextui.core.advise import cpu_share

    assert cpu_share.fit_threads(2, 1.1) == 1  # one burner on a 2-core box: one thread
    assert cpu_share.fit_threads(2, 0.3) == 2 and cpu_share.fit_threads(4, 1.6) == 2
    assert cpu_share.fit_threads(2, 5.0) == 1 and cpu_share.fit_threads(8, None) == 8
    env: dict[str, str] = {}
    assert cpu_share.passive_wait(1.1, env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    quiet: dict[str, str] = {}
    assert cpu_share.passive_wait(0.1, quiet) is None and quiet == {}  # a quiet machine keeps OpenMP's default
    assert cpu_share.passive_wait(None, quiet) is None
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert cpu_share.passive_wait(1.1, mine) == "ACTIVE"  # the user's own choice stands
    assert cpu_share.others_in({"other_cpu_cores_mean": 1.1}) == 1.1 and cpu_share.others_in(None) is None


def test_where_other_work_leaves_no_comparison_beyond_noise_the_answer_says_so_and_hands_over_no_code():
    """Every run slowed by other work and seen so: nothing was told apart beside anything else on undisturbed runs,
    so there is no reliable answer, whatever the medians say."""
    from apextui.core.advise.answer import answer_lines

    t = table({"": (30.0,), "precision=bf16,optimizer=fused,compile=default": (29.5,)})
    r, _, _ = search(t, budget=300, contention=1.0, seen=1.0)
    assert r.competed and not r.decided()
    why = r.unreliable_why()
    assert why.startswith("no reliable answer: other work competed with the runs")
    assert why.endswith("run again when it is quiet")
    assert r.to_dict()["unreliable_why"] == why
    doc = {"search": r.to_dict(), "answer": {"reliable": False, "unreliable_why": why, "snippet": None,
                                             "usual_gain": "bf16+fused+compile (…)"}}
    text = "\n".join(answer_lines(doc))
    assert why in text and "usual gain" in text and "in your training script" not in text
    quiet, _, _ = search(t, budget=300)
    assert not quiet.unreliable_why()


def test_a_cpu_search_on_a_busy_machine_has_no_reliable_answer_whatever_its_comparisons_said():
    """Beside two burners on a 2-core box three searches answered fused AdamW, fused AdamW and compile, each 'beyond
    noise' on runs too short for the monitor to mark: other work seen using a quarter of the cores or more (at least
    half a core) makes the answer the honest one."""
    t = table({"": (30.0,), "precision=bf16,optimizer=fused,compile=default": (20.0,)})
    r, _, _ = search(t, budget=300)
    assert r.decided() and not r.unreliable_why()
    r.cpu_others = (1.2, 2)
    assert r.cpu_busy() and r.unreliable_why() == ("no reliable answer: other work used 1.2 of 2 CPU cores while "
                                                   "measuring; run again when it is quiet")
    r.cpu_others = (0.3, 2)
    assert not r.cpu_busy() and not r.unreliable_why()
    r.cpu_others = (1.0, 16)  # a quarter of 16 cores is 4
    assert not r.cpu_busy()


def test_a_round_that_runs_a_candidate_keeps_room_for_the_best_points_run():
    """HF GPT-2 on an H100 (2026-12-06): in a race's second round three candidates ran and then the recipe's own run
    no longer fitted the budget, so none of them compared with anything. A candidate now runs in a round only where
    the best point's run of that round still fits after it."""
    from apextui.core.advise.race import Race
    from apextui.core.advise.search_record import Outcome, SearchResult, Trial
    from apextui.core.measure.compare import Timing

    record, spent, rounds = SearchResult(), [0.0], iter(range(1, 10))
    best, a, b = RECIPE, RECIPE.with_("optimizer", "adamw"), RECIPE.with_("compile", "none")
    ms = {best: 20.0, a: 20.1, b: 40.0}
    budget, cost = 55.0, 10.0  # round 1: three runs (30 s); round 2 has 25 s: room for two runs, not three

    def run(phase, c, why, rnd):
        spent[0] += cost
        outcome = Outcome("ok", Timing(ms[c], ms[c] * 0.999, ms[c] * 1.001, n=40))
        record.trials.append(Trial(len(record.trials) + 1, phase, c, why, outcome, spent[0], rnd))
        return outcome

    def fits(*configs):
        return spent[0] + cost * len(configs) <= budget

    finalists = Race(record, best, [a, b], run, fits, lambda: next(rounds), lambda: False,
                     full=frozenset({a, b})).go()
    second = [t.config for t in record.trials if t.round == 2]
    assert second[-1] == best and len(second) == 2  # one candidate, then the best point: the round compares
    assert finalists and record.paired(finalists[0], best) is not None


def test_a_round_whose_run_is_later_called_wide_still_pairs_the_answer_with_fp32():
    """HF GPT-2's first cold search on an H100 (2026-12-06 05:44), its runs as recorded: the recipe raced fp32 in two
    clean rounds; its later runs made the round-1 run (27.36-31.12 ms, just after its compile) wide, so the kept runs
    shared one round with fp32 and the answer read 'about 6.39x (single runs, not side by side)', within noise. The
    wide round still ran side by side: the figure is paired, and its interval holds the wide run's."""
    from apextui.core.advise.search_record import Outcome, SearchResult, Trial
    from apextui.core.measure.compare import Timing

    runs = [(BASELINE, 1, 174.8425, 174.8306, 174.8503), (RECIPE, 1, 27.3751, 27.3599, 31.1224),
            (RECIPE, 2, 27.354, 27.3377, 27.3919), (BASELINE, 2, 174.858, 174.8539, 174.8681),
            (RECIPE, 3, 27.3555, 27.3316, 27.3954), (RECIPE, 4, 27.3582, 27.3357, 27.3777)]
    record = SearchResult()
    for i, (c, rnd, ms, low, high) in enumerate(runs):
        record.trials.append(Trial(i + 1, "race", c, "", Outcome("ok", Timing(ms, low, high, n=40)), 10.0 * i, rnd))
    assert [m for _, m in record.marks(RECIPE)] == ["wide", None, None, None]  # what made it unpaired
    shown = record.shown(RECIPE, BASELINE)
    assert shown is not None and shown.basis == "paired" and shown.verdict == "faster"
    assert shown.low <= 174.8306 / 31.1224 and 6.3 < shown.speedup < 6.45

    # a run other work competed with stays out: that round's ratio is not the configurations'
    busy = SearchResult(trials=[Trial(t.index, t.phase, t.config, t.why, Outcome(
        "ok", t.outcome.timing, competed=t.index == 2), t.elapsed_s, t.round) for t in record.trials])
    assert busy.paired(RECIPE, BASELINE) is None


def test_a_budget_overrun_by_a_runs_grace_reads_as_spent_not_as_negative_seconds_left():
    from apextui.core.advise.search import room_words

    assert room_words(-11.2) == "the budget, which is spent" == room_words(0.2)
    assert room_words(47.4) == "the 47 s left of the budget"
