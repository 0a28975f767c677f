"""`apextui`'s command line → one mode (cli/command.py `mode`): each mode from its flags, and the combinations that
are none, without running anything."""

from __future__ import annotations

import pytest

from apextui.cli.command import UsageError, build_parser, mode


def mode_of(*argv: str, torchrun: bool = False) -> str:
    return mode(build_parser().parse_args(list(argv)), torchrun)


@pytest.mark.parametrize("argv, torchrun, expected", [
    ((), False, "tui"),
    (("--preset", "adam-torch", "--nproc", "2"), False, "tui"),
    (("--model", "m.py:build"), False, "tui"),
    (("list",), False, "list"),
    (("list", "--model", "m.py:build"), False, "list-model"),
    (("doctor", "--json"), False, "doctor"),
    (("advise", "--steps", "5"), False, "advise"),
    (("attach",), False, "attach"),
    (("attach", "gpt", "--json", "--once"), True, "attach"),
    (("--model", "m.py:build", "--variant", "torch", "--json"), False, "model-json"),
    (("--preset", "adam-torch", "--nproc", "2", "--json"), False, "launch"),
    (("--preset", "adam-torch", "--json"), False, "json"),
    (("--preset", "adam-torch", "--json", "--baseline-json", "one.json"), True, "torchrun-json"),
])
def test_each_mode_from_its_flags(argv: tuple[str, ...], torchrun: bool, expected: str) -> None:
    assert mode_of(*argv, torchrun=torchrun) == expected


@pytest.mark.parametrize("argv, torchrun, words", [
    (("--preset", "a", "--model", "m.py:f"), False, "not both"),
    (("--preset", "a", "--variant", "v"), False, "--variant goes with --model"),
    (("--preset", "a", "--nproc", "2", "--json"), True, "without torchrun"),
    (("--nproc", "2", "--json"), False, "--json needs --preset"),
    (("--preset", "a"), True, "add --json"),
    (("--preset", "a", "--json", "--baseline-json", "one.json"), False, "--baseline-json is for a data-parallel"),
    (("--json",), False, "--json needs --preset"),
    (("attach", "gpt", "--once"), False, "--once goes with attach --json"),
])
def test_combinations_that_are_no_mode(argv: tuple[str, ...], torchrun: bool, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        mode_of(*argv, torchrun=torchrun)
