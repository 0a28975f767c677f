"""`apextui advise`: what to use on *this* machine, computed from what was measured here.

For each workload, every available preset of it runs `repeats` times, interleaved (repeat 1 in preset
order, repeat 2 in reverse order, and so on: an ABBA order, so a slow drift such as a GPU warming up
does not favour whichever preset runs first), each run `steps` steps (default `DEFAULT_STEPS`: 100 on
CUDA, 30 on CPU at the presets' small size). Unavailable presets are listed with their reason and not
run; so are presets whose size differs from the baseline's (not comparable).

Numbers (all from the runs made; nothing is assumed):

- a preset's **median** is the median of its repeats' median ms/step (warm-up excluded, as in every
  run); its **p10 / p90** the median of its repeats' p10 / p90; its **spread** (max - min) / median of
  the repeat medians (unknown with one repeat). Failed or stopped runs are listed but never counted.
  Compile time (`compile_s`, torch.compile / CUDA-graph capture, before step 1) is reported on its own
  and never part of ms/step.
- a preset's **interval** is the hull of its repeats' 95 % median intervals and medians
  (`compare.timing_from_runs`): each run's own noise and the run-to-run spread.
- **speed-up** of A over B: median(B) / median(A) (> 1: A is faster), with its interval; **within noise**
  and faster / slower are `compare.compare`'s verdict (`NOISE_RULE`: the interval holds 1, or the faster
  is less than `NOISE_FLOOR`, 2 %, faster), the one rule every screen of apextui uses.
- **loss check** (workloads in `LOSS_CHECKED`: the transformer): a preset whose final loss (median over
  its repeats, same steps and seed) is more than `LOSS_TOLERANCE` (2 %) above the baseline's is
  flagged; a fused norm whose accuracy check failed is flagged too. Flagged presets are reported but
  never recommended.
- **recommended**: the one decision (`choice.choose`), from which every other line is worded: the torch-only
  choice (the fastest unflagged torch-only preset, unless within noise of the baseline: then the baseline),
  or the fastest Apex preset where it is faster, beyond noise, than the fastest torch-only one. The model's
  search picks its winner with the same function.
- **Apex**: per workload, the fastest measured Apex preset against the fastest measured torch-only one
  ("faster", "slower", "within_noise"); when no Apex preset could run here, "not_measurable" with the
  reason and the torch-only choice, and no number for Apex.
- **answer**: for a workload whose presets are points on the configuration axes (the user's model, the
  Transformer), the recommended point with its speed-ups, peak memory and code (`answer`).
- a one-device advice runs no data-parallel preset (`planning.plan`); `--nproc N` does.

`verdict()` and `overall_apex()` are pure (CPU-testable); `Advisor` runs the presets through any
factory with the Runner interface (`Runner.run()` is used when the runner has it, as headless does;
else `start()` and waiting, as with the TUI's worker-process runner). Every new advice is stored in
the user cache dir (`advice_file()`, next to the roofline's ceilings, written atomically) and can be
reused when it was measured in the same environment (`environment()`: device model, driver, torch,
Apex); reused advice says when, with how many steps and repeats and on which device it was measured
(`provenance`), and is flagged when its runs were shorter than the device's default (`trust_note`).
This package never imports Textual, nor torch at import time.

Modules, one job each: `records` (runs, measurements, verdicts and their JSON form), `choice` (the one
decision), `decide` (the verdicts), `wording` (words shown in more than one place), `planning` (which runs to
make), `cache` (the environment, the stored advice, reuse), `document` (the JSON document), `search` (the model's
configuration search), `answer` (the recommended configuration and its code), `advice_view` (the one renderer of
that document, for the CLI and the TUI), `run` (the `Advisor`, which makes the runs).
"""

from __future__ import annotations

from ..measure.compare import NOISE_FLOOR, NOISE_RULE
from .cache import advice_file, apex_fingerprint, environment, find_reusable, load_store, store
from .decide import apex_verdict, overall_apex, verdict
from .document import document
from .records import CACHE_FILE, CACHE_VERSION, DEFAULT_REPEATS, DEFAULT_STEPS, KIND, LOSS_CHECKED, LOSS_RULE, \
    LOSS_TOLERANCE, MAX_REPEATS, RUN_JOIN_S, SCHEMA, AdviceError, AdviceStatus, ApexStatus, ApexVerdict, \
    MachineApexStatus, Measurement, PresetStatus, RunResult, RunStatus, WorkloadStatus, WorkloadVerdict, versus
from .planning import AvailabilityFn, WorkloadPlan, parse_workloads, plan
from .advice_view import AdviceView, PresetRow, WorkloadView, format_text, text_lines, view
from .run import Advisor, Progress, ProgressFn, RunnerFactory, run_advice
from .wording import not_measured_text, provenance, roofline_text, trust_note

__all__ = [
    "CACHE_FILE", "CACHE_VERSION", "DEFAULT_REPEATS", "DEFAULT_STEPS", "KIND", "LOSS_CHECKED", "LOSS_RULE",
    "LOSS_TOLERANCE", "MAX_REPEATS", "NOISE_FLOOR", "NOISE_RULE", "RUN_JOIN_S", "SCHEMA", "AdviceError",
    "AdviceStatus", "AdviceView", "Advisor", "ApexStatus", "ApexVerdict", "AvailabilityFn", "MachineApexStatus",
    "Measurement", "PresetRow", "PresetStatus", "Progress", "ProgressFn", "RunResult", "RunStatus", "RunnerFactory",
    "WorkloadPlan", "WorkloadStatus", "WorkloadVerdict", "WorkloadView", "advice_file", "apex_fingerprint",
    "apex_verdict", "document", "environment", "find_reusable", "format_text", "load_store", "not_measured_text",
    "overall_apex", "parse_workloads", "plan", "provenance", "roofline_text", "run_advice", "store", "text_lines",
    "trust_note", "verdict", "versus", "view",
]
