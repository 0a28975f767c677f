"""Your own model: the object your function returns (`ModelSetup`) and how apextui finds that function.

`apextui --model FILE.py:FUNC` or `--model package.module:FUNC` (or `model = "..."` in a preset) names a
function that returns a `ModelSetup`. Finding it (`load_function`) is a usage matter: a file that does not
exist, a syntax error, an import error, a missing or non-callable function each raise `ModelSpecError`,
one line naming what is wrong (and, where it is the user's own code, the tail of their traceback). So is a
function that returns something else than a `ModelSetup` (`call_build`). A function that raises, a batch
on the wrong device or a model that does not fit are run-time failures: the run that builds it fails.

This module does not import torch at import time: the CLI checks the spec before any torch import, and
`apextui.ModelSetup` is importable cheaply.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .failure import first_line
from ..errors import UsageProblem

if TYPE_CHECKING:
    import torch
    from torch import nn

TRACEBACK_LINES = 6  # lines of the user's own traceback shown under a usage error


@dataclass
class ModelSetup:
    """What your function (`apextui --model FILE.py:FUNC`) returns: a model and how to train it.

    - `model`: the `torch.nn.Module` to train, built on the CPU or anywhere: apextui moves it to the run's
      device. Build it the same way on every call (seed-independent code is fine: apextui seeds torch before
      calling your function, so that every configuration starts from the same initial weights).
    - `make_batch(device, generator)`: one training batch on `device` (a `torch.device`), drawing random
      numbers from `generator` (a `torch.Generator` on that device), e.g.
      `torch.randint(0, vocab, (8, 128), device=device, generator=generator)`. With `loss_fn`, return
      `(inputs, targets)`; without, whatever your model takes (a tuple is unpacked into positional
      arguments, a dict into keyword arguments).
    - `loss_fn(output, targets)`: the scalar loss from the model's output; None when the model returns its
      loss itself (a scalar tensor, or an object or dict with a `loss` entry).
    - `lr`: AdamW's learning rate (None: 1e-3, or the preset's `lr`).
    - `units`: what `units_per_step` counts ("samples", "tokens", "images"...); `units_per_step`: how many
      a step processes (None: the first dimension of the batch's first tensor).

    CPU size: if your function takes a parameter named `small`, apextui calls it with `small=True` for a
    run on the CPU (build a tiny model and batch there) and `small=False` on CUDA.
    """

    model: nn.Module
    make_batch: Callable[[torch.device, torch.Generator], Any]
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None
    lr: float | None = None
    units: str = "samples"
    units_per_step: int | None = None


class ModelSpecError(UsageProblem, ValueError):
    """`--model` names no usable function: a usage error (exit 2). The message is one line; `detail` holds
    the tail of the user's traceback where the problem is in their code."""

    quiet_traceback = True  # a run that meets one (the worker) reports the message, not apextui's traceback

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


SPEC_FORM = "FILE.py:FUNC or package.module:FUNC"


def split_spec(spec: str) -> tuple[str, str]:
    """'examples/gpt.py:build' -> ('examples/gpt.py', 'build'); the last colon separates the function."""
    where, sep, func = spec.rpartition(":")
    if not sep or not where or not func:
        raise ModelSpecError(f"--model {spec!r}: expected {SPEC_FORM}")
    if not func.isidentifier():
        raise ModelSpecError(f"--model {spec!r}: {func!r} is not a Python function name; expected {SPEC_FORM}")
    return where, func


def is_file_spec(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def model_name(spec: str) -> str:
    """A short name for a model in tables and JSON: the file's or module's last part and the function,
    e.g. 'gpt:build'."""
    where, func = split_spec(spec)
    stem = Path(where).stem if is_file_spec(where) else where.rsplit(".", 1)[-1]
    return f"{stem}:{func}"


def user_traceback(exc: BaseException, path: str | None) -> str:
    """The last frames of `exc`'s traceback that are in the user's code (`path`; any file outside apextui,
    importlib and the standard library when None), and the exception line."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = str(Path(__file__).resolve().parents[2])

    def theirs(f: traceback.FrameSummary) -> bool:
        if path is not None:
            return Path(f.filename).resolve() == Path(path).resolve()
        return not (f.filename.startswith(here) or f.filename.startswith("<frozen"))

    mine = [f for f in frames if theirs(f)]
    lines = [line.rstrip() for line in traceback.format_list(mine)] if mine else []
    text = "\n".join(lines + traceback.format_exception_only(type(exc), exc)[-1:]).rstrip()
    return "\n".join(text.splitlines()[-TRACEBACK_LINES:])


def _load_file(spec: str, where: str) -> Any:
    path = Path(where).expanduser()
    if not path.exists():
        raise ModelSpecError(f"--model {spec!r}: file {where} does not exist; expected {SPEC_FORM}")
    if not path.is_file():
        raise ModelSpecError(f"--model {spec!r}: {where} is not a regular file; expected a .py file")
    _parse(spec, where, path)
    name = f"apextui_user_model_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ModelSpecError(f"--model {spec!r}: cannot load {where} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:  # the file's own folder, as `python FILE.py` would: its sibling modules import
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever their module raises while importing is theirs
        # (a `sys.exit(4)` there would otherwise end apextui with 4, which means "failed the correctness check")
        sys.modules.pop(name, None)
        raise ModelSpecError(f"--model {spec!r}: importing {where} failed: {first_line(exc)}",
                             user_traceback(exc, str(path))) from None
    return module


def _load_module(spec: str, where: str) -> Any:
    _find_module(spec, where)
    try:
        return importlib.import_module(where)
    except SyntaxError as exc:
        raise ModelSpecError(f"--model {spec!r}: syntax error in {exc.filename} line {exc.lineno}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a sys.exit() in their module: theirs too (_load_file)
        raise ModelSpecError(f"--model {spec!r}: importing {where} failed: {first_line(exc)}",
                             user_traceback(exc, None)) from None


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether a module's top level binds `name` (a def, a class, an assignment, an import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in node.names):
                return True
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, (ast.If, ast.Try)):  # e.g. a definition under `if TYPE_CHECKING` or `try:`
            return True  # cannot tell without running it: let the import decide
    return False


def validate_static(spec: str) -> None:
    """The checks that run none of the user's code (the TUI's process never imports it; its worker does):
    the spec's form; for a file, that it exists, parses, and binds the function at its top level; for a
    module, that it can be found. ModelSpecError on a problem."""
    where, func = split_spec(spec)
    if not is_file_spec(where):
        _find_module(spec, where)
        return
    path = Path(where).expanduser()
    if not path.exists():
        raise ModelSpecError(f"--model {spec!r}: file {where} does not exist; expected {SPEC_FORM}")
    if not path.is_file():
        raise ModelSpecError(f"--model {spec!r}: {where} is not a regular file; expected a .py file")
    tree = _parse(spec, where, path)
    if not _defines(tree, func):
        raise ModelSpecError(f"--model {spec!r}: {where} has no function {func!r} at its top level")


def _parse(spec: str, where: str, path: Path) -> ast.Module:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelSpecError(f"--model {spec!r}: cannot read {where}: {first_line(exc)}") from None
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        text = (exc.text or "").strip()
        raise ModelSpecError(f"--model {spec!r}: syntax error in {where} line {exc.lineno}: {exc.msg}"
                             + (f": {text[:120]}" if text else "")) from None


def _find_module(spec: str, where: str) -> None:
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError) as exc:  # a parent package that does not import
        raise ModelSpecError(f"--model {spec!r}: cannot import {where}: {first_line(exc)}",
                             user_traceback(exc, None)) from None
    if found is None:
        raise ModelSpecError(f"--model {spec!r}: no module named {where!r} (not a .py path, and not importable "
                             f"from this Python); expected {SPEC_FORM}")


def load_function(spec: str) -> Callable[..., Any]:
    """The function `spec` names (imports the file or module); ModelSpecError on any problem."""
    where, func = split_spec(spec)
    module = _load_file(spec, where) if is_file_spec(where) else _load_module(spec, where)
    fn = getattr(module, func, None)
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == module.__name__)
        have = f"; it defines: {', '.join(defined[:10])}" if defined else "; it defines no function"
        raise ModelSpecError(f"--model {spec!r}: {where} has no function {func!r}{have}")
    if not callable(fn):
        raise ModelSpecError(f"--model {spec!r}: {func!r} in {where} is a {type(fn).__name__}, not a function")
    return fn


def takes_small(fn: Callable[..., Any]) -> bool:
    try:
        return "small" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def call_build(fn: Callable[..., Any], spec: str, small: bool) -> ModelSetup:
    """Call the user's function (with `small=` if it takes it) and check what it returned. Exceptions it raises
    pass through (a run-time failure); a wrong return type, or a `sys.exit()` instead of a return, raises
    ModelSpecError (a usage error: its SystemExit would otherwise end apextui with the user's code, silently)."""
    try:
        result = fn(small=small) if takes_small(fn) else fn()
    except SystemExit as exc:
        raise ModelSpecError(f"--model {spec!r}: your function raised {first_line(exc)} (sys.exit) instead of "
                             "returning a ModelSetup", user_traceback(exc, None)) from None
    validate_setup(result, spec)
    return result


def validate_setup(result: Any, spec: str) -> None:
    """ModelSpecError unless `result` is a usable ModelSetup (the types of its fields, not their behaviour)."""
    from torch import nn

    if not isinstance(result, ModelSetup):
        raise ModelSpecError(f"--model {spec!r}: the function returned {type(result).__name__}; it must return "
                             "apextui.ModelSetup(model=..., make_batch=..., loss_fn=...)")
    if not isinstance(result.model, nn.Module):
        raise ModelSpecError(f"--model {spec!r}: ModelSetup.model is a {type(result.model).__name__}; it must be a "
                             "torch.nn.Module")
    params = list(result.model.parameters())
    if not params:  # nothing to freeze or unfreeze: saying "frozen" would send the user to the wrong fix
        raise ModelSpecError(f"--model {spec!r}: the model has no parameters: there is nothing to train; return the "
                             "module that holds the weights to train (its parameters() must not be empty)")
    meta = sum(1 for p in params if p.is_meta)
    if meta:  # apextui's first look at the weights (its probe) would raise, and read as the user's function raising
        raise ModelSpecError(f"--model {spec!r}: {meta} of the model's {len(params)} parameters are on the meta device "
                             "(shapes without data): apextui trains real weights; materialise them before returning "
                             "the ModelSetup (e.g. model.to_empty(device='cpu') and initialise them, or build the "
                             "model outside torch.device('meta'))")
    if not any(p.requires_grad for p in params):  # the optimizer would refuse it mid-set-up
        raise ModelSpecError(f"--model {spec!r}: every parameter of the model is frozen (requires_grad=False): there "
                             "is nothing to train; unfreeze the ones to train (e.g. model.requires_grad_(True)) "
                             "before returning the ModelSetup")
    if not callable(result.make_batch):
        raise ModelSpecError(f"--model {spec!r}: ModelSetup.make_batch is not callable; give a function "
                             "(device, generator) -> batch")
    if result.loss_fn is not None and not callable(result.loss_fn):
        raise ModelSpecError(f"--model {spec!r}: ModelSetup.loss_fn is not callable; give a function "
                             "(output, targets) -> loss, or None when the model returns its loss")
    lr = result.lr
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 10):
        raise ModelSpecError(f"--model {spec!r}: ModelSetup.lr is {lr!r}; it must be a number between 0 and 10, "
                             "or None")
    n = result.units_per_step
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ModelSpecError(f"--model {spec!r}: ModelSetup.units_per_step is {n!r}; it must be a positive "
                             "integer, or None")


# ---- one build handed from a check to the run in the same process ----------------------------------------
_prebuilt: dict[tuple[str, bool, int], ModelSetup] = {}


def keep(spec: str, small: bool, seed: int, setup: ModelSetup) -> None:
    """Keep a setup built (under `torch.manual_seed(seed)`) by a check, for the run in this process to take
    instead of building the model a second time."""
    _prebuilt.clear()
    _prebuilt[(spec, small, seed)] = setup


# ---- one build for every run of a process that runs several (`run.reusable`) --------------------------------
_masters: dict[tuple[str, bool, int], tuple[ModelSetup, Any]] = {}
_reuse = False


def reuse_builds(on: bool) -> None:
    """From now on (`on`), `build` builds each model once in this process and hands every run a copy: the same
    initial weights, without the user's function's imports and initialisation again (a reusable search worker)."""
    global _reuse
    _reuse = on
    _masters.clear()


def _copy(master: ModelSetup, rng: Any, seed: int) -> ModelSetup:
    """A run's own copy of a kept build, with torch's random state as the build left it (the run draws from it as
    from a fresh build's)."""
    import copy
    import dataclasses

    import torch

    torch.manual_seed(seed)
    torch.set_rng_state(rng)
    return dataclasses.replace(master, model=copy.deepcopy(master.model))


def build(spec: str, small: bool, seed: int) -> ModelSetup:
    """The model for a run: the one a check in this process built with the same seed (taken: each is used
    once, a run changes its weights), else a fresh one (torch seeded with `seed` first); under `reuse_builds`, a
    copy of the first one built here."""
    kept = _prebuilt.pop((spec, small, seed), None)
    if kept is not None:
        return kept
    import torch

    if _reuse and (spec, small, seed) in _masters:
        return _copy(*_masters[(spec, small, seed)], seed)
    fn = load_function(spec)
    torch.manual_seed(seed)
    setup = call_build(fn, spec, small)
    if not _reuse:
        return setup
    _masters[(spec, small, seed)] = (setup, torch.get_rng_state())
    return _copy(setup, torch.get_rng_state(), seed)


__all__ = ["ModelSetup", "ModelSpecError", "SPEC_FORM", "build", "call_build", "keep", "load_function", "model_name",
           "reuse_builds", "split_spec", "takes_small", "user_traceback", "validate_setup", "validate_static"]
