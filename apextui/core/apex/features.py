"""Which NVIDIA Apex features exist, what each needs, and how an import failure is classified and fixed.

The tables and the classification of import failures here are shared by the
preset availability check (`apextui.core.apex.probe`, which imports Apex in a
child process) and the full doctor report (`apextui.core.apex.doctor`). Nothing here
imports Apex.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

APEX_SOURCE_URL = "https://github.com/NVIDIA/apex"
BUILD_CMD = (
    "git clone https://github.com/NVIDIA/apex && cd apex && "
    "APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation ."
)
BUILD_HINT = "install NVIDIA Apex from source with its extensions: " + BUILD_CMD
REBUILD_HINT = "rebuild Apex with its C++/CUDA extensions: pip uninstall -y apex && " + BUILD_CMD
REBUILD_AGAINST_TORCH = "rebuild Apex against the installed torch: pip uninstall -y apex && " + BUILD_CMD
NOT_NVIDIA_FIX = (
    "pip uninstall -y apex (PyPI's 'apex' is an unrelated Pyramid web toolkit), then " + BUILD_HINT
)
AMP_FIX = "use torch.amp instead: torch.autocast(device_type='cuda', dtype=...) + torch.amp.GradScaler"

# Compiled modules built by `APEX_CPP_EXT=1 APEX_CUDA_EXT=1` (setup.py --cpp_ext/--cuda_ext).
# The first six are what the features below need; a build that has them all is "complete".
REQUIRED_EXTENSIONS: tuple[str, ...] = (
    "apex_C", "amp_C", "fused_layer_norm_cuda", "mlp_cuda", "fused_dense_cuda", "syncbn",
)
# Reported only when present: the rest of --cuda_ext, then the opt-in contrib modules.
OPTIONAL_EXTENSIONS: tuple[str, ...] = (
    "scaled_upper_triang_masked_softmax_cuda", "generic_scaled_masked_softmax_cuda",
    "scaled_masked_softmax_cuda", "scaled_softmax_cuda", "fused_rotary_positional_embedding",
    "fused_weight_gradient_mlp_cuda",
    "distributed_adam_cuda", "distributed_lamb_cuda", "permutation_search_cuda", "bnp",
    "xentropy_cuda", "focal_loss_cuda", "group_norm_cuda", "group_norm_v2_cuda",
    "fused_index_mul_2d", "fused_adam_cuda", "fused_lamb_cuda", "fast_layer_norm",
    "transducer_joint_cuda", "transducer_loss_cuda", "cudnn_gbn_lib", "peer_memory_cuda",
    "nccl_p2p_cuda", "fast_bottleneck", "fused_conv_bias_relu", "_apex_nccl_allocator",
)
# Sub-packages that only NVIDIA's apex has (any one is enough).
NVIDIA_MARKERS: tuple[str, ...] = ("optimizers", "normalization", "multi_tensor_apply")


@dataclass(frozen=True)
class Feature:
    """A user-facing Apex feature: where it lives and which compiled module it needs."""

    name: str
    module: str
    attr: str | None
    extensions: tuple[str, ...]
    removed: bool = False  # gone from current Apex (apex.amp)
    build_flag: str = ""  # an opt-in contrib extension: the variable Apex's setup.py needs to build it

    @property
    def build_fix(self) -> str:
        """How to build the opt-in extension this feature needs (empty for the core ones)."""
        return (f"rebuild Apex with it: pip uninstall -y apex && git clone {APEX_SOURCE_URL} && cd apex && "
                f"APEX_CPP_EXT=1 APEX_CUDA_EXT=1 {self.build_flag} pip install -v --no-build-isolation ."
                if self.build_flag else "")


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("FusedAdam", "apex.optimizers", "FusedAdam", ("amp_C",)),
        Feature("FusedLAMB", "apex.optimizers", "FusedLAMB", ("amp_C",)),
        Feature("FusedSGD", "apex.optimizers", "FusedSGD", ("amp_C",)),
        Feature("FusedLayerNorm", "apex.normalization", "FusedLayerNorm", ("fused_layer_norm_cuda",)),
        Feature("FusedRMSNorm", "apex.normalization", "FusedRMSNorm", ("fused_layer_norm_cuda",)),
        Feature(
            "MixedFusedLayerNorm", "apex.normalization", "MixedFusedLayerNorm", ("fused_layer_norm_cuda",)
        ),
        Feature("apex.mlp", "apex.mlp", "MLP", ("mlp_cuda",)),
        Feature("apex.fused_dense", "apex.fused_dense", "FusedDense", ("fused_dense_cuda",)),
        Feature("DistributedFusedAdam", "apex.contrib.optimizers.distributed_fused_adam", "DistributedFusedAdam",
                ("distributed_adam_cuda",), build_flag="APEX_DISTRIBUTED_ADAM=1"),
        Feature("apex.amp", "apex.amp", None, (), removed=True),
    )
}


@dataclass(frozen=True)
class ImportFailure:
    """A classified failed import: kind (e.g. "undefined_symbol"), a reason and a one-line fix."""

    kind: str
    reason: str
    fix: str


def first_line(error_type: str, message: str) -> str:
    """'ImportError: first line of the message' (just the type when the message is empty)."""
    lines = str(message).strip().splitlines()
    return f"{error_type}: {lines[0]}" if lines and lines[0].strip() else error_type


def _first_line(exc: BaseException) -> str:
    return first_line(type(exc).__name__, str(exc))


def classify_import_failure(
    module: str, error_type: str, message: str, missing_name: str | None = None
) -> ImportFailure:
    """Classify why `import module` failed, from the exception's class name and message."""
    line = first_line(error_type, message)
    if error_type == "ModuleNotFoundError" and missing_name == module:
        return ImportFailure(
            "missing",
            f"compiled extension {module} is not installed",
            REBUILD_HINT,
        )
    if "undefined symbol" in message:
        return ImportFailure(
            "undefined_symbol", f"{module} was built against a different torch ({line})", REBUILD_AGAINST_TORCH
        )
    if any(s in message for s in ("cannot open shared object file", "Library not loaded", "DLL load failed")):
        return ImportFailure(
            "missing_library",
            f"{module} cannot load a shared library it links against ({line})",
            "make the CUDA/torch libraries it was built with loadable (LD_LIBRARY_PATH), or "
            + REBUILD_AGAINST_TORCH,
        )
    if error_type == "ModuleNotFoundError" and missing_name:
        root = missing_name.split(".")[0]
        if root == "torch":
            return ImportFailure("import_error", f"{module} needs torch, which is not installed",
                                 "install a CUDA build of torch (https://pytorch.org), then " + REBUILD_HINT)
        if root in ("pyramid", "pyramid_mailer", "cryptacular", "velruse"):
            return ImportFailure("not_nvidia", f"{module} is the PyPI Pyramid toolkit ({line})", NOT_NVIDIA_FIX)
        return ImportFailure("import_error", f"{module} needs {missing_name}, which is missing ({line})",
                             f"pip install the package that provides {root}, or rebuild Apex")
    if "pyramid" in message:
        return ImportFailure("not_nvidia", f"{module} is the PyPI Pyramid toolkit ({line})", NOT_NVIDIA_FIX)
    if error_type == "OSError" or error_type.endswith("OSError"):
        return ImportFailure(
            "os_error", f"{module} failed to load ({line})",
            "check the file and the CUDA libraries on LD_LIBRARY_PATH, then " + REBUILD_AGAINST_TORCH,
        )
    if error_type == "SystemExit":
        return ImportFailure("system_exit", f"{module} called sys.exit() on import ({line})",
                             REBUILD_HINT)
    if error_type in ("ImportError", "ModuleNotFoundError"):
        return ImportFailure("import_error", f"{module} failed to import ({line})", REBUILD_HINT)
    return ImportFailure("exception", f"{module} raised on import ({line})", REBUILD_HINT)


HANG_FIX = "check the GPU and driver (nvidia-smi), then " + REBUILD_AGAINST_TORCH


def fatal_import_problem(module: str, fatal: str, message: str) -> tuple[str, str]:
    """(reason, fix) for an import that crashed or hung its (child) interpreter: `fatal` is "crashed" or
    "timeout", `message` what the parent saw (e.g. "the interpreter was killed by SIGSEGV")."""
    if fatal == "timeout":
        return f"import {module} hung: {message}", HANG_FIX
    return f"import {module} crashed: {message}", REBUILD_AGAINST_TORCH


def apex_import_fix(error_type: str, message: str, missing_name: str | None, fatal: str | None) -> str:
    """The one-line fix for a failing `import apex` (an exception, a crash or a hang)."""
    if fatal:
        return fatal_import_problem("apex", fatal, message)[1]
    return classify_import_failure("apex", error_type, message, missing_name).fix


def nvidia_apex_verdict(
    location: str | None, init_source: str = "", version: str | None = None, import_error: str = ""
) -> tuple[bool, str]:
    """Is the apex package at `location` NVIDIA's? (verdict, reason when it is not)."""
    has_markers = bool(location) and any(
        os.path.isdir(os.path.join(location, m)) for m in NVIDIA_MARKERS  # type: ignore[arg-type]
    )
    pyramid = "pyramid" in init_source or "pyramid" in import_error
    if has_markers and not pyramid:
        return True, ""
    tail = f" {version}" if version else ""
    if pyramid or (version or "").startswith("0.9"):
        why = (f"the 'apex'{tail} at {location} is the PyPI package 'apex', "
               "a Pyramid web toolkit, not NVIDIA's Apex")
    else:
        why = f"the 'apex'{tail} at {location} is not NVIDIA's Apex (it has no apex.optimizers/normalization)"
    return False, why


def apex_is_nvidia() -> tuple[bool, str]:
    """Is an importable `apex` present, and is it NVIDIA's (not the PyPI web toolkit)? Imports nothing."""
    try:
        spec = importlib.util.find_spec("apex")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken finder; Ctrl-C goes on
        return False, f"finding 'apex' failed: {_first_line(exc)}"
    if spec is None:
        return False, "NVIDIA Apex is not installed"
    from .doctor_child import locate_apex  # stdlib-only, shared with the doctor's child process

    return nvidia_apex_verdict(*locate_apex(spec))

