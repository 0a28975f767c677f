"""Reading the JSON a watched run's files hold (`run.json`, `live.json`, the stream's lines), which may be damaged.

The files are written by apextui, but a disk, an editor or another program can leave anything in them: a value
Python cannot parse (nested 200,000 deep: `RecursionError`; a 5,000-digit integer: `ValueError`), or one it
parses into something no reader can use (`1e999` is `inf`, a 4,000-digit integer overflows `float()`, `NaN`
makes `json.dumps` write what is not JSON). The writers never write a non-finite number (they write null), an
integer of more than `MAX_INT_DIGITS` digits, or nesting deeper than `MAX_DEPTH`: such a document is damaged, and
`loads` refuses it with `Damaged`, one line saying what is wrong.

The common, whole line costs one `json.loads`: the exact checks run only on a line where a cheap look at its
bytes finds something they could refuse.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .. import files

MAX_DEPTH = 64  # the deepest line the writers write is a few levels deep
MAX_INT_DIGITS = 30  # counts, bytes and times: a larger integer is damage
# `_suspect`: every digit read as 0 and E as e, so that a long digit run or a 3-digit exponent is a substring
_DIGITS = bytes.maketrans(b"123456789E", b"000000000e")
_LONG = b"0" * (MAX_INT_DIGITS + 1)


class Damaged(ValueError):
    """The text is not a JSON document of the shape a watched run's files hold; the message says why."""


def loads(text: str | bytes) -> Any:
    """The JSON document `text`, or `Damaged`: not JSON, nested deeper than `MAX_DEPTH`, a non-finite number or
    an integer of more than `MAX_INT_DIGITS` digits."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        if _suspect(raw):
            value = json.loads(raw, parse_constant=_constant, parse_int=_int, parse_float=_float)
        else:
            value = json.loads(raw)
    except RecursionError:
        raise Damaged(f"nested deeper than {MAX_DEPTH} levels") from None
    except Damaged:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer past Python's digit limit
        raise Damaged(f"not JSON ({files.one_line(exc, 120).split('; use sys.')[0]})") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise Damaged(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _suspect(raw: bytes) -> bool:
    """Whether `raw` could hold a non-finite or too large number (`NaN`, `Infinity`, 31 digits in a row, an
    exponent of 3 digits): then the exact, slower parse looks (it may be in a string, and fine). A substring test
    on translated bytes: a regular expression took longer than the parse."""
    if b"NaN" in raw or b"Infinity" in raw:
        return True
    t = raw.translate(_DIGITS)
    return _LONG in t or b"e000" in t or b"e+000" in t or b"e-000" in t


def _constant(name: str) -> Any:
    raise Damaged(f"a non-finite number ({name}): the writers write null")


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise Damaged(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise Damaged(f"a number out of range ({literal[:24]})")
    return value


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and dicts (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest
