"""One error base and one exit-code ladder: every error a user sees carries its documented exit code and is rendered
one way (`core/errors.py`, `cli/errors.py`); every headless front end's exit code is one decision (`cli/session.py`),
in one order."""

from __future__ import annotations

import signal

import pytest

from apextui.cli.command import UsageError
from apextui.cli.errors import report
from apextui.cli.session import Outcome, RunSession, exit_code, guarded
from apextui.cli.output import OutputFailed
from apextui.cli.signals import StopOnSignals
from apextui.core.advise.records import AdviceError
from apextui.core.config.axes import ConfigError
from apextui.core.env import DeviceUnavailable
from apextui.core.errors import ApextuiError
from apextui.core.exits import (EXIT_BROKEN_PIPE, EXIT_CHECK_FAILED, EXIT_FAILED, EXIT_OK, EXIT_TERMINATED,
                                EXIT_UNAVAILABLE, EXIT_USAGE)
from apextui.core.model_presets import ProbeTimeout
from apextui.core.model_scope import ModelRaised
from apextui.core.presets import PresetError
from apextui.core.results import ResultsError
from apextui.core.watch.reader import BadSegment
from apextui.core.watch.store import NoSuchRun
from apextui.core.workloads.user_model import ModelSpecError


@pytest.mark.parametrize("error, code", [
    (PresetError("p.toml: field 'steps': got 0"), EXIT_USAGE), (ConfigError("unknown axis 'x'"), EXIT_USAGE),
    (ModelSpecError("no function"), EXIT_USAGE), (AdviceError("repeats"), EXIT_USAGE),
    (ResultsError("r.json: not JSON"), EXIT_USAGE), (NoSuchRun("no watched run named 'x'"), EXIT_USAGE),
    (BadSegment("a FIFO"), EXIT_USAGE), (UsageError("--once goes with --json"), EXIT_USAGE),
    (DeviceUnavailable("no CUDA"), EXIT_UNAVAILABLE), (ModelRaised("your function raised"), EXIT_FAILED),
    (ProbeTimeout("m.py:f", 30), EXIT_FAILED)], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v)
def test_every_error_a_user_sees_carries_its_documented_exit_code(error, code):
    assert isinstance(error, ApextuiError) and error.exit_code == code
    assert error.line and "\n" not in error.line


def test_an_error_is_rendered_as_one_line_with_its_detail_under_it(capsys):
    exc = ModelSpecError("m.py:build raised ValueError: bad\nmore", detail='File "m.py", line 3\n  raise ValueError')
    assert report(exc) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert err == ["apextui: error: m.py:build raised ValueError: bad", '  File "m.py", line 3', "    raise ValueError"]


def signalled(signum: int) -> StopOnSignals:
    signals = StopOnSignals(lambda s: None, lambda s: None)
    signals._deliver(signum)  # as the handler does, without a signal sent
    return signals


def test_the_ladder_stdout_first_then_a_signal_then_a_failure_then_the_check(capsys):
    term = signalled(signal.SIGTERM)
    broken_pipe = OutputFailed(EXIT_BROKEN_PIPE)
    assert exit_code(Outcome("failed", stdout_failure=broken_pipe), term) == EXIT_BROKEN_PIPE
    assert exit_code(Outcome("ok", stdout_broken=True), term) == EXIT_FAILED
    # a run that failed after a signal asked it to stop ends with the signal's code, in every front end
    assert exit_code(Outcome("failed", failed_because="rank 1: the run failed"), term) == EXIT_TERMINATED
    assert exit_code(Outcome("failed", failed_because="run failed: boom", check_failed="x")) == EXIT_FAILED
    assert exit_code(Outcome("ok", check_failed="fp16 loss differs")) == EXIT_CHECK_FAILED
    assert exit_code(Outcome(None)) == EXIT_FAILED
    assert exit_code(Outcome("ok"), StopOnSignals(lambda s: None, lambda s: None)) == EXIT_OK
    err = capsys.readouterr().err
    assert "apextui: run failed: boom" in err and "apextui: error: fp16 loss differs" in err
    assert "rank 1" not in err  # the signal decided: nothing said of the failure it caused


def test_a_data_parallel_rank_other_than_0_says_nothing_of_the_failure(capsys):
    assert exit_code(Outcome("failed", failed_because="the run failed"), quiet=True) == EXIT_FAILED
    assert exit_code(Outcome("ok", check_failed="x"), quiet=True) == EXIT_CHECK_FAILED
    assert capsys.readouterr().err == ""


class Work:
    """Something a session stops: it counts its stops."""

    def __init__(self) -> None:
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1


def test_a_session_stops_its_targets_on_the_first_signal_and_one_given_later_at_once(capsys):
    seconds: list[tuple[int, str]] = []
    session = RunSession(lambda signum: "interrupted: stopping after the current step",
                         lambda signum, words: seconds.append((signum, words)))
    before, after = Work(), Work()
    session.stops(before.stop)
    session.signals._deliver(signal.SIGINT)  # as the handler does, without a signal sent
    assert before.stops == 1 and session.stopping.is_set()
    session.stops(after.stop)  # a workload built after the signal: stopped as it is given
    assert after.stops == 1
    assert capsys.readouterr().err == "apextui: interrupted: stopping after the current step\n"
    assert session.exit_code(Outcome("ok")) == 130  # the signal decides, whatever the run measured
    assert seconds == []


def test_a_ranks_notice_goes_where_the_rank_says(capsys):
    said: list[str] = []
    session = RunSession(lambda signum: "every rank stops after the same step", lambda signum, words: None,
                         say=said.append)
    session.signals._deliver(signal.SIGTERM)
    assert said == ["every rank stops after the same step"] and capsys.readouterr().err == ""
    assert session.exit_code(Outcome("failed")) == EXIT_TERMINATED


def test_a_session_without_a_signal_ends_with_what_the_run_ended_with(capsys):
    session = RunSession(lambda signum: "", lambda signum, words: None, quiet=True)
    work = Work()
    session.stops(work.stop)
    session.stop()  # stdout went away: the same stop, no signal
    assert work.stops == 1
    assert session.exit_code(Outcome("failed", failed_because="boom")) == EXIT_FAILED
    assert session.exit_code(Outcome("ok")) == EXIT_OK
    assert capsys.readouterr().err == ""  # quiet: a rank other than 0


def test_guarded_renders_a_raised_error_once_with_its_code(capsys):
    def body() -> int:
        raise PresetError("p.toml: field 'steps': got 0")

    assert guarded(body) == EXIT_USAGE
    assert capsys.readouterr().err == "apextui: error: p.toml: field 'steps': got 0\n"
    assert guarded(body, speaks=False) == EXIT_USAGE
    assert capsys.readouterr().err == ""
    assert guarded(lambda: 7) == 7


FRONT_ENDS = [("apextui/cli/json_run.py", "run"), ("apextui/cli/torchrun.py", "run"),
              ("apextui/cli/advise.py", "_run"), ("apextui/cli/advise.py", "_run_distributed"),
              ("apextui/cli/command.py", "_run"), ("apextui/ui/run_actions.py", "start_preset")]


@pytest.mark.parametrize("path, name", FRONT_ENDS, ids=lambda v: v)
def test_each_front_end_presents_the_session_in_under_40_lines(path, name):
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    tree = ast.parse((root / path).read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert fn.end_lineno - fn.lineno + 1 < 40, f"{path}:{name} is {fn.end_lineno - fn.lineno + 1} lines"


# the modules that carry a code rather than decide one: a signal's (129, 130, 143), a stdout that fails (`OutputFailed`)
CODE_CARRIERS = {"cli/session.py": None, "cli/signals.py": None, "cli/output.py": None,
                 "cli/__init__.py": {"EXIT_INTERRUPTED"}, "cli/doctor_command.py": {"EXIT_HANGUP"},
                 "ui/hangup_watchdog.py": {"EXIT_HANGUP"}, "ui/quitting.py": {"EXIT_HANGUP"}}


def test_no_front_end_decides_an_exit_code_outside_the_session():
    """Outside the session's ladder, a front end returns what the session or an error's `exit_code` says; an exit
    code constant other than EXIT_OK (a listing printed) appears only where a signal's or stdout's code is carried."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "apextui"
    found = {}
    for path in [*package.glob("cli/**/*.py"), *package.glob("ui/**/*.py")]:
        rel = path.relative_to(package).as_posix()
        names = set(re.findall(r"\bEXIT_(?!GRACE_S)[A-Z_]+\b", path.read_text())) - {"EXIT_OK"}
        allowed = CODE_CARRIERS.get(rel, set())
        if allowed is not None and names - allowed:
            found[rel] = sorted(names - allowed)
    assert found == {}
