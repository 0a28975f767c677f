"""Run history: saved results accumulate in the user's data folder, and `l` offers the recent ones.

The folder is `results.fallback_dir()` (platformdirs' user data dir: $XDG_DATA_HOME/apextui, else
~/.local/share/apextui), the one a hang-up already saves to when the working folder cannot be written.
No Textual here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.results import ResultRow, Saved, fallback_dir, save_first

PATTERN = "apextui-results-*.json"
RECENT = 20  # files offered by the load screen


def history_dir() -> Path:
    """Where every session's results accumulate."""
    return fallback_dir()


def output_dir(start: Path | None = None) -> Path:
    """Where `w`, `e` and `p` write unless told (`save_dir`): the start folder, except in a git work tree (a source
    checkout, where they would be untracked files that `git add -A` sweeps up): there the folder that keeps every
    session's results (`history_dir`). Each toast names the file's full path."""
    start = (start or Path(".")).resolve()
    if any((folder / ".git").exists() for folder in (start, *start.parents)):
        return history_dir()
    return Path(".")


def save_to_history(rows: Sequence[ResultRow], env: Mapping[str, Any] | None = None) -> Saved:
    """A new results file in `history_dir()` (created if needed); where that folder cannot be made or written
    (e.g. $XDG_DATA_HOME is a file), in the working folder, then the system's temporary folder (`Saved` says
    why); OSError when none can be written."""
    return save_first(rows, [(history_dir(), True), (Path("."), False), (Path(tempfile.gettempdir()), False)],
                      env)


@dataclass(frozen=True)
class RecentFile:
    path: Path
    mtime: float
    size: int


def recent_results(folders: Iterable[str | Path] | None = None, limit: int = RECENT) -> list[RecentFile]:
    """`apextui-results-*.json` files in `folders` (default: the history folder), newest first, at most
    `limit`; a folder that is missing or unreadable is skipped, and a file is listed once (by real path;
    and a copy with the same name and size, as `w` leaves in the history folder, only from the first folder)."""
    found: dict[Any, RecentFile] = {}
    for folder in folders if folders is not None else (history_dir(),):
        try:
            paths = list(Path(folder).glob(PATTERN))
        except OSError:
            continue
        for path in paths:
            try:
                info = path.stat()
                key = os.path.realpath(path)
            except OSError:
                continue
            if path.is_file() and (path.name, info.st_size) not in found:
                found.setdefault(key, RecentFile(path, info.st_mtime, info.st_size))
                found[(path.name, info.st_size)] = found[key]
    unique = {id(f): f for f in found.values()}.values()
    return sorted(unique, key=lambda f: (-f.mtime, str(f.path)))[:limit]
