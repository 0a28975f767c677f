"""Whether this machine has what a value needs beyond torch (`axes.Value.needs`), and the one result type of every
"can it run here" question, `Availability` (a point's, a preset's, an Apex feature's).

- "compile": a working inductor backend: on CPU a C++ compiler (`$CXX`, else `g++`; inductor's own
  choice) and Python's headers (its generated kernels include Python.h); on CUDA the triton package, a C
  compiler (`$CC`, else clang, gcc or cc: triton builds its kernel launcher with it) and Python's headers.
- "cuda_graphs": a CUDA device.
- "cuda": a CUDA device (tf32).
- "torchao": an importable torchao (fp8).
- "sm89": a GPU of compute capability >= 8.9 (fp8's float8 tensor cores).
- "sdpa_flash": SDPA's flash kernel: on CUDA an sm80+ GPU (on CPU torch has a flash kernel of its own).
- "sdpa_efficient": SDPA's memory-efficient kernel: CUDA (the CPU has none).
- "sdpa_cudnn": SDPA's cuDNN kernel: CUDA, an sm80+ GPU and cuDNN 9 or newer.
- "liger": Liger-Kernel (Triton kernels): CUDA, and the liger-kernel package (`pip install apextui[liger]`).
- "triton": inductor's Triton kernels (coordinate-descent tuning tunes them): CUDA; on CPU inductor writes C++.

Whether a value applies to the user's model at all (a convolution for channels_last, an SDPA call for an attention
backend: `axes.Value.applies`) is `applies_availability`, from what a probe found in the model (`model_presets.probe`).

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
from typing import Callable, Iterable, Mapping

from .axes import Need, Trait, Value

FP8_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9) and Hopper (9.0) onwards
SDPA_CAPABILITY = (8, 0)  # torch's flash and cuDNN attention kernels: Ampere (8.0) onwards
CUDNN_ATTENTION_VERSION = 90000  # cuDNN 9.0: torch's cuDNN SDPA needs it


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
    """TF32 is a mode of NVIDIA tensor cores: on the CPU the configuration would be fp32 again."""
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


def _capability() -> tuple[int, int]:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return int(major), int(minor)


def _sdpa_gpu(kernel: str) -> Availability:
    """An sm80+ GPU, which torch's flash and cuDNN attention kernels need."""
    cap = _capability()
    if cap < SDPA_CAPABILITY:
        return Availability(False, f"torch's {kernel} attention kernel needs a GPU of compute capability >= 8.0; this "
                                   f"one is {cap[0]}.{cap[1]}",
                            "pick attention=efficient or attention=math (or leave attention=default)")
    return Availability(True)


def sdpa_flash_availability(device: str) -> Availability:
    """SDPA's flash kernel: torch has one for the CPU; on CUDA it needs an sm80+ GPU."""
    return _sdpa_gpu("flash") if device == "cuda" else Availability(True)


def sdpa_efficient_availability(device: str) -> Availability:
    if device != "cuda":
        return Availability(False, "torch's memory-efficient attention kernel is CUDA only; on CPU SDPA has the flash "
                                   "and math kernels", "pick attention=flash or attention=math on CPU, or run on CUDA")
    return Availability(True)


def sdpa_cudnn_availability(device: str) -> Availability:
    if device != "cuda":
        return Availability(False, "cuDNN attention is a CUDA kernel; this run is on CPU",
                            "pick attention=flash or attention=math on CPU, or run on CUDA")
    gpu = _sdpa_gpu("cuDNN")
    if not gpu.ok:
        return gpu
    import torch

    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if version is None or version < CUDNN_ATTENTION_VERSION:
        have = "no cuDNN" if not version else f"cuDNN {version // 1000}.{version // 100 % 10}"  # 8.x: 8907
        return Availability(False, f"torch's cuDNN attention needs cuDNN 9 or newer; this torch has {have}",
                            "install a torch built with cuDNN 9 (the CUDA 12 wheels), or pick attention=flash")
    return Availability(True)


def liger_availability(device: str) -> Availability:
    """Liger-Kernel is Triton kernels for CUDA GPUs, and an optional package."""
    if device != "cuda":
        return Availability(False, "Liger-Kernel's kernels are Triton kernels for CUDA GPUs; this run is on CPU",
                            "run on a machine with an NVIDIA GPU and pip install liger-kernel")
    if importlib.util.find_spec("liger_kernel") is None:
        return Availability(False, "Liger's kernels need the liger-kernel package; it is not installed",
                            "pip install liger-kernel (or pip install 'apextui[liger]')")
    return Availability(True)


def triton_availability(device: str) -> Availability:
    if device != "cuda":
        return Availability(False, "coordinate-descent tuning tunes inductor's Triton kernels (CUDA); on CPU inductor "
                                   "writes C++ and this would be compile=default again",
                            "pick compile=default on CPU, or run on CUDA")
    return Availability(True)


# need -> whether a device here meets it (every `Need` has one: tests/test_config.py)
NEED_AVAILABILITY: Mapping[Need, Callable[[str], Availability]] = MappingProxyType({
    "compile": compile_availability, "cuda_graphs": cuda_graphs_availability, "cuda": cuda_availability,
    "torchao": torchao_availability, "sm89": sm89_availability, "sdpa_flash": sdpa_flash_availability,
    "sdpa_efficient": sdpa_efficient_availability, "sdpa_cudnn": sdpa_cudnn_availability,
    "liger": liger_availability, "triton": triton_availability})

# trait -> what a model without it lacks, said where a value that needs it is asked for (`applies_availability`)
LACKS: Mapping[Trait, str] = MappingProxyType({
    "conv2d": "the model has no 2-D convolution (nn.Conv2d): a memory format changes nothing in it",
    "sdpa": "the model calls no F.scaled_dot_product_attention (counted over one forward of it at its CPU size): an "
            "attention backend changes nothing in it",
    "norms": "the model has no LayerNorm or RMSNorm the finder could swap",
    "causal_lm_loss": "the model is not a Hugging Face causal LM that computes its own loss from `labels` (Liger's "
                      "fused linear cross-entropy replaces that loss and its LM head's logits)",
})


def applies_availability(values: Iterable[Value], traits: frozenset[str] | None) -> Availability:
    """The first of these values that does not apply to a model of these traits (`axes.Value.applies`), or ok; None:
    not known, so each may."""
    for value in values:
        if not value.applies_to(traits):
            return Availability(False, f"{value.axis}={value.name} does not apply: {LACKS[value.applies]}",  # type: ignore[index]
                                "nothing to do: leave that axis at its default for this model")
    return Availability(True)


def needs_availability(needs: tuple[str, ...], device: str) -> Availability:
    """The first of these needs that `device` here does not meet, or ok."""
    for need in needs:
        result = NEED_AVAILABILITY[need](device)  # type: ignore[index]
        if not result.ok:
            return result
    return Availability(True)
