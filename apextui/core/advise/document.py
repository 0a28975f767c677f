"""The advice as one JSON-ready document: what `--json` prints, the store keeps and the renderer reads."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from ..measure.compare import NOISE_FLOOR, NOISE_RULE
from .decide import overall_apex
from .records import KIND, LOSS_RULE, LOSS_TOLERANCE, SCHEMA, WorkloadVerdict
from .wording import trust_note


def document(verdicts: Sequence[WorkloadVerdict], *, device: str, env: Mapping[str, Any], steps: int,
             repeats: int, workloads: Sequence[str], partial: bool, started: float,
             finished: float | None = None, search: bool = False) -> dict[str, Any]:
    """The advice as one JSON-ready document (`apextui advise --json`; what the store keeps)."""
    ws = [v.to_dict() for v in verdicts]
    partial = partial or any(v.status != "complete" for v in verdicts)
    runs = [r for v in verdicts for m in v.measurements for r in m.runs]
    return {
        "kind": KIND, "schema": SCHEMA, "status": "partial" if partial else "complete",
        "reused": False, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "measured_at_unix": round(started, 3),
        "elapsed_s": round((finished or time.time()) - started, 3),
        "device": device, "environment": dict(env),
        "settings": {"steps": steps, "repeats": repeats, "workloads": list(workloads), "search": search,
                     "order": "interleaved: repeat 1 in preset order, repeat 2 reversed, ... (ABBA)"},
        "rules": {"noise_floor": NOISE_FLOOR, "noise": NOISE_RULE, "loss_tolerance": LOSS_TOLERANCE,
                  "loss": LOSS_RULE, "median": "median of the repeats' median ms/step (warm-up excluded), its "
                  "interval the hull of the repeats' 95 % median intervals and medians; p10/p90: median of the "
                  "repeats' p10/p90; compile time is never in ms/step"},
        "runs": {"total": len(runs), "ok": sum(r.ok for r in runs),
                 "failed": sum(r.status == "failed" for r in runs),
                 "stopped": sum(r.status == "stopped" for r in runs)},
        "workloads": ws,
        "apex": overall_apex(ws),
        "trust_note": trust_note({"device": device, "settings": {"steps": steps, "search": search}}),
    }
