"""A timing table (`record_table.py`'s format) from a real search's record: `apextui advise --model … --json`'s
document. Every point the search ran, with its runs' medians, intervals, wall and compile times in the order they ran;
every point it found unavailable, with why. A search's record holds fewer points than a recorded grid, but its costs
are a real search's (the reusable worker's recompiles, the cold compile), which the replay tests then replay.

    python benchmarks/table_from_advice.py ADVICE.json TABLE.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apextui.core.advise.table_replay import SCHEMA  # noqa: E402



def table_from_advice(doc: dict[str, Any]) -> dict[str, Any]:
    search, model = doc["search"], doc.get("model") or {}
    presets = {p["preset"].rpartition("/")[2]: p for w in doc["workloads"] for p in w["presets"]}
    order = {t["index"]: t for t in search["trials"]}
    points: dict[str, Any] = {}
    run_order = 0
    seen_runs: dict[str, int] = {}
    for index in sorted(order):
        t = order[index]
        label = t["label"]
        entry = points.setdefault(label, {"config": t["config"], "runs": []})
        if t["status"] == "unavailable":
            entry.update(status="unavailable", reason=t["reason"])
            continue
        runs = presets.get(label, {}).get("runs", [])
        k = seen_runs.get(label, 0)
        seen_runs[label] = k + 1
        if k >= len(runs):
            continue
        r = runs[k]
        run_order += 1
        entry["runs"].append({
            "order": run_order, "status": "ok" if r["status"] == "ok" else "failed", "reason": r.get("error"),
            "median_ms": r["median_ms"], "low_ms": r["median_low_ms"], "high_ms": r["median_high_ms"],
            "p10_ms": r["p10_ms"], "p90_ms": r["p90_ms"], "wall_s": r["elapsed_s"], "compile_s": r["compile_s"],
            "steps": r["measured_steps"], "peak_memory_bytes": r["peak_memory_bytes"], "competed": False})
        entry["status"] = entry["runs"][-1]["status"]
    env = doc.get("environment") or {}
    return {"schema": SCHEMA, "model": model.get("spec"), "device": doc["device"],
            "steps": (doc.get("settings") or {}).get("steps"), "recorded": doc.get("measured_at"),
            "machine": {"gpu": env.get("gpu_name") or env.get("gpu") or env.get("name"), "torch": env.get("torch"),
                        "source": "a search's record (benchmarks/table_from_advice.py)"},
            "traits": model.get("traits") or [], "recipe": search.get("recipe_config"), "points": points}


def main(argv: list[str]) -> int:
    doc = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(table_from_advice(doc), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
