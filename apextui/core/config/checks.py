"""Whether a configuration's values can run here: each value's needs (`axes.Value.needs`) checked with the
checks apextui already has, `needs.CHECKS` (torch.compile, CUDA graphs, CUDA) and `apex.check.check_features`
(Apex kernels), plus two of this module's own for fp8 (an importable `torchao`, a GPU of compute capability
>= 8.9). Cheap to import (no torch); above the data (`axes`, `point`), which the workload registry reads.
"""

from __future__ import annotations

import importlib.util
from types import MappingProxyType
from typing import Mapping

from ..needs import CHECKS as NEED_CHECKS
from ..needs import Check
from .axes import Value
from .point import Config

FP8_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9) and Hopper (9.0) onwards


def check_torchao(device: str) -> Check:
    if importlib.util.find_spec("torchao") is None:
        return Check(False, "fp8 training needs the torchao package; it is not installed",
                     "pip install torchao (the version that matches your torch)")
    return Check(True)


def check_sm89(device: str) -> Check:
    """float8 matmuls need compute capability 8.9 or newer (torch imported only here)."""
    if device != "cuda":
        return Check(False, "fp8 needs an NVIDIA GPU; this run is on CPU", "run on an Ada or Hopper GPU (or newer)")
    import torch

    cap = torch.cuda.get_device_capability()
    if tuple(cap) < FP8_CAPABILITY:
        return Check(False, f"fp8 needs a GPU of compute capability >= {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]}; "
                            f"this one is {cap[0]}.{cap[1]}", "run on an Ada (sm_89) or Hopper (sm_90) GPU or newer")
    return Check(True)


CHECKS: Mapping[str, object] = MappingProxyType({**NEED_CHECKS, "torchao": check_torchao, "sm89": check_sm89})


def value_availability(value: Value, device: str) -> Check:
    """The first unmet need of one value on `device` (Apex kernels last: their check runs a child process)."""
    for need in value.needs:
        result = CHECKS[need](device)  # type: ignore[operator]
        if not result.ok:
            return result
    return apex_check(value.apex, device)


def apex_check(features: tuple[str, ...], device: str) -> Check:
    """Working Apex kernels for `features` on `device` (CUDA only; checked in a child process, cached)."""
    if not features:
        return Check(True)
    if device != "cuda":
        return Check(False, f"needs NVIDIA Apex ({', '.join(features)}), whose fused kernels run on CUDA only; "
                            "this run is on CPU",
                     "run on a machine with an NVIDIA GPU and Apex built with APEX_CPP_EXT=1 APEX_CUDA_EXT=1, "
                     "or pick a torch preset")
    from ..apex.check import check_features

    checks = check_features(features, cuda_available=True)
    for feature in features:
        if not checks[feature].ok:
            return Check(False, f"needs Apex {feature}: {checks[feature].reason}", checks[feature].fix)
    return Check(True)


def config_availability(config: Config, device: str) -> Check:
    """The first unmet need of any of a point's values on `device` (Apex checks last: a child process)."""
    for v in sorted(config.values(), key=lambda v: bool(v.apex)):
        result = value_availability(v, device)
        if not result.ok:
            return result
    return Check(True)
