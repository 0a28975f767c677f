"""Options that do not apply are refused, never silently ignored: one line on stderr and exit 2 (in-process:
`command.main`, nothing runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apextui.cli import command as cli

MODEL = "from apextui import ModelSetup\ndef build(small=False):\n    raise AssertionError('never called')\n"


@pytest.fixture
def model(tmp_path: Path) -> str:
    (tmp_path / "m.py").write_text(MODEL)
    return f"{tmp_path / 'm.py'}:build"


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("extra, needle", [
    (["--nproc", "2"], "--nproc runs presets data-parallel; --model with --json runs in one process"),
    (["--baseline-json", "/nonexistent"], "--baseline-json is for a data-parallel run"),
    (["--load", "runs.json"], "--load is for the TUI"),
])
def test_what_does_not_apply_to_a_model_json_run_is_refused(model, capsys, extra, needle):
    code = cli.main(["--model", model, "--variant", "fp32", "--json", "--device", "cpu", *extra])
    assert code == 2
    assert one_line(capsys).startswith(f"apextui: error: {needle}")


def test_load_with_a_preset_json_run_is_refused(capsys):
    assert cli.main(["--preset", "adamw", "--json", "--device", "cpu", "--load", "x.json"]) == 2
    assert "--load is for the TUI" in one_line(capsys)


@pytest.mark.parametrize("argv, needle", [
    (["--steps", "５"], "argument --steps: must be a whole number from 1 to"),  # a full-width digit
    (["--steps", "1_0"], "argument --steps: must be a whole number from 1 to"),
    (["--sample-interval", "１"], "argument --sample-interval: must be a number of seconds"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["advise", "--repeats", "x"], "argument --repeats: must be a whole number"),
])
def test_usage_errors_are_one_line(capsys, monkeypatch, argv, needle):
    """argparse's usage block is not printed: one line, exit 2 (even in a 5-column terminal)."""
    monkeypatch.setenv("COLUMNS", "5")
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    line = one_line(capsys)
    assert line.startswith("apextui: error: ") and needle in line and line.endswith("--help)")


def test_plain_numbers_still_parse():
    args = cli.build_parser().parse_args(["--steps", " 12 ", "--sample-interval", "2.5e-1"])
    assert (args.steps, args.sample_interval) == (12, 0.25)


FROZEN = '''
import torch
from torch import nn
from apextui import ModelSetup

def build(small=False):
    model = nn.Linear(4, 1).requires_grad_(False)
    return ModelSetup(model=model, make_batch=lambda d, g: (torch.randn(2, 4), torch.randn(2, 1)),
                      loss_fn=nn.functional.mse_loss)
'''


@pytest.mark.parametrize("argv", [["list", "--model"], ["--variant", "fp32", "--json", "--model"]])
def test_a_model_with_nothing_to_train_is_a_usage_error(tmp_path, capsys, argv):
    (tmp_path / "frozen.py").write_text(FROZEN)
    code = cli.main([*argv, f"{tmp_path / 'frozen.py'}:build", "--device", "cpu"])
    assert code == 2
    assert "every parameter of the model is frozen (requires_grad=False): there is nothing to train" in \
        one_line(capsys)


NO_PARAMETERS = FROZEN.replace("nn.Linear(4, 1).requires_grad_(False)", "nn.ReLU()")


@pytest.mark.parametrize("argv", [["list", "--model"], ["--variant", "fp32", "--json", "--model"]])
def test_a_model_without_parameters_is_named_so_not_frozen(tmp_path, capsys, argv):
    (tmp_path / "empty.py").write_text(NO_PARAMETERS)
    code = cli.main([*argv, f"{tmp_path / 'empty.py'}:build", "--device", "cpu"])
    assert code == 2
    line = one_line(capsys)
    assert "the model has no parameters: there is nothing to train" in line and "frozen" not in line


EXITS_AT_IMPORT = "import sys\nsys.exit(4)\n\n\ndef build(small=False):\n    pass\n"  # never reached
EXITS_IN_BUILD = "import sys\n\ndef build(small=False):\n    sys.exit(4)\n"


@pytest.mark.parametrize("source, needle", [
    (EXITS_AT_IMPORT, "failed: SystemExit: 4"),
    (EXITS_IN_BUILD, "your function raised SystemExit: 4"),
], ids=["at-import", "in-build"])
@pytest.mark.parametrize("argv", [["advise", "--model"], ["list", "--model"],
                                  ["--variant", "fp32", "--json", "--model"]], ids=["advise", "list", "json-run"])
def test_sys_exit_in_the_users_model_is_a_usage_error_not_its_exit_code(tmp_path, capsys, source, needle, argv):
    """`sys.exit(4)` in the user's file or function: one line and exit 2, as an import error; never a silent exit 4,
    which is documented as a failed correctness check (issue 41 row 13)."""
    (tmp_path / "m.py").write_text(source)
    code = cli.main([*argv, f"{tmp_path / 'm.py'}:build", "--device", "cpu"])
    assert code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("apextui: error:")]
    assert len(errors) == 1 and needle in errors[0], err
