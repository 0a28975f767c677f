"""Flat, JSON-ready dicts for runs: the headless JSON lines and saved results share them."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..config.point import Config
from ..monitor.contention import Contention
from ..monitor.sampler import GpuReading, MonitorReading
from ..presets import Preset
from .snapshot import RunInfo, Snapshot
from ..workloads.user_model import model_name
from ..measure.details import CorrectnessCheck
from ..measure.summary import Summary
from .timing import StepRecord

SCHEMA_VERSION = 2  # 2 (2026-12-06): `start` without `variant`; `config` with `parallel`; a workload a norm
CPU_NOTE = "running on CPU: using the preset's small cpu_size"
CPU_NOTE_MODEL = "running on CPU: your function's small size (small=True, where it takes it)"


def _finite(value: float | None) -> float | None:
    """A figure as the summary holds it: unrounded, None where it is not a finite number."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return float(value)


def _num(value: float | None, digits: int = 4) -> float | None:
    """A figure as a JSON line writes it: `_finite`, rounded."""
    v = _finite(value)
    return None if v is None else round(v, digits)


def start_line(*, preset: str, workload: str, device: str, steps: int | None, warmup: int,
               env: Mapping[str, Any], preset_file: str | None = None, model: dict[str, Any] | None = None,
               baseline: str | None = None, size: str = "default", size_params: Mapping[str, Any] | None = None,
               amp: str = "none", config: Config | None = None, config_label: str | None = None,
               note: str | None = None,
               contention: Contention | None = None, **extra: Any) -> dict[str, Any]:
    """The `start` line (docs/json.md), the one place its keys are written: a preset's run (`start_event`) and a
    watched run (`watch/lines.py`) fill it; `config`: the point the run runs (a watched run has none); `amp`: its
    autocast dtype, as every earlier line has it; `extra`: what a kind of run adds (`watch`, `distributed`)."""
    return {
        "event": "start", "schema": SCHEMA_VERSION, "preset": preset, "preset_file": preset_file, "model": model,
        "workload": workload, "baseline": baseline, "device": device, "size": size,
        "size_params": dict(size_params or {}), "steps": steps, "warmup": warmup, "amp": amp,
        "config": config.as_dict() if config is not None else None,
        "config_label": config_label,
        "note": note, "env": dict(env),
        # `contention`: was other work competing as the run started (`monitor.contention`; null when not read)
        "contention": contention.to_dict() if contention is not None else None,
        **extra,
    }


def start_event(preset: Preset, device: str, steps: int, warmup: int, env: Mapping[str, Any],
                contention: Contention | None = None, **extra: Any) -> dict[str, Any]:
    """A preset's `start` line; `extra`: e.g. a data-parallel run's `distributed`."""
    size_name = "cpu" if device == "cpu" else "default"
    return start_line(
        preset=preset.name, workload=preset.workload, device=device, steps=steps,
        warmup=warmup, env=env,
        preset_file=preset.path if preset.path != preset.model else None,  # a generated model preset: none
        model=model_fields(preset), baseline=preset.baseline, size=size_name,
        size_params=preset.cpu_size if size_name == "cpu" else preset.size,
        amp=preset.config.autocast, config=preset.config, config_label=preset.label,
        note=None if device != "cpu" else CPU_NOTE if preset.model is None else CPU_NOTE_MODEL,
        contention=contention, **extra)


def model_fields(preset: Preset) -> dict[str, Any] | None:
    """The user's model a run trains ({"spec", "name"}), None for a shipped workload."""
    if preset.model is None:
        return None
    return {"spec": preset.model, "name": model_name(preset.model)}


def setup_event(info: RunInfo) -> dict[str, Any]:
    return {
        "event": "setup",
        "units": info.units,
        "units_per_step": info.units_per_step,
        "params": info.params,
        "loss_floor": _num(info.loss_floor, 6),
        "check": info.check.to_dict() if info.check else None,
        "grad_scaler": info.uses_grad_scaler,
        "compile_s": _num(info.compile_s, 3),
        "flops_per_step": _num(info.flops_per_step, 1),
        "bytes_per_step": _num(info.bytes_per_step, 1),
        "work_scope": info.work.scope if info.work is not None else None,
        # what MFU rests on: the model's FLOPs a step (counted once) and the GPU's dense peak for the precision
        "model_flops": info.model_flops.to_dict() if info.model_flops is not None else None,
        "peak": info.peak.to_dict() if info.peak is not None else None,
    }


def analysis_fields(snap: Snapshot) -> dict[str, Any]:
    """The roofline and bottleneck of a finished run (all null when there is no analysis)."""
    a = getattr(snap, "analysis", None)
    if a is None:
        return {"gpu_busy": None, "gpu_busy_source": None, "gpu_busy_note": None, "gpu_kernel_ms": None,
                "roofline": None, "bottleneck": None}
    return {
        "gpu_busy": _finite(a.busy.fraction),
        "gpu_busy_source": a.busy.source,
        "gpu_busy_note": a.busy.note,
        "gpu_kernel_ms": _finite(a.busy.kernel_ms),
        "roofline": a.roofline(),
        "bottleneck": a.bottleneck,
    }


def gpu_fields(gpu: GpuReading) -> dict[str, Any]:
    """One GPU of the run, a small flat object (as gpustat's JSON lists GPUs): NVML's index, its metrics (null
    where unavailable) and `error`, why it gave no reading at all (else null)."""
    return {"index": gpu.index, **{k: _num(v, 2) for k, v in gpu.metrics().items()}, "error": gpu.error}


NO_CONTENTION = {"contention": None, "other_cpu_cores": None, "other_gpu_processes": None}


def monitor_fields(reading: MonitorReading | None) -> dict[str, Any]:
    """A step line's monitor keys: the flat fields (the run's first GPU, and the host), `gpus`, every GPU
    of the run, and the latest contention sample's level, other processes' CPU cores and GPU processes."""
    if reading is None:
        return {**{k: None for k in MonitorReading(time=0).metrics()}, "gpus": [], **NO_CONTENTION}
    c = reading.contention
    return {**{k: _num(v, 2) for k, v in reading.metrics().items()},
            "gpus": [gpu_fields(g) for g in reading.run_gpus], **(c.step_fields() if c else NO_CONTENTION)}


def step_event(rec: StepRecord, monitor: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "step",
        "step": rec.step,
        "steps": rec.steps,
        "ms": _num(rec.ms),
        "loss": _num(rec.loss, 6),
        "opt_ms": _num(rec.opt_ms),
        "loss_scale": _num(rec.loss_scale, 1),
        **monitor,
        **_rank_fields(rec),
    }


def _rank_fields(rec: StepRecord) -> dict[str, Any]:
    """A data-parallel interval's ranks (merge.MergedRecord): nothing for a single-process run."""
    rank_ms = getattr(rec, "rank_ms", None)
    if not rank_ms:
        return {}
    return {"rank_ms": [_num(v) for v in rank_ms], "slowest_rank": getattr(rec, "slowest_rank", None),
            "spread_ms": _num(max(rank_ms) - min(rank_ms)), "throughput": _num(getattr(rec, "throughput", None), 1)}


def summary(snap: Snapshot) -> Summary:
    """The run's summary: statistics over the measured (post-warm-up) steps, unrounded (its `to_dict` rounds them
    for the JSON line and the files), with the step times they come from."""
    info, st = snap.info, snap.stats
    return Summary(
        steps=snap.steps_done,
        warmup=info.warmup if info else None,
        measured_steps=st.steps if st else 0,
        timed_intervals=st.count if st else 0,
        block_steps=st.block_steps if st else None,
        median_ms=_finite(st.median_ms) if st else None,
        median_low_ms=_finite(st.median_low_ms) if st else None,
        median_high_ms=_finite(st.median_high_ms) if st else None,
        p10_ms=_finite(st.p10_ms) if st else None,
        p90_ms=_finite(st.p90_ms) if st else None,
        mean_ms=_finite(st.mean_ms) if st else None,
        min_ms=_finite(st.min_ms) if st else None,
        max_ms=_finite(st.max_ms) if st else None,
        opt_median_ms=_finite(snap.opt_stats.median_ms) if snap.opt_stats else None,
        throughput=_finite(snap.throughput),
        throughput_unit=f"{info.units}/s" if info else None,
        wall_throughput=_finite(st.wall_throughput(info.units_per_step)) if st and info else None,
        final_loss=_finite(snap.final_loss),
        loss_floor=_finite(info.loss_floor) if info else None,
        skipped_steps=snap.skipped_steps if info and info.uses_grad_scaler else None,
        loss_scale=_finite(snap.loss_scale) if info and info.uses_grad_scaler else None,
        check=info.check if info else None,
        elapsed_s=_finite(snap.elapsed_s),
        compile_s=_finite(info.compile_s) if info else None,
        **analysis_fields(snap),
        distributed=snap.distributed,
        peak_memory_bytes=snap.peak_memory_bytes,
        contention=snap.monitor.run_contention if snap.monitor else None,
        mfu=info.mfu(st.median_ms if st else None) if info else None,
        samples=st.samples if st else None,
    )


def check_error(check: CorrectnessCheck | None) -> str | None:
    """A failed correctness check in one line, naming the cause it found; None when it passed or there was none."""
    return check.error_line if check is not None else None


def end_line(status: str, error: str | None, summary: Summary | None = None,
             check_error: str | None = None) -> dict[str, Any]:
    """The `end` line (docs/json.md), the one place its keys are written; `summary` None: a run that ended before
    it had anything to report (a second signal, ranks that never joined)."""
    return {"event": "end", "status": status, "error": error, "check_error": check_error,
            "summary": summary.to_dict() if summary is not None else None}


def end_event(snap: Snapshot) -> dict[str, Any]:
    """A run's `end` line from its final snapshot; `check_error`: a failed correctness check (the run measured
    fine, its result is wrong: exit 4)."""
    return end_line(snap.status, snap.error, summary(snap), check_error(snap.info.check if snap.info else None))


DEVICE_FIX = "use --device auto or --device cpu"  # the fix of a device that is not there (`--device cuda`)


def unavailable_event(preset: Preset, device: str, reason: str, fix: str) -> dict[str, Any]:
    """The `unavailable` line (docs/json.md): `preset` cannot run on `device` (as asked, if it did not resolve)."""
    return {"event": "unavailable", "preset": preset.name, "device": device, "reason": reason, "fix": fix}
