"""Roofline arithmetic (work models, fractions, ridge point), the ceilings cache and the bottleneck label."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from apextui.core import analysis as roofline
from apextui.core import files
from apextui.core.analysis import ceilings as ceilings_mod
from apextui.core.analysis import (
    Achieved, Ceilings, CeilingsUnavailable, Probe, Work, achieved, analyse_run, busy_from, classify,
    get_ceilings, norm_work, optimizer_work, transformer_work,
)
from apextui.core.workloads.spec import work_per_step
from apextui.core.config.point import Config
from apextui.core.run.request import RunRequest

SMALL = {"vocab": 8, "d_model": 4, "layers": 1, "heads": 2, "seq": 3, "batch": 2, "branching": 2}
# TinyDecoder at SMALL: tok 8x4 + pos 3x4 + block (ln1 8, ln2 8, qkv 4x12+12, proj 4x4+4, fc1 4x16+16,
# fc2 16x4+4) + ln_f 8 + head 4x8 = 32 + 12 + 244 + 8 + 32
SMALL_PARAMS = 328
DEFAULT = {"vocab": 1024, "d_model": 512, "layers": 8, "heads": 8, "seq": 256, "batch": 32, "branching": 4}
DEFAULT_PARAMS = 26_399_744


def ceil(copy=1000.0, **tflops) -> Ceilings:
    return Ceilings(key="test", device="cuda", name="Test GPU", copy_gb_s=copy, matmul_tflops=tflops or {"bf16": 400.0})


# ---- work models ----------------------------------------------------------------------------------
def test_optimizer_work_is_adamw_bytes_and_flops_per_parameter():
    w = optimizer_work(1000)
    assert (w.bytes, w.flops, w.scope, w.primary, w.precision) == (28_000, 14_000, "opt_step", "bytes", "fp32")
    assert w.intensity == 0.5
    # from the size: 2 x (4x4 weights + 4 biases) = 40 parameters, as bench.py always counted
    assert work_per_step("optimizer", Config(), {"layers": 2, "width": 4, "batch": 1}, None).bytes == 40 * 28
    assert work_per_step("optimizer", Config(optimizer="capturable"), {"layers": 2, "width": 4, "batch": 1},
                         40).flops == 560


def test_norm_work():
    w = norm_work(2, 3, 4, "layernorm")  # 24 elements
    assert (w.bytes, w.flops, w.scope, w.primary) == (480, 432, "step", "bytes")
    assert norm_work(2, 3, 4, "rmsnorm").flops == 288
    assert work_per_step("rms_norm", Config(norms="apex"), {"batch": 2, "seq": 3, "hidden": 4}, 4).flops == 288
    assert work_per_step("layer_norm", Config(norms="apex"), {"batch": 2, "seq": 3, "hidden": 4}, 8).flops == 432
    with pytest.raises(ValueError):
        norm_work(1, 1, 1, "batchnorm")


def test_transformer_work_by_hand():
    # dense = 328 - (8x4 + 3x4) = 284; tokens 6; attention 12 x 1 x 3 x 4 = 144 a token
    w = transformer_work(SMALL, SMALL_PARAMS, "none")
    assert w.flops == (6 * 284 + 144) * 6 == 11_088
    # params 40 x 328 + activations 6 tokens x 1 layer x 16 x 4 x 4 accesses x 4 B + logits 6 x 8 x (12 + 4)
    assert w.bytes == 13_120 + 6_144 + 768
    assert (w.scope, w.primary, w.precision) == ("step", "flops", "fp32")
    bf16 = transformer_work(SMALL, SMALL_PARAMS, "bf16")
    assert bf16.flops == w.flops and bf16.bytes == 13_120 + 3_072 + 672 and bf16.precision == "bf16"
    assert transformer_work(SMALL, SMALL_PARAMS, "fp16").precision == "fp16"
    with pytest.raises(ValueError):
        work_per_step("transformer", "fp32", SMALL, None)


@pytest.mark.slow
def test_transformer_param_counts_match_the_real_model():
    torch = pytest.importorskip("torch")
    from torch import nn

    from apextui.core.workloads.transformer import TinyDecoder

    for size, expected in ((SMALL, SMALL_PARAMS), (DEFAULT, DEFAULT_PARAMS)):
        with torch.device("meta"):
            model = TinyDecoder(size["vocab"], size["d_model"], size["layers"], size["heads"], size["seq"],
                                nn.LayerNorm)
        assert sum(p.numel() for p in model.parameters()) == expected


def test_default_transformer_flops_reproduce_the_h200_table():
    # docs/results-h200.md: fp32 at 33.738 ms/step is 40.6 TFLOP/s
    w = transformer_work(DEFAULT, DEFAULT_PARAMS, "none")
    assert w.flops == 1_368_467_177_472
    assert achieved(w, 33.738, None).tflops == pytest.approx(40.56, abs=0.01)


# ---- achieved, ridge ------------------------------------------------------------------------------
def test_achieved_fractions_intensity_and_ridge():
    w = Work(flops=2e12, bytes=4e9, precision="bf16", primary="flops")
    a = achieved(w, 10.0, ceil(copy=1000.0, bf16=400.0))
    assert a.tflops == pytest.approx(200.0) and a.gb_s == pytest.approx(400.0)
    assert a.compute_fraction == pytest.approx(0.5) and a.bandwidth_fraction == pytest.approx(0.4)
    assert a.intensity == pytest.approx(500.0) and a.ridge == pytest.approx(400.0)
    assert (a.precision, a.compute_ceiling_tflops, a.copy_ceiling_gb_s) == ("bf16", 400.0, 1000.0)
    bare = achieved(w, 10.0, None)
    assert bare.tflops == pytest.approx(200.0) and bare.compute_fraction is None and bare.ridge is None
    with pytest.raises(ValueError):
        achieved(w, 0.0, None)


def test_ceilings_fall_back_to_fp32_and_ridge_needs_both():
    c = ceil(copy=2000.0, fp32=50.0, bf16=800.0)
    assert c.ridge("bf16") == pytest.approx(400.0)
    assert c.ridge("fp32") == pytest.approx(25.0)
    assert c.compute_tflops("fp16") == (50.0, "fp32")  # not measured: fp32's, and it says so
    a = achieved(Work(flops=1e9, bytes=1e6, precision="fp16"), 1.0, c)
    assert a.precision == "fp32" and a.compute_fraction == pytest.approx(1e9 / 1e-3 / 50e12)
    assert Ceilings("k", "cpu", "x", None, {"fp32": 1.0}).ridge("fp32") is None
    assert Ceilings("k", "cpu", "x", 5.0, {}).compute_tflops("fp32") == (None, None)


# ---- bottleneck ------------------------------------------------------------------------------------
def ach(comp, band, intensity=None, ridge=None) -> Achieved:
    return Achieved(time_ms=1.0, scope="step", tflops=None, gb_s=None, precision="bf16", compute_fraction=comp,
                    bandwidth_fraction=band, intensity=intensity, ridge=ridge)


def test_host_bound_below_the_threshold():
    b = classify(0.31, ach(0.1, 0.05), ceil())
    assert b.label == "host-bound"
    assert b.figures["busy_fraction"] == 0.31 and b.figures["host_threshold"] == 0.6
    assert "31.0 %" in b.reason and "host" in b.reason
    assert classify(0.3, None).label == "host-bound"  # no roofline needed to say so


@pytest.mark.parametrize("busy, label", [(0.5999, "host-bound"), (0.6, "memory-bound"), (0.61, "memory-bound"),
                                         (0.0, "host-bound"), (1.0, "memory-bound"), (None, "memory-bound")])
def test_host_threshold_boundary(busy, label):
    assert classify(busy, ach(0.1, 0.4)).label == label


def test_threshold_is_a_parameter():
    assert classify(0.7, ach(0.1, 0.4), host_threshold=0.8).label == "host-bound"


def test_memory_and_compute_bound_by_the_higher_fraction():
    mem = classify(0.96, ach(0.02, 0.41, intensity=0.4, ridge=160.0))
    assert mem.label == "memory-bound" and mem.figures["decided_by"] == "fractions"
    assert "41.0 % of the copy bandwidth" in mem.reason and mem.figures["bandwidth_fraction"] == 0.41
    comp = classify(0.99, ach(0.73, 0.07, intensity=140.0, ridge=13.0))
    assert comp.label == "compute-bound" and "73.0 % of the bf16 matmul ceiling" in comp.reason


def test_ties_and_single_fractions_go_by_intensity_against_the_ridge():
    tie = classify(0.9, ach(0.3, 0.3, intensity=10.0, ridge=100.0))
    assert tie.label == "memory-bound" and tie.figures["decided_by"] == "intensity"
    assert classify(0.9, ach(None, 0.3, intensity=500.0, ridge=100.0)).label == "compute-bound"
    assert classify(0.9, ach(0.3, None, intensity=99.9, ridge=100.0)).label == "memory-bound"
    at_ridge = classify(0.9, ach(None, None, intensity=100.0, ridge=100.0))
    assert at_ridge.label == "compute-bound" and "at or over the ridge point" in at_ridge.reason
    # the ridge from the ceilings when `achieved` has none
    assert classify(0.9, ach(None, None, intensity=1.0), ceil(copy=1000.0, bf16=400.0)).figures["ridge"] == 400.0


def test_unknown_without_anything_to_decide_with():
    assert classify(None, None).label == "unknown"
    assert classify(0.9, ach(None, None)).label == "unknown"
    assert classify(None, ach(None, None, intensity=3.0)).label == "unknown"  # no ridge
    assert classify(0.9, None).to_dict()["figures"] == {"busy_fraction": 0.9, "host_threshold": 0.6}


# ---- busy fraction, analysis -------------------------------------------------------------------------
def test_busy_fraction_sources():
    assert busy_from(2.0, 10.0) == roofline.Busy(0.2, 2.0, "profiler", None)
    assert busy_from(12.0, 10.0).fraction == 1.0  # overlapping kernels cannot make it more than busy
    assert busy_from(None, 10.0, nvml_util_pct=44.0).fraction == pytest.approx(0.44)
    assert busy_from(None, 10.0, 44.0).source == "nvml"
    assert busy_from(None, 10.0, None, "profiler failed").to_dict() == {
        "fraction": None, "kernel_ms": None, "source": None, "note": "profiler failed"}


def test_util_average_counts_each_reading_of_the_measured_steps_once():
    u = roofline.UtilAverage(min_samples=2)
    before = SimpleNamespace(time=0.5, gpu_util_pct=0.0)  # taken while compiling: must not count
    u.add(before)
    u.start(1.0)  # measured steps from t=1; readings count from t=1+NVML_WINDOW_S
    early = SimpleNamespace(time=1.0 + roofline.NVML_WINDOW_S / 2, gpu_util_pct=0.0)
    r1 = SimpleNamespace(time=5.0, gpu_util_pct=20.0)
    r2 = SimpleNamespace(time=6.0, gpu_util_pct=40.0)
    u.add(early)
    u.add(r1)
    assert u.mean is None and "1 utilisation reading(s)" in u.note  # one is not enough
    for r in (r1, r1, r2, None, SimpleNamespace(time=7.0, gpu_util_pct=None)):
        u.add(r)
    assert u.mean == pytest.approx(30.0) and u.note is None


def test_too_few_nvml_readings_give_no_busy_figure_and_no_host_bound_label():
    """A 0.5 s CUDA-graph run (not profiled) with no NVML reading during its steps is 'unknown', not host-bound."""
    info = SimpleNamespace(work=optimizer_work(1_000_000))
    probe = Probe(kernel_ms=None, busy_note="CUDA graphs: not profiled", ceilings=ceil(copy=1000.0, fp32=50.0))
    u = roofline.UtilAverage()
    u.start(0.0)
    a = analyse_run(info, SimpleNamespace(median_ms=5.0), SimpleNamespace(median_ms=1.0), probe, u.mean, u.note)
    assert a.busy.fraction is None and a.bottleneck.label != "host-bound"
    assert "not profiled" in a.busy.note and "fewer than" in a.busy.note


def test_analyse_run_uses_the_optimizer_step_time_for_the_optimizer():
    info = SimpleNamespace(work=optimizer_work(1_000_000))  # 28 MB a step
    probe = Probe(kernel_ms=2.0, profiled_steps=10, ceilings=ceil(copy=1000.0, fp32=50.0))
    a = analyse_run(info, SimpleNamespace(median_ms=10.0), SimpleNamespace(median_ms=1.0), probe)
    assert a.achieved.time_ms == 1.0 and a.achieved.gb_s == pytest.approx(28.0)
    assert a.busy.fraction == pytest.approx(0.2) and a.bottleneck.label == "host-bound"
    r = a.roofline()
    assert r is not None and r.ceilings is not None
    assert r.scope == "opt_step" and r.bandwidth_fraction == pytest.approx(0.028) and r.ceilings.name == "Test GPU"
    assert analyse_run(SimpleNamespace(work=None), None, None, probe) is None
    no_time = analyse_run(info, SimpleNamespace(median_ms=10.0), None, Probe())
    assert no_time.achieved is None and no_time.bottleneck.label == "unknown"


def test_probe_on_cpu_skips_the_profiler(monkeypatch, tmp_path):
    monkeypatch.setattr(ceilings_mod, "measure_ceilings", lambda device: ceil(copy=5.0, fp32=0.1))
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path))
    p = roofline.probe_after_run(object(), "cpu")
    assert p.kernel_ms is None and "CPU" in p.busy_note
    assert p.ceilings.copy_gb_s == 5.0 and p.ceilings.cached is False
    assert roofline.probe_after_run(object(), "cpu").ceilings.cached is True
    assert roofline.probe_after_run(object(), "cpu", want_ceilings=False).ceilings is None


# ---- the cache --------------------------------------------------------------------------------------
class Measurer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, device: str) -> Ceilings:
        self.calls += 1
        return Ceilings(key="ignored", device=device, name="Fake", copy_gb_s=100.0 * self.calls,
                        matmul_tflops={"fp32": 1.0, "bf16": 2.0}, measured_at=1000.0 + self.calls)


def test_cache_write_read_and_remeasure(tmp_path: Path):
    path = tmp_path / "sub" / "ceilings.json"
    m = Measurer()
    first = get_ceilings("cpu", path=path, key="cpu|A", measure=m)
    assert (first.cached, first.copy_gb_s, first.key, m.calls) == (False, 100.0, "cpu|A", 1)
    stored = json.loads(path.read_text())
    assert stored["version"] == 1 and stored["ceilings"]["cpu|A"]["copy_gb_s"] == 100.0
    again = get_ceilings("cpu", path=path, key="cpu|A", measure=m)
    assert again.cached is True and again.copy_gb_s == 100.0 and m.calls == 1
    assert again.matmul_tflops == {"fp32": 1.0, "bf16": 2.0} and again.measured_at == 1001.0
    fresh = get_ceilings("cpu", path=path, key="cpu|A", measure=m, remeasure=True)
    assert fresh.cached is False and fresh.copy_gb_s == 200.0 and m.calls == 2
    assert get_ceilings("cpu", path=path, key="cpu|A", measure=m).copy_gb_s == 200.0
    # another device gets its own entry; the first one stays
    get_ceilings("cuda", path=path, key="cuda|B", measure=m)
    assert set(json.loads(path.read_text())["ceilings"]) == {"cpu|A", "cuda|B"}


@pytest.mark.parametrize("content", ["{not json", "[]", '{"ceilings": 3}', '{"version": 1}', "", "\x00\xff"])
def test_a_corrupt_cache_file_is_replaced(tmp_path: Path, content):
    path = tmp_path / "ceilings.json"
    path.write_text(content, encoding="latin-1")
    m = Measurer()
    c = get_ceilings("cpu", path=path, key="cpu|A", measure=m)
    assert m.calls == 1 and c.cached is False and "corrupt" in c.note
    assert json.loads(path.read_text())["ceilings"]["cpu|A"]["copy_gb_s"] == 100.0
    assert get_ceilings("cpu", path=path, key="cpu|A", measure=m).cached is True


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _sparse(path: Path) -> None:  # over the 64 MiB limit without writing it
    with path.open("wb") as f:
        f.truncate(files.DATA_LIMIT + 1)


@pytest.mark.parametrize("make, needle", [
    (_fifo, "not a regular file (a FIFO); a cache file must be a regular file"),
    (_sparse, f"too large for a cache file ({files.DATA_LIMIT + 1} bytes"),
])
def test_a_cache_that_is_not_a_regular_file_or_too_big_is_measured_again(tmp_path: Path, make, needle):
    path = tmp_path / "ceilings.json"
    make(path)
    entries, note = roofline.load_cache(path)
    assert entries == {} and needle in note and "\n" not in note
    m = Measurer()
    c = get_ceilings("cpu", path=path, key="cpu|A", measure=m)
    assert m.calls == 1 and c.cached is False and needle in c.note
    assert get_ceilings("cpu", path=path, key="cpu|A", measure=m).cached is True  # replaced by a good cache


@pytest.mark.parametrize("entry", [
    {"copy_gb_s": -1.0, "matmul_tflops": {"fp32": 1.0}},
    {"copy_gb_s": 10.0, "matmul_tflops": {"fp32": "fast"}},
    {"copy_gb_s": 10.0},
    "a string",
    {"copy_gb_s": None, "matmul_tflops": {}},
])
def test_a_malformed_entry_is_measured_again(tmp_path: Path, entry):
    path = tmp_path / "ceilings.json"
    if isinstance(entry, dict):
        entry = {"key": "cpu|A", "device": "cpu", "name": "x", **entry}
    path.write_text(json.dumps({"version": 1, "ceilings": {"cpu|A": entry, "cpu|B": {"keep": 1}}}))
    m = Measurer()
    c = get_ceilings("cpu", path=path, key="cpu|A", measure=m)
    assert m.calls == 1 and "unusable" in c.note
    assert json.loads(path.read_text())["ceilings"]["cpu|B"] == {"keep": 1}


def test_measuring_failures_and_unwritable_caches(tmp_path: Path):
    def broken(device: str) -> Ceilings:
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(CeilingsUnavailable, match="measuring the ceilings failed: RuntimeError: CUDA out of memory"):
        get_ceilings("cuda", path=tmp_path / "c.json", key="k", measure=broken)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = get_ceilings("cpu", path=blocker / "c.json", key="k", measure=Measurer())  # its folder is a file
    assert c.copy_gb_s == 100.0 and "could not write the cache file" in c.note


def test_cache_dir_from_the_environment(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path / "mine"))
    assert roofline.cache_file() == tmp_path / "mine" / "ceilings.json"
    monkeypatch.delenv("APEXTUI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert roofline.cache_file() == tmp_path / "xdg" / "apextui" / "ceilings.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert roofline.cache_file() == tmp_path / "home" / ".cache" / "apextui" / "ceilings.json"


def test_ceilings_round_trip_through_a_dict():
    c = ceil(copy=123.0, fp32=1.5, bf16=3.0)
    back = Ceilings.from_dict(c.to_dict())
    assert back.to_dict() == c.to_dict() and back.cached is True


@pytest.mark.slow
def test_real_cpu_ceilings_are_positive(measured_ceilings: Path | None, tmp_path: Path):
    """This machine's ceilings as the run measured them once (conftest's `measured_ceilings`: `get_ceilings` on an
    empty cache file, the real measurement, ~15 s of CPU paid once a run), then read back from their file."""
    assert measured_ceilings is not None, "get_ceilings raised CeilingsUnavailable on this CPU"
    cache = tmp_path / measured_ceilings.name
    cache.write_bytes(measured_ceilings.read_bytes())
    c = get_ceilings("cpu", path=cache)
    assert c.cached is True and c.device == "cpu" and c.key.startswith("cpu|") and "torch" in c.key
    assert c.copy_gb_s > 0 and c.matmul_tflops["fp32"] > 0 and c.matmul_tflops["bf16"] > 0


# ---- through the runner and the JSON summary ---------------------------------------------------------
def test_a_cpu_run_carries_its_roofline_and_bottleneck(monkeypatch, tmp_path):
    from apextui.core import presets
    from apextui.core.run import events
    from apextui.core.run.runner import Runner

    monkeypatch.setenv("APEXTUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "measure_ceilings", lambda device: ceil(copy=10.0, fp32=0.1, bf16=0.2))
    snaps = []
    final = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 6), snaps.append).run()
    assert final.status == "ok" and final.info.work.bytes == 20 * 4 * 64 * 256
    assert final.info.bytes_per_step == final.info.work.bytes and final.info.compile_s is None
    assert "profiling" in [s.status for s in snaps]
    a = final.analysis
    assert a.achieved.gb_s == pytest.approx(final.info.work.bytes / final.stats.median_ms / 1e6)
    assert a.busy.fraction is None and a.bottleneck.label == "memory-bound"
    s = events.summary(final).to_dict()  # the JSON object
    assert s["compile_s"] is None and s["gpu_busy"] is None and s["gpu_busy_note"] == "CPU run: no GPU"
    assert s["roofline"]["scope"] == "step" and s["roofline"]["ceilings"]["copy_gb_s"] == 10.0
    assert s["bottleneck"]["label"] == "memory-bound" and s["bottleneck"]["figures"]["decided_by"] == "fractions"
    setup = events.setup_event(final.info)
    assert setup["bytes_per_step"] == 20 * 4 * 64 * 256 and setup["work_scope"] == "step" and setup["compile_s"] is None
    json.dumps(s)
    # a run told not to analyse (or a stopped one) has none
    quiet = Runner(RunRequest(presets.resolve("layernorm"), "cpu", 3), lambda s: None, analyse=False).run()
    assert quiet.analysis is None and events.summary(quiet).roofline is None


# ---- labels that cannot be trusted (issue 27, rough edge 2) ------------------------------------------
def test_far_under_both_ceilings_is_not_labelled_memory_or_compute_bound():
    """`memory-bound` at 2.6 % of the copy bandwidth (a CPU run) said more than the figures do."""
    b = classify(None, ach(0.0005, 0.026, intensity=0.5, ridge=4.9))
    assert b.label == "unknown" and "cannot be trusted" in b.reason and "2.6 % of the copy bandwidth" in b.reason
    assert b.figures["untrusted"] and b.figures["bandwidth_fraction"] == 0.026
    assert classify(0.9, ach(None, 0.19)).label == "unknown"  # one fraction known, under the floor
    assert classify(0.9, ach(0.01, 0.2)).label == "memory-bound"  # at the floor the fractions decide again
    assert classify(0.3, ach(0.01, 0.01)).label == "host-bound"  # the busy fraction still decides first


def cpu_ceil(load):
    return Ceilings(key="cpu", device="cpu", name="CPU", copy_gb_s=30.0, matmul_tflops={"fp32": 0.15},
                    details={"load_per_core": load})


def test_cpu_ceilings_measured_on_a_busy_host_are_not_trusted():
    busy = classify(None, ach(0.1, 0.6), cpu_ceil(2.3))
    assert busy.label == "unknown" and "load 2.30 a core" in busy.reason
    assert classify(None, ach(0.1, 0.6), cpu_ceil(0.2)).label == "memory-bound"
    assert classify(None, ach(0.1, 0.6), cpu_ceil(None)).label == "memory-bound"  # older cache: no load known

