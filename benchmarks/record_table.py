"""Record a timing table of one model on this machine: the grid a search of `apextui advise --model` walks, each point
run twice through apextui's own search worker, for the replay tests (`tests/fixtures/tables/`, `tests/replay.py`).

    python benchmarks/record_table.py --model examples/gpt.py:build --out TABLE.json [--limit 280] [--run-limit 150]

The grid, in the order it is recorded (the time limit cuts the tail): the model as written (fp32), the
practitioner's recipe for this device (`core/advise/recipe.py`), the recipe without its compile, every point one
change (a value added, swapped or removed) from the recipe, then every point one change from the recipe's eager
twin. Each point runs twice, one run after the other in one worker (the search's), `--steps` steps a run: the first
run of a compiled point holds the compile of its graph (the table's first compile is cold: a fresh inductor cache
folder is made for the recording unless `TORCHINDUCTOR_CACHE_DIR` is set), the second a recompile through warm
caches. Each run's median, p10, p90, the median's interval, wall time (the worker's start left out), compile time,
status and reason are stored with the order it ran in, and the machine and versions with the table. The table is
written after every point, so a recording cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apextui.core.advise.recipe import recipe  # noqa: E402
from apextui.core.advise.table_replay import SCHEMA  # noqa: E402
from apextui.core.config.axes import AXES, Scope  # noqa: E402
from apextui.core.config.point import BASELINE, Config  # noqa: E402



def neighbours(point: Config, scope: Scope) -> list[Config]:
    """Every point one value away from `point` (added, swapped or removed), values that apply to the model only."""
    out = []
    for ax in AXES:
        for v in ax.values_for(scope):
            if v != getattr(point, ax.name):
                c = point.with_(ax.name, v.name)
                if c.conflict(scope.device) is None and not any(scope.device in getattr(c, a).default_on
                                                                  for a in c.changes()):
                    out.append(c)
    # same graph first (the optimizer), the costliest compile modes last
    return sorted(out, key=lambda c: (c.compile.setup_cost > 1.5, c.compile != point.compile,
                                      c.optimizer == point.optimizer))


def grid(start: Config, scope: Scope) -> list[Config]:
    """The points in the order they are recorded: the compile modes of a costly set-up (coordinate descent,
    max-autotune) last, where the time limit cuts them first."""
    eager = start.with_("compile", "none")
    near = [*neighbours(start, scope), *neighbours(eager, scope)]
    costly = [c for c in near if c.compile.setup_cost > 1.5]
    pts = [BASELINE, start, eager, *(c for c in near if c not in costly), *costly]
    return list(dict.fromkeys(pts))


def versions() -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "host": platform.node()}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    for name in ("transformers", "liger-kernel", "triton", "apex", "torchvision"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def run_record(result: Any, wall_s: float, order: int) -> dict[str, Any]:
    s = result.summary
    reason = (result.error or "").splitlines()[0][:300] if result.error else None
    if result.ok and result.check_failed:
        reason = f"check failed: {s.check.max_abs_err:.3g} > {s.check.tolerance:.3g}"
    return {"order": order, "status": "check_failed" if result.ok and result.check_failed else
            ("ok" if result.ok else "failed"), "reason": reason, "median_ms": s.median_ms,
            "low_ms": s.median_low_ms, "high_ms": s.median_high_ms, "p10_ms": s.p10_ms, "p90_ms": s.p90_ms,
            "wall_s": round(wall_s, 3), "compile_s": s.compile_s, "steps": s.measured_steps,
            "peak_memory_bytes": s.peak_memory_bytes, "competed": result.competed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--limit", type=float, default=280.0, help="seconds for the whole table")
    parser.add_argument("--run-limit", type=float, default=150.0, help="seconds a run may take")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-cold-"))

    from apextui.cli.model_option import model_for_advice
    from apextui.core.advise.run import Advisor
    from apextui.core.model_presets import config_preset
    from apextui.core.run.reusable import search_runner_factory

    t0 = time.monotonic()
    got = model_for_advice(args.model, args.device, False)
    if isinstance(got, int):
        return got
    facts, presets, available = got
    scope = Scope("model", facts.traits, args.device)
    start = recipe(args.device, scope, lambda c: available(config_preset(args.model, c))).point
    factory = search_runner_factory(headless=True)
    advisor = Advisor(args.device, steps=args.steps, presets=presets, workloads=("model",), availability_fn=available,
                      runner_factory=factory, search_budget_s=args.limit)
    table: dict[str, Any] = {
        "schema": SCHEMA, "model": args.model, "device": args.device, "steps": args.steps,
        "recorded": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": versions(), "traits": sorted(facts.traits or ()), "recipe": start.as_dict(),
        "setup_s": round(time.monotonic() - t0, 3), "points": {}}
    order = 0
    for point in grid(start, scope):
        if time.monotonic() - t0 > args.limit:
            table["cut_at"] = point.label
            break
        preset = config_preset(args.model, point, steps=args.steps)
        a = available(preset)
        entry: dict[str, Any] = {"config": point.as_dict(), "runs": []}
        if not a.ok:
            entry.update(status="unavailable", reason=a.reason)
        else:
            for k in range(args.runs):
                order += 1
                t = time.monotonic()
                result = advisor._run_one(preset, k + 1, order, order, deadline=time.monotonic() + args.run_limit,
                                          factory=factory)
                start_s = float(getattr(advisor, "_last_start_s", 0.0) or 0.0)
                rec = run_record(result, time.monotonic() - t - start_s, order)
                entry["runs"].append(rec)
                print(f"{point.label:40s} run {k + 1}: {rec['status']} {rec['median_ms']} ms, wall {rec['wall_s']} s, "
                      f"compile {rec['compile_s']} {rec['reason'] or ''}", flush=True)
                if rec["status"] != "ok":
                    break  # a failed point fails again: its time goes to the next
            entry["status"] = entry["runs"][-1]["status"]
        table["points"][point.label] = entry
        args.out.write_text(json.dumps(table, indent=1))
    table["elapsed_s"] = round(time.monotonic() - t0, 1)
    args.out.write_text(json.dumps(table, indent=1))
    close = getattr(factory, "close", None)
    if callable(close):
        close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
