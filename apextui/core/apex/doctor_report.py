"""The immutable report of `apextui doctor` (frozen dataclasses, JSON via `to_dict`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from apextui.core.monitor.topology import Topology

SCHEMA_VERSION = 1
# import_fails: NVIDIA's Apex is installed but `import apex` raises, crashes or hangs (whatever was built)
ApexStatus = Literal["not_installed", "not_nvidia", "import_fails", "python_only", "partial", "complete"]
APEX_STATUSES: tuple[str, ...] = get_args(ApexStatus)


@dataclass(frozen=True)
class GPUInfo:
    """One GPU as torch (or NVML, when torch cannot see it) reports it."""

    index: int
    name: str
    capability: str | None  # "9.0"
    memory_gib: float | None


@dataclass(frozen=True)
class Environment:
    """Python, torch, GPU, driver/NVML and nvcc facts."""

    python: str
    python_executable: str
    platform: str
    torch: str | None  # None when torch cannot be imported
    torch_error: str
    torch_cuda: str | None  # torch.version.cuda; None for a CPU-only build
    cudnn: str | None
    cuda_available: bool
    cuda_error: str
    gpus: tuple[GPUInfo, ...]
    driver: str | None
    nvml: str  # "ok" or "n/a: <reason>"
    cuda_home: str | None  # torch.utils.cpp_extension.CUDA_HOME, else $CUDA_HOME/$CUDA_PATH/nvcc on PATH
    nvcc_path: str | None
    nvcc_version: str | None  # "12.8"
    nvcc_error: str
    nvcc_matches_torch: bool | None  # None when either side is unknown
    tf32_supported: bool | None  # None without a visible GPU
    bf16_supported: bool | None
    nccl: str | None = None  # torch.cuda.nccl.version(), "2.27.5"; None with the reason in nccl_error
    nccl_error: str = ""
    topology: Topology | None = None  # how the GPUs NVML sees are linked (NVLink, NVSwitch, PCIe)


@dataclass(frozen=True)
class ApexInfo:
    """Apex overall: status is one of APEX_STATUSES."""

    status: ApexStatus
    location: str | None
    distribution: str | None
    version: str | None
    import_ok: bool | None  # None when not installed
    import_error: str
    import_fix: str
    detail: str
    fix: str


@dataclass(frozen=True)
class ExtensionStatus:
    """One compiled module: status "ok" | "missing" | "broken"; kind says why it is not ok."""

    name: str
    required: bool
    status: str
    kind: str  # "", missing, undefined_symbol, missing_library, os_error, import_error, system_exit,
    # exception, crashed, timeout
    error_type: str
    message: str  # first line of the exception message
    path: str | None
    reason: str
    fix: str


@dataclass(frozen=True)
class FeatureStatus:
    """One user-facing feature: the module it lives in, the extensions it needs, whether it works."""

    name: str
    module: str
    attr: str | None
    needs: tuple[str, ...]
    removed: bool
    ok: bool
    reason: str
    fix: str


@dataclass(frozen=True)
class SmokeResult:
    """One CUDA smoke test against torch.

    skipped: it could not run here (no CUDA GPU, no usable Apex, or the feature/extension it
    needs is missing or broken); `reason` says which. Otherwise it ran: passed, or failed
    because the kernel raised (reason "error: ...") or differs from torch.
    """

    name: str
    skipped: bool
    passed: bool | None  # None when skipped
    max_abs_err: float | None
    tolerance: float | None
    seconds: float | None
    reason: str
    fix: str


@dataclass(frozen=True)
class Problem:
    """One thing that is wrong and the one-line fix for it."""

    what: str
    fix: str


@dataclass(frozen=True)
class DoctorReport:
    """Everything `apextui doctor` found."""

    environment: Environment
    apex: ApexInfo
    extensions: tuple[ExtensionStatus, ...]
    features: tuple[FeatureStatus, ...]
    smoke: tuple[SmokeResult, ...]
    problems: tuple[Problem, ...]
    isolation: str  # "subprocess": risky imports ran in a child process
    seconds: float

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems

    def feature(self, name: str) -> FeatureStatus | None:
        return next((f for f in self.features if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; top-level keys: schema, environment, apex, extensions,
        features, smoke, problems, isolation, seconds."""
        return {"schema": SCHEMA_VERSION, **dataclasses.asdict(self)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
