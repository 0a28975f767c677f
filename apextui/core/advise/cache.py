"""Stored advice: the environment it was measured in, the cache file (load/save), and whether a stored
advice can be reused here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import files
from ..atomic import write_atomic
from .decide import overall_apex
from .records import CACHE_FILE, CACHE_VERSION, KIND, SCHEMA
from .planning import WorkloadPlan
from .wording import provenance, trust_note


def apex_fingerprint() -> str:
    """What Apex is installed, without importing it: 'not installed', or its version and git commit
    (from pip's direct_url.json, or the source checkout's .git) or its location."""
    try:
        spec = importlib.util.find_spec("apex")
    except Exception:  # noqa: BLE001
        spec = None
    if spec is None:
        return "not installed"
    from importlib import metadata

    parts = []
    commit = None
    try:
        dist = metadata.distribution("apex")
        parts.append(f"version {dist.version}")
        raw = dist.read_text("direct_url.json")
        if raw:
            commit = (json.loads(raw).get("vcs_info") or {}).get("commit_id")
    except Exception:  # noqa: BLE001
        pass
    locations = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
    location = Path(locations[0]) if locations else None
    if commit is None and location is not None:
        commit = _git_head(location.parent)
    if commit:
        parts.append(f"commit {commit[:12]}")
    elif location is not None:
        parts.append(f"at {location}")
    return " ".join(parts) or "installed"


def _git_head(repo: Path) -> str | None:
    """The commit checked out in Apex's source tree (an editable install), or None; never raises."""
    git = repo / ".git"

    def read(path: Path) -> str:
        return files.read_text(path, files.DATA_LIMIT, "git file")

    try:
        head = read(git / "HEAD").strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = git / ref
            if path.is_file():
                return read(path).strip()
            for line in read(git / "packed-refs").splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
            return None
        return head or None
    except (OSError, files.UnreadableFile):
        return None


def environment(device: str) -> dict[str, Any]:
    """What advice depends on: the machine's identity (`env.machine_identity`: the GPU and its driver, or the
    CPU model and threads; torch) and Apex; `key` joins them (stored advice is reused only under the same
    key: the ceilings' key with "|apex ..." after it)."""
    from ..env import machine_identity

    m = machine_identity(device)
    env: dict[str, Any] = {"device": device, "torch": m.torch, "torch_cuda": m.torch_cuda, "apex": apex_fingerprint(),
                           "name": m.name}
    if m.device == "cuda":
        env["driver"] = m.driver
    else:
        env["threads"] = m.threads
    env["key"] = f"{m.key}|apex {env['apex']}"
    return env


def advice_file() -> Path:
    from ..analysis import cache_dir

    return cache_dir() / CACHE_FILE


def load_store(path: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The stored advice documents by environment key, and a note if the file was unreadable; never raises."""
    path = path or advice_file()
    try:
        data = json.loads(files.read_text(path, files.DATA_LIMIT, "stored advice file"))
        entries = data["advice"]
        if not isinstance(entries, dict):
            raise TypeError("'advice' is not an object")
    except files.UnreadableFile as exc:
        return {}, None if exc.missing else f"stored advice is unreadable ({exc})"
    except Exception as exc:  # noqa: BLE001 - never raises: a bad store is only a note
        return {}, f"stored advice {path} is unreadable ({type(exc).__name__}: {files.one_line(exc)})"
    return entries, None

def store(document: Mapping[str, Any], path: Path | None = None) -> Path:
    """Keep `document` as the latest advice for its environment (atomically: a temporary file renamed
    over the store). Raises OSError."""
    path = path or advice_file()
    entries, _ = load_store(path)
    doc = {k: v for k, v in document.items() if k not in ("reused", "reused_from", "reuse_note")}
    entries[str(document["environment"]["key"])] = doc
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"version": CACHE_VERSION, "advice": entries}, indent=1))
    return path


def find_reusable(env: Mapping[str, Any], workloads: Sequence[str], plans: Sequence[WorkloadPlan] | None = None,
                  steps: int | None = None, repeats: int | None = None,
                  path: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """The stored advice to reuse (restricted to `workloads`, marked reused) or None, and why (not)."""
    path = path or advice_file()
    entries, note = load_store(path)
    if note:
        return None, note
    doc = entries.get(str(env["key"]))
    if not isinstance(doc, dict):
        return None, f"no stored advice for this environment ({env['key']})"
    try:
        if doc.get("kind") != KIND or doc.get("schema") != SCHEMA:
            return None, "the stored advice is from another apextui version"
        if doc.get("status") != "complete":
            return None, "the stored advice is partial (interrupted)"
        settings = doc["settings"]
        if steps is not None and settings["steps"] != steps:
            return None, f"the stored advice ran {settings['steps']} steps, not {steps}"
        if repeats is not None and settings["repeats"] != repeats:
            return None, f"the stored advice made {settings['repeats']} repeats, not {repeats}"
        stored = {w["workload"]: w for w in doc["workloads"]}
        missing = [w for w in workloads if w not in stored]
        if missing:
            return None, f"the stored advice does not cover {', '.join(missing)}"
        for p in plans or ():
            now = {x.name for x in p.runnable} | {m.preset for m in p.skipped}
            then = {x["preset"] for x in stored[p.workload]["presets"]}
            if now != then:
                return None, f"the {p.workload} presets changed since (now {', '.join(sorted(now))})"
            runnable_then = {x["preset"] for x in stored[p.workload]["presets"] if x["status"] != "unavailable"}
            if runnable_then != {x.name for x in p.runnable}:
                return None, f"which {p.workload} presets can run here changed since"
        chosen = [stored[w] for w in workloads]
        runs = [r for w in chosen for p in w["presets"] for r in p["runs"]]
        counts = {"total": len(runs), "ok": sum(r["status"] == "ok" and r["median_ms"] is not None for r in runs),
                  "failed": sum(r["status"] == "failed" for r in runs),
                  "stopped": sum(r["status"] == "stopped" for r in runs)}
        out = dict(doc, workloads=chosen, apex=overall_apex(chosen), runs=counts, reused=True, reused_from=str(path),
                   settings=dict(doc["settings"], workloads=list(workloads)))
        out["reuse_note"] = f"reused the advice of this same environment, {provenance(doc)}"
        out["trust_note"] = trust_note(out)
        _must_render(out)
    except Exception as exc:  # noqa: BLE001 - total, as the results loader: a bad store is a note, never a crash
        return None, f"the stored advice is malformed ({type(exc).__name__}: {files.one_line(exc)}); ignored"
    return out, "reused"


def _must_render(doc: Mapping[str, Any]) -> None:
    """Stored advice is reused only if it can be shown: its text (which lays out the same view as the TUI's
    screen, `render.view`) and its JSON. A value of the wrong type (a hand-edited or damaged store) raises
    here, where `find_reusable` turns it into a note, rather than in the printer."""
    from .advice_view import format_text

    format_text(doc)
    model = doc.get("model")
    if model is not None:  # the CLI's first line (cli/advise.py)
        f"{model['name']} {model['spec']} {model['params']:,} {model['size']}"
    json.dumps(doc, allow_nan=False)
