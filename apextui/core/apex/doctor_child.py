"""Child process of `apextui doctor`: does every risky import and the CUDA smoke tests.

Run as a script (``python -I doctor_child.py CONFIG_JSON``); stdlib only, so the
parent can import MARK from it without side effects. It sets ``sys.path`` from the config, moves fd 1 to stderr (so
prints from imported modules cannot corrupt the protocol), then for each task
writes a ``start`` and a ``done`` line (prefix MARK + JSON) on the saved stdout.
If an import segfaults or hangs, the parent sees which task was running and
restarts a child for the rest.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
from importlib.machinery import ModuleSpec
from types import ModuleType

MARK = "@@apextui-doctor@@ "


def usable(result: dict) -> bool:
    """Did a probe task succeed (for "apex": was a package found)?"""
    return bool(result.get("ok")) and result.get("found", True) is not False


def smoke_blocker(name: str, cfg: dict, failed: set[str] | frozenset[str]) -> str:
    """The first prerequisite task of smoke test `name` that failed ("" when none did).

    cfg["smoke_needs"][name] lists the tasks a smoke test needs (apex found and importable,
    its compiled extension, its feature); `failed` holds the tasks that failed so far, in
    this child or (cfg["failed"]) in an earlier one. A blocked smoke test is not run.
    """
    return next((t for t in cfg.get("smoke_needs", {}).get(name, []) if t in failed), "")


def _error(exc: BaseException) -> dict:
    message = str(exc)
    if isinstance(exc, SystemExit):
        message = f"SystemExit({exc.code!r})" if not message else message
    return {
        "ok": False,
        "error_type": type(exc).__name__,
        "message": message[:2000],
        "missing_name": getattr(exc, "name", None) if isinstance(exc, ImportError) else None,
    }


def _task_torch(cfg: dict) -> dict:
    import torch

    info: dict = {
        "ok": True,
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None,
        "cuda_available": False,
        "gpus": [],
        "bf16": None,
        "tf32": None,
        "cuda_error": "",
    }
    try:
        if torch.backends.cudnn.is_available():
            info["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:  # noqa: BLE001
        info["cudnn_error"] = _error(exc)["message"]
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                info["gpus"].append({
                    "index": i, "name": p.name, "capability": f"{p.major}.{p.minor}",
                    "memory_gib": round(p.total_memory / 2**30, 1),
                })
            info["tf32"] = all(int(g["capability"].split(".")[0]) >= 8 for g in info["gpus"])
            info["bf16"] = bool(torch.cuda.is_bf16_supported())
    except Exception as exc:  # noqa: BLE001
        err = _error(exc)
        info["cuda_error"] = f"{err['error_type']}: {err['message'].splitlines()[0] if err['message'] else ''}"
    info["nccl"], info["nccl_error"] = _nccl(torch)
    try:
        from torch.utils import cpp_extension

        info["cuda_home"] = cpp_extension.CUDA_HOME
    except BaseException as exc:  # noqa: BLE001
        info["cuda_home"] = None
        info["cuda_home_error"] = _error(exc)["message"]
    return info


def _nccl(torch: ModuleType) -> tuple[str | None, str]:
    """The NCCL torch was built with, "2.27.5" (torch.cuda.nccl.version(): a tuple, an int code in old torch),
    and "" ; or None and why not. Asks the library only: no GPU needed."""
    if not torch.version.cuda:
        return None, "torch is a CPU-only build"
    try:
        version = torch.cuda.nccl.version()
    except BaseException as exc:  # noqa: BLE001
        err = _error(exc)
        first = err["message"].splitlines()[0] if err["message"] else ""
        return None, f"torch has no NCCL ({err['error_type']}: {first})"
    if isinstance(version, int):  # 2708 (before NCCL 2.9) or 21903
        version = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
        version = (version[0], version[1] // 100, version[1] % 100)
    parts = [str(p) for p in version]
    return ".".join(parts[:3]) + (f"-{parts[3]}" if len(parts) > 3 and parts[3] else ""), ""


def _apex_distribution() -> dict:
    from importlib import metadata

    names: list[str] = []
    try:
        names = list(dict.fromkeys(metadata.packages_distributions().get("apex", [])))
    except Exception:  # noqa: BLE001
        pass
    for candidate in names + ["apex", "nvidia-apex"]:
        try:
            dist = metadata.distribution(candidate)
        except Exception:  # noqa: BLE001
            continue
        return {
            # an email.message.Message at run time; typeshed's PackageMetadata protocol lacks its .get
            "distribution": dist.metadata.get("Name") or candidate,  # type: ignore[attr-defined]
            "version": dist.version,
            "summary": dist.metadata.get("Summary") or "",  # type: ignore[attr-defined]
        }
    return {}


def locate_apex(spec: ModuleSpec) -> tuple[str | None, str]:
    """Where a found `apex` lives and the start of its __init__ source (to tell NVIDIA's from others)."""
    locations = list(spec.submodule_search_locations or [])
    location = locations[0] if locations else spec.origin
    source = ""
    if spec.origin and spec.origin.endswith(".py"):
        try:
            with open(spec.origin, encoding="utf-8", errors="replace") as fh:
                source = fh.read(20000)
        except OSError:
            pass
    return location, source


def _task_apex(cfg: dict) -> dict:
    spec = importlib.util.find_spec("apex")
    if spec is None:
        return {"ok": True, "found": False}
    location, source = locate_apex(spec)
    return {"ok": True, "found": True, "location": location, "init_source": source, **_apex_distribution()}


def _task_import(module: str) -> dict:
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:  # noqa: BLE001
        return _error(exc)
    return {"ok": True, "module_version": str(getattr(mod, "__version__", "") or "")}


def _task_ext(name: str) -> dict:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return {"ok": False, "present": False}
    origin = spec.origin
    try:
        importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001
        return {**_error(exc), "present": True, "origin": origin}
    return {"ok": True, "present": True, "origin": origin}


def _task_feature(module: str, attr: str | None) -> dict:
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:  # noqa: BLE001
        return {**_error(exc), "stage": "import"}
    if attr and not hasattr(mod, attr):
        return {"ok": False, "stage": "attr", "error_type": "AttributeError",
                "message": f"{module} has no attribute {attr}", "missing_name": None}
    return {"ok": True}


def _smoke_fused_adam(torch: ModuleType, device: str = "cuda") -> tuple[float, float]:
    """Two FusedAdam (AdamW mode) steps vs torch.optim.AdamW; returns (max abs error, tolerance)."""
    from apex.optimizers import FusedAdam

    torch.manual_seed(0)
    shapes = [(64, 32), (32,), (7, 5)]
    ref = [torch.randn(s, device=device) for s in shapes]
    mine = [p.clone() for p in ref]
    for p in ref + mine:
        p.requires_grad_(True)
    kw = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    opt_ref = torch.optim.AdamW(ref, foreach=False, **kw)
    opt = FusedAdam(mine, adam_w_mode=True, **kw)
    for _ in range(2):
        grads = [torch.randn(s, device=device) for s in shapes]
        for p, q, g in zip(ref, mine, grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        opt_ref.step()
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return max(float((p - q).abs().max()) for p, q in zip(ref, mine, strict=True)), 1e-5


def _smoke_norm(torch: ModuleType, rms: bool, device: str = "cuda") -> tuple[float, float]:
    """FusedLayerNorm/FusedRMSNorm forward+backward vs torch; returns (max abs error, tolerance)."""
    from apex.normalization import FusedLayerNorm, FusedRMSNorm

    torch.manual_seed(0)
    hidden = 256
    x = torch.randn(16, hidden, device=device)
    weight = torch.randn(hidden, device=device)
    bias = torch.randn(hidden, device=device)
    dy = torch.randn(16, hidden, device=device)
    mod = (FusedRMSNorm(hidden, eps=1e-5) if rms else FusedLayerNorm(hidden, eps=1e-5)).to(device)
    with torch.no_grad():
        mod.weight.copy_(weight)
        if not rms:
            mod.bias.copy_(bias)
    x1 = x.clone().requires_grad_(True)
    y1 = mod(x1)
    y1.backward(dy)
    x2 = x.clone().requires_grad_(True)
    w2 = weight.clone().requires_grad_(True)
    b2 = bias.clone().requires_grad_(True)
    if rms:
        y2 = x2 * torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + 1e-5) * w2
    else:
        y2 = torch.nn.functional.layer_norm(x2, (hidden,), w2, b2, 1e-5)
    y2.backward(dy)
    if device == "cuda":
        torch.cuda.synchronize()
    pairs = [(y1, y2), (x1.grad, x2.grad), (mod.weight.grad, w2.grad)]
    if not rms:
        pairs.append((mod.bias.grad, b2.grad))
    return max(float((a - b).abs().max()) for a, b in pairs), 1e-3


SMOKE = {
    "FusedAdam": lambda torch: _smoke_fused_adam(torch),
    "FusedLayerNorm": lambda torch: _smoke_norm(torch, rms=False),
    "FusedRMSNorm": lambda torch: _smoke_norm(torch, rms=True),
}


def _task_smoke(name: str, cfg: dict, failed: set[str]) -> dict:
    blocker = smoke_blocker(name, cfg, failed)
    if blocker:
        return {"ok": True, "skipped": True, "reason": f"not run: {blocker} failed", "blocked_by": blocker}
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001
        return {"ok": True, "skipped": True, "reason": f"torch cannot be imported ({_error(exc)['error_type']})"}
    if not torch.cuda.is_available():
        why = "torch is a CPU-only build" if not torch.version.cuda else "torch sees no CUDA GPU"
        return {"ok": True, "skipped": True, "reason": f"needs a CUDA GPU: {why}"}
    try:  # create the CUDA context first: its one-off cost is not the smoke test's
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001
        return {**_error(exc), "skipped": False, "seconds": 0.0}
    start = time.perf_counter()
    try:
        err, tol = SMOKE[name](torch)
    except BaseException as exc:  # noqa: BLE001
        return {**_error(exc), "skipped": False, "seconds": time.perf_counter() - start}
    finite = err == err and err != float("inf")
    return {"ok": True, "skipped": False, "passed": bool(finite and err <= tol),
            "max_abs_err": err if finite else None, "tolerance": tol,
            "seconds": time.perf_counter() - start}


def _run_task(task: str, cfg: dict, failed: set[str]) -> dict:
    kind, _, name = task.partition(":")
    if kind == "torch":
        return _task_torch(cfg)
    if kind == "apex":
        return _task_apex(cfg)
    if kind == "import":
        return _task_import(name)
    if kind == "ext":
        return _task_ext(name)
    if kind == "feature":
        module, attr = cfg["features"][name]
        return _task_feature(module, attr)
    if kind == "smoke":
        return _task_smoke(name, cfg, failed)
    raise ValueError(f"unknown task {task}")


def main() -> None:
    cfg = json.loads(sys.argv[1])
    sys.path[:] = cfg["sys_path"]
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(**event: object) -> None:
        proto.write(MARK + json.dumps(event, default=str) + "\n")
        proto.flush()

    emit(ev="hello", pid=os.getpid())
    if cfg.get("preload_torch"):
        try:
            import torch  # noqa: F401  - extensions need libtorch loaded first
        except BaseException:  # noqa: BLE001
            pass
    failed = set(cfg.get("failed", []))
    for task in cfg["tasks"]:
        emit(ev="start", task=task)
        try:
            result = _run_task(task, cfg, failed)
        except BaseException as exc:  # noqa: BLE001
            result = _error(exc)
        if not usable(result):
            failed.add(task)
        emit(ev="done", task=task, result=result)
    emit(ev="end")
    # Skip interpreter teardown: atexit hooks of broken modules can neither hang nor crash us.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
