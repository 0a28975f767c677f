"""NVML and host sampling never raise; missing GPU metrics come back as None with a reason."""

from __future__ import annotations

import sys
import time

import pytest
from nvml_fakes import fake_nvml

from apextui.core.monitor.nvml import Nvml
from apextui.core.monitor.sampler import GPU_METRICS, METRIC_UNITS, NO_GPU, Sampler
from apextui.core.run.events import monitor_fields


def has_nvidia_gpu() -> bool:
    return Nvml().available


@pytest.mark.skipif(has_nvidia_gpu(), reason="checks the no-GPU path")
def test_nvml_without_a_gpu_gives_reasons_not_exceptions():
    nvml = Nvml()
    for metric in (nvml.utilization(), nvml.power(), nvml.temperature(), nvml.sm_clock(), *nvml.memory()):
        assert metric.value is None
        assert metric.reason  # e.g. "NVML unavailable (no NVIDIA driver?): ..."
    assert not nvml.available and nvml.error


class BrokenLib:
    """An NVML whose every call raises, like a driver/library mismatch."""

    class NVMLError_NotSupported(Exception):
        pass

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise RuntimeError(f"{name} exploded")
        return fail


def test_nvml_call_errors_become_reasons():
    nvml = Nvml()
    nvml._ready, nvml._handle, nvml._lib = True, object(), BrokenLib()
    m = nvml.utilization()
    assert m.value is None and "exploded" in m.reason

    def not_supported(lib, handle):
        raise BrokenLib.NVMLError_NotSupported()

    assert nvml._call(not_supported).reason == "not supported on this GPU"


def test_sampler_reads_host_metrics_and_explains_missing_gpu_ones():
    sampler = Sampler(interval=0.05, gpu=False).start()
    deadline = time.monotonic() + 60  # a few samples, however long a loaded machine makes them take
    while (sampler.latest is None or (sampler.latest.run_contention.samples or 0) < 3) and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.stop()
    r = sampler.latest
    assert set(r.metrics()) == set(METRIC_UNITS)
    assert r.rss_mb > 10 and 0 <= r.ram_used_pct <= 100
    assert r.cpu_pct is not None and r.cpu_pct >= 0  # primed by the first sample
    assert r.gpu_util_pct is None and "CPU" in r.na["gpu_util_pct"]
    assert not sampler._thread.is_alive()


# ---- several GPUs (a fake NVML: tests/nvml_fakes.py) -------------------------------------------------

def bus(index: int) -> str:
    """The fake's PCI bus id of GPU `index`, as torch spells it (lower case)."""
    return f"00000000:{0x18 + 0x10 * index:02x}:00.0"


def test_scope_all_lists_every_gpu_and_keeps_a_failing_one_as_na(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(8, failing={3}, no_handle={5}))
    r = Sampler(interval=1, pci_bus_id=bus(2), scope="all").sample()
    assert [g.index for g in r.gpus] == list(range(8))
    assert [g.index for g in r.gpus if g.in_use] == [2] and [g.index for g in r.run_gpus] == [2]
    for g in r.gpus:
        if g.index == 3:
            assert g.metrics() == dict.fromkeys(GPU_METRICS) and g.error == "Unknown Error"
        elif g.index == 5:
            assert g.util_pct is None and g.error.startswith("no NVIDIA GPU 5")
        else:
            assert g.error is None and g.mem_total_mb == 143771 and g.temp_c == 34 + 3 * g.index
    gpu2 = r.gpus[2]  # the flat fields are the run's GPU, read once
    assert (r.gpu_util_pct, r.gpu_mem_used_mb, r.gpu_temp_c) == (gpu2.util_pct, gpu2.mem_used_mb, gpu2.temp_c)
    assert not any(name.startswith("gpu_") for name in r.na)


def test_scope_run_reads_the_run_gpus_only(monkeypatch):
    lib = fake_nvml(8)
    monkeypatch.setitem(sys.modules, "pynvml", lib)
    r = Sampler(interval=1, pci_bus_id=bus(6), run_bus_ids=[bus(7)]).sample()
    assert [(g.index, g.in_use) for g in r.gpus] == [(6, True), (7, True)]
    assert r.gpu_power_w == 120 + 55 * 6  # the GPU this process trains on
    assert lib.samples == [0] * 6 + [1, 1]  # the other six GPUs were never asked


def test_json_lists_the_run_gpus_with_an_error_for_one_that_fails(monkeypatch):
    failing: set[int] = set()
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(4, failing=failing))
    sampler = Sampler(interval=1, pci_bus_id=bus(0), run_bus_ids=[bus(1)], scope="all")
    first = monitor_fields(sampler.sample())
    assert [g["index"] for g in first["gpus"]] == [0, 1]  # the JSON: the run's GPUs only, not all four
    assert all(g["error"] is None and g["util_pct"] is not None for g in first["gpus"])
    assert set(first["gpus"][0]) == {"index", *GPU_METRICS, "error"}
    failing.add(1)  # GPU 1 falls over mid-run: it stays listed, n/a with the reason; GPU 0 reads on
    later = monitor_fields(sampler.sample())
    g0, g1 = later["gpus"]
    assert g1 == {"index": 1, **dict.fromkeys(GPU_METRICS), "error": "Unknown Error"}
    assert g0["error"] is None and g0["util_pct"] is not None and later["gpu_util_pct"] == g0["util_pct"]


def test_a_cpu_run_lists_the_machine_gpus_but_none_in_use(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(2))
    r = Sampler(interval=1, gpu=False, scope="all").sample()
    assert [(g.index, g.in_use) for g in r.gpus] == [(0, False), (1, False)]
    assert r.gpu_util_pct is None and r.na["gpu_util_pct"] == NO_GPU
    assert monitor_fields(r)["gpus"] == []


def test_scope_all_without_nvml_keeps_the_run_gpu_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    r = Sampler(interval=1, pci_bus_id=bus(0), scope="all").sample()
    (g,) = r.gpus
    assert g.in_use and g.error.startswith("nvidia-ml-py not importable")
    assert monitor_fields(r)["gpus"] == [{"index": 0, **dict.fromkeys(GPU_METRICS), "error": g.error}]
