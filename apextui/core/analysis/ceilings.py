"""Ceilings: what this device can do at best (a large copy, large matmuls), measured here once and cached
per device in a JSON file (`cache_file()`); `remeasure=True` measures again."""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import files
from ..atomic import write_atomic
from ..env import machine_identity

CACHE_ENV = "APEXTUI_CACHE_DIR"
CACHE_FILE = "ceilings.json"
CACHE_VERSION = 1


@dataclass(frozen=True)
class Ceilings:
    """What this device can do at best, measured here."""

    key: str  # the cache key: device name, driver and torch version
    device: str  # "cuda" | "cpu"
    name: str  # GPU or CPU model
    copy_gb_s: float | None  # large copy, bytes read + written per second / 1e9
    matmul_tflops: Mapping[str, float] = field(default_factory=dict)  # precision -> TFLOP/s
    measured_at: float = 0.0  # unix time
    details: Mapping[str, Any] = field(default_factory=dict)  # sizes, torch version, TF32 setting
    cached: bool = False  # read from the cache file (not measured in this call); not stored
    note: str | None = None  # e.g. that an unreadable cache file was replaced; not stored

    def compute_tflops(self, precision: str) -> tuple[float | None, str | None]:
        """The matmul ceiling for `precision` and the precision it is for (fp32's where that one is missing)."""
        if precision in self.matmul_tflops:
            return self.matmul_tflops[precision], precision
        if "fp32" in self.matmul_tflops:
            return self.matmul_tflops["fp32"], "fp32"
        return None, None

    def ridge(self, precision: str) -> float | None:
        """Ridge point, FLOP per byte: below it a kernel is bound by memory, above by compute."""
        tflops, _ = self.compute_tflops(precision)
        if tflops is None or not self.copy_gb_s:
            return None
        return tflops * 1e12 / (self.copy_gb_s * 1e9)

    def to_dict(self) -> dict[str, Any]:
        """What the cache file stores (and JSON output shows)."""
        return {"key": self.key, "device": self.device, "name": self.name, "copy_gb_s": self.copy_gb_s,
                "matmul_tflops": dict(self.matmul_tflops), "measured_at": self.measured_at,
                "details": dict(self.details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], cached: bool = True) -> "Ceilings":
        """Rebuild from `to_dict()`; raises ValueError on anything malformed."""
        try:
            copy = data["copy_gb_s"]
            tflops = {str(k): float(v) for k, v in dict(data["matmul_tflops"]).items()}
            ceilings = cls(key=str(data["key"]), device=str(data["device"]), name=str(data["name"]),
                           copy_gb_s=None if copy is None else float(copy), matmul_tflops=tflops,
                           measured_at=float(data.get("measured_at", 0.0)), details=dict(data.get("details") or {}),
                           cached=cached)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed ceilings entry: {exc}") from None
        figures = [v for v in ceilings.matmul_tflops.values()] + ([copy] if copy is not None else [])
        if not figures or any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in figures):
            raise ValueError("malformed ceilings entry: figures must be positive numbers")
        return ceilings


class CeilingsUnavailable(RuntimeError):
    """The ceilings could not be measured here (the message says why)."""


def cache_dir() -> Path:
    """$APEXTUI_CACHE_DIR, else $XDG_CACHE_HOME/apextui (if absolute), else ~/.cache/apextui."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "apextui"


def cache_file() -> Path:
    return cache_dir() / CACHE_FILE


def device_key(device: str) -> tuple[str, str]:
    """(cache key, device name): the machine's identity (`env.machine_identity`): GPU name + driver + torch
    version; or CPU model + threads + torch version."""
    m = machine_identity(device)
    return m.key, m.name


def load_cache(path: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The cache file's entries (key -> dict) and a note if it was unreadable; never raises."""
    path = path or cache_file()
    try:
        text = files.read_text(path, files.DATA_LIMIT, "cache file")
    except files.UnreadableFile as exc:
        return {}, None if exc.missing else f"cache file unreadable ({exc})"
    try:
        data = json.loads(text)
        entries = data["ceilings"]
        if not isinstance(entries, dict):
            raise TypeError("'ceilings' is not an object")
    except Exception as exc:  # noqa: BLE001 - never raises: a corrupt cache is measured again
        return {}, f"cache file {path} is corrupt ({type(exc).__name__}: {files.one_line(exc)})"
    return entries, None


def save_cache(entries: Mapping[str, Any], path: Path | None = None) -> None:
    """Write the cache atomically (a temporary file renamed over it); raises OSError."""
    path = path or cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"version": CACHE_VERSION, "ceilings": dict(entries)}, indent=1, sort_keys=True))


def get_ceilings(device: str, remeasure: bool = False, path: Path | None = None, key: str | None = None,
                 measure: Callable[[str], Ceilings] | None = None) -> Ceilings:
    """This device's ceilings: from the cache file, or measured now (and cached) when missing, unreadable,
    or `remeasure`. Raises CeilingsUnavailable when they cannot be measured. `key`/`measure` are for tests."""
    path = path or cache_file()
    if key is None:
        key = device_key(device)[0]
    entries, note = load_cache(path)
    if not remeasure and key in entries:
        try:
            return Ceilings.from_dict(entries[key], cached=True)
        except ValueError as exc:
            note = f"cache entry for this device was unusable ({exc})"
    try:
        fresh = (measure or measure_ceilings)(device)
    except CeilingsUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory while measuring
        raise CeilingsUnavailable(f"measuring the ceilings failed: {type(exc).__name__}: {exc}".strip()) from exc
    fresh = Ceilings(**{**fresh.__dict__, "key": key, "cached": False, "note": note})
    entries, _ = load_cache(path)  # again: another process may have added its device meanwhile
    entries[key] = fresh.to_dict()
    try:
        save_cache(entries, path)
    except OSError as exc:
        extra = f"could not write the cache file {path} ({exc})"
        fresh = Ceilings(**{**fresh.__dict__, "note": f"{note}; {extra}" if note else extra})
    return fresh


def _median_ms_cuda(torch: Any, fn: Callable[[], Any], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def _median_ms_cpu(fn: Callable[[], Any], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def load_per_core() -> float | None:
    """The host's 1-minute load average over its cores (None where the OS has none): how busy the CPU was
    while its ceilings were measured."""
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 3)
    except (OSError, AttributeError):
        return None


def measure_ceilings(device: str) -> Ceilings:
    """Measure now. CUDA: a device-to-device copy of up to 1 GiB each way, 8192^3 matmuls in bf16, fp16 and
    fp32 (fp32 as torch is set up: TF32 off by default). CPU: a 128 MiB memcpy, 1024^3 fp32 and bf16 matmuls."""
    import torch

    key, name = device_key(device)
    tflops: dict[str, float] = {}
    details: dict[str, Any] = {"torch": torch.__version__}
    if device == "cuda":
        if not torch.cuda.is_available():
            raise CeilingsUnavailable("no CUDA device")
        free, _ = torch.cuda.mem_get_info()
        copy_bytes = min(1 << 30, max(16 << 20, free // 8)) // 4 * 4
        n = 8192 if free > 12 * 8192 * 8192 * 4 else 4096
        src = torch.randn(copy_bytes // 4, device="cuda")
        dst = torch.empty_like(src)
        copy_ms = _median_ms_cuda(torch, lambda: dst.copy_(src), warmup=10, reps=30)
        del src, dst
        for prec, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            mm = functools.partial(torch.mm, a, b, out=c)  # bound now: the loop rebinds a, b, c
            ms = _median_ms_cuda(torch, mm, warmup=5, reps=20 if prec != "fp32" else 8)
            tflops[prec] = 2 * n**3 / ms / 1e9
            del a, b, c
        torch.cuda.empty_cache()
        details.update({"copy_bytes": copy_bytes, "matmul_n": n, "torch_cuda": torch.version.cuda,
                        "fp32_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32)})
    elif device == "cpu":
        copy_bytes = 128 << 20
        n = 1024
        src = torch.ones(copy_bytes // 4)
        dst = torch.empty_like(src)
        copy_ms = _median_ms_cpu(lambda: dst.copy_(src), warmup=1, reps=5)
        del src, dst
        for prec, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
            c = torch.empty(n, n, dtype=dtype)
            ms = _median_ms_cpu(functools.partial(torch.mm, a, b, out=c), warmup=1, reps=5)
            tflops[prec] = 2 * n**3 / ms / 1e9
        details.update({"copy_bytes": copy_bytes, "matmul_n": n, "threads": torch.get_num_threads(),
                        "load_per_core": load_per_core()})  # other work lowers a CPU's ceilings (bottleneck.py)
    else:
        raise CeilingsUnavailable(f"no ceilings for device {device!r}")
    return Ceilings(key=key, device=device, name=name, copy_gb_s=2 * copy_bytes / copy_ms / 1e6,
                    matmul_tflops=tflops, measured_at=time.time(), details=details)
