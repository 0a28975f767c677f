"""Analysis (the roofline): this machine's ceilings, each run's achieved work against them, and a bottleneck label.

- **Ceilings** (`get_ceilings`): a large device-to-device copy (GB/s, bytes read + written) and large
  matmuls (TFLOP/s, per precision), measured here once and cached per device in a JSON file
  (`cache_file()`); `remeasure=True` measures again. On CPU: a memcpy and fp32/bf16 matmuls.
- **Work models** (pure arithmetic): the FLOPs and the fewest bytes of one step of each workload (the
  registry's `workloads.spec.work_per_step` picks a workload's). The optimizer's work is its optimizer step
  alone (`scope="opt_step"`), compared with that step's time; the others' with the whole step's.
- **Achieved** (`achieved`): work / time as TFLOP/s and GB/s, and as fractions of the ceilings; the
  arithmetic intensity (FLOP/byte) against the ridge point (compute ceiling / copy ceiling).
- **Bottleneck** (`classify`, pure): "host-bound" when the GPU is busy for less than `HOST_BOUND_BELOW`
  of the step, else "memory-bound" or "compute-bound" by which roofline fraction is higher (ties and
  single-figure cases by intensity against the ridge point), with the figures that decided it.
- **GPU busy fraction**: kernel time per step from a short torch.profiler (CUPTI) window of
  `PROFILE_STEPS` extra steps run *after* the measured steps (so the measured steps are never slowed),
  over the run's median ms/step; where the profiler fails, the mean NVML utilisation over the measured
  steps. `probe_after_run` (training thread) and `analyse_run` (delivery thread) tie this to the runner.
  Workloads that replay CUDA graphs are not profiled by default (NVML instead): a profiler started after
  graphs were captured has made such graphs fail or hang on some CUDA/torch versions (pytorch#75504), and
  on others misses their kernels; `APEXTUI_PROFILE_GRAPHS=1` profiles them anyway.

Modules: `work` (work models), `ceilings` (the ceilings and their cache), `bottleneck` (achieved and
`classify`), `profile` (the GPU-busy window), `run_analysis` (one run's analysis). `apextui/cli/roofline.py`
prints the ceilings (`python -m apextui.cli.roofline`).

Importing this package is cheap (no torch): the runner, events and front ends import it freely.
"""

from __future__ import annotations

from ..measure.details import Bottleneck, BottleneckLabel
from .bottleneck import HOST_BOUND_BELOW, Achieved, achieved, classify
from .ceilings import CACHE_ENV, CACHE_FILE, CACHE_VERSION, Ceilings, CeilingsUnavailable, cache_dir, cache_file, \
    device_key, get_ceilings, load_cache, measure_ceilings, save_cache
from .profile import MIN_NVML_SAMPLES, NVML_WINDOW_S, PROFILE_GRAPHS_ENV, PROFILE_STEPS, Busy, Probe, UtilAverage, \
    busy_from, probe_after_run, profile_kernel_ms, profile_skip_reason
from .run_analysis import RunAnalysis, analyse_run
from .work import ADAMW_BYTES_PER_PARAM, ADAMW_FLOPS_PER_PARAM, AMP_PRECISION, NORM_BYTES_PER_ELEMENT, \
    NORM_FLOPS_PER_ELEMENT, PRECISIONS, TRANSFORMER_ACT_PER_TOKEN_LAYER, TRANSFORMER_PARAM_BYTES, PerStepWork, \
    Primary, Scope, Work, norm_work, optimizer_work, transformer_work

__all__ = [
    "ADAMW_BYTES_PER_PARAM", "ADAMW_FLOPS_PER_PARAM", "AMP_PRECISION", "CACHE_ENV", "CACHE_FILE", "CACHE_VERSION",
    "HOST_BOUND_BELOW", "MIN_NVML_SAMPLES", "NORM_BYTES_PER_ELEMENT", "NORM_FLOPS_PER_ELEMENT", "NVML_WINDOW_S",
    "PRECISIONS", "PROFILE_GRAPHS_ENV", "PROFILE_STEPS", "TRANSFORMER_ACT_PER_TOKEN_LAYER", "TRANSFORMER_PARAM_BYTES",
    "Achieved", "Bottleneck", "BottleneckLabel", "Busy", "Ceilings", "CeilingsUnavailable", "PerStepWork", "Primary",
    "Probe", "RunAnalysis", "Scope", "UtilAverage", "Work", "achieved", "analyse_run", "busy_from", "cache_dir",
    "cache_file", "classify", "device_key", "get_ceilings", "load_cache", "measure_ceilings", "norm_work",
    "optimizer_work", "probe_after_run", "profile_kernel_ms", "profile_skip_reason", "save_cache", "transformer_work",
]
