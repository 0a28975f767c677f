"""Preset files: the shipped ones load, bad ones name the file and the field."""

import json
import math
import os
import tomllib
from pathlib import Path

import pytest

from apextui.core import presets
from apextui.core.presets import POINT_NAMES, PresetError
from apextui.core.workloads.spec import SHIPPED

GOOD = """
workload = "layer_norm"
variant = "layernorm"
steps = 10
warmup = 2
[size]
batch = 2
seq = 4
hidden = 8
[cpu_size]
batch = 1
seq = 4
hidden = 8
"""


def test_every_named_point_has_a_shipped_preset_named_after_it():
    shipped = {p.name: p for p in presets.load_builtin()}
    expected = {v for w, names in POINT_NAMES.items() if w in SHIPPED for v in names}
    assert set(shipped) == expected
    for name, p in shipped.items():
        named = presets.REGISTRY[p.workload].named(name).config
        assert p.config.with_("precision", named.precision) == named  # its file's amp sets the precision alone
        assert p.warmup < p.steps
        assert set(p.size) == set(presets.SIZE_KEYS[p.workload]) == set(p.cpu_size)


def test_apex_needs_and_baselines():
    by_name = {p.name: p for p in presets.load_builtin()}
    assert by_name["fused_adam"].needs_apex == ("FusedAdam",)
    assert by_name["fused_amp"].needs_apex == ("FusedAdam", "FusedLayerNorm")
    assert by_name["fused_amp"].config.autocast == "fp16" and by_name["torch_amp"].config.autocast == "bf16"
    assert by_name["torch_amp"].needs_apex == () and by_name["fp32"].needs_apex == ()
    assert by_name["fused_rmsnorm"].baseline == "rmsnorm" and by_name["fused_layernorm"].baseline == "layernorm"
    assert by_name["fused_adam"].baseline == "adamw"
    assert [n for n, p in by_name.items() if p.is_baseline] == ["adamw", "layernorm", "rmsnorm", "fp32"]


def test_a_file_of_the_norm_workload_from_before_the_split_loads_as_its_norms_workload(tmp_path: Path):
    """Until 2026-12-06 both norms were one workload, "norm": a user's file that says so still loads, as the
    workload of the norm its named point times."""
    for name, workload in (("layernorm", "layer_norm"), ("fused_rmsnorm", "rms_norm")):
        f = tmp_path / f"old_{name}.toml"
        f.write_text(GOOD.replace('workload = "layer_norm"', 'workload = "norm"').replace('"layernorm"', f'"{name}"'))
        p = presets.resolve(str(f))
        assert (p.workload, p.config == presets.REGISTRY[workload].named(name).config) == (workload, True)
    f.write_text(GOOD.replace('workload = "layer_norm"', 'workload = "norm"').replace('"layernorm"', '"fp32"'))
    with pytest.raises(PresetError, match="field 'variant': got 'fp32'; allowed for norm: layernorm, fused_layernorm, "
                                          "rmsnorm, fused_rmsnorm"):
        presets.resolve(str(f))


def test_user_file_by_path(tmp_path: Path):
    f = tmp_path / "mine.toml"
    f.write_text(GOOD)
    p = presets.resolve(str(f))
    assert (p.name, p.workload, p.steps, p.warmup) == ("mine", "layer_norm", 10, 2)
    assert p.size["hidden"] == 8


@pytest.mark.parametrize("mutation, field", [
    (lambda s: s.replace('variant = "layernorm"', 'variant = "fast"'), "variant"),
    (lambda s: s.replace('workload = "layer_norm"', 'workload = "vision"'), "workload"),
    (lambda s: s.replace("steps = 10", "steps = -1"), "steps"),
    (lambda s: s.replace("warmup = 2", "warmup = 10"), "warmup"),
    (lambda s: s.replace("steps = 10", 'steps = 10\namp = "fp8"'), "amp"),
    (lambda s: s.replace("hidden = 8\n[cpu_size]", "hidden = 0\n[cpu_size]"), "size.hidden"),
    (lambda s: s.replace("seq = 4\nhidden = 8\n", "seq = 4\n", 1), "size.hidden"),
    (lambda s: s.replace("batch = 1", "batch = 1\nwidth = 3"), "cpu_size.width"),
    (lambda s: "colour = 1\n" + s, "colour"),
])
def test_invalid_files_name_the_file_and_field(tmp_path: Path, mutation, field):
    f = tmp_path / "bad.toml"
    f.write_text(mutation(GOOD))
    with pytest.raises(PresetError) as info:
        presets.load_file(f)
    message = str(info.value)
    assert str(f) in message
    assert f"field '{field}'" in message


def test_broken_toml_and_missing_file(tmp_path: Path):
    f = tmp_path / "broken.toml"
    f.write_text("workload = [")
    with pytest.raises(PresetError, match="not valid TOML"):
        presets.load_file(f)
    with pytest.raises(PresetError, match="no such preset file"):
        presets.resolve(str(tmp_path / "nothing.toml"))
    with pytest.raises(PresetError, match="unknown preset 'nope'.*adamw"):
        presets.resolve("nope")


# ---- limits -------------------------------------------------------------------------------------

TRANSFORMER = """
workload = "transformer"
variant = "fp32"
steps = 10
warmup = 2
[size]
vocab = 64
d_model = 256
layers = 2
heads = 4
seq = 4
batch = 2
branching = 4
[cpu_size]
vocab = 64
d_model = 64
layers = 2
heads = 4
seq = 4
batch = 2
branching = 4
"""

OPTIMIZER = """
workload = "optimizer"
variant = "adamw"
steps = 10
warmup = 2
[size]
layers = 1
width = 8
batch = 2
[cpu_size]
layers = 1
width = 8
batch = 2
"""

BASE = {"layer_norm": GOOD, "rms_norm": GOOD.replace("layer_norm", "rms_norm").replace("layernorm", "rmsnorm"),
        "transformer": TRANSFORMER, "optimizer": OPTIMIZER}


def toml_of(data: dict) -> str:
    """A small TOML writer for the flat-plus-two-tables shape of a preset (tomllib only reads)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        return repr(v)
    head = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {value(vv)}" for kk, vv in v.items())
              for k, v in data.items() if isinstance(v, dict)]
    return "\n".join(head + tables) + "\n"


def load_text(tmp_path: Path, text: str | bytes, name: str = "bad.toml"):
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    return f, presets.load_file(f)


def rejected(tmp_path: Path, text: str | bytes, name: str = "bad.toml") -> str:
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PresetError) as info:
        presets.load_file(f)
    message = str(info.value)
    assert message.startswith(f"{f}: "), message
    assert "\n" not in message, "one message, on one line"
    return message


def test_limits_cover_every_numeric_field_and_every_size_key():
    assert set(presets.LIMITS) == {"steps", "warmup", "seed"}
    for workload, keys in presets.SIZE_KEYS.items():
        assert set(presets.SIZE_LIMITS[workload]) == set(keys), workload
        assert all(1 <= lo < hi for lo, hi in presets.SIZE_LIMITS[workload].values())
        product_keys, _, most = presets.PRODUCT_LIMITS[workload]
        assert set(product_keys) <= set(keys) and most > 0
    assert presets.LIMITS["steps"] == (1, presets.MAX_STEPS)


def test_every_shipped_preset_is_within_the_limits():
    for p in presets.load_builtin():
        for table in (p.size, p.cpu_size):
            for key, v in table.items():
                lo, hi = presets.SIZE_LIMITS[p.workload][key]
                assert lo <= v <= hi, (p.name, key)
            keys, _, most = presets.PRODUCT_LIMITS[p.workload]
            assert math.prod(table[k] for k in keys) <= most


def _set(text: str, table: str, key: str, value) -> str:
    data = tomllib.loads(text)
    (data[table] if table else data)[key] = value
    return toml_of(data)


SIZE_CASES = [(w, k) for w, keys in presets.SIZE_KEYS.items() for k in keys]


@pytest.mark.parametrize("workload, key", SIZE_CASES)
def test_each_size_key_accepts_its_largest_value_and_rejects_one_more(tmp_path: Path, workload, key):
    lo, hi = presets.SIZE_LIMITS[workload][key]
    text = _set(BASE[workload], "size", key, hi)
    if key == "branching":  # branching <= vocab
        text = _set(text, "size", "vocab", hi)
    _, p = load_text(tmp_path, text, "edge.toml")
    assert p.size[key] == hi
    for bad in (hi + 1, lo - 1, 10**12, -5):
        message = rejected(tmp_path, _set(BASE[workload], "size", key, bad))
        assert f"field 'size.{key}'" in message
        assert f"got {bad}; must be an integer from {lo} to {hi}" in message


@pytest.mark.parametrize("key", ["steps", "seed"])
def test_top_level_integers_have_a_range(tmp_path: Path, key):
    lo, hi = presets.LIMITS[key]
    _, p = load_text(tmp_path, _set(GOOD, "", key, hi), "edge.toml")
    assert getattr(p, key) == hi
    for bad in (hi + 1, lo - 1, 10**18):
        message = rejected(tmp_path, _set(GOOD, "", key, bad))
        assert f"field '{key}': got {bad}; must be an integer from {lo} to {hi}" in message


@pytest.mark.parametrize("text, field, allowed", [
    # the two examples of the issue
    (TRANSFORMER.replace("vocab = 64\nd_model = 256", f"vocab = {10**12}\nd_model = 256"), "size.vocab",
     "from 1 to 32768"),
    (OPTIMIZER.replace("[size]\nlayers = 1", f"[size]\nlayers = {10**9}"), "size.layers", "from 1 to 1024"),
    # products: each key in range, the biggest tensor not
    (OPTIMIZER.replace("[size]\nlayers = 1\nwidth = 8", "[size]\nlayers = 1024\nwidth = 65536"), "size",
     "layers x width x width = 4398046511104 parameters; at most 4294967296 allowed"),
    (GOOD.replace("[size]\nbatch = 2\nseq = 4\nhidden = 8", "[size]\nbatch = 65536\nseq = 65536\nhidden = 8"),
     "size", "at most 4294967296 allowed"),
    (TRANSFORMER.replace("seq = 4\nbatch = 2\nbranching = 4\n[cpu", "seq = 65536\nbatch = 65536\nbranching = 4\n[cpu"),
     "size", "batch x seq x vocab = 274877906944 logits"),
    # lr: NaN, infinities, out of range, wrong type
    (GOOD + "lr = nan\n", "cpu_size.lr", "unknown size for layer_norm"),  # after a table: it belongs to [cpu_size]
    (GOOD.replace("steps = 10", "steps = 10\nlr = nan"), "lr", "got nan; must be a finite number greater than 0"),
    (GOOD.replace("steps = 10", "steps = 10\nlr = inf"), "lr", "got inf; must be a finite number"),
    (GOOD.replace("steps = 10", "steps = 10\nlr = -inf"), "lr", "got -inf"),
    (GOOD.replace("steps = 10", "steps = 10\nlr = 0"), "lr", "greater than 0 and less than 10"),
    (GOOD.replace("steps = 10", f"steps = 10\nlr = {10**18}"), "lr", "less than 10"),
    (GOOD.replace("steps = 10", "steps = 10\nlr = '1e-3'"), "lr", "got '1e-3'"),
    (GOOD.replace("steps = 10", "steps = 10\nlr = true"), "lr", "got True"),
    # wrong types, nested tables and arrays where a scalar belongs
    (GOOD.replace("steps = 10", "steps = 10.0"), "steps", "got 10.0; must be an integer from 1 to 10000000"),
    (GOOD.replace("steps = 10", "steps = true"), "steps", "got True"),
    (GOOD.replace("steps = 10", "steps = {n = 10}"), "steps", "got {'n': 10}"),
    (GOOD.replace("steps = 10", "steps = 1979-05-27"), "steps", "datetime.date"),
    (GOOD.replace('workload = "layer_norm"', 'workload = ["norm"]'), "workload",
     "allowed: optimizer, layer_norm, rms_norm, transformer"),
    (GOOD.replace('workload = "layer_norm"', "workload = {name = 'norm'}"), "workload", "allowed: optimizer"),
    (GOOD.replace('variant = "layernorm"', "variant = ['layernorm']"), "variant", "allowed for layer_norm: layernorm"),
    (GOOD.replace('variant = "layernorm"', "variant = {a = 1}"), "variant", "allowed for layer_norm"),
    (GOOD.replace("steps = 10", "steps = 10\namp = ['fp16']"), "amp", "allowed: none, fp16, bf16"),
    (GOOD.replace("steps = 10", "steps = 10\ndescription = 3"), "description", "must be a string"),
    (GOOD.replace("steps = 10", "steps = 10\ndescription = '" + "x" * 1001 + "'"), "description",
     "at most 1000 allowed"),
    (GOOD.split("[size]")[0] + "size = 3\n[cpu_size]\nbatch = 1\nseq = 4\nhidden = 8\n", "size",
     "got 3; must be a table [size] with keys batch, seq, hidden"),
    (GOOD.split("[size]")[0] + "size = [1, 2]\n[cpu_size]\nbatch = 1\nseq = 4\nhidden = 8\n", "size",
     "must be a table"),
    (GOOD.replace("hidden = 8\n[cpu_size]", "hidden = 8\n[size.extra]\nx = 1\n[cpu_size]"), "size.extra",
     "unknown size for layer_norm; allowed: batch, seq, hidden"),
    (GOOD.replace("[size]\nbatch = 2", "[size]\nbatch = {n = 2}"), "size.batch", "must be an integer from 1 to 65536"),
    (GOOD.replace("[size]\nbatch = 2", "[size]\nbatch = '2'"), "size.batch", "got '2'"),
    (GOOD.replace("[size]\nbatch = 2", "[size]\nbatch = 2.5"), "size.batch", "got 2.5"),
    (GOOD.replace("[size]\nbatch = 2", "[size]\nbatch = nan"), "size.batch", "got nan"),
    (GOOD.replace("[size]\nbatch = 2", "[[size.x]]\nbatch = 2\n[size]"), "size.x", "allowed: batch, seq, hidden"),
    # zero and negative
    (GOOD.replace("steps = 10", "steps = 0"), "steps", "got 0; must be an integer from 1 to"),
    (GOOD.replace("warmup = 2", "warmup = -1"), "warmup", "got -1; must be an integer from 0 to"),
    (GOOD.replace("steps = 10", "steps = 10\nseed = -1"), "seed", "from 0 to 4294967295"),
    (GOOD.replace("warmup = 2", ""), "warmup", "got 10 (the default); must be smaller than steps (10)"),
    # unknown or missing keys, unknown workload or variant
    ("Workload = 'layer_norm'\n" + GOOD, "Workload", "unknown field; allowed: amp, config, cpu_size, description"),
    (GOOD.replace('workload = "layer_norm"\n', ""), "workload",
     "missing; allowed: optimizer, layer_norm, rms_norm, transformer"),
    (GOOD.replace('variant = "layernorm"\n', ""), "variant",
     "missing; allowed for layer_norm: layernorm, fused_layernorm"),
    (GOOD.replace('variant = "layernorm"', 'variant = "fp32"'), "variant", "got 'fp32'; allowed for layer_norm"),
    (GOOD.replace('workload = "layer_norm"', 'workload = "vision"'), "workload", "got 'vision'; allowed"),
    (GOOD.replace("steps = 10\n", ""), "steps", "missing; give an integer from 1 to 10000000"),
    (GOOD.split("[cpu_size]")[0], "cpu_size", "missing table [cpu_size] with keys batch, seq, hidden"),
    (GOOD.replace("[size]\nbatch = 2\n", "[size]\n"), "size.batch", "missing; give an integer from 1 to 65536"),
    (TRANSFORMER.replace("d_model = 256", "d_model = 250"), "size.heads", "d_model (250) must be divisible by heads"),
    (TRANSFORMER.replace("branching = 4\n[cpu", "branching = 65\n[cpu"), "size.branching",
     "got 65; must not exceed vocab (64)"),
])
def test_bad_values_give_one_message_with_file_field_and_allowed(tmp_path: Path, text, field, allowed):
    message = rejected(tmp_path, text)
    assert f"field '{field}': " in message
    assert allowed in message


@pytest.mark.parametrize("content, needle", [
    ("workload = [", "not valid TOML: "),
    ('workload = "norm"\nworkload = "norm"\n', "not valid TOML: "),  # a key twice
    ("steps = 1" + "0" * 5000 + "\n", "not valid TOML for a preset"),  # too many digits for Python's int()
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
    (b"workload = \"norm\xff\"\n", "not UTF-8 text (byte 16)"),
    (b"\x00\x01\x02", "not valid TOML"),
    ("x" * (presets.MAX_FILE_BYTES + 1), "too large for a preset file"),
])
def test_unreadable_files(tmp_path: Path, content, needle):
    assert needle in rejected(tmp_path, content)


def test_toml_error_says_where(tmp_path: Path):
    message = rejected(tmp_path, GOOD.replace("steps = 10", "steps = = 10"))
    assert "not valid TOML" in message and "line 4, column 9" in message


def test_a_utf8_bom_is_accepted(tmp_path: Path):
    _, p = load_text(tmp_path, "\ufeff" + GOOD, "bom.toml")
    assert p.workload == "layer_norm"


def test_a_folder_or_a_nul_in_the_path_is_a_preset_error(tmp_path: Path):
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(PresetError, match="is a directory"):
        presets.load_file(tmp_path / "dir.toml")
    with pytest.raises(PresetError, match="cannot read"):
        presets.resolve("a\x00b.toml")


def test_parse_rejects_a_non_table(tmp_path: Path):
    with pytest.raises(PresetError, match=r"^x\.toml: field '<top level>': got list"):
        presets.parse([1, 2], name="x", path="x.toml")  # type: ignore[arg-type]


# ---- user presets ---------------------------------------------------------------------------------


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "user-presets"
    d.mkdir()
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(d))
    return d


def test_user_dir_comes_from_the_environment(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path / "mine"))
    assert presets.user_dir() == tmp_path / "mine"
    monkeypatch.delenv("APEXTUI_PRESET_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert presets.user_dir() == tmp_path / "cfg" / "apextui" / "presets"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")  # the XDG spec: relative paths are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert presets.user_dir() == tmp_path / "home" / ".config" / "apextui" / "presets"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert presets.user_dir() == tmp_path / "home" / ".config" / "apextui" / "presets"


def test_load_all_adds_good_user_presets_and_collects_bad_ones(user_dir: Path):
    (user_dir / "tiny.toml").write_text(GOOD)
    (user_dir / "big_vocab.toml").write_text(TRANSFORMER.replace("vocab = 64\nd_model = 256",
                                                                 "vocab = 99999999\nd_model = 256"))
    (user_dir / "broken.toml").write_text("steps = [")
    (user_dir / "fp32.toml").write_text(TRANSFORMER)  # the name of a shipped preset
    (user_dir / "notes.txt").write_text("not a preset")
    (user_dir / ".hidden.toml").write_text("junk")
    found, errors = presets.load_all()
    names = [p.name for p in found]
    builtin = [p.name for p in presets.load_builtin()]
    assert names == builtin + ["tiny"]
    assert [Path(e.path).name for e in errors] == ["big_vocab.toml", "broken.toml", "fp32.toml"]
    by_name = {Path(path).name: message for path, message in errors}  # (path, message) pairs
    assert by_name["big_vocab.toml"].startswith(str(user_dir / "big_vocab.toml"))
    assert "field 'size.vocab'" in by_name["big_vocab.toml"] and "from 1 to 32768" in by_name["big_vocab.toml"]
    assert "not valid TOML" in by_name["broken.toml"]
    assert "taken by a shipped preset" in by_name["fp32.toml"]
    # a user preset can be run by name too
    assert presets.resolve("tiny").path == str(user_dir / "tiny.toml")
    assert presets.resolve("fp32").path != str(user_dir / "fp32.toml")
    with pytest.raises(PresetError, match=r"unknown preset 'nope'; choose one of: .*torch_amp, .*tiny, or give"):
        presets.resolve("nope")


def test_no_user_folder_is_no_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(tmp_path / "absent"))
    found, errors = presets.load_all()
    assert errors == [] and len(found) == len(presets.load_builtin())


def test_a_user_folder_that_is_a_file_is_reported(tmp_path: Path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    monkeypatch.setenv("APEXTUI_PRESET_DIR", str(f))
    found, errors = presets.load_all()
    assert len(found) == len(presets.load_builtin())
    assert errors == [(str(f), f"{f}: the user preset folder is not a directory")]


def test_a_key_with_a_newline_keeps_the_message_on_one_line(tmp_path: Path):
    message = rejected(tmp_path, '"a\\nb" = 1\n' + GOOD)
    assert "field 'a\\nb': unknown field" in message


# ---- paths that are not regular files, and files that are too big (issue 15, section 2) ---------------


def test_a_preset_path_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path):
    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)  # no writer: an ordinary open() would block forever
    with pytest.raises(PresetError, match=r"f\.toml: not a regular file \(a FIFO\); a preset file must be a regular"):
        presets.resolve(str(fifo))
    with pytest.raises(PresetError, match=r"^/dev/null: not a regular file \(a character device\)"):
        presets.load_file("/dev/null")


def test_a_sparse_preset_file_over_the_limit_is_refused(tmp_path: Path):
    path = tmp_path / "huge.toml"
    with path.open("wb") as f:
        f.truncate(presets.MAX_FILE_BYTES * 1024)  # 1 GiB that takes no disk and is never read
    with pytest.raises(PresetError, match=rf"too large for a preset file \({presets.MAX_FILE_BYTES * 1024} bytes; "
                                          rf"at most {presets.MAX_FILE_BYTES} bytes allowed\)"):
        presets.load_file(path)


def test_the_user_folder_skips_and_reports_what_is_not_a_regular_file(user_dir: Path):
    (user_dir / "tiny.toml").write_text(GOOD)
    os.mkfifo(user_dir / "pipe.toml")
    (user_dir / "folder.toml").mkdir()
    found, errors = presets.load_all()
    assert [p.name for p in found][-1] == "tiny"
    assert [(Path(e.path).name, e.message) for e in errors] == [
        ("folder.toml", f"{user_dir / 'folder.toml'}: is a directory, not a preset file"),
        ("pipe.toml", f"{user_dir / 'pipe.toml'}: not a regular file (a FIFO); a preset file must be a regular file"),
    ]
    # by name: the FIFO's own error, not 'unknown preset'; an unknown name still lists the good ones
    with pytest.raises(PresetError, match="pipe.toml: not a regular file"):
        presets.resolve("pipe")
    with pytest.raises(PresetError, match=r"unknown preset 'nope'; choose one of: .*tiny, or give"):
        presets.resolve("nope")


def test_any_exception_while_parsing_is_a_preset_error(tmp_path: Path, monkeypatch):
    """load_file is total: an error parse() never expected is still the file's, on one line."""
    path = tmp_path / "p.toml"
    path.write_text(GOOD)

    def broken(*a, **kw):
        raise RuntimeError("something\nunforeseen")

    monkeypatch.setattr(presets, "parse", broken)
    with pytest.raises(PresetError, match=r"p\.toml: not a usable preset \(RuntimeError: something unforeseen\)$"):
        presets.load_file(path)


def test_a_description_that_says_what_happens_on_cuda_says_what_happens_on_cpu_too():
    """A CPU user reads the same words (`apextui list`, the picker): a description of the CUDA behaviour alone
    (`adamw`: "foreach on CUDA") told them nothing of their run."""
    from apextui.core.config import axes
    from apextui.core.workloads.spec import WORKLOADS

    words = [p.description for p in presets.load_builtin()]
    words += [v.description for a in axes.AXES for v in a.values]
    words += [v.description for spec in WORKLOADS.values() for v in spec.points]
    one_sided = [w for w in words if "on CUDA" in w and "on CPU" not in w]
    assert not one_sided, one_sided
