"""A run's summary, typed: the one value a finished run's measurement travels as, from the runner (`events.summary`)
to the `end` line's `summary` object (docs/json.md), a saved results row (`ResultRow.summary`), an advice's run
(`RunResult.summary`) and the noise rule (`timing`). The engine and the comparisons use its attributes; dicts only
at the edges (`to_dict` for the JSON line and the results file, `from_dict` for a file or a `--json` output,
tolerant of old and foreign ones: a missing or ill-typed value is None, a key it does not know is kept and written
back). Its nested objects are typed records too (`details`: the correctness check, roofline, bottleneck and
data-parallel ranks; `monitor.contention.RunContention`; `mfu.Mfu`), each made by its producer; `to_dict` writes
them as the `end` line always has, the roofline, bottleneck, ranks and contention with floats to 6 significant
digits, the MFU with 4."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..monitor.contention import RunContention
from .compare import Timing
from .details import Bottleneck, CorrectnessCheck, Distributed, Roofline, json_ready
from .mfu import Mfu
from .samples import Samples

# the decimals each figure has in the JSON line and the files (ms to 0.1 µs, rates to 0.1, losses to 6 places)
DECIMALS: Mapping[str, int] = {
    **dict.fromkeys(("median_ms", "median_low_ms", "median_high_ms", "p10_ms", "p90_ms", "mean_ms", "min_ms", "max_ms",
                     "opt_median_ms", "gpu_busy", "gpu_kernel_ms"), 4),
    **dict.fromkeys(("throughput", "wall_throughput", "loss_scale"), 1),
    **dict.fromkeys(("final_loss", "loss_floor"), 6), **dict.fromkeys(("elapsed_s", "compile_s"), 3)}
ANALYSIS_KEYS = ("gpu_busy", "gpu_busy_source", "gpu_busy_note", "gpu_kernel_ms", "roofline", "bottleneck")


@dataclass(frozen=True)
class Summary:
    """Statistics over a run's measured (post-warm-up) steps; the field names are the JSON keys."""

    steps: int | None = None
    warmup: int | None = None
    measured_steps: int | None = None  # a run's summary always has both; an old or hand-made file may not
    timed_intervals: int | None = None
    block_steps: int | None = None
    median_ms: float | None = None
    median_low_ms: float | None = None
    median_high_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    opt_median_ms: float | None = None
    throughput: float | None = None  # at the median step
    throughput_unit: str | None = None
    wall_throughput: float | None = None  # over the measured steps' whole time (`Stats.wall_throughput`)
    final_loss: float | None = None
    loss_floor: float | None = None
    skipped_steps: int | None = None
    loss_scale: float | None = None
    check: CorrectnessCheck | None = None
    elapsed_s: float | None = None
    compile_s: float | None = None
    gpu_busy: float | None = None
    gpu_busy_source: str | None = None
    gpu_busy_note: str | None = None
    gpu_kernel_ms: float | None = None
    roofline: Roofline | None = None
    bottleneck: Bottleneck | None = None
    distributed: Distributed | None = None  # a data-parallel run's (docs/distributed.md); absent otherwise
    peak_memory_bytes: int | None = None  # a CUDA run's torch.cuda.max_memory_allocated(); None on CPU
    contention: RunContention | None = None  # other work competing over the run (monitor/contention.py)
    mfu: Mfu | None = None  # model FLOPs utilisation (measure/mfu.py): a null value with a reason where none is known
    samples: Samples | None = None  # the measured steps' times its statistics come from (measure/samples.py)
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys of a loaded summary this version does not know

    @property
    def timing(self) -> Timing | None:
        """What the noise rule reads of this run: its median and the median's interval (`Timing.read`: None without
        a usable median; an interval missing or not holding the median is unknown), over its timed intervals."""
        return Timing.read(self.median_ms, self.median_low_ms, self.median_high_ms,
                           self.timed_intervals or self.measured_steps or 0, self.samples)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (docs/json.md): every key but `distributed` and `samples`, there only when set, in the order
        the `end` line has always had (`peak_memory_bytes`, then `contention`), and `mfu` last."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in ("distributed", "samples") and value is None:  # there only when set
                continue
            if isinstance(value, CorrectnessCheck):  # the check's figures as the workload found them
                value = value.to_dict()
            elif isinstance(value, (Roofline, Bottleneck, Distributed, RunContention)):
                value = json_ready(value.to_dict())
            elif isinstance(value, (Mfu, Samples)):  # rounded by their own to_dict
                value = value.to_dict()
            elif isinstance(value, float) and f.name in DECIMALS:  # rounding at the edge only: held unrounded
                value = round(value, DECIMALS[f.name])
            out[f.name] = value
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Summary":
        """A summary as a results file or a `--json` output holds it; never raises on odd values."""
        known = _known_fields()
        values = {name: _typed(kind, d[name]) for name, kind in known.items() if name in d}
        extra = {k: v for k, v in d.items() if k not in known}
        return cls(**values, extra=extra)


@functools.cache
def _known_fields() -> dict[str, str]:
    """Summary's field names and their annotations, found once (a 10,000-run history reads 10,000 summaries)."""
    return {f.name: str(f.type) for f in fields(Summary) if f.name != "extra"}


_RECORDS: dict[str, Any] = {"CorrectnessCheck": CorrectnessCheck, "Roofline": Roofline, "Bottleneck": Bottleneck,
                             "Distributed": Distributed, "RunContention": RunContention, "Mfu": Mfu,
                             "Samples": Samples}


def _typed(kind: str, value: Any) -> Any:
    """`value` if it has the field's type (`kind`, its annotation), else None; a nested object as its record."""
    if value is None or isinstance(value, bool) and "bool" not in kind:
        return None
    if kind.startswith("int"):
        return value if isinstance(value, int) else None
    if kind.startswith("float"):
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    if kind.startswith("str"):
        return value if isinstance(value, str) else None
    record = _RECORDS.get(kind.partition(" ")[0])
    if record is not None:
        return record.from_dict(value) if isinstance(value, Mapping) else None
    return value
