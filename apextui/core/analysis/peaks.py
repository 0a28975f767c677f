"""The GPUs' dense peaks (TFLOP/s) by precision, from NVIDIA's spec sheets: what MFU is measured against
(`measure/mfu.py`). The one table; `peak` looks a device up by the name torch / NVML reports.

Dense, never sparse: NVIDIA's data-center spec sheets print the tensor-core figures "with sparsity" (2:4 structured
sparsity, which training does not use); the dense figure is half of it (the H200's bf16: 1,979 printed, 989.5
dense). The Ada GeForce and L40S figures are those with fp32 accumulation (torch accumulates bf16 and fp16 matmuls in
fp32). Columns: `fp32` the non-tensor fp32 rate (fp32 as written, TF32 off), `tf32`, `bf16`, `fp16` and `fp8`
(tensor cores; fp8 only where the GPU has it).

Matching is by pattern on the reported name, the most specific first ("H100 NVL" and "H100 PCIe" before the H100
SXM's "H100 80GB HBM3"); a name no entry matches, and a MIG slice (a share of the GPU), have no peak, with the reason.
This is data, not a measurement: `analysis/ceilings.py` measures what this GPU's matmuls reach here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from ..measure.mfu import Peak

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")

H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"
H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
A100_URL = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
L40S_URL = "https://www.nvidia.com/en-us/data-center/l40s/"
ADA_URL = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU's dense peaks: `name` the table's, `pattern` what the reported name must contain (a regular
    expression, case-insensitive), `tflops` by precision, `source` the spec sheet (and how the dense figure was
    read)."""

    name: str
    pattern: str
    tflops: Mapping[str, float]
    source: str


def _hopper(fp32: float, tf32: float, bf16: float, fp8: float) -> Mapping[str, float]:
    """A Hopper spec sheet's figures, halved where printed with sparsity (tf32, bf16/fp16, fp8)."""
    return MappingProxyType({"fp32": fp32, "tf32": tf32 / 2, "bf16": bf16 / 2, "fp16": bf16 / 2, "fp8": fp8 / 2})


SPARSE_HALVED = " (tensor-core figures printed with sparsity, halved)"
TABLE: tuple[GpuPeaks, ...] = (
    GpuPeaks("H200 NVL", r"\bH200 NVL\b", _hopper(60, 835, 1671, 3341), H200_URL + SPARSE_HALVED),
    GpuPeaks("H200 SXM", r"\bH200\b", _hopper(67, 989, 1979, 3958), H200_URL + SPARSE_HALVED),
    GpuPeaks("H100 NVL", r"\bH100 NVL\b", _hopper(60, 835, 1671, 3341), H100_URL + SPARSE_HALVED),
    GpuPeaks("H100 PCIe", r"\bH100\b.*\bPCIe\b", _hopper(51, 756, 1513, 3026), H100_URL + SPARSE_HALVED),
    GpuPeaks("H100 SXM", r"\bH100\b.*\b(HBM3|SXM\d?)\b", _hopper(67, 989, 1979, 3958), H100_URL + SPARSE_HALVED),
    GpuPeaks("A100 PCIe", r"\bA100\b.*\bPCIe\b", MappingProxyType({"fp32": 19.5, "tf32": 156, "bf16": 312,
                                                                   "fp16": 312}), A100_URL + " (dense column)"),
    GpuPeaks("A100 SXM", r"\bA100\b.*\bSXM\d?\b", MappingProxyType({"fp32": 19.5, "tf32": 156, "bf16": 312,
                                                                    "fp16": 312}), A100_URL + " (dense column)"),
    GpuPeaks("L40S", r"\bL40S\b", MappingProxyType({"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05,
                                                    "fp8": 733}), L40S_URL + " (dense column)"),
    GpuPeaks("GeForce RTX 4090", r"\bRTX 4090\b(?! ?(D|Laptop)\b)",
             MappingProxyType({"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}),
             ADA_URL + " (appendix table: dense, fp32 accumulate)"),
)


def entry(device_name: str) -> GpuPeaks | None:
    """The table's entry for a reported GPU name ("NVIDIA H200", "NVIDIA H100 80GB HBM3"), else None."""
    name = " ".join(device_name.split())
    return next((g for g in TABLE if re.search(g.pattern, name, re.IGNORECASE)), None)


def peak(device: str, device_name: str | None, precision: str) -> Peak:
    """The dense peak of the run's GPU for `precision` (a precision axis value: fp32, tf32, bf16, fp16, fp8), or
    None with the reason: on CPU, a MIG slice, a GPU or a precision the table lacks."""
    if device != "cuda":
        return Peak(None, precision, reason=f"no peak on {device}: MFU is measured against a GPU's spec-sheet peak")
    if not device_name:
        return Peak(None, precision, reason="the GPU's name could not be read")
    if re.search(r"\bMIG\b", device_name):
        return Peak(None, precision, device_name=device_name,
                    reason=f"{device_name} is a MIG slice: its share of the GPU's peak is not in the table")
    found = entry(device_name)
    if found is None:
        return Peak(None, precision, device_name=device_name,
                    reason=f"{device_name} is not in apextui's peak table ({', '.join(g.name for g in TABLE)})")
    tflops = found.tflops.get(precision)
    if tflops is None:
        what = (f"no {precision} tensor cores" if precision in PRECISIONS
                else f"no peak for precision {precision!r} (the table has {', '.join(PRECISIONS)})")
        return Peak(None, precision, gpu=found.name, device_name=device_name, source=found.source,
                    reason=f"the {found.name} has {what}")
    return Peak(float(tflops), precision, gpu=found.name, device_name=device_name, source=found.source)
