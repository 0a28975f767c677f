"""Roofline: this machine's ceilings, each run's achieved work against them, and a bottleneck label.

- **Ceilings** (`get_ceilings`): a large device-to-device copy (GB/s, bytes read + written) and large
  matmuls (TFLOP/s, per precision), measured here once and cached per device in a JSON file
  (`cache_file()`); `remeasure=True` measures again. On CPU: a memcpy and fp32/bf16 matmuls.
- **Work models** (`work_per_step`, pure arithmetic): the FLOPs and the fewest bytes of one step of each
  workload. The optimizer's work is its optimizer step alone (`scope="opt_step"`), compared with that
  step's time; the others' with the whole step's.
- **Achieved** (`achieved`): work / time as TFLOP/s and GB/s, and as fractions of the ceilings; the
  arithmetic intensity (FLOP/byte) against the ridge point (compute ceiling / copy ceiling).
- **Bottleneck** (`classify`, pure): "host-bound" when the GPU is busy for less than `HOST_BOUND_BELOW`
  of the step, else "memory-bound" or "compute-bound" by which roofline fraction is higher (ties and
  single-figure cases by intensity against the ridge point), with the figures that decided it.
- **GPU busy fraction**: kernel time per step from a short torch.profiler (CUPTI) window of
  `PROFILE_STEPS` extra steps run *after* the measured steps (so the measured steps are never slowed),
  over the run's median ms/step; where the profiler fails, the mean NVML utilisation over the measured
  steps. `probe_after_run` (training thread) and `analyse_run` (delivery thread) tie this to the runner.
  Workloads that replay CUDA graphs are not profiled by default (NVML instead): a profiler started after
  graphs were captured has made such graphs fail or hang on some CUDA/torch versions (pytorch#75504), and
  on others misses their kernels; `APEXTUI_PROFILE_GRAPHS=1` profiles them anyway.

Importing this module is cheap (no torch): the runner, events and front ends import it freely.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import files
from .atomic import write_atomic

CACHE_ENV = "APEXTUI_CACHE_DIR"
PROFILE_GRAPHS_ENV = "APEXTUI_PROFILE_GRAPHS"  # "1": profile CUDA-graph workloads too (see profile_skip_reason)
CACHE_FILE = "ceilings.json"
CACHE_VERSION = 1

HOST_BOUND_BELOW = 0.6  # GPU busy fraction under which a step is host-bound
PROFILE_STEPS = 10  # extra steps profiled after the run for the GPU busy fraction

ADAMW_BYTES_PER_PARAM = 7 * 4  # read p, g, m, v; write p, m, v (fp32)
# AdamW as torch writes it, per parameter: decay 1, m (lerp) 3, v 4, denominator (sqrt, /, +eps) 3, update 3
ADAMW_FLOPS_PER_PARAM = 14
NORM_BYTES_PER_ELEMENT = 5 * 4  # forward: read x, write y; backward: read x and dy, write dx (fp32)
# forward + backward per element: LayerNorm 7 + 11 (mean, centre, square, sum, scale, affine; dy*w, dw, db,
# two reductions, dx); RMSNorm 4 + 8
NORM_FLOPS_PER_ELEMENT = {"layernorm": 18, "rmsnorm": 12}
TRANSFORMER_PARAM_BYTES = 40  # AdamW 28 + gradient written 4 + weights read forward and backward 2 x 4
TRANSFORMER_ACT_PER_TOKEN_LAYER = 16  # x d_model elements a block keeps (ln1, qkv 3, attn, proj, ln2, fc1 4, gelu 4, fc2)

PRECISIONS = ("fp32", "bf16", "fp16")
AMP_PRECISION = {"none": "fp32", "bf16": "bf16", "fp16": "fp16"}


# ---- work models ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Work:
    """FLOPs and bytes of one step (a model, not a measurement); None where not modelled."""

    flops: float | None
    bytes: float | None
    scope: str = "step"  # "step": divided by the step's time; "opt_step": by the optimizer step's alone
    precision: str = "fp32"  # which matmul ceiling the FLOPs compare with
    primary: str = "bytes"  # the headline figure: "bytes" (GB/s) or "flops" (TFLOP/s)
    basis: str = ""  # the model in words

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP per byte."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "bytes": self.bytes, "scope": self.scope, "precision": self.precision,
                "primary": self.primary, "basis": self.basis}


class PerStepWork:
    """`flops_per_step` and `bytes_per_step` of an object's `work` (a workload, a run's info)."""

    work: Work | None

    @property
    def flops_per_step(self) -> float | None:
        return self.work.flops if self.work is not None else None

    @property
    def bytes_per_step(self) -> float | None:
        return self.work.bytes if self.work is not None else None


def optimizer_work(n_params: int) -> Work:
    """The AdamW step over `n_params` fp32 parameters."""
    return Work(flops=float(ADAMW_FLOPS_PER_PARAM * n_params), bytes=float(ADAMW_BYTES_PER_PARAM * n_params),
                scope="opt_step", precision="fp32", primary="bytes",
                basis=f"AdamW step: {ADAMW_BYTES_PER_PARAM} bytes and {ADAMW_FLOPS_PER_PARAM} FLOPs a parameter")


def norm_work(batch: int, seq: int, hidden: int, kind: str = "layernorm") -> Work:
    """Forward + backward of a LayerNorm/RMSNorm over (batch, seq, hidden) fp32 elements."""
    if kind not in NORM_FLOPS_PER_ELEMENT:
        raise ValueError(f"unknown norm kind {kind!r}; allowed: {', '.join(NORM_FLOPS_PER_ELEMENT)}")
    elems = batch * seq * hidden
    per = NORM_FLOPS_PER_ELEMENT[kind]
    return Work(flops=float(per * elems), bytes=float(NORM_BYTES_PER_ELEMENT * elems), scope="step",
                precision="fp32", primary="bytes",
                basis=f"{kind} fwd+bwd: {NORM_BYTES_PER_ELEMENT} bytes and {per} FLOPs an element")


def transformer_work(size: Mapping[str, int], params: int, amp: str = "none") -> Work:
    """One training step of the decoder.

    FLOPs: 6 x non-embedding parameters x tokens (matmuls forward and backward) + 12 x layers x seq x
    d_model x tokens (QK^T and AV, forward and backward). Bytes, the fewest: 40 a parameter (AdamW 28,
    gradient 4, weights read forward and backward 8), each block's 16 x d_model activations a token
    written and read back, and their gradients written and read (4 accesses, 2 bytes under fp16/bf16
    autocast, else 4), and the logits (written in the model's precision, an fp32 copy written and read,
    its gradient written: 12 + that precision's bytes a logit).
    """
    tokens = size["batch"] * size["seq"]
    d, layers, vocab, seq = size["d_model"], size["layers"], size["vocab"], size["seq"]
    embed = vocab * d + seq * d
    dense = params - embed
    attention = 12 * layers * seq * d
    flops = (6 * dense + attention) * tokens
    act = 2 if amp in ("fp16", "bf16") else 4
    nbytes = (TRANSFORMER_PARAM_BYTES * params
              + tokens * layers * TRANSFORMER_ACT_PER_TOKEN_LAYER * d * 4 * act
              + tokens * vocab * (12 + act))
    return Work(flops=float(flops), bytes=float(nbytes), scope="step", precision=AMP_PRECISION.get(amp, "fp32"),
                primary="flops", basis="6 x non-embedding params x tokens + attention 12 x layers x seq x d_model "
                "x tokens; bytes: params 40 B each, activations and logits")


def work_per_step(workload: str, variant: str, size: Mapping[str, int], params: int | None,
                  amp: str = "none") -> Work:
    """The work model of one step of a workload at a size (`params`: trainable parameters, where known)."""
    if workload == "optimizer":
        n = params if params else size["layers"] * (size["width"] ** 2 + size["width"])
        return optimizer_work(n)
    if workload == "norm":
        return norm_work(size["batch"], size["seq"], size["hidden"], "rmsnorm" if "rmsnorm" in variant else "layernorm")
    if workload == "transformer":
        if params is None:
            raise ValueError("the transformer's work model needs its parameter count")
        return transformer_work(size, params, amp)
    raise ValueError(f"unknown workload {workload!r}")


# ---- ceilings -------------------------------------------------------------------------------------
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


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_key(device: str) -> tuple[str, str]:
    """(cache key, device name): GPU name + driver + torch version; or CPU model + threads + torch version."""
    import torch

    if device == "cuda":
        from .env import pci_bus_id
        from .nvml import Nvml

        name = torch.cuda.get_device_name()
        driver = Nvml(pci_bus_id=pci_bus_id()).driver_version().value or "unknown"
        return f"cuda|{name}|driver {driver}|torch {torch.__version__}", name
    name = _cpu_model()
    return f"cpu|{name}|{torch.get_num_threads()} threads|torch {torch.__version__}", name


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
            ms = _median_ms_cuda(torch, lambda: torch.mm(a, b, out=c), warmup=5, reps=20 if prec != "fp32" else 8)
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
            ms = _median_ms_cpu(lambda: torch.mm(a, b, out=c), warmup=1, reps=5)
            tflops[prec] = 2 * n**3 / ms / 1e9
        details.update({"copy_bytes": copy_bytes, "matmul_n": n, "threads": torch.get_num_threads()})
    else:
        raise CeilingsUnavailable(f"no ceilings for device {device!r}")
    return Ceilings(key=key, device=device, name=name, copy_gb_s=2 * copy_bytes / copy_ms / 1e6,
                    matmul_tflops=tflops, measured_at=time.time(), details=details)


# ---- achieved -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Achieved:
    """A run's work over its time, and as fractions of the ceilings (None where unknown)."""

    time_ms: float
    scope: str  # "step" | "opt_step"
    tflops: float | None
    gb_s: float | None
    precision: str | None = None  # the matmul ceiling compared with
    compute_ceiling_tflops: float | None = None
    copy_ceiling_gb_s: float | None = None
    compute_fraction: float | None = None
    bandwidth_fraction: float | None = None
    intensity: float | None = None  # FLOP/byte of the work model
    ridge: float | None = None  # FLOP/byte where the two ceilings meet
    primary: str = "bytes"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def achieved(work: Work, time_ms: float, ceilings: Ceilings | None) -> Achieved:
    """`work` done in `time_ms` milliseconds, against `ceilings` (None: figures without fractions)."""
    if not time_ms > 0:
        raise ValueError(f"time_ms must be > 0, got {time_ms}")
    tflops = work.flops / time_ms / 1e9 if work.flops is not None else None
    gb_s = work.bytes / time_ms / 1e6 if work.bytes is not None else None
    peak, precision, copy, ridge = None, None, None, None
    if ceilings is not None:
        peak, precision = ceilings.compute_tflops(work.precision)
        copy = ceilings.copy_gb_s
        ridge = ceilings.ridge(work.precision)
    return Achieved(
        time_ms=time_ms, scope=work.scope, tflops=tflops, gb_s=gb_s, precision=precision,
        compute_ceiling_tflops=peak, copy_ceiling_gb_s=copy,
        compute_fraction=tflops / peak if tflops is not None and peak else None,
        bandwidth_fraction=gb_s / copy if gb_s is not None and copy else None,
        intensity=work.intensity, ridge=ridge, primary=work.primary,
    )


# ---- bottleneck -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bottleneck:
    """"host-bound" | "memory-bound" | "compute-bound" | "unknown", why, and the figures that decided it."""

    label: str
    reason: str
    figures: Mapping[str, float | str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "reason": self.reason, "figures": dict(self.figures)}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def classify(busy_fraction: float | None, achieved: Achieved | None, ceilings: Ceilings | None = None,
             host_threshold: float = HOST_BOUND_BELOW) -> Bottleneck:
    """Label a run.

    1. GPU busy fraction known and < `host_threshold`: "host-bound" (the device waits for the host).
    2. Both roofline fractions known: the higher one decides ("memory-bound" if bandwidth's, else
       "compute-bound"); on a tie, intensity against the ridge point.
    3. Otherwise intensity against the ridge point: below it "memory-bound", at or above "compute-bound".
    4. Nothing to decide with: "unknown".
    `ceilings` supplies the ridge point when `achieved` lacks it.
    """
    figures: dict[str, float | str | None] = {}
    if busy_fraction is not None:
        figures["busy_fraction"] = busy_fraction
        figures["host_threshold"] = host_threshold
        if busy_fraction < host_threshold:
            return Bottleneck("host-bound", f"the GPU is busy {_pct(busy_fraction)} of the step (under "
                              f"{_pct(host_threshold)}): it waits for the host (Python, kernel launches, "
                              "synchronisation)", figures)
    if achieved is None:
        return Bottleneck("unknown", "no work model or step time to place the run on the roofline", figures)
    comp, band = achieved.compute_fraction, achieved.bandwidth_fraction
    intensity = achieved.intensity
    ridge = achieved.ridge
    if ridge is None and ceilings is not None:
        ridge = ceilings.ridge(achieved.precision or "fp32")
    figures.update({"compute_fraction": comp, "bandwidth_fraction": band, "intensity": intensity, "ridge": ridge})
    busy = f"GPU busy {_pct(busy_fraction)}; " if busy_fraction is not None else ""
    prec = achieved.precision or "matmul"
    if comp is not None and band is not None and comp != band:
        figures["decided_by"] = "fractions"
        if band > comp:
            return Bottleneck("memory-bound", f"{busy}{_pct(band)} of the copy bandwidth against {_pct(comp)} of "
                              f"the {prec} matmul ceiling", figures)
        return Bottleneck("compute-bound", f"{busy}{_pct(comp)} of the {prec} matmul ceiling against {_pct(band)} "
                          "of the copy bandwidth", figures)
    if intensity is not None and ridge is not None:
        figures["decided_by"] = "intensity"
        if intensity < ridge:
            return Bottleneck("memory-bound", f"{busy}{intensity:.3g} FLOP/byte, under the ridge point "
                              f"{ridge:.3g} FLOP/byte", figures)
        return Bottleneck("compute-bound", f"{busy}{intensity:.3g} FLOP/byte, at or over the ridge point "
                          f"{ridge:.3g} FLOP/byte", figures)
    return Bottleneck("unknown", f"{busy}no ceilings (or work model) to compare with", figures)


# ---- GPU busy fraction ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Busy:
    """How much of a step the GPU was busy."""

    fraction: float | None
    kernel_ms: float | None = None  # GPU time per step (profiler)
    source: str | None = None  # "profiler" | "nvml"
    note: str | None = None  # why there is no figure, or a caveat

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def busy_from(kernel_ms: float | None, step_ms: float | None, nvml_util_pct: float | None = None,
              note: str | None = None) -> Busy:
    """The busy fraction: profiled kernel time over the median step (capped at 1), else NVML utilisation."""
    if kernel_ms is not None and step_ms:
        return Busy(min(1.0, kernel_ms / step_ms), kernel_ms, "profiler", note)
    if nvml_util_pct is not None:
        return Busy(min(1.0, nvml_util_pct / 100.0), None, "nvml", note)
    return Busy(None, None, None, note)


MIN_NVML_SAMPLES = 3  # fewer utilisation readings than this over the measured steps: no NVML busy figure
NVML_WINDOW_S = 1.0  # a reading averages up to the last second: count only those taken this long after the
#                      measured steps began (earlier ones also saw set-up, compiling or warm-up)


class UtilAverage:
    """Mean NVML GPU utilisation over readings taken while the measured steps ran (each counted once);
    None, with a note saying why, when there were too few of them (a short run, a slow sampler)."""

    def __init__(self, min_samples: int = MIN_NVML_SAMPLES) -> None:
        self.min_samples = min_samples
        self._since: float | None = None
        self._last_time: float | None = None
        self._sum = 0.0
        self._n = 0

    def start(self, now: float) -> None:
        """The measured steps began at `now` (the readings' clock, time.time())."""
        if self._since is None:
            self._since = now + NVML_WINDOW_S

    def add(self, reading: Any) -> None:
        value = getattr(reading, "gpu_util_pct", None)
        when = getattr(reading, "time", None)
        if value is None or when is None or when == self._last_time:
            return
        if self._since is None or when < self._since:
            return
        self._last_time = when
        self._sum += float(value)
        self._n += 1

    @property
    def mean(self) -> float | None:
        return self._sum / self._n if self._n >= self.min_samples else None

    @property
    def note(self) -> str | None:
        if self._n >= self.min_samples:
            return None
        return (f"NVML gave {self._n} utilisation reading(s) during the measured steps, fewer than "
                f"{self.min_samples}: too short a run for it (run more steps, or lower --sample-interval)")


class _NoMark:
    def mark(self) -> None:
        pass


def profile_kernel_ms(step: Callable[[], Any], steps: int = PROFILE_STEPS, warmup: int = 0) -> float:
    """GPU time per step: the summed duration of every CUDA kernel, memcpy and memset torch.profiler
    (CUPTI) records over `steps` calls of `step`, after `warmup` unprofiled calls."""
    import torch
    from torch.autograd import DeviceType

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    busy_us = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    return busy_us / 1000.0 / steps


@dataclass(frozen=True)
class Probe:
    """What the training thread measures after the run's last step."""

    kernel_ms: float | None = None
    profiled_steps: int = 0
    busy_note: str | None = None
    ceilings: Ceilings | None = None
    ceilings_note: str | None = None


def _err(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}".strip().splitlines() or [type(exc).__name__])[0][:300]


def profile_skip_reason(workload: Any, device: str, profile_steps: int = PROFILE_STEPS) -> str | None:
    """Why the GPU-busy profile window is not run for this workload, or None when it is."""
    if device != "cuda":
        return "CPU run: no GPU"
    if profile_steps <= 0:
        return "profiling switched off"
    if getattr(workload, "uses_cuda_graphs", False) and os.environ.get(PROFILE_GRAPHS_ENV) != "1":
        return (f"not profiled: the workload replays CUDA graphs captured before the profiler would start "
                f"(unsafe on some CUDA/torch versions; {PROFILE_GRAPHS_ENV}=1 profiles anyway)")
    return None


def probe_after_run(workload: Any, device: str, profile_steps: int = PROFILE_STEPS,
                    want_ceilings: bool = True) -> Probe:
    """Profile `profile_steps` more steps of `workload` (CUDA only) and fetch the ceilings; never raises."""
    kernel_ms = None
    note = profile_skip_reason(workload, device, profile_steps)
    if note is None:
        marker = _NoMark()
        try:
            kernel_ms = profile_kernel_ms(lambda: workload.step(marker), steps=profile_steps)
            if kernel_ms <= 0:
                kernel_ms, note = None, "the profiler recorded no GPU activity"
        except Exception as exc:  # noqa: BLE001 - e.g. CUPTI not permitted in this container
            note = f"profiler failed: {_err(exc)}"
    ceilings, ceilings_note = None, None
    if want_ceilings:
        try:
            ceilings = get_ceilings(device)
            ceilings_note = ceilings.note
        except Exception as exc:  # noqa: BLE001
            ceilings_note = str(exc) if isinstance(exc, CeilingsUnavailable) else _err(exc)
    return Probe(kernel_ms, profile_steps if kernel_ms is not None else 0, note, ceilings, ceilings_note)


# ---- a run's analysis -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunAnalysis:
    """Everything the roofline says about one run; `to_dict()` is what the JSON `end` summary carries."""

    work: Work | None
    ceilings: Ceilings | None
    ceilings_note: str | None
    achieved: Achieved | None
    busy: Busy
    bottleneck: Bottleneck

    def roofline_dict(self) -> dict[str, Any] | None:
        if self.work is None:
            return None
        out: dict[str, Any] = {
            "flops_per_step": self.work.flops, "bytes_per_step": self.work.bytes, "scope": self.work.scope,
            "primary": self.work.primary,
        }
        keys = ("time_ms", "tflops", "gb_s", "precision", "compute_ceiling_tflops", "copy_ceiling_gb_s",
                "compute_fraction", "bandwidth_fraction", "intensity", "ridge")
        a = self.achieved
        out.update({k: getattr(a, k) if a is not None else None for k in keys})
        c = self.ceilings
        out["ceilings"] = None if c is None else {
            "key": c.key, "name": c.name, "device": c.device, "copy_gb_s": c.copy_gb_s,
            "matmul_tflops": dict(c.matmul_tflops), "measured_at": int(c.measured_at), "cached": c.cached}
        out["note"] = self.ceilings_note
        return out


def analyse_run(info: Any, stats: Any, opt_stats: Any, probe: Probe | None,
                nvml_util_pct: float | None = None, nvml_note: str | None = None) -> RunAnalysis | None:
    """Place a finished run on the roofline: `info` a RunInfo (its `work`), `stats`/`opt_stats` the
    step and optimizer-step Stats (median), `probe` what probe_after_run found. None without a work model."""
    work = getattr(info, "work", None) if info is not None else None
    if work is None:
        return None
    probe = probe or Probe()
    step_ms = stats.median_ms if stats is not None else None
    note = probe.busy_note
    if probe.kernel_ms is None and nvml_util_pct is None and nvml_note:
        note = f"{note}; {nvml_note}" if note else nvml_note
    busy = busy_from(probe.kernel_ms, step_ms, nvml_util_pct, note)
    time_ms = (opt_stats.median_ms if opt_stats is not None else None) if work.scope == "opt_step" else step_ms
    got = achieved(work, time_ms, probe.ceilings) if time_ms else None
    return RunAnalysis(work=work, ceilings=probe.ceilings, ceilings_note=probe.ceilings_note, achieved=got,
                       busy=busy, bottleneck=classify(busy.fraction, got, probe.ceilings))


def _main(argv: list[str] | None = None) -> int:
    """`python -m apextui.core.roofline [--device cpu|cuda] [--remeasure]`: print this device's ceilings."""
    import argparse

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--device", default=None, choices=("cpu", "cuda"))
    parser.add_argument("--remeasure", action="store_true")
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        c = get_ceilings(device, remeasure=args.remeasure)
    except CeilingsUnavailable as exc:
        print(f"ceilings unavailable: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**c.to_dict(), "cached": c.cached, "note": c.note, "cache_file": str(cache_file())}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
