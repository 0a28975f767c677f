"""What a variant needs beyond torch (`VariantSpec.needs`) and whether this machine has it: the checks that
torch.compile, CUDA graphs and TF32 variants pass before they run (availability.py combines them with the Apex
check).

- "compile": a working inductor backend: on CPU a C++ compiler (`$CXX`, else `g++`; inductor's own
  choice) and Python's headers (its generated kernels include Python.h); on CUDA the triton package, a C
  compiler (`$CC`, else clang, gcc or cc: triton builds its kernel launcher with it) and Python's headers.
- "cuda_graphs": a CUDA device.
- "cuda": a CUDA device (the model workload's tf32).

The checks are cheap (a PATH lookup, a file test, a module spec): they never import torch, torch._dynamo or
compile anything. A compile that still fails at run time fails that run with the error. The warm-up that keeps
compile and capture time out of the measured steps is `workloads/warmup.py`.
"""

from __future__ import annotations


import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from .workloads.spec import WORKLOADS

# (workload, variant) -> what the variant needs beyond torch itself (declared in the workload registry)
NEEDS: Mapping[tuple[str, str], tuple[str, ...]] = {
    (w, v.name): v.needs for w, spec in WORKLOADS.items() for v in spec.variants if v.needs}


@dataclass(frozen=True)
class Check:
    """Whether a requirement is met here, and if not why and how to fix it."""

    ok: bool
    reason: str = ""
    fix: str = ""


def needs(workload: str, variant: str) -> tuple[str, ...]:
    """What a variant needs beyond torch: "compile" and/or "cuda_graphs" (empty for the others)."""
    return NEEDS.get((workload, variant), ())


def cxx_compiler() -> tuple[str, str | None]:
    """(the C++ compiler inductor would use on CPU, its path or None): $CXX, else g++ (clang++ on macOS)."""
    name = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    return name, shutil.which(name)


def c_compiler() -> tuple[str, str | None]:
    """(the C compiler triton builds its CUDA launcher with, its path or None): $CC, else clang, gcc or cc."""
    if os.environ.get("CC"):
        return os.environ["CC"], shutil.which(os.environ["CC"])
    for name in ("clang", "gcc", "cc"):
        path = shutil.which(name)
        if path:
            return name, path
    return "cc", None


def python_header() -> Path:
    return Path(sysconfig.get_paths()["include"]) / "Python.h"


def check_cuda_graphs(device: str) -> Check:
    if device != "cuda":
        return Check(False, "CUDA graphs need a CUDA device; this run is on CPU",
                     "run on a machine with an NVIDIA GPU (--device cuda), or pick a preset without CUDA graphs "
                     "(torch_compile, torch_amp, adamw_fused)")
    return Check(True)


def check_compile(device: str) -> Check:
    """Can torch.compile's default (inductor) backend build kernels for `device` here?"""
    if sys.version_info >= (3, 15):
        return Check(False, f"torch.compile does not support Python {sys.version_info.major}.{sys.version_info.minor}",
                     "use Python 3.10-3.14 for the compile presets")
    where = "on CUDA" if device == "cuda" else "on CPU"
    if device == "cuda":
        if importlib.util.find_spec("triton") is None:
            return Check(False,
                         "torch.compile (inductor) needs the triton package for CUDA kernels; it is not installed",
                         "pip install triton (the version your torch pins: it comes with the CUDA torch wheels)")
        name, path = c_compiler()
        if path is None:
            missing = f"$CC {name!r} is not on PATH" if os.environ.get("CC") else "none of clang, gcc, cc is on PATH"
            return Check(False, f"torch.compile (inductor) on CUDA needs a C compiler for triton's launcher; {missing}",
                         "install one (e.g. apt-get install gcc) or set CC to a C compiler; or pick torch_amp")
    else:
        name, path = cxx_compiler()
        if path is None:
            via = "$CXX" if os.environ.get("CXX") else "the default"
            return Check(False, f"torch.compile (inductor) on CPU needs a C++ compiler; {via} {name!r} is not on PATH",
                         "install one (e.g. apt-get install g++) or set CXX to a C++ compiler; or pick torch_amp")
    header = python_header()
    if not header.is_file():
        return Check(False, f"torch.compile (inductor) {where} needs Python's C headers; {header} is missing",
                     f"install the Python development headers (e.g. apt-get install python{sys.version_info.major}."
                     f"{sys.version_info.minor}-dev)")
    return Check(True)


def check_cuda(device: str) -> Check:
    """TF32 is a mode of NVIDIA tensor cores: on the CPU the variant would be fp32 again."""
    if device != "cuda":
        return Check(False, "TF32 is a CUDA tensor-core mode; on CPU this would be the fp32 run again",
                     "run on a machine with an NVIDIA GPU (--device cuda)")
    return Check(True)


CHECKS: Mapping[str, Callable[[str], Check]] = {"cuda_graphs": check_cuda_graphs, "compile": check_compile,
                                                "cuda": check_cuda}


def check(workload: str, variant: str, device: str) -> Check:
    """The first unmet requirement of a variant on `device`, or ok."""
    for need in needs(workload, variant):
        result = CHECKS[need](device)
        if not result.ok:
            return result
    return Check(True)
