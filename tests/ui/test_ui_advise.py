"""Pilot tests of the advice screen (`a`): progress while it measures, then the verdicts; stop, close,
reuse. Fake runners through the app's runner factory (deterministic), plus one real CPU run."""

from __future__ import annotations

import statistics

import pytest
from ui_fakes import (
    FakeEngine,
    FakeRunner,
    cpu_probe_no_apex,
    gpu_app,
    no_gpu_report,
    provider,
    static_text,
    until_ready,
    wait_for,
)

from apextui.core import presets
from apextui.core.advise import run as advise_run
from apextui.ui.app import make_app
from apextui.ui.screens.advise_screen import AdviseScreen, open_advice

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # each test over ~1.5 s

SIZE = (100, 40)
ENV = {"device": "cuda", "name": "NVIDIA H200", "driver": "570.133.20", "torch": "2.11.0+cu128",
       "apex": "version 0.1 commit 0123456789ab", "key": "cuda|NVIDIA H200|driver 570.133.20|torch 2.11.0+cu128|apex x"}


class HoldFirst(FakeEngine):
    """Holds the first run of `name` at step `at` (later runs of it go to the end)."""

    def __init__(self, name: str, at: int) -> None:
        super().__init__()
        self.name, self.at = name, at
        self.held: FakeRunner | None = None

    def __call__(self, request, callback):
        hold = self.at if request.preset.name == self.name and self.held is None else None
        runner = FakeRunner(request, callback, hold_at=hold)
        if hold is not None:
            self.held = runner
        self.runners.append(runner)
        return runner


def article_app(engine, **kw):
    """The app on a fake H200 with the article's presets: fused_lamb (added later) is left out so that the run
    counts stay theirs."""
    return gpu_app(engine, presets=[p for p in presets.load_builtin() if p.name != "fused_lamb"], **kw)


def body(app) -> str:
    """The body's words, its wrapped lines joined (the screen wraps the verdicts to its width)."""
    return " ".join(static_text(app.screen, "#advise-body").split())


def status(app) -> str:
    """The head's words, its wrapped lines joined (the screen wraps them to its width)."""
    return " ".join(static_text(app.screen, "#advise-status").split())


async def test_a_measures_with_the_apps_runner_shows_progress_then_verdicts(monkeypatch):
    monkeypatch.setattr(advise_run, "environment", lambda device: dict(ENV))
    engine = HoldFirst("adamw_fused", 50)
    app = article_app(engine)
    # every preset of article_app (the shipped ones but fused_lamb) is available on the (fake) GPU, 2 repeats;
    # the data-parallel ones are not run in a one-device advice
    total = 2 * len([p for p in presets.load_builtin() if p.name != "fused_lamb" and not p.config.data_parallel])
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        await pilot.press("a")
        assert isinstance(app.screen, AdviseScreen)
        await wait_for(pilot, lambda: engine.held is not None and "50/100" in status(app), what="progress")
        text = status(app)
        assert f"run 2/{total}" in text and "optimizer · adamw_fused · repeat 1/2" in text and "running" in text
        assert f"[1/{total}] optimizer adamw repeat 1/2: ok" in body(app)  # the evidence so far
        assert not app.start_preset("fp32")  # the app trains one thing at a time
        engine.held.release()
        job = app.advice_job
        await wait_for(pilot, lambda: job.done and "➜ use" in body(app), what="the verdicts")
        doc = job.doc
        assert doc["status"] == "complete" and doc["runs"] == {"total": total, "ok": total, "failed": 0, "stopped": 0}
        assert len(engine.runners) == total and all(r.device == "cuda" and r.steps == 100 for r in engine.runners)
        opt = doc["workloads"][0]
        assert opt["workload"] == "optimizer" and opt["recommended"] == "fused_adam"
        assert opt["apex"]["status"] == "faster"
        # every number is the runs' own: median of the two repeat medians the fake runners produced
        for p in opt["presets"]:
            runs = [r for r in engine.runners if r.preset.name == p["preset"]]
            medians = [round(r.stats.read().median_ms, 4) for r in runs]
            assert p["repeat_medians_ms"] == medians and p["median_ms"] == round(statistics.median(medians), 4)
        shown = body(app)
        assert "➜ use fused_adam" in shown and "Apex here:" in shown and "transformer" in shown
        assert "measured" in status(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, AdviseScreen)


async def test_escape_leaves_it_measuring_then_the_app_says_it_is_ready():
    engine = HoldFirst("adamw", 20)
    app = article_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer",), env=ENV)
        await wait_for(pilot, lambda: engine.held is not None, what="the first run")
        await pilot.press("escape")
        assert not isinstance(app.screen, AdviseScreen) and app.advice_job.running
        engine.held.release()
        await wait_for(pilot, lambda: any("advice is ready" in n.message for n in app._notifications),
                       what="the notification")
        await pilot.press("a")  # shows the finished advice, measures nothing new
        await wait_for(pilot, lambda: "➜ use" in body(app), what="the verdict")
        assert len(engine.runners) == 8


async def test_s_stops_the_advice_and_keeps_a_partial_verdict():
    engine = HoldFirst("adamw_fused", 30)
    app = article_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer", "layer_norm", "rms_norm"), env=ENV)
        await wait_for(pilot, lambda: engine.held is not None, what="the held run")
        await pilot.press("s")
        job = app.advice_job
        await wait_for(pilot, lambda: job.done and "PARTIAL" in status(app), what="the partial advice")
        assert engine.held.stopped and len(engine.runners) == 2  # nothing starts after the stop
        doc = job.doc
        assert doc["status"] == "partial" and doc["runs"]["stopped"] == 1
        opt, *norms = doc["workloads"]
        assert opt["status"] == "partial" and [n["status"] for n in norms] == ["not_measured", "not_measured"]
        assert "adamw_fused: stopped" in body(app) or "✗ adamw_fused: stopped" in body(app)
        assert app.start_preset("adamw")  # the app can run again


async def test_stored_advice_is_reused_then_r_measures_again():
    engine = FakeEngine()
    app = article_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer",), env=ENV)
        await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done, what="the first advice")
        assert len(engine.runners) == 8
    engine2 = FakeEngine()
    app2 = article_app(engine2)
    async with app2.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app2)
        open_advice(app2, workloads=("optimizer",), env=ENV)
        await wait_for(pilot, lambda: app2.advice_job is not None and app2.advice_job.done
                       and "reused" in status(app2), what="the reused advice")
        assert engine2.runners == [] and app2.advice_job.doc["reused"] is True
        assert "➜ use fused_adam" in body(app2)
        await pilot.press("r")
        await wait_for(pilot, lambda: app2.advice_job.done and len(engine2.runners) == 8, what="measured again")
        assert app2.advice_job.doc["reused"] is False


async def test_waits_for_the_probe_and_refuses_while_a_run_is_active():
    engine = FakeEngine(hold={"fp32": 10})
    app = article_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        app.start_preset("fp32")
        await pilot.press("a")
        await wait_for(pilot, lambda: "fp32 is running" in status(app), what="the refusal")
        assert app.advice_job is None and len(engine.runners) == 1
        await pilot.press("escape")
        engine.runners[0].release()
        await wait_for(pilot, lambda: app.active is None, what="the run's end")


async def test_real_optimizer_advice_on_cpu_in_the_worker_process():
    """The real thing: the app's default runner factory (a worker process), optimizer presets on CPU."""
    from apextui.ui.app import default_runner_factory

    app = make_app(device="cpu", report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex(),
                   runner_factory=default_runner_factory)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until_ready(pilot, app)
            open_advice(app, workloads=("optimizer",), steps=15, repeats=1)
            await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done, 180, "the advice")
            doc = app.advice_job.doc
            assert doc is not None, app.advice_job.error
            (opt,) = doc["workloads"]
            ran = {p["preset"]: p for p in opt["presets"] if p["status"] == "ok"}
            assert set(ran) == {"adamw", "adamw_fused"}, opt["presets"]
            assert all(p["runs"][0]["steps"] == 15 and p["median_ms"] > 0 for p in ran.values())
            assert opt["apex"]["status"] == "not_measurable" and opt["apex"]["best_apex_ms"] is None
            await wait_for(pilot, lambda: "➜ use" in body(app), what="the verdict on screen")
            assert "Apex cannot be measured here" in body(app)
    finally:
        app.shutdown_runs(30)


async def test_reused_advice_shows_when_and_how_it_was_measured_and_flags_too_few_steps():
    """Another process measured with 8 steps; the screen reusing it says so, and that 8 are too few."""
    engine = FakeEngine()
    app = article_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer",), env=ENV, steps=8)
        await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done, what="the 8-step advice")
        assert all(r.steps == 8 for r in engine.runners)
        await wait_for(pilot, lambda: "too few steps to trust: 8 steps a run" in status(app),
                       what="the warning on the measured advice")
        measured_at = app.advice_job.doc["measured_at"]
    app2 = article_app(FakeEngine())
    async with app2.run_test(size=SIZE) as pilot:
        await until_ready(pilot, app2)
        open_advice(app2, workloads=("optimizer",), env=ENV)
        await wait_for(pilot, lambda: app2.advice_job is not None and app2.advice_job.done
                       and "reused" in status(app2), what="the reused advice")
        shown = status(app2)
        assert (f"reused the advice of this same environment, measured on cuda (NVIDIA H200) at {measured_at} (just "
                "now): each preset ran twice, 8 steps a run") in shown
        assert ("⚠ too few steps to trust: 8 steps a run, fewer than the 100 advise runs by default on cuda"
                in shown)


async def test_at_80_columns_every_wrapped_line_has_a_hanging_indent():
    """The Static's own wrap started a wrapped line at column 0, so its second half read as a line of its own; every
    line is wrapped at words to the box's width now, its continuations indented under it."""
    from apextui.core.advise.advice_view import view
    from apextui.ui.screens.advise_screen import render_doc

    engine = FakeEngine()
    app = article_app(engine)
    async with app.run_test(size=(80, 40)) as pilot:
        await until_ready(pilot, app)
        open_advice(app, workloads=("optimizer",), env=ENV)
        await wait_for(pilot, lambda: app.advice_job is not None and app.advice_job.done and "➜ use" in body(app),
                       30, "the advice")
        await pilot.pause()
        scroll = app.screen.query_one("#advise-scroll")
        width = scroll.size.width - scroll.styles.gutter.width - 1
        shown = static_text(app.screen, "#advise-body").splitlines()
        logical = render_doc(view(app.advice_job.doc), narrow=True).plain.splitlines()
    assert width < 80 and all(len(line) <= width or len(line.split()) == 1 for line in shown), \
        [line for line in shown if len(line) > width]
    starts = {line[:20] for line in logical}
    continued = [line for line in shown if line[:20] not in starts]
    assert continued and all(line.startswith("    ") for line in continued), continued


def test_an_advice_that_ends_while_the_app_closes_notifies_nothing_and_raises_nothing():
    """The job's watcher ticks once more while the app shuts down: its screen stack is gone (`app.screen` raises
    ScreenStackError). It must stop quietly; the tick used to raise out of the app as it closed."""
    from types import SimpleNamespace

    from textual.app import ScreenStackError

    from apextui.ui.screens.advise_screen import _watch

    ticks, said = [], []

    class Closing:
        is_running = False

        @property
        def screen(self):
            raise ScreenStackError("No screens on stack")

        def set_interval(self, _seconds, callback):
            ticks.append(callback)
            return SimpleNamespace(stop=lambda: ticks.append("stopped"))

        def notify(self, *args, **kw):
            said.append(args)

        def refresh_bindings(self):
            said.append("bindings")

    _watch(Closing(), SimpleNamespace(done=True, error=None, doc=None))
    ticks[0]()
    assert ticks[1:] == ["stopped"] and said == []
