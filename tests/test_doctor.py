"""`apextui doctor`: classification and hints on fake package trees, library API and CLI.

The fake trees are built in a temporary directory and put first on the probe's
sys.path (library API: `extra_sys_path`; CLI: PYTHONPATH). All probes of the
module-scoped fixture run concurrently, each in its own child interpreter.

On a GPU machine with a real Apex on PYTHONPATH (and possibly already imported into
this process by tests/test_gpu.py) the fake-tree probes still see only their tree:
the child's sys.path is the tree + CLEAN_PATH (sys.path minus the folders holding
Apex), the CLI gets PYTHONPATH=tree:repo exactly, the in-process checks set any
imported Apex aside, and a tree's stand-in torch shadows the real one. Expectations
that depend on the machine (NVML's GPUs, the real probe) are read from it.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from apextui.core import presets
from apextui.core.apex import probe as apex_probe
from apextui.core.apex import features as af
from apextui.core.apex import doctor
from apextui.core.apex import doctor_child
from apextui.core.availability import availability
from apextui.core.apex.doctor import run_doctor
from apextui.core.apex.doctor_env import format_cudnn, probe_nvcc, probe_nvml
from apextui.core.apex.doctor_report import ApexInfo, Environment, ExtensionStatus
from apextui.cli.doctor_command import print_human, render_lines, use_color

REPO = Path(__file__).resolve().parents[1]
UNDEFINED = ("/opt/venv/lib/python3.11/site-packages/amp_C.cpython-311-x86_64-linux-gnu.so: "
             "undefined symbol: _ZN3c104cuda9SetDeviceEi")

# ------------------------------------------------------------------ fake trees

# The PyPI 'apex' 0.9.10.dev0 (a Pyramid web toolkit): its apex/__init__.py imports
# Pyramid names in this order and dies on line 14 with pyramid >= 2.0, where
# UnencryptedCookieSessionFactoryConfig no longer exists.
PYRAMID_TREE = {
    "apex/__init__.py": """\
        from pyramid_mailer.interfaces import IMailer

        from apex.i18n import MessageFactory

        from sqlalchemy import engine_from_config

        from pyramid.authentication import AuthTktAuthenticationPolicy
        from pyramid.authorization import ACLAuthorizationPolicy
        from pyramid.exceptions import Forbidden
        from pyramid.interfaces import IAuthenticationPolicy
        from pyramid.interfaces import IAuthorizationPolicy
        from pyramid.interfaces import ISessionFactory
        from pyramid.security import NO_PERMISSION_REQUIRED
        from pyramid.session import UnencryptedCookieSessionFactoryConfig
        from pyramid.settings import asbool
        """,
    "apex/i18n.py": "MessageFactory = str\n",
    "apex/views.py": "def login(request):\n    return {}\n",
    "pyramid_mailer/__init__.py": "",
    "pyramid_mailer/interfaces.py": "class IMailer: pass\n",
    "sqlalchemy/__init__.py": "def engine_from_config(*a, **k): pass\n",
    "pyramid/__init__.py": "",
    "pyramid/authentication.py": "class AuthTktAuthenticationPolicy: pass\n",
    "pyramid/authorization.py": "class ACLAuthorizationPolicy: pass\n",
    "pyramid/exceptions.py": "class Forbidden(Exception): pass\n",
    "pyramid/interfaces.py": "IAuthenticationPolicy = IAuthorizationPolicy = ISessionFactory = object\n",
    "pyramid/security.py": "NO_PERMISSION_REQUIRED = '__no_permission_required__'\n",
    "pyramid/session.py": "def SignedCookieSessionFactory(secret): pass\n",
    "apex-0.9.10.dev0.dist-info/METADATA": "Metadata-Version: 2.1\nName: apex\nVersion: 0.9.10.dev0\n",
    "apex-0.9.10.dev0.dist-info/top_level.txt": "apex\n",
}

# NVIDIA's apex, Python files only (what a build without --cpp_ext/--cuda_ext installs):
# extensions are imported lazily by constructors, or at import time by apex.mlp/apex.fused_dense.
NVIDIA_PY = {
    "apex/__init__.py": """\
        import torch
        from . import optimizers
        from . import normalization
        """,
    "apex/multi_tensor_apply/__init__.py": """\
        class MultiTensorApply:
            available = False
            def __init__(self, chunk_size):
                try:
                    import amp_C
                    MultiTensorApply.available = True
                except ImportError as err:
                    MultiTensorApply.import_err = err
        multi_tensor_applier = MultiTensorApply(2048 * 32)
        """,
    "apex/optimizers/__init__.py": """\
        from apex.multi_tensor_apply import multi_tensor_applier

        def _optimizer(name):
            class Fused:
                def __init__(self, params, **kw):
                    if not multi_tensor_applier.available:
                        raise RuntimeError(f"apex.optimizers.{name} requires cuda extensions")
                    import amp_C
            Fused.__name__ = name
            return Fused

        FusedAdam, FusedLAMB, FusedSGD = (_optimizer(n) for n in ("FusedAdam", "FusedLAMB", "FusedSGD"))
        """,
    "apex/normalization/__init__.py": """\
        import importlib
        import torch

        class FusedLayerNorm(torch.nn.Module):
            def __init__(self, normalized_shape, eps=1e-5):
                super().__init__()
                self.cuda_ext = importlib.import_module("fused_layer_norm_cuda")

        class FusedRMSNorm(FusedLayerNorm): pass
        class MixedFusedLayerNorm(FusedLayerNorm): pass
        """,
    "apex/mlp/__init__.py": "from .mlp import *\n",
    "apex/mlp/mlp.py": "import torch\nimport mlp_cuda\n\nclass MLP(torch.nn.Module): pass\n",
    "apex/fused_dense/__init__.py": "from .fused_dense import *\n",
    "apex/fused_dense/fused_dense.py": "import torch\nimport fused_dense_cuda\n\n"
                                       "class FusedDense(torch.nn.Module): pass\n",
    "apex-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: apex\nVersion: 0.1\n"
                                   "Summary: PyTorch Extensions written by NVIDIA\n",
    "apex-0.1.dist-info/top_level.txt": "apex\n",
}
OK_EXT = "def forward(*args):\n    return args\n"
ALL_OK = {f"{name}.py": OK_EXT for name in af.REQUIRED_EXTENSIONS}

BROKEN_EXT = {
    "apex_C.py": "raise RuntimeError('apex_C: CUDA error: no kernel image is available for execution')\n",
    "amp_C.py": f"raise ImportError({UNDEFINED!r})\n",
    # prints on stdout (Python and fd level) must not disturb the probe's protocol
    "fused_layer_norm_cuda.py": "import os\nprint('hello from fused_layer_norm_cuda')\n"
                                "os.write(1, b'raw fd-1 noise, no newline')\n" + OK_EXT,
    "mlp_cuda.py": "raise SystemExit('mlp_cuda: refusing to load')\n",
    "fused_dense_cuda.py": "raise ImportError('libcudart.so.11.0: cannot open shared object file: "
                           "No such file or directory')\n",
    "syncbn.py": "raise OSError(5, 'Input/output error')\n",
    "xentropy_cuda.py": OK_EXT,  # an optional contrib module that is present
}
# A stand-in torch that imports in milliseconds. Trees whose classification does not depend
# on torch carry it, so the suite pays for few real torch imports (about 1 s of CPU each);
# the "broken" tree and this machine's own probe use the real torch.
FAKE_TORCH = {
    "torch/__init__.py": "__version__ = '2.99.0+fake'\nfrom . import backends, cuda, nn, utils, version\n",
    "torch/version.py": "cuda = None\nhip = None\n",
    "torch/cuda.py": "def is_available():\n    return False\n",
    "torch/backends/__init__.py": "from . import cudnn\n",
    "torch/backends/cudnn.py": "def is_available():\n    return False\n",
    "torch/nn/__init__.py": "class Module:\n    def __init__(self):\n        pass\n",
    "torch/utils/__init__.py": "",
    "torch/utils/cpp_extension.py": "CUDA_HOME = None\n",
}
# A stand-in CUDA build of torch that sees one "GPU": the smoke tests' gating runs as on a GPU
# machine. Any smoke test that does run raises at its first torch call, as a kernel built for
# the wrong architecture would.
FAKE_CUDA_TORCH = {
    **FAKE_TORCH,
    "torch/__init__.py": """\
        __version__ = '2.99.0+fakecuda'
        from . import backends, cuda, nn, utils, version

        def zeros(*shape, device=None):  # creating the CUDA context works ...
            return 0

        def manual_seed(seed):  # ... but a kernel does not
            raise RuntimeError('CUDA error: no kernel image is available for execution on the device')
        """,
    "torch/version.py": "cuda = '12.8'\nhip = None\n",
    "torch/cuda.py": """\
        class _Props:
            name, major, minor, total_memory = 'Fake GPU', 9, 0, 80 * 2**30

        def is_available():
            return True

        def device_count():
            return 1

        def get_device_properties(i):
            return _Props()

        def is_bf16_supported():
            return True

        def synchronize():
            pass
        """,
}
HOSTILE_EXT = {
    **FAKE_TORCH,
    **ALL_OK,
    "xentropy_cuda.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "focal_loss_cuda.py": "import time\ntime.sleep(120)\n",
    "group_norm_cuda.py": OK_EXT,
}
# An apex whose "fused" classes are plain torch, to run the smoke-test code itself on CPU;
# TORCH_APEX_WRONG shifts the layer norm output, which the smoke test must catch. (The
# FusedAdam smoke code is left out here: torch.optim imports torch._dynamo, ~2 s of CPU.)
TORCH_APEX = {
    "apex/__init__.py": "",
    "apex/optimizers/__init__.py": """\
        import torch

        class FusedAdam(torch.optim.AdamW):
            def __init__(self, params, adam_w_mode=True, **kw):
                assert adam_w_mode
                super().__init__(params, foreach=False, **kw)
        """,
    "apex/normalization/__init__.py": """\
        import torch

        SHIFT = 0.0

        class FusedLayerNorm(torch.nn.LayerNorm):
            def forward(self, x):
                return super().forward(x) + SHIFT

        class FusedRMSNorm(torch.nn.Module):
            def __init__(self, hidden, eps=1e-5):
                super().__init__()
                self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(hidden))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        """,
}
TORCH_APEX_WRONG = {**TORCH_APEX, "apex/normalization/__init__.py":
                    TORCH_APEX["apex/normalization/__init__.py"].replace("SHIFT = 0.0", "SHIFT = 0.01")}
SMOKE_ON_CPU = """\
import json, sys
from apextui.core.apex import doctor_child as child
import torch
out = {}
for tree in sys.argv[1:]:
    sys.path.insert(0, tree)
    out[tree] = {"ln": child._smoke_norm(torch, rms=False, device="cpu"),
                 "rms": child._smoke_norm(torch, rms=True, device="cpu")}
    sys.path.remove(tree)
    for m in [m for m in sys.modules if m.split(".")[0] == "apex"]:
        del sys.modules[m]
print(json.dumps(out))
"""
TREES: dict[str, dict[str, str]] = {
    "pyramid": {**PYRAMID_TREE, **FAKE_TORCH},
    "python_only": {**NVIDIA_PY, **FAKE_TORCH},
    "broken": {**NVIDIA_PY, **BROKEN_EXT},
    "hostile": {**NVIDIA_PY, **HOSTILE_EXT},
    "apex_segfault": {**NVIDIA_PY, **FAKE_TORCH, **ALL_OK,
                      "apex/__init__.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"},
    # every core extension built, but `import apex` raises SystemExit / hangs; and a Python-only one that exits
    "apex_exit": {**NVIDIA_PY, **FAKE_TORCH, **ALL_OK, "apex/__init__.py": "raise SystemExit(3)\n"},
    "apex_hang": {**NVIDIA_PY, **FAKE_TORCH, **ALL_OK, "apex/__init__.py": "import time\ntime.sleep(1000)\n"},
    "apex_exit_python_only": {**NVIDIA_PY, **FAKE_TORCH, "apex/__init__.py": "raise SystemExit('no GPU')\n"},
    "torch_apex": TORCH_APEX,
    "torch_apex_wrong": TORCH_APEX_WRONG,
    "no_torch": {"torch/__init__.py": "raise ImportError('libtorch_cuda.so: cannot open shared object file')\n"},
    # "CUDA machines": no Apex; Python-only Apex; complete Apex whose fused_layer_norm_cuda segfaults
    # on import (the probe child restarts, and must still not run the norm smoke tests)
    "cuda_no_apex": FAKE_CUDA_TORCH,
    "cuda_python_only": {**NVIDIA_PY, **FAKE_CUDA_TORCH},
    "cuda_ln_segv": {**NVIDIA_PY, **FAKE_CUDA_TORCH, **ALL_OK,
                     "fused_layer_norm_cuda.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"},
}
CUDA_TREES = ("cuda_no_apex", "cuda_python_only", "cuda_ln_segv")
SMOKE_TASKS = ["torch", "apex", "import:apex", "ext:amp_C", "ext:fused_layer_norm_cuda",
               *(f"feature:{n}" for n in doctor.SMOKE_TESTS), *(f"smoke:{n}" for n in doctor.SMOKE_TESTS)]
APEXISH = ("apex", "pyramid", "pyramid_mailer", "sqlalchemy", *af.REQUIRED_EXTENSIONS,
           *af.OPTIONAL_EXTENSIONS)


NVCC_NOT_UTF8 = (b"nvcc: NVIDIA (R) Cuda compiler driver \xff\xfe (Copyright \xa9 NVIDIA)\n"
                 b"Cuda compilation tools, release 12.4, V12.4.131\n")


def build_fake_cuda_home(root: Path, banner: bytes = NVCC_NOT_UTF8) -> Path:
    """ROOT/bin/nvcc: a shell script that prints `banner` (bytes, as is) for --version."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "banner").write_bytes(banner)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\ncat '{root / 'banner'}'\n")
    nvcc.chmod(0o755)
    return root


def build_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def apexish_modules() -> list[str]:
    return [m for m in sys.modules if m.split(".")[0] in APEXISH]


def holds_apex(entry: str) -> bool:
    try:
        names = os.listdir(entry or ".")
    except OSError:
        return False
    return any(n.split(".")[0] in ("apex", *af.REQUIRED_EXTENSIONS, *af.OPTIONAL_EXTENSIONS) for n in names)


# A real Apex on sys.path (the GPU machine) would shine through the fake trees wherever they
# lack a module, so fake-tree probes search CLEAN_PATH: sys.path without the folders holding it.
# That cannot work when Apex sits next to torch (site-packages); those tests then skip.
REAL_APEX_DIRS = [os.path.abspath(p or ".") for p in sys.path if holds_apex(p)]
CLEAN_PATH = [p for p in sys.path if os.path.abspath(p or ".") not in REAL_APEX_DIRS]
FAKES_SKIP = next((f"NVIDIA Apex is installed next to torch in {d}; fake trees cannot hide it"
                   for d in REAL_APEX_DIRS if os.path.isdir(os.path.join(d, "torch"))), "")
_PYTHONPATH = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
CLI_SKIP = FAKES_SKIP or next((f"Apex in {d} (not from PYTHONPATH) would shine through the fake trees"
                               for d in REAL_APEX_DIRS if d not in _PYTHONPATH), "")


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    return {name: build_tree(tmp_path_factory.mktemp(name), files) for name, files in TREES.items()}


def cli(*args: str, pythonpath: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """`python -m ARGS` in the repo with PYTHONPATH exactly [the fake tree,] the repo (so an Apex on
    the caller's PYTHONPATH cannot shine through, and the tree's torch shadows site-packages'),
    NO_COLOR/FORCE_COLOR cleared."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.update(env)
    environ["PYTHONPATH"] = os.pathsep.join([*([str(pythonpath)] if pythonpath is not None else []), str(REPO)])
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO,
                          env=environ, timeout=120)


HAS_APEXTUI_CLI = (REPO / "apextui" / "cli" / "command.py").exists() and (REPO / "apextui" / "__main__.py").exists()
DOCTOR_JSON = ("apextui", "doctor", "--json") if HAS_APEXTUI_CLI else ("apextui.cli.doctor_command", "--json")


@pytest.fixture(scope="module")
def probes(trees):
    """Every probe of this module at once: run_doctor per fake tree and on this machine, and the CLI."""
    before = set(sys.modules)
    jobs: dict = {"real": (run_doctor, (), {})}
    if not FAKES_SKIP:
        for name, path in trees.items():
            if not name.startswith("torch_apex"):
                jobs[name] = (run_doctor, (), dict(extra_sys_path=[path], sys_path=CLEAN_PATH))
        jobs["hostile"][2]["task_timeout"] = 6.0
        jobs["apex_hang"][2]["task_timeout"] = 6.0  # finding apex (metadata) must fit in it on a busy machine
        for name in CUDA_TREES:  # the child's raw results: were blocked smoke tests run at all?
            jobs[f"raw:{name}"] = (doctor._run_child, (SMOKE_TASKS, [str(trees[name]), *CLEAN_PATH], 30.0, 200.0),
                                   {})
        jobs["smoke_on_cpu"] = (subprocess.run, ([sys.executable, "-c", SMOKE_ON_CPU, str(trees["torch_apex"]),
                                                  str(trees["torch_apex_wrong"])],),
                                dict(capture_output=True, text=True, cwd=REPO, timeout=120,
                                     env={**os.environ, "PYTHONPATH": str(REPO)}))
    if not CLI_SKIP:
        for name in ("pyramid", "python_only", "broken"):
            jobs[f"cli:{name}"] = (cli, DOCTOR_JSON, {"pythonpath": trees[name]})
        jobs["cli:human"] = (cli, ("apextui.cli.doctor_command",), {"pythonpath": trees["python_only"], "NO_COLOR": "1",
                                                             "CUDA_HOME": str(trees["python_only"] / "no-cuda")})
    # the real torch (a CPU build on the development machine) with CUDA_HOME at an nvcc whose banner is not UTF-8
    cuda_home = build_fake_cuda_home(trees["python_only"].parent / "c\u00fcda-home")
    jobs["cli:cuda_home"] = (cli, DOCTOR_JSON, {"CUDA_HOME": str(cuda_home)})
    jobs["cli:cuda_home_human"] = (cli, ("apextui", "doctor"), {"CUDA_HOME": str(cuda_home), "NO_COLOR": "1",
                                                                  "PYTHONIOENCODING": "ascii"})
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:  # mostly waiting on child processes
        futures = {name: pool.submit(fn, *args, **kw) for name, (fn, args, kw) in jobs.items()}
        out = {name: f.result() for name, f in futures.items()}
    out["_new_modules"] = sorted(set(sys.modules) - before)
    out["_apexish_before"] = sorted(m for m in before if m.split(".")[0] in APEXISH)
    return out


class Probes(dict):
    """Results by job name; a job that could not run here skips the test that needs it."""

    def __missing__(self, key: str):
        pytest.skip(CLI_SKIP if key.startswith("cli:") else FAKES_SKIP)


@pytest.fixture(scope="module")
def reports(probes):
    return Probes(probes)


@pytest.fixture(scope="module")
def cli_runs(probes):
    return Probes(probes)


def real_has_cuda(reports) -> bool:
    return reports["real"].environment.cuda_available


def problem_for(report, needle: str):
    hits = [p for p in report.problems if needle in p.what]
    assert hits, f"no problem mentions {needle!r}: {[p.what for p in report.problems]}"
    return hits[0]


# ------------------------------------------------------------------ library API


def test_this_machine_without_apex(reports):
    if importlib.util.find_spec("apex") is not None:
        pytest.skip("an apex is installed here")
    r = reports["real"]
    assert r.apex.status == "not_installed" and r.apex.location is None
    assert r.apex.fix == af.BUILD_HINT
    assert [e.name for e in r.extensions] == list(af.REQUIRED_EXTENSIONS)  # optional ones only when present
    assert all(e.status == "missing" and e.kind == "missing" for e in r.extensions)
    assert problem_for(r, "NVIDIA Apex is not installed").fix == af.BUILD_HINT
    assert all(not f.ok and f.fix for f in r.features)
    amp = r.feature("apex.amp")
    assert amp.removed and "removed" in amp.reason and "torch.amp" in amp.fix
    assert r.isolation == "subprocess" and not r.ok


def test_this_machine_environment(reports):
    env = reports["real"].environment
    assert env.python == "{}.{}.{}".format(*sys.version_info[:3]) and env.python_executable == sys.executable
    assert env.torch  # torch imports in this venv
    if env.nvml == "ok":
        assert env.driver and env.gpus
    else:
        assert env.nvml.startswith("n/a: ") and env.driver is None
    if env.nvcc_version is None:
        assert env.nvcc_error and env.nvcc_matches_torch is None
    if not env.cuda_available:
        assert env.tf32_supported is None and env.bf16_supported is None
    if env.torch_cuda is None:  # the CPU-only torch of the development machine
        assert problem_for(reports["real"], "CPU-only build").fix.startswith("install a CUDA build of torch")
    else:
        assert env.cudnn and env.cuda_home


def test_this_machine_real_apex_on_cuda(reports):
    """On a GPU machine with NVIDIA Apex built from source: complete, and the smoke tests pass,
    in under 3 s together (CUDA context creation is done before the clock starts)."""
    if importlib.util.find_spec("apex") is None or not real_has_cuda(reports):
        pytest.skip("needs NVIDIA Apex and a CUDA GPU")
    r = reports["real"]
    assert r.apex.status == "complete", r.apex.detail
    assert all(e.status == "ok" for e in r.extensions if e.required)
    for s in r.smoke:
        assert not s.skipped and s.passed and s.max_abs_err <= s.tolerance, s
    assert all(s.seconds > 0 for s in r.smoke) and sum(s.seconds for s in r.smoke) < 3.0, r.smoke
    assert all(f.ok for f in r.features if not f.removed)
    assert r.environment.gpus and r.environment.tf32_supported is not None
    assert not r.problems, r.problems


def test_smoke_tests_skipped_without_cuda(reports):
    if real_has_cuda(reports):
        pytest.skip("a CUDA GPU is visible: the smoke tests run")
    for name in ("real", "broken"):
        smoke = reports[name].smoke
        assert [s.name for s in smoke] == ["FusedAdam", "FusedLayerNorm", "FusedRMSNorm"]
        for s in smoke:
            assert s.skipped and s.passed is None and s.max_abs_err is None
            assert s.reason.startswith("needs a CUDA GPU") and "CPU-only" in s.reason


def test_pypi_pyramid_apex_is_not_nvidia(reports, trees):
    r = reports["pyramid"]
    a = r.apex
    assert a.status == "not_nvidia"
    assert a.location == str(trees["pyramid"] / "apex")
    assert (a.distribution, a.version) == ("apex", "0.9.10.dev0")
    assert a.import_ok is False
    assert a.import_error.startswith("ImportError: cannot import name 'UnencryptedCookieSessionFactoryConfig'")
    assert "Pyramid" in a.detail and a.fix == af.NOT_NVIDIA_FIX
    p = problem_for(r, "Pyramid web toolkit")
    assert p.fix.startswith("pip uninstall -y apex") and af.BUILD_CMD in p.fix
    fused_adam = r.feature("FusedAdam")
    assert not fused_adam.ok and fused_adam.fix == af.NOT_NVIDIA_FIX


def test_python_only_apex(reports, trees):
    r = reports["python_only"]
    assert r.apex.status == "python_only"
    assert r.apex.location == str(trees["python_only"] / "apex")
    assert (r.apex.distribution, r.apex.version) == ("apex", "0.1")
    assert r.apex.import_ok is True and r.apex.import_error == ""
    assert all(e.status == "missing" for e in r.extensions)
    p = problem_for(r, "Python-only")
    assert p.fix.startswith("rebuild Apex with its C++/CUDA extensions") and af.BUILD_CMD in p.fix
    adam = r.feature("FusedAdam")
    assert not adam.ok and adam.needs == ("amp_C",) and "needs amp_C" in adam.reason
    assert adam.fix == af.REBUILD_HINT
    assert "mlp_cuda" in r.feature("apex.mlp").reason
    assert "torch.amp" in r.feature("apex.amp").fix


def test_broken_extensions_are_classified(reports, trees):
    r = reports["broken"]
    assert r.apex.status == "partial"
    ext = {e.name: e for e in r.extensions}
    assert list(ext)[:6] == list(af.REQUIRED_EXTENSIONS)
    expected = {  # name: (status, kind, exception class)
        "apex_C": ("broken", "exception", "RuntimeError"),
        "amp_C": ("broken", "undefined_symbol", "ImportError"),
        "fused_layer_norm_cuda": ("ok", "", ""),
        "mlp_cuda": ("broken", "system_exit", "SystemExit"),
        "fused_dense_cuda": ("broken", "missing_library", "ImportError"),
        "syncbn": ("broken", "os_error", "OSError"),
        "xentropy_cuda": ("ok", "", ""),
    }
    assert {n: (ext[n].status, ext[n].kind, ext[n].error_type) for n in expected} == expected
    amp = ext["amp_C"]
    assert amp.message == UNDEFINED and "built against a different torch" in amp.reason
    assert amp.fix.startswith("rebuild Apex against the installed torch")
    assert amp.path == str(trees["broken"] / "amp_C.py")
    assert ext["syncbn"].message == "[Errno 5] Input/output error" and "LD_LIBRARY_PATH" in ext["syncbn"].fix
    assert "cannot open shared object file" in ext["fused_dense_cuda"].message
    assert "refusing to load" in ext["mlp_cuda"].message
    assert ext["xentropy_cuda"].required is False
    for name in ("apex_C", "amp_C", "mlp_cuda", "fused_dense_cuda", "syncbn"):
        assert problem_for(r, name).fix == ext[name].fix
    adam = r.feature("FusedAdam")
    assert not adam.ok and "different torch" in adam.reason and adam.fix.startswith("rebuild Apex against")
    ln = r.feature("FusedLayerNorm")  # its extension imports; without a GPU it cannot run
    assert not ln.ok
    if not real_has_cuda(reports):
        assert ln.reason == "needs a CUDA GPU; torch sees none"


def test_smoke_test_code_against_torch_backed_apex(reports, trees):
    """The CUDA smoke tests' own code, run on CPU against an apex made of plain torch."""
    proc = reports["smoke_on_cpu"]
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    good, wrong = out[str(trees["torch_apex"])], out[str(trees["torch_apex_wrong"])]
    for name in ("ln", "rms"):
        err, tol = good[name]
        assert 0 <= err <= tol, (name, err, tol)
    assert good["ln"][1] == 1e-3
    assert wrong["ln"][0] > wrong["ln"][1]  # a shifted output is caught
    assert wrong["rms"][0] <= wrong["rms"][1]


def test_crash_and_hang_on_import_are_reported_and_probe_continues(reports):
    r = reports["hostile"]
    assert r.environment.torch == "2.99.0+fake"  # the tree's torch, first on the child's sys.path
    ext = {e.name: e for e in r.extensions}
    assert ext["xentropy_cuda"].status == "broken" and ext["xentropy_cuda"].kind == "crashed"
    assert "SIGSEGV" in ext["xentropy_cuda"].message
    assert ext["focal_loss_cuda"].kind == "timeout" and "6 s" in ext["focal_loss_cuda"].message
    assert ext["group_norm_cuda"].status == "ok"  # probed after the crash and the hang
    assert [f.name for f in r.features] == list(af.FEATURES)
    assert problem_for(r, "crashed the interpreter").fix.startswith("rebuild Apex against the installed torch")
    assert "nvidia-smi" in problem_for(r, "hung").fix


def test_apex_that_segfaults_on_import(reports):
    r = reports["apex_segfault"]
    assert r.apex.import_ok is False and r.apex.import_error.startswith("crashed: ")
    assert "SIGSEGV" in r.apex.import_error
    assert problem_for(r, "import apex fails").fix == af.REBUILD_AGAINST_TORCH
    assert all(not f.ok for f in r.features)  # not imported again: each would crash the same way
    assert "not run: import apex crashed" in r.feature("FusedAdam").reason


@pytest.mark.parametrize("tree, error", [("apex_exit", "SystemExit: 3"), ("apex_hang", "timeout: did not finish"),
                                         ("apex_segfault", "crashed: the interpreter was killed by SIGSEGV")])
def test_apex_whose_import_fails_is_not_complete(reports, tree, error):
    """Every core extension imports, but `import apex` raises, hangs or segfaults: nothing of Apex is usable."""
    r = reports[tree]
    assert all(e.status == "ok" for e in r.extensions if e.required)
    assert r.apex.status == "import_fails" and r.apex.import_ok is False, r.apex
    assert r.apex.import_error.startswith(error) and error in r.apex.detail, r.apex
    assert "6/6 core compiled extensions import" in r.apex.detail
    p = problem_for(r, "import apex fails")
    assert error in p.what and p.fix == r.apex.import_fix and p.fix
    if tree == "apex_hang":
        assert "6 s" in p.what and "nvidia-smi" in p.fix
        assert "not run: import apex hung" in r.feature("FusedAdam").reason
    assert not any(f.ok for f in r.features)


def test_python_only_apex_whose_import_fails(reports):
    r = reports["apex_exit_python_only"]
    assert r.apex.status == "import_fails" and "none of its compiled extensions exist" in r.apex.detail
    p = problem_for(r, "import apex fails")
    assert "SystemExit: no GPU" in p.what and p.fix == af.REBUILD_HINT
    assert problem_for(r, "compiled extensions missing").fix == af.REBUILD_HINT  # and what was not built


def test_complete_apex(reports):
    r = reports["hostile"]  # every core extension imports (the crash and the hang are optional modules)
    assert r.apex.status == "complete" and r.apex.import_ok and r.apex.detail.startswith("all core"), r.apex
    assert all(e.status == "ok" and e.path for e in r.extensions if e.required)
    assert not [p for p in r.problems if "missing" in p.what or "Python-only" in p.what or "apex" in p.what]
    assert r.feature("FusedAdam").reason == "needs a CUDA GPU; torch sees none"


def test_torch_that_fails_to_import(reports):
    r = reports["no_torch"]
    env = r.environment
    assert env.torch is None and "libtorch_cuda.so" in env.torch_error
    assert problem_for(r, "torch cannot be imported").fix.startswith("install a CUDA build of torch")
    assert all(s.skipped and "torch cannot be imported" in s.reason for s in r.smoke)
    assert r.apex.status == "not_installed"


def smoke_text(report) -> str:
    buf = io.StringIO()
    print_human(report, buf, color=False)
    return buf.getvalue().split("Smoke tests", 1)[1].split("\n", 1)[1]


@pytest.mark.parametrize("tree, reasons", [
    ("cuda_no_apex", ["NVIDIA Apex is not installed"] * 3),
    ("cuda_python_only", ["amp_C missing", "fused_layer_norm_cuda missing", "fused_layer_norm_cuda missing"]),
    ("cuda_ln_segv", [None, "fused_layer_norm_cuda broken (crashed)", "fused_layer_norm_cuda broken (crashed)"]),
])
def test_smoke_tests_on_cuda_skip_what_apex_cannot_run(reports, tree, reasons):
    """With CUDA but no usable Apex feature a smoke test is skipped with the reason, never a FAIL;
    FAIL means the kernel ran and raised or was wrong (here the fake torch raises 'no kernel image')."""
    r = reports[tree]
    assert r.environment.cuda_available and r.environment.torch == "2.99.0+fakecuda"
    assert r.environment.gpus[0].capability == "9.0"
    assert [s.name for s in r.smoke] == list(doctor.SMOKE_TESTS)
    text = smoke_text(r)
    for s, reason in zip(r.smoke, reasons, strict=True):
        if reason is None:  # its prerequisites are fine: it ran, and the kernel raised
            assert not s.skipped and s.passed is False, s
            assert s.reason.startswith("error: RuntimeError: CUDA error: no kernel image"), s.reason
            assert 'TORCH_CUDA_ARCH_LIST="9.0"' in s.fix
            assert f"FAIL {s.name}" in text
            assert problem_for(r, f"{s.name} smoke test").fix == s.fix
            feat = r.feature(s.name)
            assert not feat.ok and feat.reason.startswith("smoke test failed")
        else:
            assert s.skipped and s.passed is None and s.max_abs_err is None and s.seconds is None, s
            assert s.reason == reason and s.fix
            assert f"skip {s.name:<16}{reason}" in text
            assert not [p for p in r.problems if p.what.startswith(f"{s.name} smoke test")]
    if tree == "cuda_no_apex":
        assert s.fix == af.BUILD_HINT and "FAIL" not in text
        assert r.apex.status == "not_installed"
        assert problem_for(r, "NVIDIA Apex is not installed").fix == af.BUILD_HINT


@pytest.mark.parametrize("tree, blockers", [
    ("cuda_no_apex", ["apex"] * 3),
    ("cuda_python_only", ["ext:amp_C", "ext:fused_layer_norm_cuda", "ext:fused_layer_norm_cuda"]),
    # fused_layer_norm_cuda killed the first child: its successor learns that from the parent
    ("cuda_ln_segv", [None, "ext:fused_layer_norm_cuda", "ext:fused_layer_norm_cuda"]),
])
def test_probe_child_does_not_run_blocked_smoke_tests(reports, tree, blockers):
    raw = reports[f"raw:{tree}"]
    assert raw["torch"]["ok"] and raw["torch"]["cuda_available"]
    for name, blocker in zip(doctor.SMOKE_TESTS, blockers, strict=True):
        res = raw[f"smoke:{name}"]
        if blocker is None:
            assert res["ok"] is False and res["error_type"] == "RuntimeError", res
        else:
            assert res["skipped"] and res["blocked_by"] == blocker and "seconds" not in res, res
    if tree == "cuda_ln_segv":
        assert raw["ext:fused_layer_norm_cuda"]["fatal"] == "crashed"


def _env(**kw) -> Environment:
    base = dict(python="3.12.3", python_executable=sys.executable, platform="Linux", torch="2.11.0+cu130",
                torch_error="", torch_cuda="13.0", cudnn="9.19.0", cuda_available=True, cuda_error="", gpus=(),
                driver="580", nvml="ok", cuda_home="/usr/local/cuda", nvcc_path=None, nvcc_version="13.0",
                nvcc_error="", nvcc_matches_torch=True, tf32_supported=True, bf16_supported=True)
    return Environment(**{**base, **kw})


def _apex(status: str, import_error: str = "") -> ApexInfo:
    return ApexInfo(status, None if status == "not_installed" else "/x/apex", None, "0.1",
                    None if status == "not_installed" else not import_error, import_error, "", "d", "fix-" + status)


def _ext(name: str, status: str, kind: str = "") -> ExtensionStatus:
    return ExtensionStatus(name, True, status, kind, "", "", None, "r", f"fix-{name}")


def test_smoke_skip_reason_decides_skip_vs_run():
    """The gate itself, on a "CUDA machine": what must hold for a smoke test to run."""
    ok_exts = {n: _ext(n, "ok") for n in af.REQUIRED_EXTENSIONS}
    env, complete, ok = _env(), _apex("complete"), {"ok": True}
    for name in doctor.SMOKE_TESTS:
        assert doctor.smoke_skip_reason(name, env, complete, ok_exts, ok) == ("", "")
    skip = doctor.smoke_skip_reason
    assert skip("FusedAdam", env, ApexInfo("not_installed", None, None, None, None, "", "",
                                            "NVIDIA Apex is not installed", af.BUILD_HINT), {}, {}) == (
        "NVIDIA Apex is not installed", af.BUILD_HINT)
    assert skip("FusedAdam", env, _apex("not_nvidia"), ok_exts, ok)[0] == "the installed 'apex' is not NVIDIA's Apex"
    assert skip("FusedAdam", env, _apex("partial", "crashed: killed by SIGSEGV"), ok_exts, ok)[0] == (
        "import apex fails (crashed: killed by SIGSEGV)")
    missing = {**ok_exts, "amp_C": _ext("amp_C", "missing", "missing")}
    assert skip("FusedAdam", env, _apex("partial"), missing, ok) == ("amp_C missing", "fix-amp_C")
    assert skip("FusedLayerNorm", env, _apex("partial"), missing, ok) == ("", "")  # needs no amp_C
    broken = {**ok_exts, "fused_layer_norm_cuda": _ext("fused_layer_norm_cuda", "broken", "undefined_symbol")}
    assert skip("FusedRMSNorm", env, _apex("partial"), broken, ok)[0] == (
        "fused_layer_norm_cuda broken (undefined_symbol)")
    bad_feature = {"ok": False, "error_type": "AttributeError", "message": "apex.optimizers has no attribute"}
    assert skip("FusedAdam", env, complete, ok_exts, bad_feature)[0].startswith(
        "apex.optimizers.FusedAdam is unusable (AttributeError")
    # torch and the GPU come first: with neither, the Apex state does not matter
    assert skip("FusedAdam", _env(cuda_available=False), complete, ok_exts, ok)[0] == (
        "needs a CUDA GPU: torch sees no CUDA GPU")
    assert skip("FusedAdam", _env(torch_cuda=None, cuda_available=False), complete, ok_exts, ok)[0] == (
        "needs a CUDA GPU: torch is a CPU-only build")
    assert skip("FusedAdam", _env(torch=None, torch_error="ImportError: x"), complete, ok_exts, ok)[0] == (
        "torch cannot be imported (ImportError: x)")


def test_child_smoke_gate_needs_no_torch():
    cfg = {"smoke_needs": {"FusedAdam": ["apex", "import:apex", "ext:amp_C", "feature:FusedAdam"]}}
    assert doctor_child.smoke_blocker("FusedAdam", cfg, {"ext:amp_C", "feature:FusedAdam"}) == "ext:amp_C"
    assert doctor_child.smoke_blocker("FusedAdam", cfg, {"ext:syncbn"}) == ""
    assert doctor_child._task_smoke("FusedAdam", cfg, {"apex"}) == {
        "ok": True, "skipped": True, "reason": "not run: apex failed", "blocked_by": "apex"}
    assert not doctor_child.usable({"ok": True, "found": False}) and doctor_child.usable({"ok": True})
    assert not doctor_child.usable({"ok": False, "present": False})


def test_probe_leaves_sys_modules_clean(probes):
    # Other test modules of the same session (tests/test_gpu.py) may have imported the real Apex
    # in this process already; the probe must add nothing.
    assert not [m for m in probes["_new_modules"] if m.split(".")[0] in APEXISH + ("torch",)]
    assert sorted(apexish_modules()) == probes["_apexish_before"]


def test_report_is_immutable_and_json_ready(reports):
    r = reports["broken"]
    with pytest.raises(AttributeError):
        r.apex.status = "complete"  # type: ignore[misc]
    d = json.loads(r.to_json())
    assert list(d) == ["schema", "environment", "apex", "extensions", "features", "smoke", "problems",
                       "isolation", "seconds"]
    assert d["apex"]["status"] == "partial"
    assert {p["what"] for p in d["problems"]} == {p.what for p in r.problems}
    assert all(p["fix"] for p in d["problems"])


# ------------------------------------------------------------------ the presets' Apex check (a child, cached)


@pytest.fixture
def on_path(monkeypatch, trees):
    """Put a fake tree first on sys.path, with any Apex that other tests imported into this
    process (tests/test_gpu.py on a GPU machine) set aside meanwhile and restored after."""
    if FAKES_SKIP:
        pytest.skip(FAKES_SKIP)
    stashed = {m: sys.modules.pop(m) for m in apexish_modules()}
    apex_probe._memo.clear()

    def put(name: str) -> Path:
        monkeypatch.setattr(sys, "path", [str(trees[name]), *CLEAN_PATH])
        importlib.invalidate_caches()
        return trees[name]

    try:
        yield put
    finally:
        for m in apexish_modules():
            sys.modules.pop(m, None)
        sys.modules.update(stashed)
        importlib.invalidate_caches()
        apex_probe._memo.clear()


@pytest.mark.slow
def test_check_feature_classifies_broken_extensions(on_path):
    on_path("broken")
    adam = apex_probe.feature_availability("FusedAdam", cuda_available=False)
    assert not adam.ok and "different torch" in adam.reason and adam.fix.startswith("rebuild Apex against")
    mlp = apex_probe.feature_availability("apex.mlp", cuda_available=False)  # mlp_cuda raises SystemExit on import
    assert not mlp.ok and "sys.exit" in mlp.reason
    assert not apexish_modules()  # this process imported nothing of it


def test_check_feature_not_nvidia_and_python_only(on_path):
    on_path("pyramid")
    check = apex_probe.feature_availability("FusedAdam", cuda_available=True)
    assert not check.ok and "Pyramid" in check.reason and check.fix == af.NOT_NVIDIA_FIX
    on_path("python_only")
    check = apex_probe.feature_availability("FusedLayerNorm", cuda_available=True)
    assert not check.ok and "fused_layer_norm_cuda is not installed" in check.reason
    assert not apexish_modules()


@pytest.mark.parametrize("tree, reason, fix", [
    ("apex_exit", "import apex fails: SystemExit: 3", af.REBUILD_HINT),
    ("apex_segfault", "import apex crashed: the interpreter was killed by SIGSEGV", af.REBUILD_AGAINST_TORCH),
    ("apex_hang", "import apex hung: did not finish within 5 s", af.HANG_FIX),
])
@pytest.mark.slow
def test_availability_survives_an_apex_that_exits_crashes_or_hangs(on_path, monkeypatch, tree, reason, fix):
    """The presets' Apex check on CUDA (list, headless runs, the TUI's probe) imports Apex in a child: this
    process lives on, and the preset is unavailable with what happened and the fix."""
    monkeypatch.setenv(apex_probe.TIMEOUT_ENV, "5")
    on_path(tree)
    a = availability(presets.resolve("fused_adam"), "cuda")
    assert not a.ok and a.reason == f"needs Apex FusedAdam: {reason}" and a.fix == fix, a
    assert not apexish_modules()
    cached = apex_probe._read_cache()
    if tree == "apex_hang":  # a hang may be the GPU's passing state: asked again next time
        assert cached == {}
    else:
        (entry,) = cached.values()
        assert entry["checks"]["FusedAdam"]["reason"] == reason


@pytest.mark.slow
def test_apex_check_answer_is_cached_per_environment(on_path):
    """The second start reads the answer; a rebuilt Apex (another mtime) is checked afresh. The tree has never been
    imported (no __pycache__): the probe's child writes one into the apex folder, whose mtime is in the key, and the
    answer is stored under the key that later starts compute."""
    tree = on_path("apex_exit")
    shutil.rmtree(tree / "apex" / "__pycache__", ignore_errors=True)
    first = apex_probe.feature_availability("FusedAdam")
    assert first.reason == "import apex fails: SystemExit: 3"
    path = apex_probe._cache_path()
    doc = json.loads(path.read_text())
    (key,) = doc["entries"]
    assert key == apex_probe.cache_key()
    doc["entries"][key]["checks"]["FusedAdam"]["reason"] = "from the cache"  # only the cache can say this
    path.write_text(json.dumps(doc))
    apex_probe._memo.clear()
    assert apex_probe.feature_availability("FusedAdam").reason == "from the cache"
    init = tree / "apex" / "__init__.py"
    st = init.stat()
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # "rebuilt"
    assert apex_probe.cache_key() != key
    assert apex_probe.feature_availability("FusedAdam").reason == "import apex fails: SystemExit: 3"
    assert len(json.loads(path.read_text())["entries"]) == 2


# ------------------------------------------------------------------ env helpers


def test_nvcc_version_compared_with_torch_cuda(tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    "echo 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    bad = probe_nvcc(str(tmp_path), "12.8")
    assert (bad.path, bad.version, bad.matches_torch) == (str(nvcc), "12.4", False)
    assert probe_nvcc(str(tmp_path), "12.4.1").matches_torch is True
    assert probe_nvcc(str(tmp_path), None).matches_torch is None
    missing = probe_nvcc(str(tmp_path / "nowhere"), "12.8")
    assert missing.version is None and "no nvcc" in missing.error


def test_nvcc_output_that_is_not_utf8(tmp_path):
    """nvcc's banner with bytes that are not UTF-8 is still read (a real child process prints them)."""
    info = probe_nvcc(str(build_fake_cuda_home(tmp_path / "a")), "12.4")
    assert (info.version, info.error, info.matches_torch) == ("12.4", "", True)
    garbled = probe_nvcc(str(build_fake_cuda_home(tmp_path / "b", b"nvcc \xff\xfe broken\n")), "12.4")
    assert garbled.version is None and garbled.error == "cannot parse nvcc --version: nvcc \ufffd\ufffd broken"


def test_cli_cpu_torch_with_cuda_home_set(cli_runs, reports):
    """CUDA_HOME names a working nvcc (whose banner is not UTF-8): the doctor finds it itself, and says
    torch is a CPU build where it is one; the human report survives an ASCII-only stdout."""
    d = cli_json(cli_runs, "cuda_home")
    env = d["environment"]
    home = env["cuda_home"]
    assert home.endswith("c\u00fcda-home") and env["nvcc_path"] == os.path.join(home, "bin", "nvcc")
    assert env["nvcc_version"] == "12.4" and env["nvcc_error"] == ""
    human = cli_runs["cli:cuda_home_human"]
    assert human.returncode == 0, human.stderr
    assert f"nvcc       12.4  {home.replace(chr(0xfc), '?')}" in human.stdout
    if env["torch_cuda"] is None:
        assert "torch is a CPU-only build" in human.stdout and "CUDA_HOME is not set" not in human.stdout
        assert any("CPU-only build" in p["what"] for p in d["problems"])


def test_nvml_is_tolerant():
    info = probe_nvml()  # no driver here: "n/a: <reason>", never an exception
    if info.status == "ok":
        assert info.driver and info.gpus and all(g.name for g in info.gpus)
    else:
        assert info.status.startswith("n/a: ") and info.driver is None and info.gpus == ()


def test_cudnn_version_format():
    assert format_cudnn(91002) == "9.10.2" and format_cudnn(8907) == "8.9.7" and format_cudnn(None) is None


def test_doctor_module_imports_neither_torch_nor_textual():
    code = ("import sys, apextui.core.apex.doctor, apextui.cli.doctor_command; "
            "print([m for m in ('torch', 'textual', 'apex') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ CLI


def cli_json(cli_runs, name: str) -> dict:
    proc = cli_runs[f"cli:{name}"]
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cli_json_broken_extensions(cli_runs):
    d = cli_json(cli_runs, "broken")
    assert d["apex"]["status"] == "partial"
    ext = {e["name"]: e for e in d["extensions"]}
    kinds = {"apex_C": "exception", "amp_C": "undefined_symbol", "fused_layer_norm_cuda": "",
             "mlp_cuda": "system_exit", "fused_dense_cuda": "missing_library", "syncbn": "os_error",
             "xentropy_cuda": ""}
    assert {n: ext[n]["kind"] for n in kinds} == kinds
    assert ext["amp_C"]["message"] == UNDEFINED and ext["amp_C"]["error_type"] == "ImportError"
    assert ext["amp_C"]["fix"].startswith("rebuild Apex against the installed torch")
    assert ext["syncbn"]["error_type"] == "OSError" and "LD_LIBRARY_PATH" in ext["syncbn"]["fix"]
    assert [s["name"] for s in d["smoke"]] == ["FusedAdam", "FusedLayerNorm", "FusedRMSNorm"]
    whats = {p["what"]: p["fix"] for p in d["problems"]}
    assert whats[ext["amp_C"]["reason"]] == ext["amp_C"]["fix"] and all(whats.values())


def test_cli_json_pyramid_apex(cli_runs):
    d = cli_json(cli_runs, "pyramid")
    assert d["apex"]["status"] == "not_nvidia" and d["apex"]["version"] == "0.9.10.dev0"
    assert "UnencryptedCookieSessionFactoryConfig" in d["apex"]["import_error"]
    assert any(p["fix"] == af.NOT_NVIDIA_FIX for p in d["problems"])


def test_cli_json_python_only_apex(cli_runs):
    d = cli_json(cli_runs, "python_only")
    assert d["apex"]["status"] == "python_only"
    assert {e["status"] for e in d["extensions"]} == {"missing"}
    assert any("Python-only" in p["what"] and p["fix"].startswith("rebuild Apex with its C++/CUDA extensions")
               for p in d["problems"])
    adam = next(f for f in d["features"] if f["name"] == "FusedAdam")
    assert adam["ok"] is False and adam["needs"] == ["amp_C"]


def test_cli_human_output_plain_when_piped(cli_runs, trees):
    proc = cli_runs["cli:human"]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out
    report = cli_runs["python_only"]  # the same tree through the library API
    env = report.environment
    yes_no = {None: "n/a", True: "yes", False: "no"}
    for needle in ("Environment", f"Python     {env.python}",
                   "torch      2.99.0+fake  CPU-only build",
                   # the fake torch sees no GPU, but on a GPU machine NVML does (and then says TF32 yes)
                   "nvcc       not found", f"TF32/bf16  {yes_no[env.tf32_supported]} / {yes_no[env.bf16_supported]}",
                   "Apex       PYTHON ONLY",
                   f"location   {trees['python_only'] / 'apex'}  (apex 0.1)", "Compiled extensions",
                   "missing  amp_C", "Features", "no   FusedAdam", "needs amp_C", "Smoke tests",
                   "skip FusedAdam", f"Problems ({len(report.problems)})",
                   *(f"fix: {p.fix}" for p in report.problems), *(p.what for p in report.problems)):
        assert needle in out, needle


def test_human_output_colour_only_when_wanted(reports, monkeypatch):
    report = reports["broken"]
    coloured, plain = io.StringIO(), io.StringIO()
    print_human(report, coloured, color=True)
    print_human(report, plain, color=False)
    assert "\x1b[" in coloured.getvalue() and "\x1b[" not in plain.getvalue()
    assert "broken   amp_C" in plain.getvalue()
    assert len(plain.getvalue().splitlines()) == len(render_lines(report))

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(Tty()) is True and use_color(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False and use_color(Tty(), color=True) is True


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_hung_probe_child_too(trees, sig):
    """`apextui doctor` with an Apex whose import hangs, interrupted or its terminal gone: it exits (130/143/129)
    and its probe child (and the child's process group) is gone, not left running with ppid 1. (A hang-up ended
    the command by SIGHUP's default action, past every `finally`: the child, a session of its own, ran on.)"""
    import psutil

    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(trees["apex_hang"]), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "doctor"], cwd=REPO, env=environ,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, child = time.monotonic() + 60, None
        while child is None and time.monotonic() < deadline:
            time.sleep(0.2)
            child = next((c for c in psutil.Process(proc.pid).children()
                          if any("doctor_child" in part for part in c.cmdline())), None)
        assert child is not None, "no probe child started"
        time.sleep(0.5)  # into the hanging import
        proc.send_signal(sig)
        assert proc.wait(30) == 128 + sig
        gone, alive = psutil.wait_procs([child], timeout=5)
        assert not alive, f"the probe child {child.pid} outlived apextui doctor"
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
