"""Where watched runs live: one folder a run under the user's data dir, and one small index of live runs.

A run folder is `runs/NAME-YYYYmmddTHHMMSS-PID[-rankR]` under `root()` (platformdirs' user data dir, e.g.
`~/.local/share/apextui/watch`; `APEXTUI_WATCH_DIR` moves it). It holds `run.json` (name, pid, host, start, rank:
who writes it, read to tell a live run from a dead one) and the stream's segments (`stream.py`). The index,
`live.json`, lists the runs being written now; it is rewritten whole under a lock (`live.lock`, `lock.py`), and an
entry whose process is gone is dropped whenever it is read, so a killed run never stays "live".

A run's folder is the folder its `run.json` was found in, never a path a file names: a folder of runs that was
moved, or copied (a backup), reads as it is, and `prune` removes only folders found in the folder of runs it
prunes. The files name a run's folder relative to the folder of runs (`runs/NAME-...`); older versions wrote an
absolute path, which is read for the folder's name alone.

Why files and no server: a file works over SSH, in tmux, after the training process died and across restarts, and
needs no port.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import files
from ..atomic import write_atomic
from ..errors import UsageProblem
from . import jsonline, lock

ROOT_ENV = "APEXTUI_WATCH_DIR"
SAME_RUN_S = 60.0  # `find`: runs of one name started this close together are the ranks of one torchrun run
SAME_PROCESS_S = 1.0  # `alive`: start times this close are one process's (psutil derives them from clock ticks)
KEEP_RUNS = 100  # finished run folders kept; the oldest beyond are removed when a new run starts
META = "run.json"
INDEX = "live.json"
LOCK = "live.lock"
RUNS = "runs"  # the run folders' folder, under the folder of runs
FILE_LIMIT = 8 << 20  # run.json and live.json: a few hundred bytes a run (a longer file is not one)
PID_MAX = 2**31 - 1  # what os.kill takes
RANK_MAX = 2**20
TIME_RANGE = (0.0, 1e10)  # Unix times to the year 2286: time.localtime takes every one


def root() -> Path:
    """The folder of every watched run: $APEXTUI_WATCH_DIR, else the user data dir's `watch`."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("apextui")) / "watch"


@dataclass(frozen=True)
class RunMeta:
    """Who writes a run folder: the index entry and `run.json` alike."""

    name: str
    pid: int
    host: str
    start: float  # time.time() when the run folder was made
    path: str  # the run folder, where it was found (in the files: relative to the folder of runs, `runs/NAME-...`)
    rank: int | None = None
    created: float | None = None  # when the process `pid` started (psutil): a pid reused later has another; None
    # in a run.json of an older version

    @property
    def started(self) -> str:
        """The start time, local, to the second (what the picker and the error lines show)."""
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.start))

    def describe(self) -> str:
        """'gpt (pid 4242, started 2026-12-02 01:10:00)'."""
        rank = f", rank {self.rank}" if self.rank is not None else ""
        host = "" if self.host == socket.gethostname() else f" on {self.host}"
        return f"{self.name} (pid {self.pid}{host}{rank}, started {self.started})"

    @classmethod
    def from_dict(cls, d: Any, folder: Path) -> "RunMeta | None":
        """The run whose folder is `folder` (where its `run.json` or index entry was found: the `path` a file
        holds is not trusted); None for a dict that is not one (`parse` says why)."""
        try:
            return cls.parse(d, folder)
        except BadRunFile:
            return None

    @classmethod
    def parse(cls, d: Any, folder: Path) -> "RunMeta":
        """As `from_dict`, or `BadRunFile` naming the first value no run has: every value is checked here, so that
        no later use (`os.kill`, `time.localtime`) meets one it cannot take."""
        if not isinstance(d, dict):
            raise BadRunFile(f"holds {type(d).__name__}, not an object")
        return cls(name=_text(d, "name"), pid=_whole(d, "pid", 1, PID_MAX), host=_text(d, "host"),
                   start=_time(d, "start"), path=str(folder), rank=_whole(d, "rank", 0, RANK_MAX, optional=True),
                   created=_time(d, "created", optional=True))

    def to_dict(self) -> dict[str, Any]:
        """As `run.json` and the index hold it: the folder relative to the folder of runs."""
        return {**asdict(self), "path": f"{RUNS}/{Path(self.path).name}"}


class BadRunFile(ValueError):
    """A `run.json` (or an index entry) that is not a run's; the message names the value and what is allowed."""


def _text(d: dict[str, Any], key: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise BadRunFile(f"{key} {_show(value)}: a string is allowed")
    return value


def _whole(d: dict[str, Any], key: str, low: int, high: int, optional: bool = False) -> Any:
    value = d.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRunFile(f"{key} {_show(value)}: a whole number from {low} to {high} is allowed")
    return value


def _time(d: dict[str, Any], key: str, optional: bool = False) -> Any:
    value = d.get(key)
    if value is None and optional:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and TIME_RANGE[0] <= value <= TIME_RANGE[1]:
        return float(value)  # NaN fails the comparisons
    raise BadRunFile(f"{key} {_show(value)}: a Unix time from {TIME_RANGE[0]:.0f} to {TIME_RANGE[1]:.0f} is allowed")


def _show(value: Any, most: int = 40) -> str:
    """A value as an error line quotes it, cut to `most` characters (a 300-character name is still one line)."""
    text = "missing" if value is None else repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def alive(meta: RunMeta) -> bool:
    """Whether the run's process still runs. A process on another host (a shared home folder) cannot be asked:
    it counts as alive. A process with the run's pid that started at another time than the run's (`created`) is
    another process the pid was given to since."""
    if meta.host != socket.gethostname():
        return True
    try:
        os.kill(meta.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process with that pid
        pass
    except OSError:
        return False
    if meta.created is not None:
        created = process_created(meta.pid)
        if created is not None and abs(created - meta.created) > SAME_PROCESS_S:
            return False
    return _not_zombie(meta.pid)


def process_created(pid: int) -> float | None:
    """When process `pid` started (Unix time, psutil's reading of /proc); None when it cannot be read."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None


def _not_zombie(pid: int) -> bool:
    """A killed child not yet reaped still answers kill(0): read its state where /proc has it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _safe(name: str) -> str:
    """A run name as a folder name: letters, digits, '._-' kept, the rest '_', at most 60 characters."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._")[:60] or "run"


def new_run(name: str, rank: int | None = None, where: Path | None = None) -> RunMeta:
    """Make a new run folder and its `run.json`; two runs of one name get two folders (time and pid differ)."""
    base = (where or root()) / RUNS
    base.mkdir(parents=True, exist_ok=True)
    now = time.time()
    stem = f"{_safe(name)}-{time.strftime('%Y%m%dT%H%M%S', time.localtime(now))}-{os.getpid()}"
    if rank is not None:
        stem += f"-rank{rank}"
    folder = base / stem
    n = 1
    while True:  # the same name twice in one second in one process: -2, -3 ...
        try:
            folder.mkdir()
            break
        except FileExistsError:
            n += 1
            folder = base / f"{stem}-{n}"
    meta = RunMeta(name=name, pid=os.getpid(), host=socket.gethostname(), start=now, path=str(folder), rank=rank,
                   created=process_created(os.getpid()))
    write_atomic(folder / META, json.dumps(meta.to_dict()) + "\n")
    return meta


def read_meta(folder: Path) -> RunMeta | None:
    """The run whose `run.json` is in `folder`, its path `folder` whatever the file says; None when there is no
    such file or it is not a run's (`load_meta` says why)."""
    try:
        return load_meta(folder)
    except BadRunFile:
        return None


def load_meta(folder: Path) -> RunMeta:
    """As `read_meta`, or `BadRunFile` saying what is wrong with `folder`'s `run.json` (a FIFO or a device is
    never opened for reading: `files.read_bytes`)."""
    try:
        doc = jsonline.loads(files.read_bytes(folder / META, FILE_LIMIT, META))
    except files.UnreadableFile as exc:
        raise BadRunFile(str(exc)) from None
    except jsonline.Damaged as exc:
        raise BadRunFile(f"{folder / META}: {exc}") from None
    try:
        return RunMeta.parse(doc, folder)
    except BadRunFile as exc:
        raise BadRunFile(f"{folder / META}: {exc}") from None


def _indexed_folder(where: Path, recorded: Any) -> Path | None:
    """The run folder an index entry names, in this folder of runs: its last part, taken from `runs/NAME-...`
    or from the absolute path an older version wrote; None for a name that is no folder's."""
    name = Path(recorded).name if isinstance(recorded, str) else ""
    return where / RUNS / name if name not in ("", ".", "..") else None


@contextlib.contextmanager
def _locked(where: Path) -> Iterator[None]:
    """The index's lock, held for the block, or not after a bounded wait (`lock.held`: never blocks the training)."""
    where.mkdir(parents=True, exist_ok=True)
    with lock.held(where / LOCK):
        yield


def _read_index(where: Path) -> list[RunMeta]:
    """The index's runs; a damaged index (or an entry) is read as no runs (it is rewritten at the next run's
    start)."""
    try:
        doc = jsonline.loads(files.read_bytes(where / INDEX, FILE_LIMIT, INDEX))
    except ValueError:  # UnreadableFile, Damaged
        return []
    runs = doc.get("runs") if isinstance(doc, dict) else None
    found = []
    for d in runs if isinstance(runs, list) else []:
        folder = _indexed_folder(where, d.get("path")) if isinstance(d, dict) else None
        meta = RunMeta.from_dict(d, folder) if folder is not None else None
        if meta is not None:
            found.append(meta)
    return found


def _write_index(where: Path, runs: list[RunMeta]) -> None:
    write_atomic(where / INDEX, json.dumps({"runs": [m.to_dict() for m in runs]}, indent=1) + "\n")


def register(meta: RunMeta, where: Path | None = None) -> None:
    where = where or root()
    with _locked(where):
        runs = [m for m in _read_index(where) if alive(m) and m.path != meta.path]
        _write_index(where, [*runs, meta])


def unregister(meta: RunMeta, where: Path | None = None) -> None:
    where = where or root()
    with _locked(where):
        _write_index(where, [m for m in _read_index(where) if m.path != meta.path and alive(m)])


def live_runs(where: Path | None = None) -> list[RunMeta]:
    """The runs being written now, newest first (entries of dead processes left out)."""
    return sorted((m for m in _read_index(where or root()) if alive(m) and Path(m.path).is_dir()),
                  key=lambda m: m.start, reverse=True)


def all_runs(where: Path | None = None) -> list[RunMeta]:
    """Every run folder, newest first."""
    base = (where or root()) / RUNS
    try:
        folders = [p for p in base.iterdir() if p.is_dir()]
    except OSError:
        return []
    metas = [m for m in (read_meta(p) for p in folders) if m is not None]
    return sorted(metas, key=lambda m: m.start, reverse=True)


def prune(keep: int = KEEP_RUNS, where: Path | None = None) -> int:
    """Remove the oldest finished run folders beyond `keep`; the number removed. Live runs are never removed, nor
    anything outside this folder of runs (a run folder that is a link to elsewhere is left as it is)."""
    base = (where or root()) / RUNS
    runs = [m for m in all_runs(where) if not alive(m)]
    return sum(_remove_run(Path(meta.path), base) for meta in runs[keep:])


def _remove_run(folder: Path, base: Path) -> bool:
    """Remove `folder` if it is a folder of `base` itself (not a link, not elsewhere once resolved)."""
    try:
        inside = not folder.is_symlink() and folder.resolve().parent == base.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False
    if not inside:
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


class NoSuchRun(UsageProblem, LookupError):
    """`find` found nothing; the message is the one line for stderr (names the live runs)."""


def ranks(meta: RunMeta, runs: list[RunMeta] | None = None, where: Path | None = None) -> list[RunMeta]:
    """The ranks of `meta`'s torchrun run, by rank: the runs of its name with a rank, started within `SAME_RUN_S`
    of it; [] outside torchrun."""
    if meta.rank is None:
        return []
    found = [m for m in (runs if runs is not None else all_runs(where))
             if m.name == meta.name and m.rank is not None and abs(m.start - meta.start) < SAME_RUN_S]
    return sorted(found, key=lambda m: (m.rank or 0, -m.start))


def find(name_or_path: str, where: Path | None = None) -> tuple[RunMeta, list[RunMeta]]:
    """The run a user names: a run folder (or a file in one), else the newest live run of that name, else the newest
    finished one. Also returns the other runs of that name (two runs with the same name: the caller says which
    one it follows)."""
    folder, why = _run_folder(name_or_path)
    if folder is not None:
        try:
            return load_meta(folder), []
        except BadRunFile as exc:
            raise NoSuchRun(f"not a watched run's folder: {exc}") from None
    named = [m for m in all_runs(where) if m.name == name_or_path]
    if named:
        chosen = _newest(named)
        return chosen, [m for m in named if m is not chosen]
    live = live_runs(where)
    listed = "; ".join(m.describe() for m in live) if live else "none"
    raise NoSuchRun(f"no watched run named {_show(name_or_path, 80)} (nor a run folder at that path{why}); "
                    f"live runs: {listed}")


def _newest(named: list[RunMeta]) -> RunMeta:
    """Of the runs of one name (newest first): the newest live one, else the newest; under torchrun rank 0 of it (the
    ranks of one run start within moments of each other, and rank 0 stands for them)."""
    live = [m for m in named if alive(m)]
    pool = live or named
    same_run = [m for m in ranks(pool[0], pool) if m.rank == 0]
    return same_run[0] if same_run else pool[0]


def newest(name: str, where: Path | None = None) -> RunMeta | None:
    """The run `attach NAME` follows now: the newest live run of that name, else the newest finished one; None where
    none has that name."""
    named = [m for m in all_runs(where) if m.name == name]
    return _newest(named) if named else None


def is_run_folder(name_or_path: str) -> bool:
    """Whether a user's word names a run folder (or a file in one) rather than a run's name."""
    return _run_folder(name_or_path)[0] is not None


def _run_folder(name_or_path: str) -> tuple[Path | None, str]:
    """The run folder a user's word names (the folder, or a file in it, holding a `run.json`), else None and why
    not, for the error line: a path the system refuses (a name over 255 bytes, `~` of no user) may still be a run's
    name, so it is no error here."""
    try:
        path = Path(name_or_path).expanduser()
        folder = path.parent if path.is_file() else path
        if folder.is_dir() and (folder / META).exists():
            return folder, ""
    except (OSError, RuntimeError) as exc:  # RuntimeError: `~user` of no user
        return None, f": {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
    return None, ""

