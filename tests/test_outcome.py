"""One error base and one exit-code ladder: every error a user sees carries its documented exit code and is rendered
one way (`core/errors.py`, `cli/errors.py`); every headless front end's exit code is one decision (`cli/outcome.py`),
in one order."""

from __future__ import annotations

import signal

import pytest

from apextui.cli.command import UsageError
from apextui.cli.errors import report
from apextui.cli.outcome import Outcome, exit_code
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
    assert exit_code(Outcome("failed", term, stdout_failure=broken_pipe)) == EXIT_BROKEN_PIPE
    assert exit_code(Outcome("ok", term, stdout_broken=True)) == EXIT_FAILED
    # a run that failed after a signal asked it to stop ends with the signal's code, in every front end
    assert exit_code(Outcome("failed", term, failed_because="rank 1: the run failed")) == EXIT_TERMINATED
    assert exit_code(Outcome("failed", None, failed_because="run failed: boom", check_failed="x")) == EXIT_FAILED
    assert exit_code(Outcome("ok", None, check_failed="fp16 loss differs")) == EXIT_CHECK_FAILED
    assert exit_code(Outcome(None)) == EXIT_FAILED
    assert exit_code(Outcome("ok", StopOnSignals(lambda s: None, lambda s: None))) == EXIT_OK
    err = capsys.readouterr().err
    assert "apextui: run failed: boom" in err and "apextui: error: fp16 loss differs" in err
    assert "rank 1" not in err  # the signal decided: nothing said of the failure it caused


def test_a_data_parallel_rank_other_than_0_says_nothing_of_the_failure(capsys):
    assert exit_code(Outcome("failed", None, failed_because="the run failed", quiet=True)) == EXIT_FAILED
    assert exit_code(Outcome("ok", None, check_failed="x", quiet=True)) == EXIT_CHECK_FAILED
    assert capsys.readouterr().err == ""
