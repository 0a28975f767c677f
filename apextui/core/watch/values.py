"""What the watch hook takes as a number (a loss, a metric, a step's tokens), and why a value is left out.

A user's loop passes whatever it has: a 0-d tensor, a Python float, a NumPy scalar, but also (by mistake) a
per-sample loss vector, a string, a 10**400 integer, a complex number or a meta tensor. Each of these is left out
with a reason the hook warns with once (`BadValue.key`: one warning a kind of problem, not one a step); none
stops the monitor. A tensor is only checked here (its shape, its device, its dtype), never read: reading is the
clock's (at the end of a block, without a synchronisation)."""

from __future__ import annotations

import math
import numbers
from typing import Any

MAX_COUNT = 2.0**53  # tokens or samples in one step: beyond this a float no longer counts them one by one


class BadValue(ValueError):
    """Why a value cannot be taken (the message: a phrase after its name, 'has 4 elements'); `key` names the kind
    of problem, for one warning a kind."""

    def __init__(self, reason: str, key: str) -> None:
        super().__init__(reason)
        self.key = key


def is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "numel")


def tensor_problem(t: Any) -> BadValue | None:
    """Why the tensor `t` cannot be read as one real number; None when it can."""
    n = t.numel()
    if n != 1:
        return BadValue(f"has {n} elements", "elements")
    if getattr(t, "is_meta", False):
        return BadValue("is a meta tensor (it holds no value)", "meta")
    if t.is_complex():
        return BadValue("is complex", "complex")
    return None


def real(x: Any) -> float:
    """`x`, a Python or NumPy real number (NaN and infinities included), as a float; else `BadValue`."""
    if type(x) is float:
        return x
    if isinstance(x, bool):
        raise BadValue("is a bool, not a number", "bool")
    if type(x).__module__ == "numpy":
        size, kind = getattr(x, "size", 1), getattr(getattr(x, "dtype", None), "kind", "")
        if size != 1:
            raise BadValue(f"has {size} elements", "elements")
        if kind not in ("i", "u", "f"):
            raise BadValue(f"is a NumPy {getattr(x, 'dtype', type(x).__name__)} value, not a real number", f"np-{kind}")
        x = x.item() if hasattr(x, "item") else x
    elif not isinstance(x, numbers.Real):
        kind = "a tensor" if is_tensor(x) else f"a {type(x).__name__}"
        raise BadValue(f"is {kind}, not a number", f"type-{type(x).__name__}")
    try:
        return float(x)
    except OverflowError:
        raise BadValue("is too large for a float", "overflow") from None
    except (TypeError, ValueError) as exc:
        raise BadValue(f"is not a number ({exc})", "other") from None


def count(x: Any) -> float:
    """A step's tokens or samples: a positive, finite Python or NumPy number; else `BadValue` (a count of 0, a
    negative one or NaN would make a throughput of nothing)."""
    if is_tensor(x):
        raise BadValue("is a tensor (reading it would synchronise): pass a Python number", "tensor")
    value = real(x)
    if not math.isfinite(value):
        raise BadValue(f"is {value}, not a finite number", "nonfinite")
    if value <= 0:
        raise BadValue(f"is {x}, not a positive number", "nonpositive")
    if value >= MAX_COUNT:
        raise BadValue(f"is {value:.3g}, more than a step can count", "overflow")
    return value
