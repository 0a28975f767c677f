"""One preset through `apextui --json` in a fresh process (benchmarks/run_presets.py and bench.py): the
process apextui's users run, its JSON-lines events parsed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence


def run_one(preset: str, device: str, steps: int | None, extra: Sequence[str] = ()) -> dict:
    """`apextui --preset P --json [EXTRA]` in a fresh interpreter (this one's, so the same installed apextui);
    its exit code, wall time, stderr's tail and every event (an unparsable line kept as one). `extra`: e.g.
    `--nproc 2` (a data-parallel run, benchmarks/scaling.py)."""
    cmd = [sys.executable, "-m", "apextui", "--preset", preset, "--json", "--device", device]
    if steps:
        cmd += ["--steps", str(steps)]
    cmd += list(extra)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"event": "unparsable", "line": line})
    return {"preset": preset, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 2),
            "stderr_tail": proc.stderr[-2000:], "events": events}
