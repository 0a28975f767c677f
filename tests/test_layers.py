"""The import contract inside `apextui.core`: no import cycle between modules, none between core's folders and
top-level modules (its *units*: `run/`, `measure/`, `presets.py`...), and one way down through the layers of units in
`LAYERS`.

The graph is built from the source with `ast` (nothing is imported): every `import` and `from ... import`, at
module level and inside functions alike (a function's import is how a cycle hides), except those under
`if TYPE_CHECKING:` (annotations only, never run). Importing `a.b.c` also runs the packages `a` and `a.b`, so an
edge to a package whose `__init__` imports something counts as well. docs/development.md draws the same layers.

Why a test and not import-linter's `layers` contract: the same rule in forty lines of `ast`, no new dependency,
and it sees imports inside functions the same way on every Python.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import ROOT

CORE = "apextui.core"

# Top to bottom: a unit (a folder of core, with everything under it, or a top-level module) may import units of its
# own layer or of a lower one, never of a higher one; two units of one layer never import each other both ways. Every
# module is judged with its unit: an entry is a unit's name, never a module inside one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("advise", "watch"),  # the comparisons and the verdict; watching the user's own training (the runner's clock)
    ("results", "model_presets", "model_scope"),  # the results file (runs' summaries); the user's model as presets,
    # and what the search may try on it (its probe's facts, for every front end)
    ("run",),  # the runner, the worker process, snapshots, events, data-parallel ranks
    ("availability", "memory"),  # can a preset run here; does it fit
    ("presets", "apex"),  # presets; the Apex probe
    ("workloads",),  # the registry (spec: every workload and variant declared once), the workload modules (torch),
    # what each axis value builds (apply) and builders.build, which the runner calls
    ("analysis",),  # work models, ceilings, the GPU-busy profile, the bottleneck
    ("measure", "env"),  # a run's statistics, its summary with its typed records, and the noise rule; the marker a
    # step is handed; the machine's description
    ("monitor", "config"),  # leaves the layers above share: monitoring (a run's contention record); the configuration
    # axes, points, needs' checks, snippets and the model's calling convention (data)
    ("number_format", "files", "atomic", "errors", "exits"),  # errors: the one base of the errors a user sees
)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _names_the_package(node: ast.AST, package: str) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").startswith(package)
    return isinstance(node, ast.Import) and any(a.name.startswith(package) for a in node.names)


def import_graph(root: Path = ROOT, package: str = CORE) -> dict[str, dict[str, int]]:
    """module -> {imported module of `package`: the line of its first import}, for every module under `package`
    (apextui/core; the front ends' `apextui.cli` and `apextui.ui` for their own loops)."""
    files = {module_name(p, root): p for p in sorted(root.joinpath(*package.split(".")).rglob("*.py"))}
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in files.items()}
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    # a package whose __init__ imports nothing of the package runs nothing when a submodule is imported
    inert = {m for m in packages if not any(_names_the_package(n, package) for n in ast.walk(trees[m]))}
    graph: dict[str, dict[str, int]] = {}
    for mod, tree in trees.items():
        skip = _type_checking_only(tree)
        here = mod if mod in packages else mod.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here.split(".")[:len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
            for target in targets:
                while target and target not in files:  # `from .x import name`: the module x
                    target = target.rpartition(".")[0]
                if not target.startswith(package):
                    continue
                parts = target.split(".")
                for i in range(len(package.split(".")) + 1, len(parts) + 1):  # the packages on the way run too
                    name = ".".join(parts[:i])
                    if name == mod or mod.startswith(name + ".") or (name != target and name in inert):
                        continue
                    edges.setdefault(name, node.lineno)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = set(component)
    lines = [f"{len(component)} modules import each other in a loop:"]
    for mod in component:
        lines += [f"  {mod} -> {target} (line {line})" for target, line in sorted(graph[mod].items())
                  if target in inside]
    return "\n".join(lines)


def unit_of(module: str) -> str | None:
    """The folder of core or top-level module a module belongs to ("apextui.core.run.events" -> "run"); None for
    `apextui.core` itself."""
    rest = module[len(CORE) + 1:] if module.startswith(CORE + ".") else ""
    return rest.split(".")[0] or None


def unit_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """unit -> {imported unit: the first import that makes the edge, 'module (line n) imports module'}: the module
    graph with each module folded into its unit, edges inside one unit left out."""
    units: dict[str, dict[str, str]] = {}
    for mod, edges in sorted(graph.items()):
        mine = unit_of(mod)
        if mine is None:
            continue
        units.setdefault(mine, {})
        for target, line in sorted(edges.items()):
            theirs = unit_of(target)
            if theirs is not None and theirs != mine:
                units[mine].setdefault(theirs, f"{mod} (line {line}) imports {target}")
    return units


def describe_units(component: list[str], units: dict[str, dict[str, str]]) -> str:
    inside = set(component)
    lines = [f"{len(component)} of core's folders or top-level modules import each other in a loop:"]
    for unit in component:
        lines += [f"  {unit} -> {target}: {why}" for target, why in sorted(units[unit].items()) if target in inside]
    return "\n".join(lines)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of a module's unit (0 = top), None where its unit is in no layer."""
    unit = unit_of(module)
    return next((depth for depth, entries in enumerate(LAYERS) if unit in entries), None)


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    wrong = []
    for mod, edges in sorted(graph.items()):
        mine = layer_of(mod)
        for target, line in sorted(edges.items()):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs < mine:
                wrong.append(f"{mod} (line {line}) imports {target}, a higher layer "
                             f"({', '.join(LAYERS[theirs])} above {', '.join(LAYERS[mine])})")
    return wrong


GRAPH = import_graph()


def test_the_core_has_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "\n".join(describe(c, GRAPH) for c in found)


@pytest.mark.parametrize("package", ["apextui.cli", "apextui.ui"])
def test_the_front_ends_have_no_import_cycle(package):
    """A loop inside a front end (`json_run` and `refusals`, the bridge and its messages) makes each of its modules
    a part of the others: none can be read, tested or changed alone."""
    graph = import_graph(package=package)
    found = cycles(graph)
    assert not found, "\n".join(describe(c, graph) for c in found)


def test_no_two_of_cores_folders_or_top_level_modules_import_each_other():
    """Modules may be free of loops while their folders are not (config/checks -> needs -> workloads/spec ->
    config/point was one): each folder and top-level module of core, taken whole, imports down only."""
    units = unit_graph(GRAPH)
    found = cycles({u: dict.fromkeys(e, 0) for u, e in units.items()})
    assert not found, "\n".join(describe_units(c, units) for c in found)


def test_every_core_module_has_a_layer():
    unplaced = [m for m in GRAPH if m != CORE and layer_of(m) is None]
    assert not unplaced, f"add these to LAYERS in tests/test_layers.py (and docs/development.md): {unplaced}"


def test_a_layer_names_whole_folders_or_top_level_modules():
    """No module is placed apart from its folder: an entry is a unit that exists, and in one layer only."""
    entries = [e for layer in LAYERS for e in layer]
    existing = {unit_of(m) for m in GRAPH} - {None}
    assert all("." not in e for e in entries), [e for e in entries if "." in e]
    assert len(entries) == len(set(entries)), entries
    assert set(entries) <= existing, set(entries) - existing


def test_no_core_module_imports_a_higher_layer():
    wrong = upward_imports(GRAPH)
    assert not wrong, "\n".join(wrong)


def test_the_configuration_vocabulary_imports_nothing_of_the_core_outside_itself():
    """config/ (the axes, points, needs' checks, snippet) is what every workload's variants are declared in: it
    once imported needs.py, which imported the registry, which imported config.point (a loop between folders). The
    bottom leaves are the exception: its ConfigError is an `errors.ApextuiError` (with its exit code)."""
    config = f"{CORE}.config"
    leaves = {f"{CORE}.errors", f"{CORE}.exits"}
    outside = [f"{mod} (line {line}) imports {target}" for mod, edges in sorted(GRAPH.items())
               if mod == config or mod.startswith(config + ".")
               for target, line in sorted(edges.items())
               if not (target == config or target.startswith(config + ".")) and target not in leaves]
    assert not outside, "\n".join(outside)


def test_the_checks_see_a_cycle_through_a_function_and_ignore_type_checking(tmp_path):
    """The contract catches what it is for: a loop closed by an import inside a function, named module by
    module; an `if TYPE_CHECKING:` import is no edge; a lower layer importing a higher one is named."""
    core = tmp_path / "apextui" / "core"
    (core / "run").mkdir(parents=True)
    (core / "__init__.py").write_text("")
    (core / "run" / "__init__.py").write_text("")
    (core / "files.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .run import runner\n")
    (core / "presets.py").write_text("from .files import x\n")
    (core / "run" / "runner.py").write_text("from ..presets import y\n")
    (core / "workloads.py").write_text("def build():\n    from .run.runner import z\n")
    (core / "run" / "handle.py").write_text("from .. import workloads\n")
    (core / "run" / "runner.py").write_text("from ..presets import y\nfrom .handle import h\n")
    graph = import_graph(tmp_path)
    assert "apextui.core.run.runner" not in graph["apextui.core.files"]
    found = cycles(graph)
    assert found == [["apextui.core.run.handle", "apextui.core.run.runner", "apextui.core.workloads"]]
    assert "apextui.core.workloads -> apextui.core.run.runner (line 2)" in describe(found[0], graph)
    assert any(w.startswith("apextui.core.workloads (line 2) imports apextui.core.run.runner")
               for w in upward_imports(graph))


def test_the_checks_see_a_loop_between_folders_that_no_two_modules_close(tmp_path):
    """run/a -> measure/b and measure/c -> run/d: no module imports another in a loop, but the folders do; the unit
    graph names both edges, and the layers, which put measure/ below run/, name the upward one."""
    core = tmp_path / "apextui" / "core"
    for folder in ("run", "measure"):
        (core / folder).mkdir(parents=True)
        (core / folder / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "run" / "a.py").write_text("from ..measure import b\n")
    (core / "measure" / "b.py").write_text("X = 1\n")
    (core / "measure" / "c.py").write_text("def f():\n    from ..run.d import y\n")
    (core / "run" / "d.py").write_text("y = 2\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == []
    units = unit_graph(graph)
    found = cycles({u: dict.fromkeys(e, 0) for u, e in units.items()})
    assert found == [["measure", "run"]]
    words = describe_units(found[0], units)
    assert "measure -> run: apextui.core.measure.c (line 2) imports apextui.core.run.d" in words
    assert "run -> measure: apextui.core.run.a (line 1) imports apextui.core.measure.b" in words
    assert upward_imports(graph) == ["apextui.core.measure.c (line 2) imports apextui.core.run.d, a higher layer "
                                     "(run above measure, env)"]


@pytest.mark.parametrize("module, unit", [("apextui.core.workloads.spec", "workloads"),
                                          ("apextui.core.config.point", "config"),
                                          ("apextui.core.presets", "presets"), ("apextui.core", None)])
def test_a_module_is_judged_with_its_folder(module, unit):
    assert unit_of(module) == unit
    assert (layer_of(module) is None) == (unit is None)
    if unit is not None:
        assert unit in LAYERS[layer_of(module)]
