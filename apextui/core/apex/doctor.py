"""`apextui doctor`: exactly which NVIDIA Apex fused kernels work here, and why not.

`run_doctor()` returns an immutable `DoctorReport`. Every risky import (apex, its
compiled extensions, torch) and the CUDA smoke tests run in a child Python
process (`doctor_child.py`), so a module that raises anything, calls sys.exit,
segfaults or hangs is reported, and the caller's `sys.modules` is never touched.
This module imports neither torch nor apex.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any
from concurrent.futures import ThreadPoolExecutor

from apextui.core.exits import describe_exit
from apextui.core.apex.features import (
    AMP_FIX,
    BUILD_CMD,
    BUILD_HINT,
    FEATURES,
    HANG_FIX,
    NOT_NVIDIA_FIX,
    REBUILD_AGAINST_TORCH,
    REBUILD_HINT,
    OPTIONAL_EXTENSIONS,
    REQUIRED_EXTENSIONS,
    apex_import_fix,
    classify_import_failure,
    first_line,
    nvidia_apex_verdict,
)
from apextui.core.apex.doctor_child import MARK, usable
from apextui.core.apex.doctor_env import NvccInfo, NvmlInfo, find_cuda_home, format_cudnn, probe_nvcc, probe_nvml
from apextui.core.apex.doctor_report import (
    ApexInfo,
    DoctorReport,
    Environment,
    ExtensionStatus,
    FeatureStatus,
    GPUInfo,
    Problem,
    SmokeResult,
)

__all__ = ["DoctorError", "DoctorReport", "run_doctor", "smoke_skip_reason", "SMOKE_TESTS"]

CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_child.py")
SMOKE_TESTS: tuple[str, ...] = ("FusedAdam", "FusedLayerNorm", "FusedRMSNorm")  # each is a FEATURES name
TORCH_INSTALL_FIX = "install a CUDA build of torch (https://pytorch.org/get-started/locally/), then rebuild Apex"


def _smoke_needs() -> dict[str, list[str]]:
    """The probe tasks each smoke test needs to have succeeded; the child skips a blocked one."""
    return {n: ["apex", "import:apex", *(f"ext:{e}" for e in FEATURES[n].extensions), f"feature:{n}"]
            for n in SMOKE_TESTS}


def _arch_fix(capability: str | None) -> str:
    arch = capability or "<major.minor>"
    return "rebuild Apex for this GPU: pip uninstall -y apex && " + BUILD_CMD.replace(
        "APEX_CPP_EXT=1", f'TORCH_CUDA_ARCH_LIST="{arch}" APEX_CPP_EXT=1')


class DoctorError(RuntimeError):
    """The probe itself could not run (e.g. the child interpreter cannot start)."""


# ---------------------------------------------------------------- child process


def _run_child_once(tasks: list[str], cfg: dict, results: dict[str, dict], task_timeout: float,
                    deadline: float) -> None:
    """Run one child on `tasks`; record results; mark the task it died or hung on."""
    with tempfile.TemporaryFile() as errf:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", CHILD_SCRIPT, json.dumps({**cfg, "tasks": tasks})],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf,
                text=True, encoding="utf-8", errors="replace", start_new_session=True,
            )
        except OSError as exc:
            raise DoctorError(f"cannot start the probe child ({sys.executable}): {exc}") from exc
        _live.add(proc)
        try:
            _watch_child(proc, errf, tasks, results, task_timeout, deadline)
        finally:  # every way out (Ctrl-C, SIGTERM, an error here): the child and whatever it started end too
            _end_group(proc)
            _live.discard(proc)


_live: set[subprocess.Popen[str]] = set()  # probe children running now (a daemon thread's is not reaped at exit)


def end_children() -> None:
    """End every probe child still running (at exit, and before a forced exit): a probe in a daemon thread
    (the TUI's) never reaches its own `finally`, and its child, a session of its own, gets no hang-up."""
    for proc in list(_live):
        _end_group(proc)


atexit.register(end_children)


def _end_group(proc: subprocess.Popen[str]) -> None:
    """Kill the child's process group (it is a session of its own: `start_new_session`) and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _watch_child(proc: subprocess.Popen[str], errf: Any, tasks: list[str], results: dict[str, dict],
                 task_timeout: float, deadline: float) -> None:
    """Read the child's events until it ends, hangs past its limit or dies; record what it did."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    current: str | None = None
    hello = False
    outcome = ""
    while True:
        limit = max(task_timeout, 120.0) if current in ("torch", "import:torch", None) else task_timeout
        wait = min(limit, deadline - time.monotonic())
        try:
            line = lines.get(timeout=max(wait, 0.01))
        except queue.Empty:
            outcome = f"timeout: did not finish within {min(limit, max(wait, 0)):.3g} s"
            proc.kill()
            break
        if line is None:
            break
        if not line.startswith(MARK):
            continue
        try:
            event = json.loads(line[len(MARK):])
        except ValueError:
            continue
        if event["ev"] == "hello":
            hello = True
        elif event["ev"] == "start":
            current = event["task"]
        elif event["ev"] == "done":
            results[event["task"]] = event["result"]
            current = None
        elif event["ev"] == "end":
            break
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    if not hello and not outcome:
        errf.seek(0)
        tail = errf.read().decode(errors="replace").strip().splitlines()[-3:]
        raise DoctorError(f"the probe child exited with {code} before starting: {' | '.join(tail)}")
    pending = [t for t in tasks if t not in results]
    if not pending:
        return
    victim = current or pending[0]
    if not outcome:
        errf.seek(0)
        tail = errf.read().decode(errors="replace").strip().splitlines()
        last = tail[-1][:300] if tail else ""
        outcome = "crashed: " + describe_exit(code, "the interpreter")
        if last:
            outcome += f" ({last})"
    kind, _, message = outcome.partition(": ")
    results[victim] = {"ok": False, "error_type": kind, "message": message, "missing_name": None,
                           "fatal": kind}


def _run_child(tasks: list[str], sys_path: list[str], task_timeout: float, total_timeout: float
               ) -> dict[str, dict]:
    """Run `tasks` (see doctor_child._run_task) in children, a fresh one after each crash or hang, within
    `total_timeout`; each task's result. Also used by `check` for the presets' Apex check."""
    features = {name: [f.module, f.attr] for name, f in FEATURES.items()}
    cfg: dict = {"sys_path": sys_path, "features": features, "smoke_needs": _smoke_needs()}
    results: dict[str, dict] = {}
    deadline = time.monotonic() + total_timeout
    for _ in range(len(tasks) + 1):
        pending = [t for t in tasks if t not in results]
        if not pending:
            break
        if time.monotonic() >= deadline:
            for t in pending:
                results[t] = {"ok": False, "error_type": "timeout", "fatal": "timeout",
                                  "message": f"not run: the probe's {total_timeout:g} s budget was spent",
                                  "missing_name": None}
            break
        apex_import = results.get("import:apex", {})
        if apex_import.get("fatal"):  # every feature/smoke import would repeat the crash
            for t in pending:
                if t.startswith(("feature:", "smoke:")):
                    how = "hung" if apex_import["fatal"] == "timeout" else apex_import["fatal"]
                    results[t] = {**apex_import, "message": "not run: import apex " + how}
            pending = [t for t in pending if t not in results]
            if not pending:
                break
        torch_res = results.get("torch") or results.get("import:torch")
        cfg["preload_torch"] = bool(torch_res and torch_res.get("ok"))
        cfg["failed"] = [t for t, r in results.items() if not usable(r)]
        _run_child_once(pending, cfg, results, task_timeout, deadline)
    return results


# ---------------------------------------------------------------- classification


def _err_line(res: dict) -> str:
    return first_line(res.get("error_type", "Error"), res.get("message", ""))


def _extension(name: str, required: bool, res: dict) -> ExtensionStatus | None:
    if res.get("ok"):
        return ExtensionStatus(name, required, "ok", "", "", "", res.get("origin"), "", "")
    if not res.get("present", True) and "fatal" not in res:
        if not required:
            return None
        f = classify_import_failure(name, "ModuleNotFoundError", f"No module named '{name}'", name)
        return ExtensionStatus(name, True, "missing", "missing", "", "", None, f.reason, f.fix)
    line = _err_line(res)
    fatal = res.get("fatal")
    if fatal == "crashed":
        reason = f"importing {name} crashed the interpreter ({res.get('message', '')})"
        fix = REBUILD_AGAINST_TORCH
        return ExtensionStatus(name, required, "broken", "crashed", "crashed", res.get("message", ""),
                               res.get("origin"), reason, fix)
    if fatal == "timeout":
        reason = f"importing {name} hung ({res.get('message', '')})"
        fix = HANG_FIX
        return ExtensionStatus(name, required, "broken", "timeout", "timeout", res.get("message", ""),
                               res.get("origin"), reason, fix)
    f = classify_import_failure(name, res.get("error_type", ""), res.get("message", ""), res.get("missing_name"))
    status = "missing" if f.kind == "missing" else "broken"
    message = line.partition(": ")[2] if ": " in line else ""
    return ExtensionStatus(name, required, status, f.kind, res.get("error_type", ""), message,
                           res.get("origin"), f.reason, f.fix)


def _environment(torch_res: dict, nvml: NvmlInfo, nvcc: NvccInfo, cuda_home: str | None) -> Environment:
    ok = bool(torch_res.get("ok"))
    gpus = tuple(GPUInfo(g["index"], g["name"], g.get("capability"), g.get("memory_gib"))
                 for g in torch_res.get("gpus", [])) if ok else ()
    if not gpus:
        gpus = nvml.gpus
    tf32 = torch_res.get("tf32") if ok else None
    if tf32 is None and gpus and all(g.capability for g in gpus):
        tf32 = all(int(str(g.capability).split(".")[0]) >= 8 for g in gpus)
    return Environment(
        python=platform.python_version(),
        python_executable=sys.executable,
        platform=platform.platform(terse=True),
        torch=torch_res.get("version") if ok else None,
        torch_error="" if ok else _err_line(torch_res),
        torch_cuda=torch_res.get("cuda") if ok else None,
        cudnn=format_cudnn(torch_res.get("cudnn")) if ok else None,
        cuda_available=bool(torch_res.get("cuda_available")) if ok else False,
        cuda_error=torch_res.get("cuda_error", "") if ok else "",
        gpus=gpus,
        driver=nvml.driver,
        nvml=nvml.status,
        cuda_home=cuda_home,
        nvcc_path=nvcc.path,
        nvcc_version=nvcc.version,
        nvcc_error=nvcc.error,
        nvcc_matches_torch=nvcc.matches_torch,
        tf32_supported=tf32,
        bf16_supported=torch_res.get("bf16") if ok else None,
        nccl=torch_res.get("nccl") if ok else None,
        nccl_error=torch_res.get("nccl_error", "") if ok else "torch cannot be imported",
        topology=nvml.topology,
    )


def _apex(res: dict, imp: dict, required: list[ExtensionStatus]) -> ApexInfo:
    if not res.get("ok"):
        line = _err_line(res)
        return ApexInfo("not_installed", None, None, None, None, "", "", f"looking for apex failed: {line}",
                        BUILD_HINT)
    if not res.get("found"):
        return ApexInfo("not_installed", None, None, None, None, "", "", "NVIDIA Apex is not installed",
                        BUILD_HINT)
    location = res.get("location")
    version = res.get("version") or imp.get("module_version") or None
    dist = res.get("distribution")
    import_error, import_fix = "", ""
    if not imp.get("ok"):
        import_error = _err_line(imp)
        import_fix = apex_import_fix(imp.get("error_type", ""), imp.get("message", ""), imp.get("missing_name"),
                                     imp.get("fatal"))
    nvidia, why = nvidia_apex_verdict(location, res.get("init_source", ""), version, imp.get("message", ""))
    common = (location, dist, version, bool(imp.get("ok")), import_error, import_fix)
    if not nvidia:
        detail = why + (f"; import apex fails: {import_error}" if import_error else "")
        return ApexInfo("not_nvidia", *common, detail, NOT_NVIDIA_FIX)
    ok = [e.name for e in required if e.status == "ok"]
    missing = [e.name for e in required if e.status == "missing"]
    if import_error:  # whatever was built, nothing of Apex can be used
        built = ("none of its compiled extensions exist" if len(missing) == len(required) else
                 f"{len(ok)}/{len(required)} core compiled extensions import")
        return ApexInfo("import_fails", *common, f"import apex fails ({import_error}); {built}", import_fix)
    if len(ok) == len(required):
        return ApexInfo("complete", *common, "all core compiled extensions import", "")
    if len(missing) == len(required):
        return ApexInfo(
            "python_only", *common,
            "Python-only install: none of Apex's compiled extensions exist (the C++/CUDA build "
            "was skipped or failed silently; pip -v shows why)",
            REBUILD_HINT,
        )
    bad = [e.name for e in required if e.status != "ok"]
    return ApexInfo("partial", *common, f"partly built: {len(ok)}/{len(required)} core extensions import; "
                    f"not: {', '.join(bad)}", REBUILD_HINT)


def smoke_skip_reason(name: str, env: Environment, apex: ApexInfo, exts: dict[str, ExtensionStatus],
                      feature_res: dict) -> tuple[str, str]:
    """Why smoke test `name` cannot run here, and the fix: ("", "") when it can.

    A smoke test runs only when torch sees a CUDA GPU and the NVIDIA Apex feature it
    exercises imports with its compiled extension; otherwise it is skipped with this
    reason (the cause is reported once, as an Apex/extension/torch problem), so a FAIL
    always means the kernel ran and was wrong or raised.
    """
    if env.torch is None:
        return f"torch cannot be imported ({env.torch_error})", TORCH_INSTALL_FIX
    if not env.cuda_available:
        why = "torch is a CPU-only build" if not env.torch_cuda else "torch sees no CUDA GPU"
        return f"needs a CUDA GPU: {why}", ("" if not env.torch_cuda else
                                            "check nvidia-smi, the NVIDIA driver and CUDA_VISIBLE_DEVICES")
    if apex.status == "not_installed":
        return apex.detail or "NVIDIA Apex is not installed", apex.fix
    if apex.status == "not_nvidia":
        return "the installed 'apex' is not NVIDIA's Apex", apex.fix
    if apex.import_error:
        return f"import apex fails ({apex.import_error})", apex.import_fix
    f = FEATURES[name]
    for ext in f.extensions:
        e = exts.get(ext)
        if e is None:
            return f"{ext} missing", REBUILD_HINT
        if e.status != "ok":
            return f"{ext} {e.status}" + (f" ({e.kind})" if e.kind and e.kind != "missing" else ""), e.fix
    if not usable(feature_res):
        return f"{f.module}.{f.attr} is unusable ({_err_line(feature_res)})", REBUILD_HINT
    return "", ""


def _smoke(name: str, res: dict | None, smoke_enabled: bool, capability: str | None,
           skip: tuple[str, str] = ("", "")) -> SmokeResult:
    if not smoke_enabled:
        return SmokeResult(name, True, None, None, None, None, "smoke tests disabled", "")
    if skip[0]:
        return SmokeResult(name, True, None, None, None, None, skip[0], skip[1])
    if res is None:
        return SmokeResult(name, True, None, None, None, None, "not run", "")
    if res.get("skipped"):
        return SmokeResult(name, True, None, None, None, None, res.get("reason", ""), "")
    if not res.get("ok"):
        line = _err_line(res)
        msg = res.get("message", "")
        if "no kernel image" in msg:
            fix = _arch_fix(capability)
        elif "requires cuda extensions" in msg or res.get("error_type") == "ModuleNotFoundError":
            fix = REBUILD_HINT
        else:
            fix = REBUILD_AGAINST_TORCH
        return SmokeResult(name, False, False, None, None, res.get("seconds"), f"error: {line}", fix)
    passed = bool(res.get("passed"))
    err, tol = res.get("max_abs_err"), res.get("tolerance")
    if passed:
        return SmokeResult(name, False, True, err, tol, res.get("seconds"), "", "")
    reason = f"differs from torch: max abs error {err:.3g} > {tol:g}" if err is not None else "non-finite output"
    return SmokeResult(name, False, False, err, tol, res.get("seconds"), reason, REBUILD_AGAINST_TORCH)


def _feature(name: str, res: dict, apex: ApexInfo, exts: dict[str, ExtensionStatus], env: Environment,
             smoke: dict[str, SmokeResult]) -> tuple[FeatureStatus, bool]:
    """The feature's status, and whether its failure is a new problem (not already reported)."""
    f = FEATURES[name]

    def status(ok: bool, reason: str = "", fix: str = "", new: bool = False) -> tuple[FeatureStatus, bool]:
        return FeatureStatus(name, f.module, f.attr, f.extensions, f.removed, ok, reason, fix), new

    if f.removed:
        if res.get("ok") and apex.status not in ("not_installed", "not_nvidia"):
            return status(True, f"{f.module} is deprecated and removed from current NVIDIA Apex", AMP_FIX)
        return status(False, f"{f.module} was removed from NVIDIA Apex", AMP_FIX)
    if apex.status in ("not_installed", "not_nvidia"):
        return status(False, apex.detail, apex.fix)
    for ext in f.extensions:
        e = exts.get(ext)
        if e is None and f.build_flag:  # an opt-in extension that was not built: a choice, not a problem
            return status(False, f"{ext} is not built (Apex builds it only with {f.build_flag})", f.build_fix)
        if e is not None and e.status != "ok":
            return status(False, f"needs {ext}: {e.reason}", e.fix)
    if not res.get("ok"):
        line = _err_line(res)
        if res.get("stage") == "attr":
            fix = "update NVIDIA Apex: pip uninstall -y apex && " + BUILD_CMD
            return status(False, line.partition(": ")[2], fix, True)
        fail = classify_import_failure(f.module, res.get("error_type", ""), res.get("message", ""),
                                       res.get("missing_name"))
        return status(False, f"import {f.module} failed: {line}", fail.fix, not apex.import_error)
    if not env.cuda_available:
        return status(False, "needs a CUDA GPU; torch sees none", "run on a machine with an NVIDIA GPU")
    s = smoke.get(name)
    if s is not None and not s.skipped and not s.passed:
        return status(False, f"smoke test failed: {s.reason}", s.fix)
    return status(True)


def _problems(env: Environment, apex: ApexInfo, exts: list[ExtensionStatus],
              features: list[tuple[FeatureStatus, bool]], smoke: list[SmokeResult]) -> tuple[Problem, ...]:
    out: list[Problem] = []
    if env.torch is None:
        out.append(Problem(f"torch cannot be imported ({env.torch_error})", TORCH_INSTALL_FIX))
    elif not env.torch_cuda:
        out.append(Problem(f"torch {env.torch} is a CPU-only build; Apex's fused kernels need CUDA",
                           TORCH_INSTALL_FIX))
    elif not env.cuda_available:
        extra = f" ({env.cuda_error})" if env.cuda_error else ""
        out.append(Problem(f"torch cannot see a CUDA GPU{extra}",
                           "check nvidia-smi, the NVIDIA driver and CUDA_VISIBLE_DEVICES"))
    if apex.status != "complete":
        if env.nvcc_matches_torch is False:
            out.append(Problem(
                f"nvcc is CUDA {env.nvcc_version} (CUDA_HOME={env.cuda_home}) but torch was built with CUDA "
                f"{env.torch_cuda}; Apex's setup.py refuses to build its extensions",
                f"install CUDA toolkit {env.torch_cuda} and point CUDA_HOME at it (or install a torch built for "
                f"CUDA {env.nvcc_version}), then rebuild Apex"))
        elif env.nvcc_version is None and env.torch_cuda:
            out.append(Problem(
                f"no usable nvcc ({env.nvcc_error}): Apex's CUDA extensions cannot be built here",
                f"install the CUDA {env.torch_cuda} toolkit (e.g. a -devel image) and set CUDA_HOME"))
    if apex.status in ("not_installed", "not_nvidia", "python_only"):
        out.append(Problem(apex.detail if apex.status != "not_installed" else "NVIDIA Apex is not installed",
                           apex.fix))
    elif apex.import_error:
        out.append(Problem(f"import apex fails: {apex.import_error}", apex.import_fix))
    if apex.status in ("import_fails", "partial", "complete"):
        missing = [e.name for e in exts if e.status == "missing"]
        if missing:
            out.append(Problem(f"compiled extensions missing: {', '.join(missing)}",
                               REBUILD_HINT))
    for e in exts:
        if e.status == "broken":
            out.append(Problem(e.reason, e.fix))
    for feat, new in features:
        if new:
            out.append(Problem(f"{feat.name}: {feat.reason}", feat.fix))
    for s in smoke:
        if not s.skipped and not s.passed:
            out.append(Problem(f"{s.name} smoke test: {s.reason}", s.fix))
    seen: set[str] = set()
    return tuple(p for p in out if not (p.what in seen or seen.add(p.what)))  # type: ignore[func-returns-value]


# ---------------------------------------------------------------- entry point


def run_doctor(*, extra_sys_path: Sequence[str | os.PathLike[str]] = (),
               sys_path: Sequence[str | os.PathLike[str]] | None = None, smoke: bool = True,
               task_timeout: float = 60.0, total_timeout: float = 240.0) -> DoctorReport:
    """Probe this environment and return the report. Never raises for anything it finds.

    The child searches `extra_sys_path` first, then `sys_path` (default: this process's
    sys.path). `task_timeout` bounds each import or smoke test (importing torch gets at
    least 120 s). Raises DoctorError only if the probe itself cannot run.
    """
    start = time.perf_counter()
    base = list(sys.path) if sys_path is None else [os.fspath(p) for p in sys_path]
    search_path = [os.path.abspath(os.fspath(p)) for p in extra_sys_path] + base
    required = list(REQUIRED_EXTENSIONS)
    tasks = (["torch", "apex", "import:apex"] + [f"ext:{n}" for n in required + list(OPTIONAL_EXTENSIONS)]
             + [f"feature:{n}" for n in FEATURES] + ([f"smoke:{n}" for n in SMOKE_TESTS] if smoke else []))
    with ThreadPoolExecutor(max_workers=1) as pool:
        nvml_future = pool.submit(probe_nvml)
        results = _run_child(tasks, search_path, task_timeout, total_timeout)
        nvml = nvml_future.result()
    torch_res = results.get("torch", {})
    # A CPU-only torch's cpp_extension.CUDA_HOME is None whatever the environment says: look for ourselves.
    cuda_home = (torch_res.get("cuda_home") if torch_res.get("ok") else None) or find_cuda_home()
    nvcc = probe_nvcc(cuda_home, torch_res.get("cuda") if torch_res.get("ok") else None)
    env = _environment(torch_res, nvml, nvcc, cuda_home)

    exts = [e for n in required + list(OPTIONAL_EXTENSIONS)
            if (e := _extension(n, n in required, results.get(f"ext:{n}", {}))) is not None]
    apex = _apex(results.get("apex", {}), results.get("import:apex", {}), [e for e in exts if e.required])
    cap = env.gpus[0].capability if env.gpus else None
    by_name = {e.name: e for e in exts}
    smoke_results = [_smoke(n, results.get(f"smoke:{n}"), smoke, cap,
                            smoke_skip_reason(n, env, apex, by_name, results.get(f"feature:{n}", {})))
                     for n in SMOKE_TESTS]
    smoke_by_name = {s.name: s for s in smoke_results}
    features = [_feature(n, results.get(f"feature:{n}", {}), apex, by_name, env, smoke_by_name) for n in FEATURES]
    problems = _problems(env, apex, exts, features, smoke_results)
    return DoctorReport(
        environment=env, apex=apex, extensions=tuple(exts), features=tuple(f for f, _ in features),
        smoke=tuple(smoke_results), problems=problems, isolation="subprocess",
        seconds=round(time.perf_counter() - start, 3),
    )
