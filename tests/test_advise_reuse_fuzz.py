"""`advise --reuse` on a damaged store (hypothesis): whatever a stored advice's values turn into, reusing it
either works (its text and JSON render) or is refused with a note; no exception escapes."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apextui.core import advise
from apextui.core.advise.advice_view import format_text

from test_advise import ENV, advisor, cpu_availability

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@functools.cache
def measured() -> dict[str, Any]:
    a, _ = advisor({"adamw": [3.0], "adamw_fused": [1.3], "fused_adam": [1.1], "adamw_capturable_graph": [2.0]},
                   availability_fn=cpu_availability, repeats=1)
    return json.loads(json.dumps(a.run()))


def leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value in `doc` (dict keys and list indices)."""
    out = [path] if path else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += leaves(v, (*path, i))
    return out


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=4),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@FUZZ
@given(data=st.data())
def test_a_mutated_store_is_reused_or_refused_with_a_note(tmp_path_factory, data):
    doc = copy.deepcopy(measured())
    paths = leaves(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths))
        parent = doc
        try:
            for key in where[:-1]:
                parent = parent[key]
            parent[where[-1]] = data.draw(VALUES)
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced the way there
            continue
    path = tmp_path_factory.mktemp("store") / "advice.json"
    path.write_text(json.dumps({"version": 1, "advice": {ENV["key"]: doc}}))
    got, why = advise.find_reusable(ENV, ("optimizer",), path=path)
    if got is None:
        assert why and "\n" not in why
    else:
        assert why == "reused"
        format_text(got)  # what the CLI then prints, and the TUI lays out
        json.dumps(got)


def test_the_reported_crashes_are_notes(tmp_path):
    """From the report: a figure that is a string (format code 'f'), a list that is a bool."""
    for damage in ("roofline", "runs"):
        doc = copy.deepcopy(measured())
        preset = doc["workloads"][0]["presets"][0]
        if damage == "roofline":
            preset["roofline"] = {"tflops": "1.5", "compute_fraction": "x"}
            preset["status"] = "ok"
        else:
            preset["runs"] = True
        path = tmp_path / f"{damage}.json"
        path.write_text(json.dumps({"version": 1, "advice": {ENV["key"]: doc}}))
        got, why = advise.find_reusable(ENV, ("optimizer",), path=path)
        assert got is None and why.startswith("the stored advice is malformed (") and why.endswith("; ignored")
