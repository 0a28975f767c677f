"""The Advice screen with `--model`: the model's configuration search (the engine `apextui advise --model` runs),
its progress (which point, the budget used and left) and the CLI's answer; and the compile timer, which counts
on between updates (it froze at `compiling… 3 s` for two minutes: a compile sends no update)."""

from __future__ import annotations


import pytest
from ui_fakes import FakeEngine, cpu_app, static_text, until_ready, wait_for

from apextui.core.advise.advice_view import view
from apextui.core.advise.answer import answer_lines
from apextui.core.model_presets import presets_for
from apextui.core.presets import load_builtin
from apextui.core.run.runner import thread_runner_factory
from apextui.ui.screens.advise_screen import AdviseScreen, open_advice
from helpers import TINY_MODEL

pytestmark = pytest.mark.asyncio

SIZE = (110, 40)
TINY = TINY_MODEL


def status(app) -> str:
    return static_text(app.screen, "#advise-status")


def body(app) -> str:
    return static_text(app.screen, "#advise-body")


@pytest.mark.slow
async def test_the_compile_timer_counts_on_while_no_update_comes():
    """The advice's first run stays compiling with no update (a real compile sends none for minutes): the
    screen's compile time goes on with the clock (it stayed at the update's figure: `compiling… 3 s`)."""
    engine = FakeEngine(compile_hold=["adamw"])
    app = cpu_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer",))
        await wait_for(pilot, lambda: app.advice_job is not None and "compiling" in status(app), what="compiling")
        job = app.advice_job
        job.clock = lambda: job.latest_at  # the clock held at the update (a loaded box drew it a second late)
        await wait_for(pilot, lambda: "optimizer · adamw · repeat 1/2 · compiling… 0 s" in status(app),
                       what="compiling at 0 s")
        job.clock = lambda: job.latest_at + 100.0  # 100 s on, and no update came (a still clock: a running one
        # showed 101 s where a loaded box drew the screen a second late)
        await wait_for(pilot, lambda: "compiling… 100 s" in status(app), what="the compile timer counting on")
        await pilot.press("s")
        await wait_for(pilot, lambda: job.done, what="the stopped advice")


async def test_the_search_shows_its_point_and_the_budget_used_and_left(tmp_path, monkeypatch):
    """The search's first run (fp32) stays compiling: the screen names the point, and the budget used goes on
    with the clock too."""
    monkeypatch.setenv("APEXTUI_WORKER", "thread")  # the model is probed in this process, as its runs would be
    (tmp_path / "m.py").write_text(TINY)  # the search looks at the model before its first run
    spec = f"{tmp_path / 'm.py'}:build"
    engine = FakeEngine(compile_hold=["m:build/fp32"])
    app = cpu_app(engine, presets=[*load_builtin(), *presets_for(spec)])
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, budget=60)
        await wait_for(pilot, lambda: app.advice_job is not None and "compiling" in status(app), what="compiling")
        job = app.advice_job
        assert job.searches and job.advisor.workloads == ("model",)
        job.clock = lambda: job.latest_at  # the clock held at the update (a loaded box drew it a second late)
        await wait_for(pilot, lambda: all(part in status(app) for part in ("search run 1 m:build/fp32",
                                                                           "compiling… 0 s", "of 60 s")),
                       what="the point, compiling at 0 s, the budget")
        job.clock = lambda: job.latest_at + 100.0  # 100 s on, and no update came (a still clock: a running one
        # showed 101 s where a loaded box drew the screen a second late)
        await wait_for(pilot, lambda: "compiling… 100 s" in status(app), what="the compile timer counting on")
        assert "budget 60 of 60 s (0 s left)" in status(app)
        await pilot.press("s")
        await wait_for(pilot, lambda: job.done, what="the stopped search")
        assert engine.runners[0].stopped and len(engine.runners) == 1


@pytest.mark.slow
async def test_the_advice_screen_runs_the_model_search_and_shows_the_clis_answer(tmp_path, monkeypatch):
    """A real search of a tiny CPU model, trained in this process, within a 1 s budget (compile left out: no C++
    compiler): the search's lines, then the answer, line for line the CLI's (`answer_lines`)."""
    monkeypatch.setenv("CXX", "no-such-compiler")  # torch.compile unavailable: the search stays short
    (tmp_path / "tiny.py").write_text(TINY)
    spec = f"{tmp_path / 'tiny.py'}:build"
    app = cpu_app(thread_runner_factory, presets=[*load_builtin(), *presets_for(spec)])
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, budget=1, steps=6)
        await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done, 120, "the search")
        job = app.advice_job
        doc = job.doc
        assert doc is not None, job.error
        assert doc["search"]["trials"][0]["phase"] == "baseline" and doc["search"]["budget_s"] == 1
        assert any(line.startswith("search [1] fp32: the baseline") for line in job.lines)
        if doc["answer"] is not None:  # None where the 1 s budget ended inside fp32's run (a loaded box)
            assert doc["answer"]["preset"] == doc["workloads"][0]["recommended"]
        last = answer_lines(doc)[-1].strip()  # the snippet's last line, or "no answer: …" where 1 s ran fp32 alone
        await wait_for(pilot, lambda: last in body(app), what="the answer on screen")
        shown = body(app)
        for line in answer_lines(doc):
            assert line.strip() in shown
        assert view(doc).answer == tuple(answer_lines(doc))
        assert isinstance(app.screen, AdviseScreen) and not doc["reused"]


async def test_the_search_leaves_out_values_that_do_not_apply_to_the_model(tmp_path, monkeypatch):
    """A model with no SDPA call, no convolution and an MSE loss: the Advice screen's search never names the attention
    backends, channels_last nor Liger's fused loss (they do not apply to it), as `apextui advise --model` leaves
    them out; it did list them as unavailable points. The values that do apply (bf16, the optimizers) are tried."""
    monkeypatch.setenv("APEXTUI_WORKER", "thread")  # the model is probed in this process, as its runs would be
    (tmp_path / "tiny.py").write_text(TINY)
    spec = f"{tmp_path / 'tiny.py'}:build"
    app = cpu_app(FakeEngine(), presets=[*load_builtin(), *presets_for(spec)])
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, budget=600)
        await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done, 120, "the search")
        job = app.advice_job
        assert job.doc is not None, job.error
        await wait_for(pilot, lambda: "what each part buys" in body(app) or "no answer" in body(app),
                       what="the answer on screen")
        trials = job.doc["search"]["trials"]
        assert all((t["config"]["attention"], t["config"]["memory_format"], t["config"]["loss"])
                   == ("default", "contiguous", "model") for t in trials), [t["label"] for t in trials]
        listed = "\n".join([*job.lines, *(t["label"] for t in trials)])  # the search's lines, the verdict's rows
        for value in ("sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "liger_flce", "channels_last"):
            assert value not in listed, value
        for value in ("bf16", "fused", "foreach"):
            assert value in listed, value
        shown = body(app)
        assert all(t["label"] in shown for t in trials)
