"""The answer's confirmation on fake timing tables (no torch): every value earns its place side by side or is taken
out, the Apex verdict weighs like with like, and runs that other work disturbed decide nothing."""

from __future__ import annotations

import types

import pytest

from apextui.core.advise import ablation
from apextui.core.advise.search import Outcome
from apextui.core.measure.compare import Timing
from apextui.core.measure.summary import Summary
from apextui.core.monitor.contention import RunContention
from apextui.core.config.point import BASELINE, Config, parse
from helpers import search_on_a_model_with_norms as Search

COMPILE_S = 45.0


class Table:
    """A fake machine: `ms(config)` per point, a 0.1 % interval, 10 s a run (a compile 45 s the first time a graph is
    built, a quarter of that after); `busy(config, round)` marks a run as disturbed by other work."""

    def __init__(self, ms, busy=lambda c, rnd: False, width: float = 0.001) -> None:
        self.now, self.ms, self.busy, self.width = 0.0, ms, busy, width
        self.graphs: set[tuple[str, str, str]] = set()
        self.calls: list[Config] = []

    def clock(self) -> float:
        return self.now

    def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
        graph = (config.precision, config.norms, config.compile)
        s = 0.0 if config.compile == "none" else COMPILE_S * (0.25 if graph in self.graphs else 1.0)
        self.graphs.add(graph)
        self.now += 10.0 + s
        self.calls.append(config)
        busy = self.busy(config, round)
        ms = self.ms(config) * (1.6 if busy else 1.0)
        w = self.width * (40 if busy else 1)
        return Outcome("ok", Timing(ms, ms * (1 - w), ms * (1 + w), n=40), competed=busy,
                       compile_s=(s or None))


def gpt2_like(c: Config) -> float:
    """HF GPT-2 on an H200 in shape: bf16 4x, fused AdamW 4 % at bf16, compile 2x at bf16; Apex's fused norms 3 %
    faster eager under bf16 (they join the combination) and nothing once compiled (inductor fuses torch's own)."""
    ms = {"fp32": 164.0, "tf32": 70.0, "bf16": 42.0, "fp16": 52.0, "fp8": 196.0}[c.precision]
    ms -= 1.7 * (c.optimizer in ("fused", "apex"))
    if c.norms == "apex" and c.compile == "none":
        ms *= 0.97 if c.precision == "bf16" else 0.9998
    if c.compile == "default":
        ms *= 0.5 if c.precision == "bf16" else 0.9
    if c.compile in ("reduce-overhead", "max-autotune-no-cudagraphs"):
        ms *= 0.52 if c.precision == "bf16" else 0.95
    return ms


def fused_pays_only_eager(c: Config) -> float:
    """`gpt2_like`, but fused AdamW (or FusedAdam) saves nothing once the model is compiled."""
    return gpt2_like(c.with_("optimizer", "adamw") if c.compile != "none" else c)


def test_a_tie_goes_to_the_simpler_point_and_to_torch_over_apex():
    def tie(c: Config) -> float:  # bf16 halves the step; fused AdamW and Apex's FusedAdam change nothing
        return 50.0 if c.precision == "bf16" else 100.0

    r = Search(Table(tie).measure, budget_s=2_000, clock=Table(tie).clock).run()
    assert r.winner == parse("precision=bf16")
    parts = ablation.parts(parse("precision=bf16,optimizer=apex"), r.versus, lambda c: None)
    assert ablation.to_drop(parts) is None or ablation.to_drop(parts).apex  # type: ignore[union-attr]


def test_to_drop_takes_apexs_value_out_before_torchs_and_keeps_what_it_could_not_measure():
    from apextui.core.measure.compare import Comparison

    answer = parse("precision=bf16,optimizer=fused,norms=apex")

    def versus(a: Config, b: Config):
        speed = {"precision": 3.0, "optimizer": 1.005, "norms": 1.01}
        changed = next(x for x in ("precision", "optimizer", "norms") if getattr(a, x) != getattr(b, x))
        return Comparison.of(speed[changed], speed[changed] * 0.98, speed[changed] * 1.02, basis="paired")

    parts = ablation.parts(answer, versus, lambda c: 1.0)
    assert [p.verdict for p in parts] == ["earns", "within_noise", "within_noise"]
    assert ablation.to_drop(parts).axis == "norms"  # type: ignore[union-attr]  # Apex first, though it buys more
    unpaired = ablation.parts(answer, lambda a, b: Comparison.of(1.5, 1.4, 1.6, basis="drift_seen"), lambda c: 1.0)
    assert all(p.verdict == "not_measured" and p.kept for p in unpaired)
    assert ablation.to_drop(unpaired) is None


def test_an_apex_value_is_weighed_against_its_torch_counterpart():
    answer = parse("precision=bf16,optimizer=apex,norms=apex")
    assert ablation.without(answer, "optimizer") == parse("precision=bf16,optimizer=fused,norms=apex")  # fused AdamW
    assert ablation.without(answer, "norms") == parse("precision=bf16,optimizer=apex")  # torch's own norms
    assert ablation.without(answer, "precision") == parse("optimizer=apex,norms=apex")  # the axis's default
    assert ablation.without_apex(answer) == parse("precision=bf16,optimizer=fused")


def test_a_run_far_wider_than_its_points_other_runs_is_left_out():
    from apextui.core.measure.compare import disturbances, kept_runs

    quiet = [(Timing(22.6, 22.5, 22.7), False)] * 3
    noisy = (Timing(30.5, 28.0, 33.0), False)
    assert disturbances([*quiet, noisy]) == [None, None, None, "wide"]
    assert kept_runs([*quiet, noisy]) == ([0, 1, 2], False)
    # against one other run nothing is called wide (which of the two is the odd one?)
    assert disturbances([quiet[0], noisy]) == [None, None]
    # every run disturbed: all are kept, and the comparison rests on them
    assert kept_runs([(Timing(10.0, 9.0, 11.0), True)] * 2) == ([0, 1], True)


def _disturbances_by_definition(runs):
    """DISTURBED_RULE read literally: each run against the median width of every other run of its configuration."""
    import statistics

    from apextui.core.measure.compare import WIDE_FACTOR, WIDE_FLOOR, _width

    out = []
    for i, (t, competed) in enumerate(runs):
        mine = _width(t)
        others = [w for j, (o, _) in enumerate(runs) if j != i and (w := _width(o)) is not None]
        wide = mine is not None and len(others) >= 2 and mine > WIDE_FLOOR and \
            mine > WIDE_FACTOR * statistics.median(others)
        out.append("busy" if competed else "wide" if wide else None)
    return out


def test_disturbances_reads_each_runs_others_as_the_rule_says_for_any_runs():
    """The sorted-once median (a history of thousands of runs of a preset) marks what the rule does, run by run: ties,
    unknown intervals, competed runs, odd and even counts of others."""
    import random

    from apextui.core.measure.compare import disturbances

    rng = random.Random(0)
    for _ in range(400):
        runs = []
        for _ in range(rng.randint(0, 9)):
            median = rng.choice([10.0, 20.0, 22.6])
            half = rng.choice([None, 0.01, 0.05, 0.1, 0.5, 2.0, 5.0])
            t = Timing(median) if half is None else Timing(median, median - min(half, median / 2), median + half)
            runs.append((t, rng.random() < 0.15))
        assert disturbances(runs) == _disturbances_by_definition(runs), runs


def test_disturbances_reads_each_runs_width_once(monkeypatch):
    """Linear in the runs, not quadratic: a history of 10,000 runs of two presets is read whole on every page of
    the comparison table (it took 36 s of CPU a page when each run re-read every other run's width)."""
    from apextui.core.measure import compare

    read = []
    width = compare._width
    monkeypatch.setattr(compare, "_width", lambda t: read.append(t) or width(t))
    assert compare.disturbances([(Timing(10.0, 9.9, 10.1), False)] * 1000) == [None] * 1000
    assert len(read) == 1000


def test_a_search_at_its_own_step_count_carries_no_too_few_steps_warning():
    from apextui.core.advise.search import SEARCH_STEPS
    from apextui.core.advise.wording import trust_note

    assert trust_note({"device": "cuda", "settings": {"steps": SEARCH_STEPS["cuda"], "search": True}}) is None
    assert trust_note({"device": "cuda", "settings": {"steps": SEARCH_STEPS["cuda"]}}) is not None  # presets: 100
    assert "12 steps" in (trust_note({"device": "cpu", "settings": {"steps": 12, "search": True}}) or "")


class H200HFGPT2(Table):
    """HF GPT-2 small on an H200 (2026-12-03, cold caches), in shape: a run costs 20 s at fp32 and 16 s otherwise (a
    worker process each: start, build, the check, 50 steps), a first compile of a graph 70 s, a rerun of it 17 s;
    bf16 2.8x fp32, fused AdamW or Apex's FusedAdam 3 % at bf16, compile 2.3x at bf16."""

    def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
        graph = (config.precision, config.norms, config.compile)
        compiled = config.compile != "none"
        cost = (70.0 if graph not in self.graphs else 17.0) if compiled else (20.0 if config.precision == "fp32"
                                                                             else 16.0)
        self.graphs.add(graph)
        self.now += cost
        self.calls.append(config)
        ms = {"fp32": 166.8, "tf32": 73.2, "bf16": 58.7, "fp16": 63.3, "fp8": 200.0}[config.precision]
        ms *= 0.97 if config.optimizer in ("fused", "apex") and config.precision != "fp32" else 1.0
        ms /= 2.3 if compiled and config.precision == "bf16" else 1.0
        return Outcome("ok", Timing(ms, ms * 0.999, ms * 1.001, n=40),
                       compile_s=((cost - 16.0) if compiled else None))


def test_a_busy_search_that_ran_only_fp32_says_why_there_is_no_answer_and_that_the_machine_was_busy():
    """The new-user pass beside two CPU burners (2026-12-03 19:13): the fp32 baseline took the 60 s budget, and the
    text said "no answer: the budget ended before anything but fp32 ran" without the busy caution its run carried."""
    from apextui.core.advise.answer import answer_lines

    fake = Table(lambda c: 100.0, busy=lambda c, rnd: True)
    fake_cost = 30.0

    def slow(config: Config, why: str, round: int | None = None) -> Outcome:
        out = fake.measure(config, why, round)
        fake.now += fake_cost
        return out

    r = Search(slow, budget_s=35, clock=fake.clock).run()
    assert [t.outcome.status for t in r.trials if t.outcome.status == "ok"] == ["ok"] and r.competed
    text = "\n".join(answer_lines({"search": r.to_dict(), "answer": None, "device": "cpu"}))
    assert "no answer: the budget ended before anything but fp32 ran" in text
    assert "⚠ the machine was busy while measuring: run again when it is quiet" in text


def test_fusedadam_never_stays_where_torchs_fused_adamw_is_as_fast_in_the_answer():
    """Review of 2026-12-03: fused AdamW's single change at fp32 was 0.2 % slower than fp32 and Apex's 0.5 % faster, so
    an Apex value weighed against torch's "fastest single change" (the default AdamW) earned its place, though at bf16
    fused AdamW is as fast as FusedAdam. Now FusedAdam is weighed against fused AdamW, its torch counterpart."""
    def ms_of(c: Config) -> float:
        ms = {"fp32": 160.0, "bf16": 40.0, "fp16": 60.0}.get(c.precision, 300.0)
        if c.optimizer in ("fused", "apex"):
            ms *= 0.95 if c.precision == "bf16" else (1.002 if c.optimizer == "fused" else 0.995)
        return ms * (0.5 if c.compile == "default" else 0.7 if c.compile != "none" else 1.0)

    available = lambda c: types.SimpleNamespace(ok=c.precision in ("fp32", "bf16", "fp16") and c.norms != "apex",  # noqa: E731
                                                reason="not here", fix="")
    fake = Table(ms_of)
    r = Search(fake.measure, 3000, clock=fake.clock, available=available).run()
    assert r.winner is not None and r.winner.optimizer != "apex" and not r.winner.needs_apex
    assert r.apex_counterpart == r.winner  # the Apex line: the answer with FusedAdam in place of fused, against it
    assert r.shown(r.apex_point, r.apex_counterpart).within_noise  # type: ignore[union-attr]


def test_single_changes_left_for_the_compiles_room_are_tried_later_when_the_compile_fails():
    """Review of 2026-12-03: singles skipped to keep the first compile's room were taken for tried (and failed), so
    when the compile failed at once the search ended with fused AdamW, the one value that helps, never run."""
    class CompileFails(Table):
        def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
            if config.compile != "none":
                self.now += 10.0
                self.calls.append(config)
                return Outcome("failed", reason="torch._dynamo error")
            out = super().measure(config, why, round)
            self.now += 10.0  # 20 s an eager run
            return out

    available = lambda c: types.SimpleNamespace(ok=c.precision in ("fp32", "bf16", "fp16") and c.norms == "torch"  # noqa: E731
                                                and c.optimizer != "apex", reason="not here", fix="")
    fake = CompileFails(lambda c: {"bf16": 120.0, "fp16": 130.0}.get(c.precision, 100.0)
                        * (0.97 if c.optimizer == "fused" else 1.0))
    r = Search(fake.measure, 300, clock=fake.clock, available=available).run()
    assert parse("optimizer=fused") in fake.calls and not r.not_run()
    assert r.winner == parse("optimizer=fused") and r.spent_s <= 300


class H200HFGPT2Reused(Table):
    """HF GPT-2 small on an H200 (2026-12-03 18:19, cold caches), the search's runs in one worker, in shape: a run
    costs 9 s at fp32 and 4-5 s otherwise (the worker's start, 15 s, said apart: `Outcome.start_s`), a first compile
    of a graph 45 s, a rerun of it 5 s; bf16 2.9x fp32, fused AdamW 3 % at bf16, compile 2.5x at bf16; Apex's norms
    0.3 % faster than torch's eager (56.18 against 56.35 ms: within noise), the same compiled."""

    def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
        graph = (config.precision, config.norms, config.compile)
        compiled = config.compile != "none"
        cost = (45.0 if graph not in self.graphs else 5.0) if compiled else (9.0 if config.precision == "fp32"
                                                                            else 4.5)
        start = 15.0 if not self.calls else 0.0
        self.graphs.add(graph)
        self.now += cost + start
        self.calls.append(config)
        ms = {"fp32": 166.8, "tf32": 72.7, "bf16": 58.2, "fp16": 60.9, "fp8": 200.0}[config.precision]
        ms *= 0.97 if config.optimizer in ("fused", "apex") and config.precision != "fp32" else 1.0
        ms *= 0.997 if config.norms == "apex" and not compiled else 1.0
        ms /= 2.5 if compiled and config.precision == "bf16" else 1.0
        return Outcome("ok", Timing(ms, ms * 0.995, ms * 1.005, n=40), start_s=start,
                       compile_s=((cost - 5.0) if compiled else None))


def test_apex_joins_only_beyond_noise():
    """2026-12-03 18:19 on an H200, HF GPT-2: Apex's norms joined bf16 + fused AdamW on a 0.3 % lower median, so the
    compiled answer held them, and the point without them (a compile of its own) was left out of the confirmation's
    core: "no Apex verdict: nothing comparable was measured" (by hand, Apex's norms added nothing: 22.85 against 22.81
    ms). An Apex value now joins only beyond noise."""
    fake = H200HFGPT2Reused(gpt2_like)
    lines: list[str] = []
    r = Search(fake.measure, budget_s=285, clock=fake.clock, on_progress=lines.append, device="cuda").run()
    assert r.winner is not None and r.winner.compile != "none" and r.winner.precision == "bf16", lines
    assert r.winner.norms == "torch" and not r.winner.needs_apex, lines
    assert r.spent_s <= 285


class H200Llama(Table):
    """The Llama example (220 M) on an H200 (2026-12-03 21:10, cold caches, one worker), in shape: a run costs 15 s at
    fp32 and 5 s at bf16 or fp16 (the worker's start, 12 s, said apart), a graph's first compile 40 s (36 s in
    reduce-overhead), a rerun 5 s; bf16 4.2x fp32, fused AdamW 1.2 % at fp32 and 5 % at bf16, Apex's norms 3.4 % eager
    (2 % in compile's default mode, nothing in reduce-overhead), compile 2.1x at bf16, reduce-overhead 12 % faster than
    the default mode."""

    def measure(self, config: Config, why: str, round: int | None = None) -> Outcome:
        graph = (config.precision, config.norms, config.compile)
        compiled = config.compile != "none"
        first = {"default": 40.0, "reduce-overhead": 36.0, "max-autotune-no-cudagraphs": 120.0}
        cost = (first[config.compile] if graph not in self.graphs else 5.0) if compiled else \
            (15.0 if config.precision == "fp32" else 5.0)
        start = 12.0 if not self.calls else 0.0
        self.graphs.add(graph)
        self.now += cost + start
        self.calls.append(config)
        ms = {"fp32": 259.5, "tf32": 103.2, "bf16": 62.0, "fp16": 65.0, "fp8": 300.0}[config.precision]
        ms *= (0.988 if config.precision == "fp32" else 0.95) if config.optimizer in ("fused", "apex") else 1.0
        if config.norms == "apex":  # by hand: 2 % in the default mode, within its noise; nothing in reduce-overhead
            ms *= {"none": 0.966, "default": 0.98}.get(config.compile, 1.0)
        if compiled:
            ms *= 0.9 if config.precision == "fp32" else {"default": 30.0, "reduce-overhead": 26.5,
                                                         "max-autotune-no-cudagraphs": 27.5}[config.compile] / 62.0
        return Outcome("ok", Timing(ms, ms * 0.995, ms * 1.005, n=40), start_s=start,
                       compile_s=((cost - 5.0) if compiled else None))


def test_a_baseline_the_budget_ended_on_a_busy_machine_says_the_machine_was_busy():
    """The new-user pass beside two CPU burners (2026-12-03 21:24, load 8-10 on 2 cores): the fp32 baseline was ended
    by the 60 s budget after 24 of its 30 steps, and the search said nothing of the busy machine: a run that did not
    end ok dropped its contention."""
    from apextui.core.advise.answer import answer_lines
    from apextui.core.advise.records import RunResult
    from apextui.core.advise.run import outcome_of

    ended = RunResult(1, "stopped", Summary(contention=RunContention("busy", other_cpu_cores_mean=1.9)),
                      error="ended by the budget after 52 s")
    fake = Table(lambda c: 100.0)
    r = Search(lambda c, why, round=None: outcome_of(ended), budget_s=46, clock=fake.clock).run()
    assert r.stopped_by == "baseline failed" and r.competed
    text = "\n".join(answer_lines({"search": r.to_dict(), "answer": None, "device": "cpu"}))
    assert "⚠ the machine was busy while measuring: run again when it is quiet" in text, text
    assert "search: 1 run in " in text  # the unavailable and unrun points it looked up are no runs


def test_a_value_that_saves_memory_but_not_time_stays_in_the_answer_and_says_so():
    """Liger's fused linear cross-entropy never holds the logits whole: as fast, a third less peak memory. A tie in
    time would take it out (the simpler point); the memory it frees keeps it, and the row says why."""
    from apextui.core.measure.compare import Comparison

    answer = parse("precision=bf16,loss=liger_flce")
    peak = {answer: 700, parse("precision=bf16"): 1000, parse("loss=liger_flce"): 1400}

    def versus(a: Config, b: Config):
        speed = 3.0 if a.precision != b.precision else 1.001
        return Comparison.of(speed, speed * 0.98, speed * 1.02, basis="paired")

    parts = ablation.parts(answer, versus, lambda c: 1.0, memory=lambda c: peak.get(c, 2000))
    loss = next(p for p in parts if p.axis == "loss")
    assert loss.verdict == "saves_memory" and loss.kept and loss.memory_saved == pytest.approx(0.3)
    assert ablation.to_drop(parts) is None
    assert loss.to_dict()["memory_saved"] == pytest.approx(0.3)
    assert "less peak memory: kept" in ablation.PART_WORDS[loss.verdict]
    peak[parse("precision=bf16")] = 710  # 1.4 % less: within noise in time and in memory alike
    parts = ablation.parts(answer, versus, lambda c: 1.0, memory=lambda c: peak.get(c, 2000))
    assert ablation.to_drop(parts).axis == "loss"  # type: ignore[union-attr]
    no_memory = ablation.parts(answer, versus, lambda c: 1.0)  # CPU: no peak measured, the tie rule as before
    assert next(p for p in no_memory if p.axis == "loss").verdict == "within_noise"


def test_a_value_the_search_left_out_on_time_is_reported_where_it_saved_memory():
    """The search moves on time alone, so a value that buys memory only never joins the answer: the answer's record
    lists it apart, with what it saved, instead of dropping it silently."""
    import dataclasses

    from apextui.core.advise.answer import answer_lines, confirmation
    from apextui.core.config.axes import Scope

    fake = Table(lambda c: 50.0 if c.precision == "bf16" else 100.0)  # Liger's loss: no faster

    def measure(config: Config, why: str, round: int | None = None) -> Outcome:
        peak = (1000 if config.precision == "bf16" else 1400) * (0.6 if config.loss == "liger_flce" else 1.0)
        return dataclasses.replace(fake.measure(config, why, round), peak_memory_bytes=int(peak))

    r = Search(measure, budget_s=2_000, clock=fake.clock, device="cuda",
               workload=Scope("model", frozenset({"norms", "causal_lm_loss"}), "cuda")).run()
    assert r.winner is not None and r.winner.loss == "model"
    savers = confirmation(r)["memory_savers"]
    assert [(s["axis"], s["value"]) for s in savers] == [("loss", "liger_flce")]
    assert abs(savers[0]["memory_saved"] - 0.4) < 1e-9
    doc = {"search": r.to_dict(), "answer": {**_answer_of(r), **confirmation(r)}, "device": "cuda"}
    assert "saves memory, not time: loss=liger_flce" in "\n".join(answer_lines(doc))


def _answer_of(r) -> dict:
    """The fields `answer_lines` reads of a searched answer, for the winner of `r`."""
    return {"label": r.winner.label, "summary": r.winner.description(), "is_baseline": r.winner == BASELINE,
            "speedup_vs_fp32_text": "2.00x", "best_single": None, "preset": r.winner.label, "snippet": "",
            "toml": None, "peak_memory_bytes": None}


@pytest.mark.parametrize("doc, start, end", [
    ("your-model.md", "`memory_saved` (CUDA), `verdict`:", "```"),
    ("json.md", "`memory_saved` (the share of the peak the value saves), `verdict`", "and `kept`"),
])
def test_the_docs_list_exactly_the_verdicts_a_part_can_have(doc, start, end):
    """The `verdict` of `answer.ablation[]` (and of `dropped`, `memory_savers`) is `ablation.PartVerdict`: each doc
    that lists its values lists every one of them and no other (docs/json.md left out `disturbed`), so that a new
    verdict without its words fails here."""
    import re
    from pathlib import Path
    from typing import get_args

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / doc).read_text().split())
    assert start in text, f"docs/{doc} no longer lists the verdicts after {start!r}"
    listed = text.split(start, 1)[1].split(end, 1)[0]
    assert sorted(set(re.findall(r"`(\w+)`", listed))) == sorted(get_args(ablation.PartVerdict))
