"""Can the Apex features a preset needs be used here? Probed in a child process, cached per environment.

`list`, headless runs and the TUI's probe ask this before an Apex preset runs on CUDA. `import apex` and its
compiled extensions can raise anything, call sys.exit, segfault or hang, so, as the doctor does, the imports
run in the doctor's child process (`doctor_child.py`) with a timeout per import: a crash or a hang becomes a
failed probe that says so, and this process never imports Apex. A child costs seconds (it imports torch), so
the answer is cached in `cache_dir()/apex-check.json` under a key of the interpreter, sys.path, the torch
version and the files of Apex and its extensions (path, size, mtime): start-up stays fast, and rebuilding
Apex, or another torch, asks again. A hang is kept for this process only (it may be the GPU's passing
state, not Apex's): the next start asks again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from .features import (
    AMP_FIX,
    BUILD_HINT,
    FEATURES,
    NOT_NVIDIA_FIX,
    REQUIRED_EXTENSIONS,
    apex_import_fix,
    apex_is_nvidia,
    classify_import_failure,
    fatal_import_problem,
    first_line,
    nvidia_apex_verdict,
)
from ..analysis import cache_dir
from ..config.needs import Availability
from ..atomic import write_atomic

TIMEOUT_ENV = "APEXTUI_APEX_CHECK_TIMEOUT"  # seconds each import may take in the child (default 60)
DEFAULT_TIMEOUT_S = 60.0
CACHE_FILE = "apex-check.json"
CACHE_FORMAT = 1
CACHE_ENTRIES = 16  # environments remembered (oldest dropped first)

_memo: dict[str, dict[str, Availability]] = {}
_lock = threading.Lock()  # the TUI's probe thread and a caller may ask at once: one child, not two


def import_timeout() -> float:
    """$APEXTUI_APEX_CHECK_TIMEOUT when it is a positive number, else 60 s."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 and value == value and value != float("inf") else DEFAULT_TIMEOUT_S


def feature_availability(name: str, cuda_available: bool = True) -> Availability:
    """Can Apex feature `name` be used here? Never raises; never imports Apex into this process."""
    return features_availability([name], cuda_available)[name]


def features_availability(names: Iterable[str], cuda_available: bool = True) -> dict[str, Availability]:
    """Check each feature in `names` (a FEATURES name); never raises. Without a usable `apex` package
    (none, or PyPI's unrelated one) no child is started."""
    names = list(names)
    out: dict[str, Availability] = {}
    for name in names:
        feature = FEATURES[name]
        if feature.removed:
            out[name] = Availability(False, f"{feature.module} was removed from NVIDIA Apex", AMP_FIX)
    todo = [n for n in names if n not in out]
    if not todo:
        return out
    nvidia, why = apex_is_nvidia()  # finds the package without running it
    if not nvidia:
        fix = NOT_NVIDIA_FIX if "not NVIDIA" in why else BUILD_HINT
        return {**out, **{n: Availability(False, why, fix) for n in todo}}
    checks = _probed()
    for name in todo:
        check = checks[name]
        if check.ok and not cuda_available:
            check = Availability(False, "Apex fused kernels need a CUDA GPU; none is available here", "")
        out[name] = check
    return out


# ---------------------------------------------------------------- cache


def _stat(path: str | None) -> list[Any]:
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None
    return [path, st.st_size, st.st_mtime_ns] if st else [path, None, None]


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__version__", None):
        return str(torch.__version__)
    try:
        return metadata.version("torch")
    except Exception:  # noqa: BLE001 - no metadata: the key still has sys.path
        return None


def cache_key() -> str:
    """What the answer depends on: the interpreter, sys.path (less the working directory), torch's version,
    and Apex's files (its __init__ and folder, and each core extension: path, size, mtime; an `apex` in the
    working directory shows here). Finds specs; imports nothing."""
    files: list[list[Any]] = []
    for name in ("apex", *REQUIRED_EXTENSIONS):
        try:
            spec = importlib.util.find_spec(name)
        except (Exception, SystemExit):  # noqa: BLE001 - a broken finder: the name without files (Ctrl-C goes on)
            spec = None
        origin = spec.origin if spec is not None else None
        files.append(_stat(origin))
        if name == "apex" and spec is not None and spec.submodule_search_locations:
            files.append(_stat(list(spec.submodule_search_locations)[0]))
    here = {"", os.getcwd()}  # `python -m apextui` puts the working directory first: any directory, same answer
    material = {"format": CACHE_FORMAT, "python": sys.executable, "sys_path": [p for p in sys.path if p not in here],
                "torch": _torch_version(), "files": files}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _cache_path() -> Path:
    # cache_dir: $APEXTUI_CACHE_DIR, else $XDG_CACHE_HOME/apextui, else ~/.cache/apextui

    return cache_dir() / CACHE_FILE


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def _cached(key: str) -> dict[str, Availability] | None:
    entry = _read_cache().get(key)
    try:
        checks = {n: Availability(bool(c["ok"]), str(c["reason"]), str(c["fix"]))
                  for n, c in entry["checks"].items()}  # type: ignore[index]
    except (TypeError, KeyError, AttributeError):
        return None
    return checks if all(n in checks for n in FEATURES) else None


def _store(key: str, checks: dict[str, Availability]) -> None:
    """Best effort: a cache that cannot be written only costs the next start a child."""
    entries = _read_cache()
    entries[key] = {"at": time.time(), "python": sys.executable,
                    "checks": {n: {"ok": c.ok, "reason": c.reason, "fix": c.fix} for n, c in checks.items()}}
    keep = sorted(entries, key=lambda k: entries[k].get("at", 0) if isinstance(entries[k], dict) else 0)
    entries = {k: entries[k] for k in keep[-CACHE_ENTRIES:]}
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=1) + "\n")
    except OSError:
        pass


def _probed() -> dict[str, Availability]:
    """Every feature's check (as if CUDA were there), from memory, the cache or a fresh child."""
    key = cache_key()
    with _lock:
        checks = _memo.get(key) or _cached(key)
        if checks is None:
            checks, hung = _probe_in_child()
            # the child's `import apex` may have written apex/__pycache__, and the folder's mtime is part of the key:
            # stored under the key as it is now, which every later start computes (before, the first answer was
            # stored under a key never seen again, and the second start probed anew)
            after = cache_key()
            if not hung:  # a hang is remembered by this process only: the next start asks again
                _store(after, checks)
            _memo[after] = checks
        _memo[key] = checks
        return checks


# ---------------------------------------------------------------- the child


def _line(res: dict) -> str:
    return first_line(res.get("error_type", "Error"), res.get("message", ""))


def _probe_in_child() -> tuple[dict[str, Availability], bool]:
    """Import torch, apex, each core extension and each feature module in the doctor's child (a timeout
    each); (a check for every feature, whether an import hung)."""
    from .doctor import DoctorError, _run_child

    features = [n for n, f in FEATURES.items() if not f.removed]
    exts = list(dict.fromkeys(e for n in features for e in FEATURES[n].extensions))
    tasks = ["import:torch", "apex", "import:apex", *(f"ext:{e}" for e in exts), *(f"feature:{n}" for n in features)]
    timeout = import_timeout()
    try:
        results = _run_child(tasks, list(sys.path), timeout, 4 * timeout + 120.0)
    except DoctorError as exc:
        why = f"the Apex check could not run: {exc}"
        return {n: Availability(False, why, "run `apextui doctor` for details") for n in FEATURES}, True
    hung = any(r.get("fatal") == "timeout" for r in results.values())
    checks = {n: _verdict(n, results) for n in features}
    removed = {n: Availability(False, f"{f.module} was removed from NVIDIA Apex", AMP_FIX)
               for n, f in FEATURES.items() if f.removed}
    return {**checks, **removed}, hung


def _verdict(name: str, results: dict[str, dict]) -> Availability:
    """One feature's check from the child's results: the first thing it needs that failed, and its fix."""
    feature = FEATURES[name]
    torch_res = results.get("import:torch", {})
    if not torch_res.get("ok"):
        if torch_res.get("fatal"):
            return Availability(False, *fatal_import_problem("torch", torch_res["fatal"], torch_res["message"]))
        return Availability(False, f"torch failed to import: {_line(torch_res)}", "reinstall torch")
    apex = results.get("apex", {})
    if not apex.get("ok") or not apex.get("found"):
        return Availability(False, "NVIDIA Apex is not installed", BUILD_HINT)
    imp = results.get("import:apex", {})
    nvidia, why = nvidia_apex_verdict(apex.get("location"), apex.get("init_source", ""), apex.get("version"),
                                      imp.get("message", ""))
    if not nvidia:
        return Availability(False, why, NOT_NVIDIA_FIX)
    if not imp.get("ok"):
        fix = apex_import_fix(imp.get("error_type", ""), imp.get("message", ""), imp.get("missing_name"),
                              imp.get("fatal"))
        if imp.get("fatal"):
            return Availability(False, fatal_import_problem("apex", imp["fatal"], imp.get("message", ""))[0], fix)
        return Availability(False, f"import apex fails: {_line(imp)}", fix)
    for ext in feature.extensions:
        res = results.get(f"ext:{ext}", {})
        if res.get("ok"):
            continue
        if res.get("fatal"):
            return Availability(False, *fatal_import_problem(ext, res["fatal"], res.get("message", "")))
        if not res.get("present", True):
            f = classify_import_failure(ext, "ModuleNotFoundError", f"No module named '{ext}'", ext)
            if feature.build_flag:  # an opt-in contrib extension: built only when asked for
                return Availability(False, f"{f.reason} (Apex builds it only with {feature.build_flag})",
                                    feature.build_fix)
        else:
            f = classify_import_failure(ext, res.get("error_type", ""), res.get("message", ""), res.get("missing_name"))
        return Availability(False, f.reason, f.fix)
    res = results.get(f"feature:{name}", {})
    if res.get("ok"):
        return Availability(True)
    if res.get("fatal"):
        reason, fix = fatal_import_problem(feature.module, res["fatal"], res.get("message", ""))
        return Availability(False, reason, fix)
    if res.get("stage") == "attr":
        return Availability(False, f"{feature.module} has no {feature.attr}", "update NVIDIA Apex")
    return Availability(False, f"import {feature.module} failed: {_line(res)}", BUILD_HINT)
