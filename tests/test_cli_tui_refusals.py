"""The TUI's refusals come before it draws anything (issue 27, rough edges 13 and 17): `--device cuda` without
CUDA exits 3 with one line, as `apextui list --device cuda` does; TERM=dumb exits 2 naming the headless commands."""

from __future__ import annotations

import pytest

from apextui.cli import command


@pytest.fixture
def no_tui(monkeypatch):
    """The TUI must not open: opening it fails the test (the refusals come before it)."""
    import apextui.ui.app as app_module

    def opened(*args, **kwargs):
        raise AssertionError("the TUI opened")

    monkeypatch.setattr(app_module, "run_app", opened)


def test_device_cuda_without_cuda_exits_3_before_the_tui(no_tui, monkeypatch, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("TERM", "xterm-256color")
    code = command.main(["--preset", "adamw", "--device", "cuda"])
    err = capsys.readouterr().err
    assert code == 3
    (line,) = err.strip().splitlines()
    assert line.startswith("apextui: error: --device cuda was asked for but") and "torch" in line
    assert command.main(["list", "--device", "cuda"]) == 3  # the same refusal, the same code
    assert capsys.readouterr().err.strip() == line


def test_term_dumb_exits_2_with_the_headless_commands(no_tui, monkeypatch, capsys):
    monkeypatch.setenv("TERM", "dumb")
    assert command.main(["--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("apextui: error: TERM=dumb") and "--json" in line and "apextui advise" in line


def test_a_real_terminal_opens_the_tui(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    assert command.tui_refusal("cpu") is None and command.tui_refusal("auto") is None
