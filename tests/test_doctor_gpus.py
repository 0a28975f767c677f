"""`apextui doctor` on several GPUs: the GPU count, NCCL and how the GPUs are linked (NVLink, NVSwitch, PCIe).

As in tests/test_doctor.py, torch is a fake tree first on the probe child's sys.path (a CUDA build that sees
N GPUs and reports an NCCL version); NVML, which the doctor asks in its own process, is the fake `pynvml` of
tests/nvml_fakes.py. Cases: no GPU, 1 GPU, 2 GPUs joined by NVLink, 8 GPUs on NVSwitch (and one of them
failing), PCIe only.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from nvml_fakes import fake_nvml

from apextui.core.apex.doctor import run_doctor
from apextui.core.apex.doctor_lines import render_lines
from apextui.core.monitor.topology import matrix, probe_topology


def fake_torch(root: Path, gpus: int, nccl: str = "(2, 27, 5)") -> Path:
    """A CUDA build of torch seeing `gpus` H200s whose torch.cuda.nccl.version() returns `nccl` (a Python
    expression: a tuple, an old int code, or a raise); with gpus=0 a CPU-only build."""
    files = {
        "torch/__init__.py": "__version__ = '2.99.0+fake'\nfrom . import backends, cuda, nn, utils, version\n",
        "torch/version.py": f"cuda = {'None' if gpus == 0 else repr('12.8')}\nhip = None\n",
        "torch/backends/__init__.py": "from . import cudnn\n",
        "torch/backends/cudnn.py": "def is_available():\n    return False\n",
        "torch/nn/__init__.py": "",
        "torch/utils/__init__.py": "",
        "torch/utils/cpp_extension.py": "CUDA_HOME = None\n",
        "torch/cuda.py": f"""\
            class _Props:
                name, major, minor, total_memory = 'NVIDIA H200', 9, 0, 141 * 2**30

            class nccl:
                @staticmethod
                def version():
                    return {nccl}

            def is_available():
                return {gpus} > 0

            def device_count():
                return {gpus}

            def get_device_properties(i):
                return _Props()

            def is_bf16_supported():
                return True
            """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def doctor(tmp_path, monkeypatch, gpus: int, nvml, **torch_kw):
    """run_doctor with the fake torch of `gpus` GPUs and the fake NVML `nvml` (None: not installed)."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    tree = fake_torch(tmp_path / "tree", gpus, **torch_kw)
    report = run_doctor(extra_sys_path=[tree], smoke=False)
    text = ["".join(t for t, _ in line) for line in render_lines(report)]
    return report, json.loads(report.to_json())["environment"], text


def row(text: list[str], label: str) -> str:
    (line,) = [line for line in text if line.startswith(f"  {label:<10} ")]
    return line[13:]


# ---- the topology alone (NVML) ----------------------------------------------------------------


@pytest.mark.parametrize("remote_type", [True, False], ids=["remote-type", "old-nvml-bus-ids"])
def test_two_gpus_joined_by_nvlink(monkeypatch, remote_type):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(2, links="pairs", nvlinks=18, remote_type=remote_type))
    t = probe_topology()
    assert (t.kind, t.gpus) == ("nvlink", 2)
    (link,) = t.links
    assert (link.a, link.b, link.kind, link.nvlinks, link.label) == (0, 1, "nvlink", 18, "NV18")
    assert t.summary == "NVLink: the 2 GPUs are joined directly by 18 NVLinks"


@pytest.mark.parametrize("remote_type", [True, False], ids=["remote-type", "old-nvml-bus-ids"])
def test_eight_gpus_on_nvswitch(monkeypatch, remote_type):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(8, links="switch", remote_type=remote_type))
    t = probe_topology()
    assert (t.kind, t.gpus, len(t.links)) == ("nvswitch", 8, 28)
    assert {(link.kind, link.nvlinks) for link in t.links} == {("nvswitch", 18)}
    assert t.summary == "NVSwitch: all 8 GPUs over NVLink through NVSwitch (18 NVLinks a GPU)"
    rows = matrix(t)
    assert len(rows) == 9 and rows[8].split() == ["GPU7", *["NVSW"] * 7, "X"]


def test_one_failing_gpu_leaves_its_pairs_na_and_the_others_classified(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(8, links="switch", failing={3}))
    t = probe_topology()
    na = [link for link in t.links if link.kind == "n/a"]
    assert sorted((link.a, link.b) for link in na) == sorted(tuple(sorted((3, i))) for i in range(8) if i != 3)
    assert all(link.reason == "GPU 3: Unknown Error" for link in na)
    assert {link.kind for link in t.links} - {"n/a"} == {"nvswitch"} and t.kind == "nvswitch"
    assert t.summary.endswith("; 7 of 28 pairs n/a (GPU 3: Unknown Error)")
    rows = matrix(t)
    assert rows[0].split() == [f"GPU{i}" for i in range(8)]
    assert rows[4].split() == ["GPU3", "n/a", "n/a", "n/a", "X", "n/a", "n/a", "n/a", "n/a"]
    assert rows[1].split() == ["GPU0", "X", "NVSW", "NVSW", "n/a", "NVSW", "NVSW", "NVSW", "NVSW"]


def test_pcie_only_names_the_farthest_path(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(4, links="none", pcie=50))
    t = probe_topology()
    assert t.kind == "pcie" and {link.label for link in t.links} == {"SYS"}
    assert t.summary == "PCIe only: no NVLink between the 4 GPUs (farthest pair SYS, across NUMA nodes)"


def test_mixed_topology(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(4, links="pairs", nvlinks=4, pcie=40))
    t = probe_topology()
    assert t.kind == "mixed" and t.summary == "mixed: 2 of 6 pairs over NVLink, 4 over PCIe only"
    assert {(link.a, link.b): link.label for link in t.links} == {
        (0, 1): "NV4", (2, 3): "NV4", (0, 2): "NODE", (0, 3): "NODE", (1, 2): "NODE", (1, 3): "NODE"}


def test_no_gpu_and_no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(0))
    assert probe_topology().kind == "none"
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(1))
    assert probe_topology().kind == "single"
    monkeypatch.setitem(sys.modules, "pynvml", None)
    t = probe_topology()
    assert t.kind == "n/a" and t.summary.startswith("n/a: nvidia-ml-py not importable")


# ---- the whole doctor: report, text and JSON ---------------------------------------------------------


def test_doctor_eight_gpus_on_nvswitch(tmp_path, monkeypatch):
    report, env, text = doctor(tmp_path, monkeypatch, 8, fake_nvml(8, links="switch"))
    assert len(report.environment.gpus) == 8 and report.environment.nccl == "2.27.5"
    assert row(text, "GPUs") == "8 visible to torch"
    assert row(text, "NCCL") == "2.27.5"
    assert row(text, "GPU links").startswith("NVSwitch: all 8 GPUs over NVLink")
    assert not any(line.strip().startswith("GPU0 ") for line in text)  # uniform: no matrix
    assert env["nccl"] == "2.27.5" and env["nccl_error"] == ""
    assert env["topology"]["kind"] == "nvswitch" and env["topology"]["gpus"] == 8
    assert len(env["topology"]["links"]) == 28
    assert env["topology"]["links"][0] == {"a": 0, "b": 1, "kind": "nvswitch", "nvlinks": 18, "pcie": None,
                                           "reason": ""}


def test_doctor_eight_gpus_one_failing_shows_a_matrix(tmp_path, monkeypatch):
    _, env, text = doctor(tmp_path, monkeypatch, 8, fake_nvml(8, links="switch", failing={3}))
    assert "7 of 28 pairs n/a (GPU 3: Unknown Error)" in row(text, "GPU links")
    start = text.index(next(line for line in text if line.startswith("  GPU links ")))
    assert text[start + 1].split() == [f"GPU{i}" for i in range(8)]
    assert text[start + 5].split()[:5] == ["GPU3", "n/a", "n/a", "n/a", "X"]
    assert env["gpus"][3]["name"] == "NVIDIA H200"  # torch still sees it; NVML's trouble is in the links


def test_doctor_two_gpus_nvlinked(tmp_path, monkeypatch):
    _, env, text = doctor(tmp_path, monkeypatch, 2, fake_nvml(2, links="pairs"), nccl="21903")
    assert row(text, "GPUs") == "2 visible to torch"
    assert row(text, "NCCL") == "2.19.3"  # an old torch's int code
    assert row(text, "GPU links") == "NVLink: the 2 GPUs are joined directly by 18 NVLinks"
    assert env["topology"]["kind"] == "nvlink"


def test_doctor_one_gpu_of_two_visible(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES=0 on a 2-GPU box: torch sees one, NVML the machine's two."""
    _, env, text = doctor(tmp_path, monkeypatch, 1, fake_nvml(2, links="pairs"), nccl="(2, 27, 5, 'a0')")
    assert row(text, "GPUs") == "1 visible to torch, 2 on this machine (NVML)" and env["topology"]["gpus"] == 2
    assert row(text, "NCCL") == "2.27.5-a0"


def test_doctor_one_gpu(tmp_path, monkeypatch):
    _, env, text = doctor(tmp_path, monkeypatch, 1, fake_nvml(1),
                          nccl="__import__('torch')._C._nccl_version()")
    assert row(text, "GPUs") == "1 visible to torch"
    assert row(text, "NCCL").startswith("n/a (torch has no NCCL (AttributeError:")
    assert row(text, "GPU links") == "one GPU: nothing to link"
    assert env["nccl"] is None and env["topology"]["kind"] == "single"


def test_doctor_no_gpu(tmp_path, monkeypatch):
    _, env, text = doctor(tmp_path, monkeypatch, 0, None)
    assert row(text, "NCCL") == "n/a (torch is a CPU-only build)"
    assert not [line for line in text if line.startswith(("  GPUs ", "  GPU links "))]  # "GPU none visible" says it
    assert env["gpus"] == [] and env["topology"]["kind"] == "n/a"
    assert env["topology"]["summary"].startswith("n/a: nvidia-ml-py not importable")
