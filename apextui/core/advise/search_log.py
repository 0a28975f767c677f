"""What the search's runs print, kept off the terminal: one log file per search, and one line per kind of message.

Why: a search runs dozens of points in one worker, and third-party code prints for each (HF Llama on an H100: 3,856
lines of Triton `CompilationError` warnings from Liger's kernels under torch.compile; 26,928 lines in a table's
recording), which buried the search's own progress lines. The worker writes to this file instead (`run.reusable`,
`ReusableWorker(log_path=...)`), a failed run's error names it, and the advice says how many lines of each kind it
holds and where it is.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.ceilings import cache_dir

FOLDER = "search-logs"
KEEP = 20  # the newest logs kept; older ones are removed when a new one is made
MAX_READ_BYTES = 64 * 2**20  # a log larger than this is counted in its first 64 MiB (said so)
# the kinds of line counted, first match wins; a line of none is "other output"
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Triton kernel compile errors", re.compile(r"CompilationError|triton_kernel_wrap|triton/compiler")),
    ("torch.compile (dynamo, inductor) messages", re.compile(r"torch[/.]_(dynamo|inductor|higher_order_ops)")),
    ("Python warnings", re.compile(r"\b\w*Warning\b")),
    ("tracebacks", re.compile(r"^Traceback|^\s+File \"")),
    ("transformers messages", re.compile(r"^\[transformers\]|transformers/")),
)


def new_path(now: float | None = None) -> Path:
    """A fresh log file's path in apextui's cache folder, named by its date
    (`search-logs/2026-12-06-034501-search.log`); the oldest beyond the newest `KEEP` are removed."""
    folder = cache_dir() / FOLDER
    logs = sorted(folder.glob("*-search.log"))  # their names sort by date
    for old in logs[: max(0, len(logs) - (KEEP - 1))]:
        try:
            old.unlink()
        except OSError:
            pass
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.localtime(now))
    return folder / f"{stamp}-search.log"


@dataclass(frozen=True)
class LogSummary:
    path: str
    lines: int
    kinds: tuple[tuple[str, int], ...]  # (kind, lines), the most first
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "lines": self.lines, "kinds": [{"kind": k, "lines": n} for k, n in self.kinds],
                "truncated": self.truncated}

    def words(self) -> list[str]:
        """The terminal's lines: none for an empty log, else where it is and one line per kind."""
        if not self.lines:
            return []
        cut = " (counted in its first 64 MiB)" if self.truncated else ""
        return [f"the search's runs printed {self.lines:,} lines, kept in {self.path}{cut}:",
                *(f"  {n:,} lines: {kind}" for kind, n in self.kinds)]


def summarise(path: str | Path) -> LogSummary | None:
    """Count the log's lines by kind (`KINDS`); None where it cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_READ_BYTES + 1)
    except OSError:
        return None
    truncated = len(data) > MAX_READ_BYTES
    counts: dict[str, int] = {}
    total = 0
    for raw in data[:MAX_READ_BYTES].splitlines():
        line = raw.decode("utf-8", "replace")
        if not line.strip():
            continue
        total += 1
        kind = next((k for k, pattern in KINDS if pattern.search(line)), "other output")
        counts[kind] = counts.get(kind, 0) + 1
    kinds = tuple(sorted(counts.items(), key=lambda kv: -kv[1]))
    return LogSummary(str(path), total, kinds, truncated)
