"""One run request: every runner and runner factory takes a `RunRequest` and the callback, never the loose
`preset, device, steps, sample_interval` it replaced (issue 25). Checked two ways, both fast: the signatures of the
protocol and of every implementation, and the calls in the source (package, benchmarks, tests' fakes), so a
loose-argument path that comes back fails here even where mypy does not look (the tests, the benchmarks)."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

from apextui.core.run.data_parallel import DataParallelRuns
from apextui.core.run.handle import RunnerFactory
from apextui.core.run.launched import LaunchedRunner, launched_factory
from apextui.core.run.request import RunRequest
from apextui.core.run.runner import Runner, thread_runner_factory
from apextui.core.run.worker import ProcessRunner
from apextui.ui.app import default_runner_factory

from ui.ui_fakes import FakeEngine, FakeRunner, LoggingEngine

ROOT = Path(__file__).resolve().parents[1]
LOOSE = {"preset", "device", "steps", "sample_interval"}  # what a RunRequest carries

# (name, callable, whether its first parameter is `self`)
IMPLEMENTATIONS = [
    ("Runner", Runner.__init__, True),
    ("ProcessRunner", ProcessRunner.__init__, True),
    ("LaunchedRunner", LaunchedRunner.__init__, True),
    ("thread_runner_factory", thread_runner_factory, False),
    ("default_runner_factory", default_runner_factory, False),
    ("launched_factory(2)", launched_factory(2), False),
    ("DataParallelRuns", DataParallelRuns.__call__, True),
    ("FakeEngine", FakeEngine.__call__, True),
    ("LoggingEngine", LoggingEngine.__call__, True),
    ("FakeRunner", FakeRunner.__init__, True),
]


def test_the_factory_protocol_takes_a_request_and_a_callback_only():
    params = list(inspect.signature(RunnerFactory.__call__).parameters.values())[1:]
    assert [p.name for p in params] == ["request", "callback"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in params)
    hints = typing.get_type_hints(RunnerFactory.__call__)
    assert hints["request"] is RunRequest


@pytest.mark.parametrize("name,fn,method", IMPLEMENTATIONS, ids=[i[0] for i in IMPLEMENTATIONS])
def test_every_runner_and_factory_takes_the_request_first(name, fn, method):
    params = list(inspect.signature(fn).parameters.values())[1 if method else 0:]
    first, second = params[0], params[1]
    assert first.name == "request" and second.name == "callback", f"{name}: {[p.name for p in params]}"
    assert typing.get_type_hints(fn)["request"] is RunRequest, name
    # anything after the callback is keyword-only and none of it is what the request carries
    for p in params[2:]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}: {p.name} is positional"
        assert p.name not in LOOSE, f"{name} takes {p.name} beside the request"


FACTORIES = {"thread_runner_factory", "default_runner_factory", "runner_factory", "factory"}
# first, before the request: the workload benchmarks/overhead_blocks.py built; tests/test_advise.py's scripted engine
EXTRA_POSITIONAL = {"SharedWorkloadRunner": 1, "ScriptedRunner": 1, "WithRun": 1}  # WithRun: a ScriptedRunner


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _subclasses(tree: ast.AST) -> set[str]:
    """Classes of the source that subclass a runner whatever their own name (a benchmark's `OnBuilt(Runner)`)."""
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
            and any(_name(b).endswith("Runner") for b in n.bases)}


def _made_loose(node: ast.Call, runners: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """A runner (a class named ...Runner, or a subclass of one) or a factory called with what a RunRequest
    carries beside it."""
    name = _name(node.func)
    if not (name.endswith("Runner") or name in runners or name in FACTORIES):
        return False
    return bool({k.arg for k in node.keywords} & LOOSE) or len(node.args) > 2 + EXTRA_POSITIONAL.get(name, 0)


def _loose_factory(node: ast.FunctionDef | ast.Lambda) -> bool:
    """A function of the old factory shape: `(preset, device, callback, *, steps=None, sample_interval=1.0)`."""
    positional = {a.arg for a in node.args.posonlyargs + node.args.args}
    kwonly = {a.arg for a in node.args.kwonlyargs}
    return bool(positional & {"callback", "cb"}) and bool(kwonly & {"steps", "sample_interval"})


def loose_paths(source: str) -> list[tuple[int, str]]:
    """(line, code) of every loose-argument run in `source`: a call or a factory of the old shape."""
    found = []
    tree = ast.parse(source)
    runners = _subclasses(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _made_loose(node, runners) or \
                isinstance(node, (ast.FunctionDef, ast.Lambda)) and _loose_factory(node):
            found.append((node.lineno, ast.unparse(node).splitlines()[0][:80]))
    return sorted(found)


def test_no_runner_is_made_from_loose_arguments():
    files = [p for d in ("apextui", "benchmarks", "tests", "tools") for p in sorted((ROOT / d).rglob("*.py"))]
    found = [f"{f.relative_to(ROOT)}:{line}: {code}" for f in files if f.name != Path(__file__).name
             for line, code in loose_paths(f.read_text(encoding="utf-8"))]
    assert not found, "runs made from loose arguments, not one RunRequest:\n" + "\n".join(found)


def test_the_scan_finds_each_old_form():
    """The scan above can fail: each old form is found, the new ones are not."""
    old = """
r = Runner(preset, "cpu", cb, steps=5)
f = self.runner_factory(p, d, cb, sample_interval=1.0)
w = ProcessRunner(p, d, cb)
def factory(preset, device, callback, *, steps=None, sample_interval=1.0): ...
g = lambda p, d, cb, *, steps=None: None
class OnBuilt(Runner): ...
run = OnBuilt(preset, device, cb, steps=3)
"""
    new = """
r = Runner(RunRequest(preset, "cpu", 5), cb, analyse=False)
f = self.runner_factory(RunRequest(p, d, None, 1.0), cb)
s = SharedWorkloadRunner(workload, RunRequest(p, d), cb)
l = LaunchedRunner(request, cb, nproc=2)
def factory(request, callback): ...
"""
    assert [line for line, _ in loose_paths(old)] == [2, 3, 4, 5, 6, 8]
    assert loose_paths(new) == []
