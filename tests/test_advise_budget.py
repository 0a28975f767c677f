"""The search's budget bounds every run, the model's build included, and one signal ends `advise`: a run is stopped at
its deadline (the budget's start + budget + a grace) or at the user's stop, and its worker killed when it does not end
soon after (a hung step never looks at a stop request). Issue 41 rows 9 and 12b, issue 37 item 5.

The deadline logic on fake clocks and scripted runners (the CLI with real worker processes:
test_advise_budget_cli.py)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from apextui.core.advise import Advisor
from apextui.core.advise import run as advise_run
from apextui.core.advise.run import STOP_GRACE_S, RunWatch, budget_grace
from apextui.core.availability import Availability
from apextui.core.model_presets import presets_for
from apextui.core.run.snapshot import Snapshot


class Clock:
    """A fake monotonic clock: `step` seconds later at every reading."""

    def __init__(self, start: float = 1000.0, step: float = 0.5) -> None:
        self.now, self.step = start, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


# ---- the watch over one run: when to stop it, when to kill its worker, in what words --------------------------
def snap(steps_done: int = 0, status: str = "running") -> Snapshot:
    return Snapshot(status=status, info=None, steps_done=steps_done, new_steps=(), stats=None, throughput=None,
                    skipped_steps=0, monitor=None, elapsed_s=0.0)


def polls(watch: RunWatch, clock: Clock, until: float, stopping: bool = False) -> list[tuple[float, str]]:
    out = []
    while clock.now < until:
        action = watch.poll(stopping)
        if action:
            out.append((clock.now, action))
    return out


def test_a_run_is_stopped_at_its_deadline_and_killed_a_grace_later():
    clock = Clock(step=1.0)
    watch = RunWatch(deadline=1010.0, clock=clock)  # made at 1001
    assert polls(watch, clock, 1030.0) == [(1010.0, "stop"), (1010.0 + STOP_GRACE_S, "kill")]
    assert watch.by_budget
    status, words = watch.ending(snap(steps_done=0))
    assert (status, words) == ("failed", "no step finished in 9 s: ended by the budget")
    status, words = watch.ending(snap(steps_done=12))
    assert (status, words) == ("stopped", "ended by the budget after 9 s")


def test_a_run_without_a_deadline_is_left_alone_until_the_user_stops_it():
    clock = Clock(step=1.0)
    watch = RunWatch(deadline=None, clock=clock)
    assert polls(watch, clock, 1100.0) == []
    assert polls(watch, clock, 1200.0, stopping=True) == [(1101.0, "stop"), (1101.0 + STOP_GRACE_S, "kill")]
    assert not watch.by_budget and watch.ending(snap()) is None  # the user's stop: the run's own words
    assert "did not end within" in watch.kill_words()


def test_the_grace_is_five_seconds_or_a_tenth_of_the_budget():
    assert budget_grace(20) == 5.0 and budget_grace(300) == 30.0


# ---- the Advisor: the deadline it gives each run of the search -----------------------------------------------
class Held:
    """A runner whose run never ends by itself (a hung step): it records stop() and ends only when killed."""

    made: list["Held"] = []

    def __init__(self, request, callback):
        self.request, self.callback = request, callback
        self.calls: list[str] = []
        self.result = None
        Held.made.append(self)

    def start(self):
        self.callback(snap(status="starting"))
        return self

    def stop(self):
        self.calls.append("stop")

    def kill(self, reason=None):
        self.calls.append("kill")
        self.result = Snapshot(status="stopped", info=None, steps_done=0, new_steps=(), stats=None, throughput=None,
                               skipped_steps=0, monitor=None, elapsed_s=0.0, error=reason)
        self.callback(self.result)
        return True

    def join(self, timeout=None):
        return True

    def is_alive(self):
        return self.result is None

    @property
    def stopping(self):
        return "stop" in self.calls

    def wait(self, timeout=None):
        return self.result is not None


def advisor(clock: Clock, budget: float, budget_started: float | None = None) -> Advisor:
    Held.made = []
    return Advisor("cpu", workloads="model", presets=presets_for("m.py:build"), runner_factory=Held,
                   availability_fn=lambda p: Availability(True), env={"device": "cpu", "key": "k"},
                   use_run=False, search_budget_s=budget, clock=clock, budget_started=budget_started)


@pytest.fixture
def quick_polls(monkeypatch):
    monkeypatch.setattr(advise_run, "POLL_S", 0.001)


def test_a_hung_baseline_is_ended_by_the_budget_and_reported(quick_polls):
    clock = Clock(step=0.5)
    doc = advisor(clock, budget=20).run()
    [held] = Held.made
    assert held.calls[:2] == ["stop", "kill"]  # asked first, killed when it did not answer
    s = doc["search"]
    assert s["stopped_by"] == "baseline failed"
    t = s["trials"][0]
    assert t["status"] == "failed" and re.fullmatch(r"no step finished in \d+ s: ended by the budget", t["reason"])
    seconds = int(t["reason"].split()[4])
    assert 20 <= seconds <= 20 + budget_grace(20) + 1  # the search's start + budget + grace


def test_the_budget_counts_the_time_before_the_search(quick_polls):
    """The model's build to check it (the CLI's, before the search starts) counts against the budget: the search
    plans with what is left, its runs end at the budget's start + budget + grace, and the record says so."""
    clock = Clock(step=0.5)
    doc = advisor(clock, budget=30, budget_started=clock.now - 10).run()
    s = doc["search"]
    assert s["budget_s"] == 30 and s["setup_s"] >= 10 and s["spent_s"] >= s["setup_s"]
    seconds = int(s["trials"][0]["reason"].split()[4])
    assert 30 - 10 - 1 <= seconds <= 30 + budget_grace(30) - 10


def test_a_search_whose_budget_went_on_the_build_starts_no_run(quick_polls):
    clock = Clock(step=0.5)
    doc = advisor(clock, budget=30, budget_started=clock.now - 60).run()
    assert Held.made == []
    t = doc["search"]["trials"][0]
    assert t["status"] == "failed" and t["reason"].startswith("not run: the budget ended first")


def test_a_stop_kills_a_run_that_does_not_answer(quick_polls):
    """The user's stop (a signal's `Advisor.stop`): the run is asked, then its worker killed a grace later."""
    clock = Clock(step=0.5)
    a = advisor(clock, budget=10_000)

    def stop_when_started():
        while not Held.made:
            time.sleep(0.001)
        a.stop()

    threading.Thread(target=stop_when_started, daemon=True).start()
    doc = a.run()
    [held] = Held.made
    assert held.calls[0] == "stop" and held.calls[-1] == "kill"  # asked (by stop() and the watch), then killed
    assert doc["status"] == "partial"
    assert "did not end within 5 s of the stop" in doc["search"]["trials"][0]["reason"]
