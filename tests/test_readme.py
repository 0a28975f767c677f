"""The README's two commands, as a new user follows them literally: the test set-up has an environment of its own
(it pinned CPU torch 2.13.0 into the run's `.venv`, replacing its CUDA torch and the caches built with it), CI runs
that very command, and the CPU line says what to do when PyTorch's CPU index cannot be reached."""

from __future__ import annotations

import re

from helpers import ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)


def venv_of(command: str) -> str:
    return re.match(r"python3 -m venv (\S+) ", command).group(1)  # type: ignore[union-attr]


def test_the_run_and_the_test_set_ups_use_environments_of_their_own():
    run, test = BLOCKS[0], BLOCKS[1]
    assert "pytest" not in run and "pytest" in test and '"torch==2.13.0"' in test
    assert venv_of(run) != venv_of(test)
    assert all(part.startswith(venv_of(test) + "/bin/") for part in re.findall(r"\S+/bin/\S+", test))


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    install, pytest_run = BLOCKS[1].split(" && .venv-test/bin/python -m pytest ")
    assert install in ci and f".venv-test/bin/python -m pytest {pytest_run}" in ci
    assert venv_of(BLOCKS[1]) in (ROOT / ".gitignore").read_text() or ".venv-*" in (ROOT / ".gitignore").read_text()


def test_the_cpu_line_says_what_to_do_when_its_index_cannot_be_reached():
    cpu = README[README.index("**On a machine without an NVIDIA GPU**"):]
    said = cpu[:cpu.index("## ")]
    assert "download.pytorch.org is unreachable" in said and "leave `--extra-index-url` out" in said
    assert "5.5 GB" in said


def test_the_readme_is_short():
    assert len(README.split()) <= 1000
