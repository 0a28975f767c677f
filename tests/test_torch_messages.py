"""torch's messages about apextui's own use of it go to a log, not the user's terminal; the user's own warnings
still reach it (issue 27, rough edge 14)."""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from helpers import json_lines, run_cli

from apextui.core.analysis import torch_messages as tm

PROFILER = ("Warning: Profiler clears events at the end of each cycle. Only events from the current cycle will be "
            "reported. To keep events across cycles, set acc_events=True.")


class Records(logging.Handler):
    """What reaches a logger's handlers (torch's own handler prints these on stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_own_messages_go_to_the_log_and_the_users_warnings_are_shown(tmp_path):
    log = tmp_path / "torch.log"
    handler = Records()
    logging.getLogger("torch.utils.cpp_extension").addHandler(handler)
    shown: list[str] = []
    before = warnings.showwarning
    warnings.showwarning = lambda message, *a, **k: shown.append(str(message))
    try:
        with tm.diverted(log), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn(PROFILER, UserWarning, stacklevel=1)
            warnings.warn("Profiler record function step#3 will be ignored", UserWarning, stacklevel=1)
            warnings.warn("your model: dropout is ignored in eval mode", UserWarning, stacklevel=1)
            logging.getLogger("torch.utils.cpp_extension").warning(
                "No CUDA runtime is found, using CUDA_HOME='%s'", "/usr/local/cuda")
            logging.getLogger("torch.utils.cpp_extension").warning("a message of torch's own, not about apextui")
    finally:
        warnings.showwarning = before
        logging.getLogger("torch.utils.cpp_extension").removeHandler(handler)
    text = log.read_text()
    assert "Profiler clears events" in text and "step#3 will be ignored" in text
    assert "CUDA_HOME='/usr/local/cuda'" in text
    assert shown == ["your model: dropout is ignored in eval mode"]
    assert handler.messages == ["a message of torch's own, not about apextui"]  # the CUDA_HOME line never got there


def test_after_the_block_nothing_is_diverted(tmp_path):
    log = tmp_path / "torch.log"
    with tm.diverted(log):
        pass
    logger = logging.getLogger("torch.utils.cpp_extension")
    assert not logger.filters and tm.profile_window().__class__.__name__ == "nullcontext"
    assert not log.exists()


def test_the_profile_windows_c_output_goes_to_the_log_on_a_terminal(tmp_path):
    """fd 2 a terminal (a pty here): what C++ writes there during the window (the profiler's start/stop lines)
    lands in the log; after it, fd 2 is the terminal again."""
    log = tmp_path / "torch.log"
    master, slave = os.openpty()
    saved = os.dup(2)
    os.dup2(slave, 2)
    try:
        with tm.diverted(log), tm.profile_window():
            os.write(2, b"profiler_start (C++)\n")
        os.write(2, b"after the window\n")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(slave)
    seen = os.read(master, 4096).decode()
    os.close(master)
    assert "profiler_start" in log.read_text() and "profiler_start" not in seen and "after the window" in seen


def test_a_file_as_stderr_is_left_alone(tmp_path):
    log = tmp_path / "torch.log"
    with tm.stderr_to_log(log):  # pytest's capture: not a terminal
        pass
    assert not log.exists()


WARNS = '''
import warnings
import torch
from torch import nn
from apextui import ModelSetup

def build(small=False):
    warnings.warn("the user's model warns about its own config")
    warnings.warn("{profiler}")
    return ModelSetup(model=nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 1)),
                      make_batch=lambda d, g: (torch.randn(2, 4, device=d, generator=g),
                                               torch.randn(2, 1, device=d, generator=g)),
                      loss_fn=nn.functional.mse_loss)
'''


@pytest.mark.slow
def test_a_headless_run_keeps_torchs_note_off_stderr_and_the_models_warning_on_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m.py"
    model.write_text(WARNS.format(profiler=PROFILER))
    proc = run_cli("--model", f"{model}:build", "--variant", "fp32", "--json", "--device", "cpu", "--steps", "3")
    assert proc.returncode == 0, proc.stderr
    assert json_lines(proc.stdout)[-1]["status"] == "ok"
    assert "the user's model warns about its own config" in proc.stderr
    assert "Profiler clears events" not in proc.stderr, proc.stderr
    assert "Profiler clears events" in (tmp_path / "cache" / tm.LOG_FILE).read_text()
