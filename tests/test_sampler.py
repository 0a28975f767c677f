"""NVML and host sampling never raise; missing GPU metrics come back as None with a reason."""

from __future__ import annotations

import time

import pytest

from apextui.core.monitor.nvml import Nvml
from apextui.core.monitor.sampler import METRIC_UNITS, Sampler


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
    time.sleep(0.3)
    sampler.stop()
    r = sampler.latest
    assert set(r.metrics()) == set(METRIC_UNITS)
    assert r.rss_mb > 10 and 0 <= r.ram_used_pct <= 100
    assert r.cpu_pct is not None and r.cpu_pct >= 0  # primed by the first sample
    assert r.gpu_util_pct is None and "CPU" in r.na["gpu_util_pct"]
    assert not sampler._thread.is_alive()
