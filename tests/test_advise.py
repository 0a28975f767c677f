"""`apextui advise`: the verdict rules (pure), the engine with scripted runners, the store and reuse,
and the CLI end to end on CPU (optimizer workload only: cheap, no torch.compile)."""

from __future__ import annotations

import json
from dataclasses import replace
import signal
import statistics
import subprocess
import sys
import time

import pytest

from apextui.cli import advise as advise_cli
from apextui.cli import command as cli
from apextui.core import advise
from apextui.core.measure.details import CorrectnessCheck
from apextui.core.advise import run as advise_run
from apextui.core.advise import Advisor, AdviceError, Measurement, RunResult, overall_apex, verdict
from apextui.core.availability import Availability
from apextui.core.presets import load_builtin, parse
from apextui.core.workloads.spec import WORKLOADS
from helpers import named
from apextui.core.run.snapshot import RunInfo, Snapshot
from apextui.core.measure.compare import Timing
from apextui.core.measure.stats import Stats
from apextui.core.measure.summary import Summary

from helpers import ROOT, cli_env, run_cli

ENV = {"device": "cpu", "name": "Test CPU", "torch": "2.13.0+cpu", "apex": "not installed", "threads": 2,
       "key": "cpu|Test CPU|2 threads|torch 2.13.0+cpu|apex not installed"}
NUM = (int, float)


# ---- helpers ---------------------------------------------------------------------------------------
def m(name, medians, *, variant=None, workload="optimizer", apex=(), loss=None, status="ok", planned=None,
      spread_p=0.05, check=None, available=True, reason="", ci=None) -> Measurement:
    """A measurement whose runs had these medians (p10/p90 at -/+ spread_p); each median's 95 % interval at
    -/+ ci (None: unknown, as in advice stored before the intervals, so only the 2 % floor applies)."""
    ok = status == "ok"
    runs = tuple(RunResult(i + 1, status, Summary(median_ms=v if ok else None,
                                                  median_low_ms=v * (1 - ci) if ok and ci is not None else None,
                                                  median_high_ms=v * (1 + ci) if ok and ci is not None else None,
                                                  p10_ms=v * (1 - spread_p) if status == "ok" else None,
                                                  p90_ms=v * (1 + spread_p) if status == "ok" else None,
                                                  final_loss=loss, steps=30, measured_steps=24, check=check),
                           error=None if status == "ok" else "RuntimeError: boom")
                 for i, v in enumerate(medians))
    return Measurement(name, workload, tuple(apex), runs=runs if available else (),
                       planned=(len(medians) if planned is None else planned) if available else 0,
                       available=available, reason=reason, config=point_named(workload, variant or name))


def point_named(workload: str, name: str):
    """The named point of this name: the measurement's workload's, else any shipped workload's (a verdict of one
    workload made of another's measurements), else None."""
    return named(workload, name) or next((c for w in WORKLOADS if (c := named(w, name)) is not None), None)


def unavailable(name, workload="optimizer", apex=("FusedAdam",)):
    return m(name, [], workload=workload, apex=apex, available=False,
             reason="needs NVIDIA Apex (FusedAdam), whose fused kernels run on CUDA only; this run is on CPU")


def stats(median: float) -> Stats:
    return Stats(count=24, median_ms=median, p10_ms=median * 0.9, p90_ms=median * 1.2, mean_ms=median,
                 min_ms=median * 0.8, max_ms=median * 1.5, steps=24, median_low_ms=median * 0.98,
                 median_high_ms=median * 1.02)


class ScriptedRunner:
    """The Runner interface (start/stop/join/is_alive/result), no training: one final snapshot whose median
    is the next value scripted for its preset; "fail" gives a failed run; "hold" waits for stop()."""

    def __init__(self, engine, request, callback):
        self.engine, self.preset, self.device, self.callback = engine, request.preset, request.device, callback
        self.steps = request.steps
        self.result = None
        self.stopped = False

    def _info(self):
        p = self.preset
        return RunInfo(preset=p.name, workload=p.workload, config=p.config, device=self.device, size_name="cpu",
                       size=dict(p.cpu_size), steps=self.steps, warmup=6, autocast=p.config.autocast, units="samples",
                       units_per_step=16, baseline=p.baseline)

    def _finish(self, status, median=None, loss=None, error=None):
        snap = Snapshot(status=status, info=self._info(), steps_done=self.steps if status == "ok" else 3,
                        new_steps=(), stats=stats(median) if median else None, throughput=None, skipped_steps=0,
                        monitor=None, elapsed_s=0.5, error=error, final_loss=loss)
        self.result = snap
        self.callback(snap)

    def start(self):
        self.engine.order.append(self.preset.name)
        self.callback(Snapshot(status="starting", info=None, steps_done=0, new_steps=(), stats=None,
                               throughput=None, skipped_steps=0, monitor=None, elapsed_s=0.0))
        script = self.engine.script[self.preset.name]
        value = script.pop(0) if len(script) > 1 else script[0]
        if value == "hold":
            self.engine.held = self
            return self
        if value == "fail":
            self._finish("failed", error="RuntimeError: scripted failure (at step 3)")
        else:
            self._finish("ok", value, loss=self.engine.loss.get(self.preset.name))
        return self

    def stop(self):
        self.stopped = True
        if self.result is None:
            self._finish("stopped", 9.0)

    def join(self, timeout=None):
        return True

    def is_alive(self):
        return self.result is None


class Scripted:
    """A runner factory: preset name -> medians (ms) of its successive runs, or "fail"/"hold"."""

    def __init__(self, script, loss=None):
        self.script = {k: list(v) for k, v in script.items()}
        self.loss = loss or {}
        self.order: list[str] = []
        self.held = None

    def __call__(self, request, callback):
        return ScriptedRunner(self, request, callback)


def cpu_availability(p):
    return Availability(False, "needs NVIDIA Apex, CUDA only; this run is on CPU", "use a GPU") if p.needs_apex \
        else Availability(True)


def optimizer_presets():
    return [p for p in load_builtin() if p.workload == "optimizer"]


def advisor(script, *, workloads=("optimizer",), repeats=2, availability_fn=None, presets=None, loss=None, **kw):
    engine = Scripted(script, loss)
    a = Advisor("cpu", steps=30, repeats=repeats, workloads=workloads, presets=presets or load_builtin(),
                availability_fn=availability_fn or (lambda p: Availability(True)), runner_factory=engine,
                env=ENV, **kw)
    return a, engine


# ---- the verdict rules ---------------------------------------------------------------------------
def test_a_run_result_carries_its_runs_summary_and_writes_the_advice_fields_from_it():
    """One measurement value: the run's `Summary` (the `end` line's) is what a RunResult holds and what the noise
    rule reads (its timing); the advice's JSON run entry is written from it, with the keys it always had."""
    from apextui.core.run import events

    info = RunInfo(preset="fp32", workload="transformer", config=None, device="cpu", size_name="cpu", size={},
                   steps=30, warmup=6, autocast="none", units="samples", units_per_step=16, baseline="fp32")
    snap = Snapshot(status="ok", info=info, steps_done=30, new_steps=(), stats=stats(10.0), throughput=None,
                    skipped_steps=0, monitor=None, elapsed_s=0.5, final_loss=2.5)
    r = RunResult.from_snapshot(1, snap)
    assert r.summary == events.summary(snap) and r.ok and r.median_ms == 10.0
    assert r.timing == r.summary.timing == Timing(10.0, 9.8, 10.2, n=24)
    assert r.to_dict() == {
        "repeat": 1, "status": "ok", "error": None, "median_ms": 10.0, "median_low_ms": 9.8, "median_high_ms": 10.2,
        "timed_intervals": 24, "p10_ms": 9.0, "p90_ms": 12.0, "steps": 30, "measured_steps": 24, "final_loss": 2.5,
        "compile_s": None, "elapsed_s": 0.5, "gpu_busy": None, "bottleneck": None, "peak_memory_bytes": None,
        "contention": None, "round": None}
    never = RunResult(2, "failed", error="could not start")  # a run that never started: an empty summary
    assert never.timing is None and never.to_dict()["steps"] == 0 and never.to_dict()["timed_intervals"] == 0


def test_a_clear_win():
    v = verdict("optimizer", [m("adamw", [3.0, 3.02]), m("adamw_fused", [1.30, 1.31]), unavailable("fused_adam")])
    assert v.fastest == "adamw_fused" and v.runner_up == "adamw" and v.recommended == "adamw_fused"
    assert v.speedup_vs_baseline == pytest.approx(3.01 / 1.305)
    assert v.within_noise is False and v.baseline_within_noise is False and v.status == "complete"
    assert "adamw_fused is fastest here" in v.text and "2.31× the baseline adamw" in v.text
    assert "beyond noise" in v.text and v.text.endswith("Use: adamw_fused")


def test_within_noise_by_the_floor():
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.30, 1.30]), m("fused_adam", [1.313, 1.313],
                                                                                      apex=("FusedAdam",))])
    assert v.fastest == "adamw_fused" and v.runner_up == "fused_adam"
    assert v.within_noise is True and v.noise_threshold == advise.NOISE_FLOOR  # no spread: the 2 % floor
    assert v.difference == pytest.approx(0.01) and v.tied == ("fused_adam",)
    assert "within noise (1.0 % slower, noise ±2.0 %)" in v.text and "(or fused_adam: within noise)" in v.text
    assert v.apex.status == "within_noise" and "not worth installing" in v.apex.text


def test_within_noise_by_the_run_to_run_spread():
    # 4 % apart: beyond the 2 % floor, but a preset whose repeats differ by 6 % cannot tell them apart.
    # Changed with the one noise rule (core/compare.py): the spread now counts through the interval, the
    # hull of the repeats' own 95 % intervals (here ±1 %) and medians: layernorm 0.99..1.0706 against
    # rmsnorm 1.0593..1.0807 gives a speed-up interval holding 1; the noise is how far it reaches.
    noisy = verdict("layer_norm", [m("layernorm", [1.00, 1.06], ci=0.01), m("rmsnorm", [1.07, 1.07], ci=0.01)])
    assert noisy.within_noise is True
    assert noisy.noise_threshold == pytest.approx(1.07 / 1.03 - 1.07 * 0.99 / (1.06 * 1.01), rel=1e-6)
    assert noisy.recommended == "layernorm"
    steady = verdict("layer_norm", [m("layernorm", [1.03, 1.03], ci=0.01), m("rmsnorm", [1.07, 1.071], ci=0.01)])
    assert steady.within_noise is False and steady.fastest == "layernorm"
    # Changed too: repeats without intervals (advice stored before them) have an unknown interval, never
    # the medians' range taken as one, so only the 2 % floor decides (the old rule used the spread here)
    old = verdict("layer_norm", [m("layernorm", [1.00, 1.06]), m("rmsnorm", [1.07, 1.07])])
    assert old.within_noise is False and old.noise_threshold == advise.NOISE_FLOOR


def test_a_wide_interval_is_noise_whatever_the_speedup_and_every_output_says_so():
    """The busy 2-core box: adamw_fused's median 1.42 ms had the interval 0.811–75.4 ms; the table said
    18.96× while the advice said within noise. Now the verdict, its text and the JSON agree."""
    runs = (RunResult(1, "ok", Summary(median_ms=1.42, median_low_ms=0.811, median_high_ms=75.4, timed_intervals=10)),)
    fused = Measurement("adamw_fused", "optimizer", runs=runs, planned=1)
    v = verdict("optimizer", [m("adamw", [26.9], ci=0.02), fused])
    assert v.fastest == "adamw_fused" and v.baseline_within_noise is True and v.recommended == "adamw"
    assert "unmeasurable (spread >10×)" in v.text and "18.94" not in v.text
    assert "the runner-up adamw is within noise" in v.text
    entry = next(p for p in v.to_dict()["presets"] if p["preset"] == "adamw_fused")
    assert entry["speedup_vs_baseline"] == pytest.approx(18.9437, abs=1e-4)
    assert entry["speedup_vs_baseline_verdict"] == "within_noise"
    assert entry["speedup_vs_baseline_low"] < 1 < entry["speedup_vs_baseline_high"]
    assert (entry["median_low_ms"], entry["median_high_ms"]) == (0.811, 75.4)
    text = advise.format_text({"device": "cpu", "environment": ENV, "settings": {"steps": 30, "repeats": 1},
                               "measured_at": "now", "elapsed_s": 1, "workloads": [v.to_dict()],
                               "apex": overall_apex([v.to_dict()])})
    assert "unmeasurable (spread >10×)" in text and "0.35–33.8" not in text


def test_the_baseline_is_fastest():
    v = verdict("layer_norm", [m("layernorm", [0.9, 0.9]), m("rmsnorm", [1.2, 1.2]),
                               unavailable("fused_layernorm", "layer_norm")])
    assert v.fastest == "layernorm" and v.recommended == "layernorm" and v.speedup_vs_baseline == 1.0
    assert v.text.startswith("layer_norm: the baseline layernorm is fastest here")
    assert v.baseline_within_noise is True


def test_a_gain_within_noise_of_the_baseline_recommends_the_baseline():
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [2.97, 2.97])])
    assert v.fastest == "adamw_fused" and v.recommended == "adamw"
    assert "nothing is measurably faster than the baseline" in v.text


def test_apex_not_installed_is_never_given_a_number():
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.3, 1.3]), unavailable("fused_adam")])
    a = v.apex
    assert a.status == "not_measurable" and a.best_apex is None and a.best_apex_ms is None and a.speedup is None
    assert "cannot be measured here" in a.text and "best torch-only option is adamw_fused" in a.text
    assert "CUDA only" in a.reason
    d = v.to_dict()
    assert d["apex"]["speedup"] is None and d["apex"]["best_apex_ms"] is None
    fused = next(p for p in d["presets"] if p["preset"] == "fused_adam")
    assert fused["status"] == "unavailable" and fused["median_ms"] is None and fused["runs"] == []
    over = overall_apex([d])
    assert over["status"] == "not_measurable" and "optimizer: adamw_fused" in over["text"]


def test_apex_slower_than_torch_native():
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.0, 1.0]), m("fused_adam", [1.2, 1.2],
                                                                                  apex=("FusedAdam",))])
    assert v.apex.status == "slower" and v.apex.speedup == pytest.approx(1.0 / 1.2)
    assert "torch-only adamw_fused is 1.20× faster than the best Apex fused_adam" in v.apex.text
    assert overall_apex([v.to_dict()])["status"] == "not_worth_it"


def test_apex_faster_is_worth_it_and_mixed_across_workloads():
    opt = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.3, 1.3]), m("fused_adam", [1.1, 1.1],
                                                                                   apex=("FusedAdam",))])
    assert opt.apex.status == "faster" and opt.apex.speedup == pytest.approx(1.3 / 1.1)
    norm = verdict("layer_norm", [m("layernorm", [0.9, 0.9]),
                                  m("fused_layernorm", [0.9, 0.9], apex=("FusedLayerNorm",))])
    assert norm.apex.status == "within_noise"
    assert overall_apex([opt.to_dict()])["status"] == "worth_it"
    mixed = overall_apex([opt.to_dict(), norm.to_dict()])
    assert mixed["status"] == "mixed" and "fused_adam 1.18× vs adamw_fused" in mixed["text"]


def test_transformer_loss_flag():
    t = "transformer"
    v = verdict(t, [m("fp32", [12.0, 12.0], workload=t, loss=2.00),
                    m("fused_amp", [5.0, 5.0], workload=t, loss=2.10, apex=("FusedAdam", "FusedLayerNorm")),
                    m("torch_amp", [5.6, 5.6], workload=t, loss=2.03)])
    assert v.fastest == "fused_amp" and v.recommended == "torch_amp"
    (flag,) = v.flags
    assert flag["preset"] == "fused_amp" and flag["kind"] == "loss" and flag["worse_by"] == pytest.approx(0.05)
    assert "FLAGGED" in v.text and "Use: torch_amp" in v.text
    assert v.apex.status == "faster_flagged"  # faster, but not a clear gain
    assert overall_apex([v.to_dict()])["status"] == "not_worth_it"
    d = v.to_dict()
    assert next(p for p in d["presets"] if p["preset"] == "fused_amp")["flagged"] is True
    # only the transformer's losses are compared
    o = verdict("optimizer", [m("adamw", [3.0, 3.0], loss=2.0), m("adamw_fused", [1.3, 1.3], loss=2.5)])
    assert o.flags == () and o.recommended == "adamw_fused"


def test_a_failed_accuracy_check_is_flagged():
    v = verdict("layer_norm", [m("layernorm", [0.9, 0.9]), m("fused_layernorm", [0.4, 0.4], apex=("FusedLayerNorm",),
                                                      check=CorrectnessCheck(passed=False, max_abs_err=0.1))])
    assert [f["kind"] for f in v.flags] == ["check"] and v.recommended == "layernorm"


def test_failed_runs_are_reported_never_counted():
    some = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.3, 1.3], status="failed")])
    assert some.fastest == "adamw" and some.status == "complete"
    assert any("adamw_fused failed: RuntimeError: boom" in n for n in some.notes)
    d = some.to_dict()
    failed = next(p for p in d["presets"] if p["preset"] == "adamw_fused")
    assert failed["status"] == "failed" and failed["median_ms"] is None and failed["errors"]
    # one repeat of two failed: the other counts, and the note says so
    half = Measurement("adamw_fused", "optimizer", runs=(
        RunResult(1, "failed", error="OOM"), RunResult(2, "ok", Summary(median_ms=1.3, p10_ms=1.2, p90_ms=1.4))),
        planned=2)
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), half])
    assert v.fastest == "adamw_fused" and half.medians_ms == [1.3]
    assert any("1 of 2 runs did not finish ok" in n for n in v.notes)
    every = verdict("optimizer", [m("adamw", [3.0], status="failed"), m("adamw_fused", [1.0], status="failed")])
    assert every.status == "failed" and every.fastest is None and every.recommended is None
    assert "every run failed" in every.text


def test_partial_results():
    v = verdict("optimizer", [m("adamw", [3.0, 3.0]), m("adamw_fused", [1.3], planned=2),
                              m("fused_adam", [], planned=2, apex=("FusedAdam",))])
    assert v.status == "partial" and v.fastest == "adamw_fused"
    assert any(n.startswith("partial") for n in v.notes)
    assert v.apex.status == "not_measured" and v.apex.speedup is None
    none = verdict("optimizer", [m("adamw", [], planned=2), m("adamw_fused", [], planned=2)])
    assert none.status == "not_measured" and none.fastest is None


def test_one_repeat_says_the_spread_is_unknown():
    v = verdict("optimizer", [m("adamw", [3.0]), m("adamw_fused", [1.3])])
    assert any("one repeat" in n for n in v.notes) and v.noise_threshold == advise.NOISE_FLOOR


def test_parse_workloads():
    assert advise.parse_workloads(None) == ("optimizer", "layer_norm", "rms_norm", "transformer")
    assert advise.parse_workloads("rms_norm, optimizer,rms_norm") == ("rms_norm", "optimizer")
    # "norm", one workload for both norms until 2026-12-06: both norms' workloads
    assert advise.parse_workloads("norm, optimizer,rms_norm") == ("layer_norm", "rms_norm", "optimizer")
    with pytest.raises(AdviceError, match="unknown workload 'gpu'"):
        advise.parse_workloads("optimizer,gpu")
    with pytest.raises(AdviceError, match="no workload"):
        advise.parse_workloads(" , ")


# ---- the engine --------------------------------------------------------------------------------
def test_engine_interleaves_abba_and_reports_the_runs_numbers():
    events = []
    a, engine = advisor({"adamw": [3.0, 3.2], "adamw_fused": [1.3, 1.25], "fused_adam": [1.1, 1.12]},
                        availability_fn=lambda p: Availability(p.name not in ("adamw_capturable_graph", "fused_lamb"),
                                                               "CUDA graphs or Apex", "use a GPU"),
                        on_progress=events.append)
    doc = a.run()
    assert engine.order == ["adamw", "adamw_fused", "fused_adam", "fused_adam", "adamw_fused", "adamw"]
    assert doc["status"] == "complete" and doc["runs"] == {"total": 6, "ok": 6, "failed": 0, "stopped": 0}
    (w,) = doc["workloads"]
    by = {p["preset"]: p for p in w["presets"]}
    assert by["adamw"]["repeat_medians_ms"] == [3.0, 3.2] and by["adamw"]["median_ms"] == pytest.approx(3.1)
    assert by["adamw"]["spread"] == round(0.2 / 3.1, 4)
    assert by["adamw"]["p10_ms"] == pytest.approx(statistics.median([2.7, 3.2 * 0.9]))
    # the interval: the hull of the two runs' intervals and medians
    assert (by["adamw"]["median_low_ms"], by["adamw"]["median_high_ms"]) == (2.94, round(3.2 * 1.02, 4))
    assert [r["median_low_ms"] for r in by["adamw"]["runs"]] == [2.94, round(3.2 * 0.98, 4)]
    assert by["fused_adam"]["speedup_vs_baseline_verdict"] == "faster"
    # both ran in both ABBA rounds: compared round by round, the lower end round 1's (3.0 / 1.1, each at its 95 %
    # end), not the pooled hulls' 2.94 / 1.1424
    assert by["fused_adam"]["speedup_vs_baseline_low"] == round(3.0 * 0.98 / (1.1 * 1.02), 4)
    assert [r["round"] for r in by["adamw"]["runs"]] == [1, 2]
    assert by["adamw_capturable_graph"]["status"] == "unavailable" and by["adamw_capturable_graph"]["runs"] == []
    assert w["fastest"] == "fused_adam" and w["apex"]["status"] == "faster"
    kinds = [e.event for e in events]
    assert kinds[0] == "plan" and kinds[1] == "skip" and kinds[-1] == "done" and kinds.count("run_end") == 6
    ends = [e for e in events if e.event == "run_end"]
    assert [(e.index, e.preset, e.repeat) for e in ends][:3] == [(1, "adamw", 1), (2, "adamw_fused", 1),
                                                                 (3, "fused_adam", 1)]
    assert "ok, median 3.00 ms/step" in ends[0].line()


def test_engine_uses_run_when_the_runner_has_it():
    calls = []

    class WithRun(ScriptedRunner):
        def run(self):
            calls.append(self.preset.name)
            self.start()
            return self.result

    # 5x: single runs, so beyond the factor of 2 a comparison of runs made one after another is widened by
    engine = Scripted({"adamw": [5.0], "adamw_fused": [1.0]})
    factory = lambda request, cb: WithRun(engine, request, cb)  # noqa: E731
    a = Advisor("cpu", steps=10, repeats=1, workloads="optimizer", presets=optimizer_presets(),
                availability_fn=lambda p: Availability(not p.needs_apex and "graph" not in p.name),
                runner_factory=factory, env=ENV)
    doc = a.run()
    assert calls == ["adamw", "adamw_fused"] and doc["workloads"][0]["recommended"] == "adamw_fused"


def test_a_preset_of_another_size_is_not_compared():
    base = load_builtin()
    mine = parse({"workload": "optimizer", "variant": "adamw_fused", "steps": 50,
                  "size": {"layers": 60, "width": 512, "batch": 32},
                  "cpu_size": {"layers": 2, "width": 64, "batch": 4}}, name="tiny_fused")
    a, engine = advisor({"adamw": [3.0], "adamw_fused": [1.3], "fused_adam": [1.1], "adamw_capturable_graph": [2.0]},
                        presets=base + [mine], repeats=1)
    doc = a.run()
    tiny = next(p for p in doc["workloads"][0]["presets"] if p["preset"] == "tiny_fused")
    assert tiny["status"] == "unavailable" and "not comparable" in tiny["reason"] and "tiny_fused" not in engine.order


def test_stop_gives_a_partial_advice():
    a, engine = advisor({"adamw": [3.0], "adamw_fused": ["hold"], "fused_adam": [1.1], "adamw_capturable_graph": [2.0],
                         "layernorm": [1.0]}, workloads=("optimizer", "layer_norm"))

    def stop_when_held(p):
        if p.event == "run" and p.preset == "adamw_fused":
            a.stop()

    a.on_progress = stop_when_held
    doc = a.run()
    assert engine.order == ["adamw", "adamw_fused"] and engine.held.stopped
    assert doc["status"] == "partial" and doc["runs"] == {"total": 2, "ok": 1, "failed": 0, "stopped": 1}
    opt, norm = doc["workloads"]
    assert opt["status"] == "partial" and norm["status"] == "not_measured"
    assert opt["fastest"] == "adamw"  # what was measured; the stopped run is listed, never counted
    fused = next(p for p in opt["presets"] if p["preset"] == "adamw_fused")
    assert fused["status"] == "stopped" and fused["median_ms"] is None and fused["runs"][0]["median_ms"] == 9.0


def test_a_runner_that_cannot_start_is_a_failed_run():
    def broken(request, callback):
        raise OSError("no worker")

    a = Advisor("cpu", steps=10, repeats=1, workloads="optimizer", presets=optimizer_presets(),
                availability_fn=cpu_availability, runner_factory=broken, env=ENV)
    doc = a.run()
    assert doc["runs"]["ok"] == 0 and doc["workloads"][0]["status"] == "failed"
    assert "could not start: OSError: no worker" in doc["workloads"][0]["presets"][0]["errors"][0]


def test_bad_settings_are_refused():
    with pytest.raises(AdviceError, match="repeats"):
        Advisor("cpu", repeats=0, presets=[], env=ENV)
    with pytest.raises(AdviceError, match="unknown workload"):
        Advisor("cpu", workloads="gpu", presets=[], env=ENV)
    with pytest.raises(AdviceError, match="steps"):
        Advisor("cpu", steps=0, presets=[], env=ENV)


# ---- store and reuse ----------------------------------------------------------------------------
def test_a_store_that_is_a_fifo_or_too_big_is_a_note_and_is_replaced(tmp_path):
    import os

    from apextui.core import files

    fifo, huge = tmp_path / "fifo.json", tmp_path / "huge.json"
    os.mkfifo(fifo)  # an ordinary open() would block forever
    with huge.open("wb") as f:
        f.truncate(files.DATA_LIMIT + 1)
    assert advise.load_store(fifo) == ({}, f"stored advice is unreadable ({fifo}: not a regular file (a FIFO); "
                                           "a stored advice file must be a regular file)")
    entries, note = advise.load_store(huge)
    assert entries == {} and f"{huge}: too large for a stored advice file" in note
    got, why = advise.find_reusable(ENV, ("optimizer",), path=fifo)
    assert got is None and "not a regular file" in why
    a, _ = advisor({"adamw": [3.0], "adamw_fused": [1.3], "fused_adam": [1.1], "adamw_capturable_graph": [2.0]},
                   availability_fn=cpu_availability, repeats=1)
    advise.store(a.run(), fifo)  # the FIFO is replaced by a good store
    assert advise.load_store(fifo)[1] is None and advise.load_store(fifo)[0]


def test_store_is_atomic_and_reuse_needs_the_same_environment(tmp_path):
    path = tmp_path / "advice.json"
    a, _ = advisor({"adamw": [3.0], "adamw_fused": [1.3], "fused_adam": [1.1], "adamw_capturable_graph": [2.0]},
                   availability_fn=cpu_availability, repeats=1)
    doc = a.run()
    advise.store(doc, path)
    assert [p.name for p in tmp_path.iterdir()] == ["advice.json"]  # no temporary file left behind
    plans = a.plans()
    got, why = advise.find_reusable(ENV, ("optimizer",), plans, path=path)
    assert why == "reused" and got["reused"] is True and got["workloads"] == doc["workloads"]
    assert doc["measured_at"] in got["reuse_note"] and got["measured_at"] == doc["measured_at"]
    other = dict(ENV, key=ENV["key"].replace("torch 2.13.0", "torch 2.12.0"))
    assert advise.find_reusable(other, ("optimizer",), plans, path=path)[0] is None
    assert "does not cover rms_norm" in advise.find_reusable(ENV, ("optimizer", "rms_norm"), path=path)[1]
    assert got["runs"] == doc["runs"] and got["apex"] == doc["apex"]
    assert "ran 30 steps, not 50" in advise.find_reusable(ENV, ("optimizer",), path=path, steps=50)[1]
    assert "1 repeats, not 2" in advise.find_reusable(ENV, ("optimizer",), path=path, repeats=2)[1]
    # a partial advice is stored, never reused
    advise.store(dict(doc, status="partial"), path)
    assert "partial" in advise.find_reusable(ENV, ("optimizer",), path=path)[1]
    path.write_text("{not json")
    got, why = advise.find_reusable(ENV, ("optimizer",), path=path)
    assert got is None and "unreadable" in why
    advise.store(doc, path)  # a corrupt store is replaced
    assert advise.find_reusable(ENV, ("optimizer",), path=path)[0] is not None


def test_apex_fingerprint_without_importing_apex():
    assert "apex" not in sys.modules
    fp = advise.apex_fingerprint()
    assert isinstance(fp, str) and fp
    assert "apex" not in sys.modules


# ---- the CLI -------------------------------------------------------------------------------------
def check_schema(doc: dict) -> None:
    """The documented `apextui advise --json` schema (docs/advise.md)."""
    assert doc["kind"] == "apextui-advice" and doc["schema"] == 2
    assert doc["status"] in ("complete", "partial") and isinstance(doc["reused"], bool)
    assert isinstance(doc["measured_at"], str) and isinstance(doc["measured_at_unix"], NUM)
    assert doc["device"] in ("cpu", "cuda") and isinstance(doc["elapsed_s"], NUM)
    for k in ("device", "name", "torch", "apex", "key"):
        assert isinstance(doc["environment"][k], str), k
    s = doc["settings"]
    assert isinstance(s["steps"], int) and isinstance(s["repeats"], int) and isinstance(s["workloads"], list)
    assert doc["rules"]["noise_floor"] == 0.02 and doc["rules"]["loss_tolerance"] == 0.02
    assert set(doc["runs"]) == {"total", "ok", "failed", "stopped"}
    assert set(doc["apex"]) == {"status", "text", "workloads"}
    assert doc["trust_note"] is None or doc["trust_note"].startswith("too few steps to trust")
    for w in doc["workloads"]:
        assert w["status"] in ("complete", "partial", "not_measured", "failed")
        for k in ("fastest", "runner_up", "recommended", "baseline"):
            assert w[k] is None or isinstance(w[k], str)
        for k in ("speedup_vs_baseline", "speedup_vs_runner_up", "difference", "noise_threshold"):
            assert w[k] is None or isinstance(w[k], NUM)
        assert w["within_noise"] in (None, True, False) and isinstance(w["verdict"], str)
        assert isinstance(w["tied"], list) and isinstance(w["flags"], list) and isinstance(w["notes"], list)
        assert set(w["apex"]) == {"status", "text", "best_apex", "best_apex_ms", "best_torch", "best_torch_ms",
                                  "speedup", "difference", "noise_threshold", "reason", "torch_choice"}
        for p in w["presets"]:
            assert p["status"] in ("ok", "failed", "stopped", "unavailable", "not_run")
            for k in ("median_ms", "median_low_ms", "median_high_ms", "p10_ms", "p90_ms", "spread",
                      "speedup_vs_baseline", "speedup_vs_baseline_low", "speedup_vs_baseline_high", "final_loss",
                      "compile_s"):
                assert p[k] is None or isinstance(p[k], NUM), k
            assert p["speedup_vs_baseline_verdict"] in (None, "faster", "slower", "within_noise")
            assert isinstance(p["repeats"], int) and isinstance(p["repeat_medians_ms"], list)
            assert p["bottleneck"] is None or {"label", "reason", "figures"} <= set(p["bottleneck"])
            for r in p["runs"]:
                assert r["status"] in ("ok", "stopped", "failed") and isinstance(r["repeat"], int)
                assert r["median_ms"] is None or isinstance(r["median_ms"], NUM)


def check_consistent(doc: dict) -> None:
    """Every aggregate is computed from the runs listed with it."""
    for w in doc["workloads"]:
        base = next(p for p in w["presets"] if p["is_baseline"])
        for p in w["presets"]:
            # `repeats` counts the ok runs; the medians, p10/p90 and the evidence run are those the comparisons read:
            # the ok runs less those left out as disturbed (a loaded machine disturbs some: `left_out`)
            out = {x["repeat"] for x in p["left_out"]}
            every = [r for r in p["runs"] if r["status"] == "ok"]
            ok = [r for r in every if r["repeat"] not in out]
            assert p["repeat_medians_ms"] == [r["median_ms"] for r in ok] and p["repeats"] == len(every)
            if ok:
                # the runs' step times pooled (measure/samples.py): a median between the runs' own, and percentiles
                # around it; the speed-up from the unrounded figures, within their rounding of the shown ones
                medians = [r["median_ms"] for r in ok]
                assert min(medians) - 1e-4 <= p["median_ms"] <= max(medians) + 1e-4
                assert p["p10_ms"] <= p["median_ms"] <= p["p90_ms"] and p["evidence_run"] not in out
                assert p["median_low_ms"] <= min(medians) and p["median_high_ms"] >= max(medians)
                assert p["speedup_vs_baseline"] == pytest.approx(base["median_ms"] / p["median_ms"], rel=2e-4)
        fastest = min((p for p in w["presets"] if p["median_ms"] is not None), key=lambda p: p["median_ms"])
        assert w["fastest"] == fastest["preset"]


@pytest.mark.slow
def test_cli_end_to_end_on_cpu_then_reuse():
    proc = run_cli("advise", "--workloads", "optimizer", "--steps", "20", "--repeats", "2", "--device", "cpu",
                   "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # one JSON document, nothing else on stdout
    check_schema(doc)
    check_consistent(doc)
    assert doc["status"] == "complete" and doc["reused"] is False and doc["device"] == "cpu"
    assert doc["settings"] == dict(doc["settings"], steps=20, repeats=2, workloads=["optimizer"])
    assert doc["runs"] == {"total": 4, "ok": 4, "failed": 0, "stopped": 0}
    (w,) = doc["workloads"]
    by = {p["preset"]: p for p in w["presets"]}
    assert by["adamw"]["repeats"] == by["adamw_fused"]["repeats"] == 2
    assert all(r["steps"] == 20 for p in (by["adamw"], by["adamw_fused"]) for r in p["runs"])
    assert by["adamw"]["bottleneck"]["label"] in ("memory-bound", "compute-bound", "host-bound", "unknown")
    assert by["adamw"]["roofline"]["scope"] == "opt_step"
    assert by["fused_adam"]["status"] == "unavailable" and by["adamw_capturable_graph"]["status"] == "unavailable"
    assert w["apex"]["status"] == "not_measurable" and w["apex"]["speedup"] is None
    assert doc["apex"]["status"] == "not_measurable"
    # progress: a line per run on stderr, the unavailable presets named
    assert [line for line in proc.stderr.splitlines()
            if "] optimizer " in line and ": ok, median" in line].__len__() == 4
    assert "fused_adam: not run: needs NVIDIA Apex" in proc.stderr

    again = run_cli("advise", "--workloads", "optimizer", "--device", "cpu", "--reuse", "--json", timeout=120)
    assert again.returncode == 0, again.stderr
    reused = json.loads(again.stdout)
    assert reused["reused"] is True and reused["measured_at"] == doc["measured_at"]
    assert reused["workloads"] == doc["workloads"] and "] optimizer" not in again.stderr
    assert "reused the advice of this same environment, measured on" in again.stderr
    text = run_cli("advise", "--workloads", "optimizer", "--device", "cpu", "--reuse", timeout=120)
    assert text.returncode == 0 and "reused the advice of this same environment, measured on" in text.stdout
    assert "verdict: optimizer:" in text.stdout and "Apex on this machine: Apex cannot be measured here" in text.stdout
    # another number of steps: nothing to reuse, so it measures (and says why)
    fresh = run_cli("advise", "--workloads", "optimizer", "--device", "cpu", "--reuse", "--steps", "8",
                    "--repeats", "1", timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    assert "nothing to reuse: the stored advice ran 20 steps, not 8" in fresh.stderr and "measured " in fresh.stdout


@pytest.mark.slow
def test_cli_numbers_are_those_of_the_runs_it_made(capsys):
    from apextui.core.measure.samples import Samples
    from apextui.core.run import events
    from apextui.core.run.runner import Runner

    made = []

    def recording(request, callback):
        def record(snap):
            if snap.finished:
                made.append((request.preset.name, events.summary(snap).to_dict()))
            callback(snap)

        return Runner(request, record)

    rc = advise_cli.main(["--workloads", "optimizer", "--steps", "12", "--repeats", "2", "--device", "cpu", "--json"],
                         runner_factory=recording)
    out = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out)
    check_schema(doc)
    assert [name for name, _ in made] == ["adamw", "adamw_fused", "adamw_fused", "adamw"]
    by = {p["preset"]: p for p in doc["workloads"][0]["presets"]}
    for name in ("adamw", "adamw_fused"):
        runs = [s for n, s in made if n == name]
        assert [r["median_ms"] for r in by[name]["runs"]] == [s["median_ms"] for s in runs]
        assert [r["p90_ms"] for r in by[name]["runs"]] == [s["p90_ms"] for s in runs]
        assert [r["median_low_ms"] for r in by[name]["runs"]] == [s["median_low_ms"] for s in runs]
        # the aggregate is that of the runs the comparisons read: a run other work disturbed (a loaded box) is left
        # out, and named (compare.DISTURBED_RULE)
        out = {x["repeat"] for x in by[name]["left_out"]}
        kept = [s for i, s in enumerate(runs, start=1) if i not in out]
        # the runs' step times pooled: their median, and as interval the hull of the pooled median's interval and
        # the runs' own (the times in the end lines are to 0.1 µs, as every figure there)
        pooled = Samples.pool([Samples.from_dict(s["samples"]) for s in kept]) if len(kept) > 1 else None
        ends = [*pooled.median_interval(), pooled.median] if pooled is not None else []
        assert by[name]["median_low_ms"] == pytest.approx(min([s["median_low_ms"] for s in kept] + ends), abs=1e-4)
        assert by[name]["median_high_ms"] == pytest.approx(max([s["median_high_ms"] for s in kept] + ends), abs=1e-4)
        median = pooled.median if pooled is not None else kept[0]["median_ms"]
        assert by[name]["median_ms"] == pytest.approx(median, abs=1e-4)
        assert by[name]["final_loss"] == round(statistics.median(s["final_loss"] for s in runs), 6)
    rep = by["adamw"]["evidence_run"]
    assert by["adamw"]["bottleneck"] == [s for n, s in made if n == "adamw"][rep - 1]["bottleneck"]


@pytest.mark.parametrize("args, message", [
    (["--workloads", "optimizer,gpu"],
     "unknown workload 'gpu'; choose from optimizer, layer_norm, rms_norm, transformer"),
    (["--repeats", "0"], "argument --repeats: must be a whole number from 1 to 100, got 0"),
    (["--steps", "0"], "argument --steps: must be a whole number from 1 to"),
    (["--device", "tpu"], "argument --device: invalid choice"),
])
def test_cli_bad_input_exits_2(capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(["advise", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_device_cuda_unavailable_exits_3(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert cli.main(["advise", "--device", "cuda", "--json"]) == 3
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "unavailable" and "--device cuda was asked for" in err


def test_cli_every_run_failed_exits_1(capsys):
    def failing(request, callback):
        return Scripted({request.preset.name: ["fail"]})(request, callback)

    rc = advise_cli.main(["--workloads", "optimizer", "--repeats", "1", "--device", "cpu"], runner_factory=failing)
    out, err = capsys.readouterr()
    assert rc == 1 and "every run failed" in err and "optimizer: every run failed: no verdict" in out


@pytest.mark.slow
def test_cli_ctrl_c_prints_the_partial_advice_and_exits_130():
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "advise", "--json", "--device", "cpu", "--workloads",
                             "optimizer,norm", "--steps", "1000000", "--repeats", "2"], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        seen = ""
        while "not run:" not in seen and time.monotonic() < deadline:  # the plan is out: the first run starts
            seen += proc.stderr.readline()
        time.sleep(3)  # some steps of the first run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    doc = json.loads(out)
    check_schema(doc)
    assert doc["status"] == "partial" and doc["runs"]["stopped"] == 1 and doc["runs"]["total"] == 1
    assert [w["status"] for w in doc["workloads"]] == ["partial", "not_measured", "not_measured"]  # both norms
    assert "interrupted" in err


def test_reuse_keeps_only_the_workloads_asked_for(tmp_path):
    path = tmp_path / "advice.json"
    a, _ = advisor({"adamw": [3.0], "adamw_fused": [1.3], "layernorm": [1.0], "rmsnorm": [0.8]},
                   workloads=("optimizer", "layer_norm", "rms_norm"), availability_fn=cpu_availability, repeats=1,
                   presets=[p for p in load_builtin() if p.workload in ("optimizer", "layer_norm", "rms_norm")
                            and p.name != "adamw_capturable_graph"])
    doc = a.run()
    advise.store(doc, path)
    got, why = advise.find_reusable(ENV, ("layer_norm", "rms_norm"), path=path)
    assert why == "reused" and [w["workload"] for w in got["workloads"]] == ["layer_norm", "rms_norm"]
    assert got["settings"]["workloads"] == ["layer_norm", "rms_norm"]
    assert got["runs"] == {"total": 2, "ok": 2, "failed": 0, "stopped": 0}
    assert got["apex"]["workloads"] == {"layer_norm": "not_measurable", "rms_norm": "not_measurable"}
    check_schema(got)


def test_compile_time_is_the_cold_compile_not_the_median_of_cached_repeats():
    """On the H200 repeat 1 of torch_compile compiled in 20.1 s and repeat 2 in 0.07 s (torch's in-process
    cache): the user pays the first, so that is what the advice reports."""
    runs = (RunResult(1, "ok", Summary(median_ms=16.4, compile_s=20.09)),
            RunResult(2, "ok", Summary(median_ms=19.1, compile_s=0.073)),
            RunResult(3, "ok", Summary(median_ms=17.0, compile_s=0.08)))
    meas = Measurement("torch_compile", "transformer", (), runs=runs)
    assert meas.compile_s == pytest.approx(20.09)
    once = RunResult(1, "ok", Summary(median_ms=33.0))
    assert Measurement("fp32", "transformer", (), runs=(once,)).compile_s is None


# ---- provenance of reused advice ------------------------------------------------------------------
def test_provenance_and_too_few_steps_to_trust():
    doc = {"device": "cpu", "measured_at": "2026-11-30T10:00:00+0000", "measured_at_unix": 1000.0,
           "settings": {"steps": 8, "repeats": 1}, "environment": ENV}
    assert advise.provenance(doc, now=1000.0 + 3 * 3600 + 5) == \
        ("measured on cpu (Test CPU, 2 threads) at 2026-11-30T10:00:00+0000 (3 h ago): each preset ran once, 8 steps "
         "a run")
    assert "each preset ran twice," in advise.provenance({**doc, "settings": {**doc["settings"], "repeats": 2}})
    assert "(just now)" in advise.provenance(doc, now=1030.0) and "(2 days ago)" in advise.provenance(doc, now=2e5)
    assert advise.trust_note(doc) == ("too few steps to trust: 8 steps a run, fewer than the 30 advise runs by "
                                      "default on cpu; measure again with more steps")
    assert advise.trust_note(dict(doc, settings={"steps": 30, "repeats": 2})) is None
    assert "fewer than the 100" in advise.trust_note(dict(doc, device="cuda", settings={"steps": 30}))


def test_cli_reused_advice_says_how_it_was_measured_and_flags_too_few_steps(monkeypatch, capsys):
    """Advice measured with --steps 8 (by another process, say) and reused: when, with how many steps and
    repeats, on which device, and a warning that 8 steps are too few."""
    monkeypatch.setattr(advise_run, "environment", lambda device: dict(ENV))
    as_here = lambda p: Availability(not p.needs_apex and "graph" not in p.name, "CUDA only", "use a GPU")  # noqa: E731
    a = Advisor("cpu", steps=8, repeats=1, workloads="optimizer", presets=load_builtin(), availability_fn=as_here,
                runner_factory=Scripted({"adamw": [3.0], "adamw_fused": [1.3]}), env=ENV)
    stored = a.run()
    assert stored["trust_note"].startswith("too few steps to trust")
    advise.store(stored)

    def never(*args, **kw):
        raise AssertionError("measured instead of reusing")

    rc = advise_cli.main(["--workloads", "optimizer", "--device", "cpu", "--reuse"], runner_factory=never)
    out, err = capsys.readouterr()
    assert rc == 0, err
    first = out.splitlines()[1]
    assert first == (f"reused the advice of this same environment, measured on cpu (Test CPU, 2 threads) at "
                     f"{stored['measured_at']} (just now): each preset ran once, 8 steps a run"), out
    assert out.splitlines()[2] == ("WARNING: too few steps to trust: 8 steps a run, fewer than the 30 advise runs "
                                   "by default on cpu; measure again with more steps")
    assert "reused the advice of this same environment" in err and "warning: too few steps to trust" in err
    rc = advise_cli.main(["--workloads", "optimizer", "--device", "cpu", "--reuse", "--json"], runner_factory=never)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["reused"] is True and doc["trust_note"].startswith("too few steps to trust")


def optimizer_and_transformer(fused_ms: list[float]):
    """An advice of the optimizer and Transformer workloads on scripted timings (two repeats each); adamw_fused's
    medians are the caller's."""
    transformer = [p for p in load_builtin() if p.workload == "transformer"]
    script = {"adamw": [36.6, 36.6], "adamw_fused": fused_ms, "adamw_capturable_graph": [40.0, 40.0],
              "fp32": [10.0, 10.0], "torch_amp": [6.0, 6.0],
              "torch_compile": [4.0, 4.0], "torch_compile_cg": [4.05, 4.05], "torch_compile_graph": [5.0, 5.0]}
    return advisor(script, workloads=("optimizer", "transformer"), presets=[*optimizer_presets(), *transformer],
                   availability_fn=cpu_availability)


def test_one_verdict_per_workload_and_every_line_derived_from_it():
    """Issue 27's advice on a busy box: the headline said `use adamw (runner-up adamw within noise)`, the verdict
    `Use: adamw`, the machine line `best torch-only options: optimizer: adamw_fused, ..., transformer:
    ddp_adamw_fused` (a data-parallel preset as a one-device option, and a `best` the verdict says is not
    better). Now: adamw_fused within noise of adamw, so every line says adamw; the data-parallel presets are
    not run on one device; the transformer's answer is its recommended preset's point."""
    a, engine = optimizer_and_transformer(fused_ms=[36.2, 36.3])
    doc = a.run()
    opt, tr = doc["workloads"]
    assert opt["fastest"] == "adamw_fused" and opt["recommended"] == "adamw"
    assert opt["within_noise_of_recommended"] == ["adamw_fused"]
    assert opt["verdict"].endswith("Use: adamw (nothing is measurably faster than the baseline)")
    assert opt["apex"]["torch_choice"] == "adamw"
    assert "the best torch-only option is adamw" in opt["apex"]["text"]
    assert "adamw_fused is within noise of it" in opt["apex"]["text"]
    # the data-parallel presets: not run, and never an option
    parallel = {"ddp_adamw_fused", "ddp_fused_adam", "distributed_fused_adam", "fsdp2_adamw_fused"}
    assert not parallel & set(engine.order)
    skipped = {p["preset"]: p for p in tr["presets"] if p["preset"] in parallel}
    assert set(skipped) == parallel and all("data-parallel preset" in p["reason"] for p in skipped.values())
    assert tr["recommended"] == "torch_compile" and tr["within_noise_of_recommended"] == ["torch_compile_cg"]
    assert doc["apex"]["status"] == "not_measurable"
    assert doc["apex"]["text"].endswith("best torch-only options: optimizer: adamw, transformer: torch_compile")
    # the transformer's answer: its recommended preset as a point, with the code
    ans = tr["answer"]
    assert ans["preset"] == "torch_compile" and ans["config"] == {
        "precision": "bf16", "optimizer": "fused", "norms": "torch", "compile": "default",
        "memory_format": "contiguous", "attention": "default", "loss": "model", "parallel": "auto"}
    assert ans["speedup_vs_fp32_verdict"] == "faster" and "torch.compile(model)" in ans["snippet"]
    assert ans["toml"] is None and opt["answer"] is None  # the optimizer's presets are kernels, not points
    v = advise.view(doc)
    o = v.workloads[0]
    assert o.recommended == "adamw" and o.why_recommended == "nothing is measurably faster"
    assert o.within_noise == ("adamw_fused",)
    text = advise.format_text(doc)
    assert "configuration: precision=bf16, optimizer=fused, compile=default (" in text  # the axes off their default
    assert "apextui --preset torch_compile" in text
    from apextui.ui.screens.advise_screen import render_doc

    shown = render_doc(v).plain  # the TUI's headline: never the recommended preset named as its own runner-up
    assert "➜ use adamw  (nothing is measurably faster)  (adamw_fused within noise of it)" in shown
    assert "runner-up adamw within noise" not in shown


def test_the_text_advice_fits_80_columns_without_cutting_a_row_and_keeps_every_column_in_a_pipe():
    """Issue 27 §3.5: the advice table wrapped mid-row at 80 columns. At a terminal's width each row is one line
    (columns dropped from the least needed, and said so), the prose wraps between words; in a pipe nothing is cut."""
    a, _ = optimizer_and_transformer(fused_ms=[30.2, 30.3])
    doc = a.run()
    narrow, wide = advise.format_text(doc, 80).splitlines(), advise.format_text(doc).splitlines()
    code = [line for line in narrow if line.startswith("    ")]  # the snippet and the preset: never wrapped
    assert all(len(line) <= 80 for line in narrow if line not in code), [x for x in narrow if len(x) > 80]
    for name in ("adamw_fused", "torch_compile_cg", "torch_amp"):
        [row] = [line for line in narrow if line.startswith(f"  {name} ")]
        assert "×" in row and "ms" not in row  # its median and speed-up on its own line
    assert any("left out at 80 columns: " in line for line in narrow)
    assert any("bottleneck · roofline" in line for line in wide) and not any("left out at" in x for x in wide)
    verdict = next(line for line in wide if line.strip().startswith("verdict:"))
    assert len(verdict) > 80  # one line in a pipe


def test_one_repeat_a_preset_compares_single_runs_within_the_drift_it_cannot_rule_out():
    """Issue 27: `advise --repeats 1` compared single runs made one after another by their own intervals only (a
    busy box's 1.2x between two runs of one preset came out 'faster'). Now such a comparison is widened by the drift
    between runs (unknown here: nothing ran twice, so a factor of 2); a 4x difference still shows."""
    def advice(script):
        engine = Scripted(script)
        a = Advisor("cpu", steps=10, repeats=1, workloads="optimizer", presets=optimizer_presets(),
                    availability_fn=lambda p: Availability(p.name in script), env=ENV,
                    runner_factory=lambda request, cb: ScriptedRunner(engine, request, cb))
        return a.run()["workloads"][0]

    drifted = advice({"adamw": [36.6], "adamw_fused": [30.2]})  # the same speed on a drifting host, in shape
    assert drifted["fastest"] == "adamw_fused" and drifted["recommended"] == "adamw"
    assert any("widened by a factor of 2" in n for n in drifted["notes"]), drifted["notes"]
    fused = next(p for p in drifted["presets"] if p["preset"] == "adamw_fused")
    assert fused["speedup_vs_baseline_verdict"] == "within_noise"
    real = advice({"adamw": [36.6], "adamw_fused": [9.0]})
    assert real["recommended"] == "adamw_fused"


def test_an_unknown_bottleneck_says_so_on_one_plain_line():
    """'unknown · 9.67 GB/s' read as a bottleneck named "unknown"; its reason in the row ran to 3-4 lines a preset
    ("cannot be trusted: at 15.4 % of the copy bandwidth and 0.7 % of the fp32 matmul ceiling …"): the row says
    "bottleneck unknown" and its figures, their fractions only where they can be trusted; the why is the document's."""
    from apextui.core.advise import roofline_text

    p = {"bottleneck": {"label": "unknown", "reason": "no ceilings (or work model) to compare with"},
         "roofline": {"gb_s": 9.67, "bandwidth_fraction": 0.6, "primary": "bytes"}}
    assert roofline_text(p) == "bottleneck unknown · 9.67 GB/s (60.0 % of copy)"
    untrusted = {"bottleneck": {"label": "unknown", "reason": "cannot be trusted: at 15.4 % of the copy bandwidth and "
                                "0.7 % of the fp32 matmul ceiling, under the 25 % a label needs"},
                 "roofline": {"gb_s": 3.1, "bandwidth_fraction": 0.154, "tflops": 0.02, "compute_fraction": 0.007,
                              "primary": "bytes"}}
    assert roofline_text(untrusted) == "bottleneck unknown · 3.1 GB/s · 0.02 TFLOP/s"
    assert roofline_text({**p, "bottleneck": {"label": "memory-bound"}}).startswith("memory-bound · 9.67 GB/s")


def test_a_clear_speed_up_measured_only_on_single_runs_reads_about_never_within_noise():
    """A search's answer against fp32 where the two never ran side by side: its figure is shown as what it is
    ("about 6.40× (single runs, not side by side)"), never as "≈" (within noise) for an interval that excludes 1."""
    from apextui.core.advise.answer import answer
    from apextui.core.config.point import BASELINE, parse as parse_point

    fast = parse_point("precision=bf16,optimizer=fused")
    v = verdict("model", [m("fp32", [64.0], workload="model", ci=0.001),
                          m("bf16+fused", [10.0], workload="model", ci=0.001)], baseline="fp32")
    a = answer(v, {"fp32": BASELINE, "bf16+fused": fast}, side_by_side=True)
    assert a is not None and a["label"] == "bf16+fused"
    assert a["speedup_vs_fp32_text"] == "about 6.40× (single runs, not side by side)"
    assert a["speedup_vs_fp32_verdict"] == "within_noise"  # never called faster on such evidence
    plain = answer(v, {"fp32": BASELINE, "bf16+fused": fast}, side_by_side=False)
    assert plain is not None and not plain["speedup_vs_fp32_text"].startswith("about")


def test_one_record_judges_every_comparison_of_a_searchs_measurements():
    """A search's measurements carry its judge (`SearchResult.shown`): the table's speed-up, the verdict's text and
    the answer read that one comparison, not each its own pooling of the runs."""
    from apextui.core.advise.records import versus
    from apextui.core.measure.compare import Comparison

    side_by_side = Comparison.of(1.5, 1.4, 1.6, basis="paired")

    def judge(a, b):
        return side_by_side if (a.preset, b.preset) == ("fast", "base") else None

    base = replace(m("base", [30.0, 31.0], workload="model", ci=0.01), judge=judge)
    fast = replace(m("fast", [20.0, 29.0], workload="model", ci=0.01), judge=judge)  # pooled: 1.24x, wide
    assert versus(fast, base) is side_by_side
    assert versus(base, fast).speedup != 1 / 1.5  # a pair the judge does not hold: the runs decide
    v = verdict("model", [base, fast], baseline="base")
    row = next(p for p in v.to_dict()["presets"] if p["preset"] == "fast")
    assert (row["speedup_vs_baseline"], row["speedup_vs_baseline_low"], row["speedup_vs_baseline_high"]) == (1.5, 1.4,
                                                                                                               1.6)
    assert "1.50× (1.40–1.60) the baseline base's" in v.text


def test_a_run_past_the_plan_is_counted_not_set_against_the_plan():
    """A progress line read `[9/9] model gpt:build/compile repeat 3/2: compiling…`: a run beyond the planned repeats
    (one confirming an answer) is numbered as the search's are."""
    from apextui.core.advise.run import Progress

    past = Progress("run", index=9, total=9, workload="model", preset="gpt:build/compile", repeat=3, repeats=2,
                    status="compiling")
    assert past.line() == "[run 9] model gpt:build/compile (its run 3): compiling…"
    planned = Progress("run", index=2, total=9, workload="norm", preset="layernorm", repeat=1, repeats=2,
                       status="running", steps_done=5, steps=30)
    assert planned.line() == "[2/9] norm layernorm repeat 1/2: running 5/30"


def test_a_data_parallel_preset_is_available_in_list_and_not_compared_by_the_one_device_advice():
    """`apextui list` called ddp_adamw_fused available, the advice unavailable: one rule, one word. It can run here
    (one rank alone), and the one-device advice leaves it out: "not compared here", and `list` says so beside it."""
    from apextui.core.advise.advice_view import _row
    from apextui.core.advise.planning import SINGLE_DEVICE_ONLY, plan
    from apextui.core.availability import availability
    from helpers import run_cli

    shipped = load_builtin()
    (tplan,) = plan(shipped, "cpu", ["transformer"], lambda p: availability(p, "cpu"))
    ddp = next(m for m in tplan.skipped if m.preset == "ddp_adamw_fused")
    assert ddp.not_compared and ddp.reason == SINGLE_DEVICE_ONLY
    row = _row({"preset": ddp.preset, "status": ddp.status, "is_baseline": False, "flagged": False,
                "reason": ddp.reason, "not_compared": ddp.not_compared}, None)
    assert row.why.startswith("not compared here: a data-parallel preset") and "unavailable" not in row.why
    listed = next(line for line in run_cli("list", "--device", "cpu").stdout.splitlines() if "ddp_adamw_fused" in line)
    assert "available (data-parallel:" in listed and "the one-device advice does not" in listed
