"""Which device to run on, and a short description of the environment for reports."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

DEVICE_CHOICES = ("auto", "cpu", "cuda")


class DeviceUnavailable(RuntimeError):
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


def pci_bus_id() -> str | None:
    """PCI bus id of the current CUDA device, so NVML samples the same GPU."""
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except Exception:  # noqa: BLE001
        return None
