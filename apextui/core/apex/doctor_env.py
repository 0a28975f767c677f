"""Environment probes for `apextui doctor` that need no torch: NVML (driver, GPUs, their links) and nvcc.
Never raise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from apextui.core.apex.doctor_report import GPUInfo
from apextui.core.monitor.nvml import all_gpus, driver_version
from apextui.core.monitor.topology import Topology, probe_topology


@dataclass(frozen=True)
class NvmlInfo:
    """Driver, GPUs and their links as NVML sees them; status "ok" or "n/a: <reason>"."""

    status: str
    driver: str | None
    gpus: tuple[GPUInfo, ...]
    topology: Topology


@dataclass(frozen=True)
class NvccInfo:
    """nvcc under CUDA_HOME: its release and whether it matches torch.version.cuda."""

    path: str | None
    version: str | None
    error: str
    matches_torch: bool | None


def probe_nvml() -> NvmlInfo:
    """Query NVML (nvidia-ml-py); no driver or no package gives status "n/a: ...". A GPU that does not answer
    is listed with its name "n/a (<reason>)"."""
    listed, error = all_gpus()
    if error:
        return NvmlInfo(f"n/a: {error}", None, (), Topology("n/a", 0, (), f"n/a: {error}"))
    gpus = []
    for g in listed:
        name, cap, (_, total) = g.name(), g.compute_capability(), g.memory()
        gpus.append(GPUInfo(g.index, name.value if name.ok else f"n/a ({name.reason})", cap.value,
                            round(total.value / 1024, 1) if total.ok else None))
    return NvmlInfo("ok", driver_version().value, tuple(gpus), probe_topology(listed))


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
