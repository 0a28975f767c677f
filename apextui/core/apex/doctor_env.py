"""Environment probes for `apextui doctor` that need no torch: NVML and nvcc. Never raise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass

from apextui.core.apex.doctor_report import GPUInfo


@dataclass(frozen=True)
class NvmlInfo:
    """Driver and GPUs as NVML sees them; status "ok" or "n/a: <reason>"."""

    status: str
    driver: str | None
    gpus: tuple[GPUInfo, ...]


@dataclass(frozen=True)
class NvccInfo:
    """nvcc under CUDA_HOME: its release and whether it matches torch.version.cuda."""

    path: str | None
    version: str | None
    error: str
    matches_torch: bool | None


def _text(value: object) -> str:
    """NVML may hand back bytes; a byte that is not UTF-8 must not end the probe."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def probe_nvml() -> NvmlInfo:
    """Query NVML (nvidia-ml-py); no driver or no package gives status "n/a: ..."."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml
    except BaseException as exc:  # noqa: BLE001
        return NvmlInfo(f"n/a: nvidia-ml-py is not importable ({type(exc).__name__})", None, ())
    try:
        pynvml.nvmlInit()
    except BaseException as exc:  # noqa: BLE001
        return NvmlInfo(f"n/a: {_text(exc) or type(exc).__name__}", None, ())
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cap: str | None = f"{major}.{minor}"
            except BaseException:  # noqa: BLE001
                cap = None
            try:
                mem: float | None = round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30, 1)
            except BaseException:  # noqa: BLE001
                mem = None
            gpus.append(GPUInfo(i, _text(pynvml.nvmlDeviceGetName(handle)), cap, mem))
        return NvmlInfo("ok", driver, tuple(gpus))
    except BaseException as exc:  # noqa: BLE001
        return NvmlInfo(f"n/a: {_text(exc) or type(exc).__name__}", None, ())
    finally:
        try:
            pynvml.nvmlShutdown()
        except BaseException:  # noqa: BLE001
            pass


def find_cuda_home() -> str | None:
    """CUDA_HOME the way torch.utils.cpp_extension finds it: $CUDA_HOME, $CUDA_PATH, nvcc on PATH, /usr/local/cuda.

    Used when torch cannot say: it is not importable, or it is a CPU-only build (whose cpp_extension.CUDA_HOME
    is always None, whatever the environment holds)."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        home = os.path.dirname(os.path.dirname(nvcc)) if nvcc else "/usr/local/cuda"
        if not os.path.exists(home):
            home = None
    return home


def major_minor(version: str | None) -> str | None:
    """'12.8.1' -> '12.8'; None stays None."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def probe_nvcc(cuda_home: str | None, torch_cuda: str | None, timeout: float = 15.0) -> NvccInfo:
    """Run CUDA_HOME/bin/nvcc --version (as Apex's setup.py does) and compare with torch's CUDA."""
    if not cuda_home:
        return NvccInfo(None, None, "CUDA_HOME is not set and no nvcc was found", None)
    path = os.path.join(cuda_home, "bin", "nvcc")
    if not os.path.isfile(path):
        return NvccInfo(None, None, f"no nvcc in {cuda_home}/bin", None)
    try:
        # errors="replace": one byte that is not UTF-8 (a localised banner) must not cost the whole report
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return NvccInfo(path, None, f"nvcc --version did not finish in {timeout:g} s", None)
    except OSError as exc:
        return NvccInfo(path, None, f"nvcc cannot run: {exc}", None)
    m = re.search(r"release (\d+\.\d+)", proc.stdout + proc.stderr)
    if not m:
        out = (proc.stdout + proc.stderr).strip().splitlines()
        return NvccInfo(path, None, f"cannot parse nvcc --version: {out[-1] if out else proc.returncode}", None)
    version = m.group(1)
    torch_mm = major_minor(torch_cuda)
    return NvccInfo(path, version, "", None if torch_mm is None else torch_mm == version)


def format_cudnn(version: int | None) -> str | None:
    """torch.backends.cudnn.version() int -> 'major.minor.patch' (91002 -> 9.10.2, 8907 -> 8.9.7)."""
    if not version:
        return None
    if version >= 10000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"
