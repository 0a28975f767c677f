"""Which device to run on, a short description of the environment for reports, and the machine's identity
(`machine_identity`) under which measurements are cached."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from .errors import NotHere

DEVICE_CHOICES = ("auto", "cpu", "cuda")


class DeviceUnavailable(NotHere, RuntimeError):
    """The requested device cannot be used here."""


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda' when a GPU is usable, else 'cpu'; 'cuda' without a GPU raises."""
    if requested not in DEVICE_CHOICES:
        raise ValueError(f"device must be one of {', '.join(DEVICE_CHOICES)}, got {requested!r}")
    if requested == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if requested == "cuda":
        why = "torch was built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise DeviceUnavailable(f"--device cuda was asked for but {why} (torch {torch.__version__})")
    return "cpu"


def apex_version() -> str | None:
    """Version of the installed distribution named 'apex', if any."""
    try:
        return metadata.version("apex")
    except metadata.PackageNotFoundError:
        return None


def describe(device: str) -> dict[str, Any]:
    """A flat summary of this machine for the JSON 'start' event."""
    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": sys.platform,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "gpu": None,
        "compute_capability": None,
        "apex": apex_version(),
        "cpu_threads": torch.get_num_threads(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env["gpu"] = props.name
        env["compute_capability"] = f"{props.major}.{props.minor}"
        env["gpu_memory_mb"] = round(props.total_memory / 2**20)
    return env


def gpu_count() -> int:
    """CUDA devices torch sees (0 without CUDA or torch)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


def pci_bus_id(index: int | None = None) -> str | None:
    """PCI bus id of CUDA device `index` (default: the current one), so NVML samples the same GPU (a
    data-parallel run's rank 0 names its other local ranks' GPUs to the sampler this way)."""
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
        # torch's stubs lack the PCI fields its device properties have had since 2.1
        return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return None


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one): part of a CPU machine's identity."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@dataclass(frozen=True)
class MachineIdentity:
    """Which machine a measurement belongs to, so a cached one is reused only where it was made: the GPU
    and its driver, or the CPU model and torch's threads; and torch. The roofline's ceilings are cached
    under `key`; stored advice under `key` and the Apex installed (`core.advise.cache.environment`)."""

    device: str  # "cuda" | "cpu"
    name: str  # GPU or CPU model
    torch: str
    torch_cuda: str | None
    driver: str | None = None  # CUDA only
    threads: int | None = None  # CPU only

    @property
    def key(self) -> str:
        """'cuda|<GPU>|driver <version>|torch <version>' or 'cpu|<CPU>|<n> threads|torch <version>' (the
        values stored in the cache files: keep them as they are, or old entries are no longer found)."""
        if self.device == "cuda":
            return f"cuda|{self.name}|driver {self.driver}|torch {self.torch}"
        return f"cpu|{self.name}|{self.threads} threads|torch {self.torch}"


def machine_identity(device: str) -> MachineIdentity:
    """This machine's identity for `device` (imports torch; on CUDA asks NVML for the driver)."""
    import torch

    if device == "cuda":
        from .monitor.nvml import Nvml

        name = torch.cuda.get_device_name()
        try:
            version = Nvml(pci_bus_id=pci_bus_id()).driver_version().value
            driver = str(version) if version else "unknown"
        except Exception:  # noqa: BLE001 - the NVML shim never raises; a driver we cannot read is "unknown"
            driver = "unknown"
        return MachineIdentity("cuda", name, torch.__version__, torch.version.cuda, driver=driver)
    return MachineIdentity(device, cpu_model(), torch.__version__, torch.version.cuda,
                           threads=torch.get_num_threads())
