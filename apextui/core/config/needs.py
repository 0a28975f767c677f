"""Whether this machine has what a value needs beyond torch (`axes.Value.needs`), and the one result type of every
"can it run here" question, `Availability` (a point's, a preset's, an Apex feature's).

- "compile": a working inductor backend: on CPU a C++ compiler (`$CXX`, else `g++`; inductor's own
  choice) and Python's headers (its generated kernels include Python.h); on CUDA the triton package, a C
  compiler (`$CC`, else clang, gcc or cc: triton builds its kernel launcher with it) and Python's headers.
- "cuda_graphs": a CUDA device.
- "cuda": a CUDA device (tf32).
- "torchao": an importable torchao (fp8).
- "sm89": a GPU of compute capability >= 8.9 (fp8's float8 tensor cores).

Each answer is cheap (a PATH lookup, a file test, a module spec): they never import torch._dynamo or compile
anything (sm89 alone asks torch for the GPU's capability, on CUDA). A compile that still fails at run time fails
that run with the error. The warm-up that keeps compile and capture time out of the measured steps is
`workloads/warmup.py`; whether a whole point can run (these answers and the Apex probe) is `availability.py`'s.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

from .axes import Need

FP8_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9) and Hopper (9.0) onwards


@dataclass(frozen=True)
class Availability:
    """Whether something can run here (a point, a preset, a need, an Apex feature), and if not why and how to
    fix it."""

    ok: bool
    reason: str = ""
    fix: str = ""


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


def cuda_graphs_availability(device: str) -> Availability:
    if device != "cuda":
        return Availability(False, "CUDA graphs need a CUDA device; this run is on CPU",
                            "run on a machine with an NVIDIA GPU (--device cuda), or pick a preset without CUDA "
                            "graphs (torch_compile, torch_amp, adamw_fused)")
    return Availability(True)


def compile_availability(device: str) -> Availability:
    """Can torch.compile's default (inductor) backend build kernels for `device` here?"""
    if sys.version_info >= (3, 15):
        return Availability(False, f"torch.compile does not support Python {sys.version_info.major}."
                                   f"{sys.version_info.minor}", "use Python 3.10-3.14 for the compile presets")
    where = "on CUDA" if device == "cuda" else "on CPU"
    if device == "cuda":
        if importlib.util.find_spec("triton") is None:
            return Availability(False,
                                "torch.compile (inductor) needs the triton package for CUDA kernels; it is not "
                                "installed",
                                "pip install triton (the version your torch pins: it comes with the CUDA torch "
                                "wheels)")
        name, path = c_compiler()
        if path is None:
            missing = f"$CC {name!r} is not on PATH" if os.environ.get("CC") else "none of clang, gcc, cc is on PATH"
            return Availability(False, f"torch.compile (inductor) on CUDA needs a C compiler for triton's launcher; "
                                       f"{missing}",
                                "install one (e.g. apt-get install gcc) or set CC to a C compiler; or pick torch_amp")
    else:
        name, path = cxx_compiler()
        if path is None:
            via = "$CXX" if os.environ.get("CXX") else "the default"
            return Availability(False, f"torch.compile (inductor) on CPU needs a C++ compiler; {via} {name!r} is not "
                                       "on PATH",
                                "install one (e.g. apt-get install g++) or set CXX to a C++ compiler; or pick "
                                "torch_amp")
    header = python_header()
    if not header.is_file():
        return Availability(False, f"torch.compile (inductor) {where} needs Python's C headers; {header} is missing",
                            f"install the Python development headers (e.g. apt-get install python"
                            f"{sys.version_info.major}.{sys.version_info.minor}-dev)")
    return Availability(True)


def cuda_availability(device: str) -> Availability:
    """TF32 is a mode of NVIDIA tensor cores: on the CPU the variant would be fp32 again."""
    if device != "cuda":
        return Availability(False, "TF32 is a CUDA tensor-core mode; on CPU this would be the fp32 run again",
                            "run on a machine with an NVIDIA GPU (--device cuda)")
    return Availability(True)


def torchao_availability(device: str) -> Availability:
    if importlib.util.find_spec("torchao") is None:
        return Availability(False, "fp8 training needs the torchao package; it is not installed",
                            "pip install torchao (the version that matches your torch)")
    return Availability(True)


def sm89_availability(device: str) -> Availability:
    """float8 matmuls need compute capability 8.9 or newer (torch imported only here)."""
    if device != "cuda":
        return Availability(False, "fp8 needs an NVIDIA GPU; this run is on CPU",
                            "run on an Ada or Hopper GPU (or newer)")
    import torch

    cap = torch.cuda.get_device_capability()
    if tuple(cap) < FP8_CAPABILITY:
        return Availability(False, f"fp8 needs a GPU of compute capability >= {FP8_CAPABILITY[0]}."
                                   f"{FP8_CAPABILITY[1]}; this one is {cap[0]}.{cap[1]}",
                            "run on an Ada (sm_89) or Hopper (sm_90) GPU or newer")
    return Availability(True)


# need -> whether a device here meets it (every `Need` has one: tests/test_config.py)
NEED_AVAILABILITY: Mapping[Need, Callable[[str], Availability]] = MappingProxyType({
    "compile": compile_availability, "cuda_graphs": cuda_graphs_availability, "cuda": cuda_availability,
    "torchao": torchao_availability, "sm89": sm89_availability})


def needs_availability(needs: tuple[str, ...], device: str) -> Availability:
    """The first of these needs that `device` here does not meet, or ok."""
    for need in needs:
        result = NEED_AVAILABILITY[need](device)  # type: ignore[index]
        if not result.ok:
            return result
    return Availability(True)
