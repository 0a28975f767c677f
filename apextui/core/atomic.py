"""Write a file atomically: whatever fails (serialising, a full disk, Ctrl-C, the rename), the file at
`path` is either the complete new text or exactly what it was, and no temporary file is left behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _written_temp(path: Path, text: str) -> str:
    """A temporary file beside `path` holding `text`, flushed, fsynced and given the usual file mode (mkstemp
    makes it 0600); removed again if writing it fails."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to a temporary file in the same folder, flush and fsync it, give it the usual file mode,
    rename it over `path`, then fsync the folder. The exception of a failure propagates."""
    path = Path(path)
    tmp = _written_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(path.parent)
    return path


MAX_NUMBERED = 1000  # `write_new_numbered`: NAME, NAME-2 ... NAME-1000, then FileExistsError


def write_new(path: str | Path, text: str) -> Path:
    """As `write_atomic`, but never over a file that exists: FileExistsError then (a file of another process,
    say, whose name came from the same clock second). The complete file appears at once (a hard link of the
    fsynced temporary file); where links are not allowed, `path` is reserved with O_EXCL and then replaced."""
    path = Path(path)
    tmp = _written_temp(path, text)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: reserve the name, then rename over our reservation
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            os.replace(tmp, path)
    finally:
        _unlink_quietly(tmp)
    _fsync_dir(path.parent)
    return path


def write_new_numbered(path: str | Path, text: str) -> Path:
    """`write_new` at `path`, or where that exists at STEM-2.SUFFIX, STEM-3.SUFFIX...; the path written."""
    path = Path(path)
    for n in range(1, MAX_NUMBERED + 1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        try:
            return write_new(candidate, text)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path} and {MAX_NUMBERED - 1} numbered names after it exist already")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every platform or file system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
