"""Fuzzing the preset loader (hypothesis): whatever the file holds, `load_file` returns a valid Preset or
raises PresetError whose message starts with the file's path (and names a field when the TOML itself
was fine); no other exception escapes. The CLI turns any bad file into exit code 2 without a traceback."""

from __future__ import annotations

import datetime as dt
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apextui.cli import command as cli
from apextui.core import presets
from apextui.core.presets import Preset, PresetError

from helpers import ROOT

FUZZ = settings(max_examples=500, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHIPPED = {p.name: tomllib.loads(p.read_text()) for p in sorted((ROOT / "presets").glob("*.toml"))}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ---- a TOML writer (tomllib only reads), for any value hypothesis makes ------------------------------

def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_string(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(doc: dict[str, Any]) -> str:
    """Scalars first, then each table as a [section] (nested tables inside it inline)."""
    lines = [f"{_string(k)} = {_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{_string(k)}]")
            lines += [f"{_string(kk)} = {_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def test_the_writer_round_trips_the_shipped_presets():
    for doc in SHIPPED.values():
        assert tomllib.loads(to_toml(doc)) == doc


# ---- strategies ---------------------------------------------------------------------------------------

INTS = st.one_of(
    st.integers(),
    st.integers(-3, 70000),
    st.sampled_from([0, -1, 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, -(2**63), 10**12, 10**9, presets.MAX_STEPS,
                     presets.MAX_STEPS + 1, 32768, 32769, 65536, 65537, 1024, 1025,
                     10**400, -(10**400)]),  # beyond a float
)
SCALARS = st.one_of(
    INTS,
    st.floats(),  # nan, inf, -inf, subnormals
    st.booleans(),
    st.text(max_size=20),
    st.sampled_from(["norm", "layer_norm", "rms_norm", "transformer", "optimizer", "fp32", "layernorm", "adamw",
                     "fp16", "bf16", "none",
                     "fused_amp", "", "NORM"]),
    st.dates(),
    st.datetimes(),
    st.times(),
)
VALUES = st.one_of(
    SCALARS,
    st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                 max_leaves=8),
)
KEYS = st.one_of(st.sampled_from(sorted(presets.TOP_KEYS)), st.text(max_size=12))
SIZE_KEY_NAMES = st.one_of(st.sampled_from(sorted({k for ks in presets.SIZE_KEYS.values() for k in ks})),
                           st.text(max_size=8))


MUTATIONS = ["wrong_type", "number", "unknown_key", "delete", "set_size", "delete_size", "scale",
             "size_other_workload"]


@st.composite
def mutated_presets(draw) -> dict[str, Any]:
    """A shipped preset with one mutation (half of the time) or up to five: wrong types (nested tables and
    arrays included), out-of-range numbers, unknown keys, missing keys, sizes from another workload."""
    shipped = draw(st.sampled_from(sorted(SHIPPED.items())))[1]
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in shipped.items()}
    for _ in range(draw(st.one_of(st.just(1), st.integers(1, 5)))):
        op = draw(st.sampled_from(MUTATIONS))
        event(op)
        if op == "wrong_type":
            doc[draw(st.sampled_from(sorted(presets.TOP_KEYS)))] = draw(VALUES)
        elif op == "number":
            doc[draw(st.sampled_from(["steps", "warmup", "seed", "lr"]))] = draw(st.one_of(INTS, st.floats()))
        elif op == "unknown_key":
            doc[draw(KEYS)] = draw(VALUES)
        elif op == "delete" and doc:
            doc.pop(draw(st.sampled_from(sorted(doc))))
        elif op in ("set_size", "delete_size", "scale"):
            table = draw(st.sampled_from(["size", "cpu_size"]))
            if not isinstance(doc.get(table), dict):
                continue
            if op == "set_size":
                doc[table][draw(SIZE_KEY_NAMES)] = draw(st.one_of(INTS, VALUES))
            elif op == "delete_size" and doc[table]:
                doc[table].pop(draw(st.sampled_from(sorted(doc[table]))))
            elif op == "scale" and doc[table]:  # plausible but maybe too big: one key times 2..10**6
                key = draw(st.sampled_from(sorted(doc[table])))
                if isinstance(doc[table][key], int):
                    doc[table][key] *= draw(st.sampled_from([2, 8, 64, 1000, 10**6]))
        elif op == "size_other_workload":
            other = draw(st.sampled_from(sorted(SHIPPED.values(), key=lambda d: d["variant"])))
            doc[draw(st.sampled_from(["size", "cpu_size"]))] = dict(other["size"])
    return doc


TOML_ALPHABET = "[]{}=\"'.,#\n\t abcdefghijklmnopqrstuvwxyz_0123456789-+:eEnaif\\"
TOML_WORDS = ["workload", "variant", "steps", "warmup", "lr", "seed", "amp", "size", "cpu_size", "[size]",
              "[cpu_size]", " = ", "\n", '"norm"', '"layernorm"', "nan", "inf", "-1", "0", "10", "1e9", "[[", "]]",
              "{", "}", "[", "]", ",", '"', "'''", '"""', "true", "1979-05-27", "0x1F", "1_000"]


def toml_like_text():
    return st.one_of(
        st.text(alphabet=TOML_ALPHABET, max_size=200),
        st.lists(st.sampled_from(TOML_WORDS), max_size=40).map("".join),
        st.builds(lambda doc, cut: to_toml(doc)[:cut], mutated_presets(), st.integers(0, 400)),  # cut short
    )


# ---- the property --------------------------------------------------------------------------------------

def check_valid(p: Preset) -> None:
    """What a returned Preset must satisfy, checked independently of the loader's code."""
    spec = presets.REGISTRY[p.workload]  # a KeyError for a workload that is none
    named = [v.config for v in spec.points]
    assert any(p.config.with_("precision", c.precision) == c for c in named)  # a named point, at its file's amp
    assert type(p.steps) is int and 1 <= p.steps <= presets.MAX_STEPS
    assert type(p.warmup) is int and 0 <= p.warmup < p.steps
    assert type(p.seed) is int and 0 <= p.seed < 2**32
    assert math.isfinite(p.lr) and 0 < p.lr < 10
    assert p.config.autocast in presets.AMP_MODES and isinstance(p.description, str)
    for table in (p.size, p.cpu_size):
        assert set(table) == set(presets.SIZE_KEYS[p.workload])
        for key, v in table.items():
            lo, hi = presets.SIZE_LIMITS[p.workload][key]
            assert type(v) is int and lo <= v <= hi
        keys, _, most = presets.PRODUCT_LIMITS[p.workload]
        assert math.prod(table[k] for k in keys) <= most
        if p.workload == "transformer":
            assert table["d_model"] % table["heads"] == 0 and table["branching"] <= table["vocab"]


def load_or_error(path: Path) -> Preset | str:
    try:
        p = presets.load_file(path)
    except PresetError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message
        return message
    check_valid(p)
    return p


@FUZZ
@given(doc=mutated_presets())
@pytest.mark.slow
def test_mutated_presets_load_or_name_the_field(folder: Path, doc):
    text = to_toml(doc)
    assert to_toml(tomllib.loads(text)) == text  # valid TOML, read back as written (NaN-safe, unlike ==)
    path = folder / "mutated.toml"
    path.write_text(text, encoding="utf-8")
    result = load_or_error(path)
    if isinstance(result, str):
        assert "field '" in result, result  # a semantic error names the field
    else:
        assert result.workload == doc["workload"] and result.steps == doc["steps"]


@FUZZ
@given(base=st.sampled_from(sorted(SHIPPED)),
       path=st.one_of(st.sampled_from(sorted(presets.TOP_KEYS)),
                      st.tuples(st.sampled_from(["size", "cpu_size"]), SIZE_KEY_NAMES)),
       value=st.one_of(SCALARS, INTS, st.lists(SCALARS, max_size=3),
                       st.dictionaries(st.text(max_size=8), SCALARS, max_size=3), VALUES))
@pytest.mark.slow
def test_one_field_set_to_anything(folder: Path, base, path, value):
    """Every field, and every size key, set to a value of any TOML type or any size, one at a time."""
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in SHIPPED[base].items()}
    if isinstance(path, tuple):
        doc[path[0]][path[1]] = value
    else:
        doc[path] = value
    file = folder / "one.toml"
    file.write_text(to_toml(doc), encoding="utf-8")
    result = load_or_error(file)
    if isinstance(result, str):
        assert "field '" in result, result


@FUZZ
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300), toml_like_text()))
@pytest.mark.slow
def test_random_bytes_and_text_never_escape_as_another_exception(folder: Path, content):
    path = folder / "random.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    load_or_error(path)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=mutated_presets(), content=st.one_of(st.binary(max_size=100), toml_like_text()))
@pytest.mark.slow
def test_cli_exits_2_without_a_traceback_for_any_bad_file(folder: Path, capsys, doc, content):
    for i, data in enumerate((to_toml(doc).encode(), content if isinstance(content, bytes) else content.encode())):
        path = folder / f"cli-{i}.toml"
        path.write_bytes(data)
        try:
            presets.load_file(path)
            continue  # a valid preset would start a run: not what this test is about
        except PresetError:
            pass
        capsys.readouterr()
        code = cli.main(["--preset", str(path), "--json", "--device", "cpu"])
        out, err = capsys.readouterr()
        assert code == 2
        assert out == ""
        assert err.startswith(f"apextui: error: {path}: ") and err.count("\n") == 1
        assert "Traceback" not in err
