"""Results files: written atomically (a crash mid-save leaves the previous file and no temporary file),
and any broken file gives a ResultsError naming the path and what is wrong."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apextui.core.measure.summary import Summary
from apextui.core import atomic
from apextui.core import results
from apextui.core.results import ResultRow, ResultsError, load_results, save_results
from helpers import named


def row(preset: str = "fp32", variant: str = "fp32", median: float = 10.0, **summary) -> ResultRow:
    return ResultRow(preset=preset, workload="transformer", config=named("transformer", variant), device="cuda",
                     size="default",
                     status="ok", summary=Summary.from_dict({"steps": 50, "median_ms": median, **summary}))


ROWS_A = [row(), row("fused_amp", "fused_amp", 5.0)]
ROWS_B = [row(median=20.0)]


def saved(path: Path) -> Path:
    save_results(ROWS_A, path, env={"gpu": "H200"})
    return path


def only_file(path: Path) -> None:
    """The folder holds just the results file: no temporary file was left behind."""
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def medians(path: Path) -> list[float]:
    return [r.median_ms for r in load_results(path)]


# ---- atomic save ---------------------------------------------------------------------------------------

def test_save_round_trips_and_replaces(tmp_path: Path):
    path = saved(tmp_path / "r.json")
    assert medians(path) == [10.0, 5.0]
    save_results(ROWS_B, path)
    assert medians(path) == [20.0]
    only_file(path)
    assert json.loads(path.read_text())["kind"] == "apextui-results"


def test_a_saved_file_gets_the_usual_mode_not_0600(tmp_path: Path):
    mask = os.umask(0o022)
    try:
        path = saved(tmp_path / "r.json")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_unserialisable_rows_leave_the_previous_file(tmp_path: Path):
    path = saved(tmp_path / "r.json")
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save_results([row(odd=object())], path)  # a real serialisation error (a key kept as given), no mock
    assert path.read_bytes() == before
    only_file(path)


class Boom(Exception):
    pass


def test_a_crash_in_the_middle_of_the_write_leaves_the_previous_file(tmp_path: Path, monkeypatch):
    path = saved(tmp_path / "r.json")
    before = path.read_bytes()
    real_fdopen = os.fdopen
    written = []

    class HalfWriter:
        """The real temporary file; its write puts half the text on disk and then fails."""

        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, text):
            self.fh.write(text[: len(text) // 2])
            self.fh.flush()
            written.append(Path(self.fh.name if isinstance(self.fh.name, str) else f"/proc/self/fd/{self.fh.name}"))
            raise Boom("disk on fire")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(atomic.os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    with pytest.raises(Boom):
        save_results(ROWS_B, path)
    assert written, "the write really started"
    assert path.read_bytes() == before
    only_file(path)


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failing_fsync_or_rename_leaves_the_previous_file(tmp_path: Path, monkeypatch, step):
    path = saved(tmp_path / "r.json")
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, step, fail)
    with pytest.raises(OSError, match="No space left"):
        save_results(ROWS_B, path)
    assert path.read_bytes() == before
    only_file(path)


def test_keyboard_interrupt_during_the_save_leaves_no_temporary_file(tmp_path: Path, monkeypatch):
    path = saved(tmp_path / "r.json")
    before = path.read_bytes()

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_results(ROWS_B, path)
    assert path.read_bytes() == before
    only_file(path)


def test_the_temporary_file_is_fsynced_then_renamed_within_the_folder(tmp_path: Path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", stat.S_ISREG(os.fstat(fd).st_mode)))
        real_fsync(fd)

    def replace(src, dst):
        calls.append(("replace", Path(src).parent == Path(dst).parent, Path(src).read_text().endswith("}\n")))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    save_results(ROWS_A, tmp_path / "r.json")
    # the file's data is on disk before the rename, complete; then the folder entry
    assert calls[:2] == [("fsync", True), ("replace", True, True)]
    assert calls[2:] == [("fsync", False)]
    only_file(tmp_path / "r.json")


def test_saving_into_a_missing_folder_is_an_os_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        save_results(ROWS_A, tmp_path / "nope" / "r.json")
    assert list(tmp_path.iterdir()) == []


# ---- broken files ----------------------------------------------------------------------------------------

def _truncated(path: Path) -> None:
    """Cut short after a comma about half-way (not inside a string, whatever keys a run has)."""
    text = saved(path).read_text()
    path.write_text(text[: text.rindex(",", 0, len(text) // 2) + 1])


def _corrupt(path: Path) -> None:
    text = saved(path).read_text()
    path.write_text(text.replace('"runs": [', '"runs": [#', 1))


DOC = {"kind": "apextui-results", "schema": 1}
START = b'{"event": "start", "preset": "p", "workload": "norm", "variant": "layernorm", "device": "cpu"}\n'


@pytest.mark.parametrize("make, needle", [
    (None, "no such results file"),
    (b"", "empty file"),
    (b"  \n\t\n", "empty file"),
    (b"\xff\xfe{\x00", "not UTF-8 text (byte 0)"),
    ('{"kind": "apextui-results", "runs": []}\n'.encode("utf-16"), "not UTF-8 text"),
    (_truncated, "not JSON (Expecting"),
    (_corrupt, "not JSON (Expecting value at line"),
    (b"[1, 2, 3]\n", "JSON of the wrong shape (a list)"),
    (b"42\n", "JSON of the wrong shape (a single value)"),
    (b'"hello"\n', "JSON of the wrong shape (a single value)"),
    (b'{"runs": []}\n', 'JSON of the wrong shape (an object without "kind": "apextui-results")'),
    (json.dumps({**DOC, "runs": {"a": 1}}).encode(), "field 'runs' must be a list"),
    (json.dumps({**DOC, "runs": ["fp32"]}).encode(), "runs[0]: must be an object, got str"),
    (json.dumps({**DOC, "runs": [{"preset": "x"}]}).encode(), "runs[0]: missing field 'workload'"),
    (json.dumps({**DOC, "runs": [{"preset": "x", "workload": ["norm"], "variant": "v", "device": "cpu"}]}).encode(),
     "runs[0]: unknown workload ['norm']; known: optimizer, layer_norm, rms_norm, transformer"),
    (json.dumps({**DOC, "runs": [{"preset": "x", "workload": "layer_norm", "variant": "v", "device": "cpu",
                                  "summary": [1]}]}).encode(), "runs[0]: 'summary' must be an object"),
    (json.dumps({**DOC, "schema": 99, "runs": []}).encode(), "field 'schema': 99 is newer than this apextui reads (2)"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (START + b'{"event": "end", "status": "ok"}\nnot json\n', "line 3 is not JSON"),
    (START + b'{"event": "end", "status": "ok", "summary": 3}\n', "line 2: 'summary' must be an object"),
    (b'{"event": "start"}\n[1]\n', "line 2: not an apextui event"),
    (b'{"event": "start", "preset": "p"}\n{"event": "end", "status": "ok"}\n', "line 2: missing field 'workload'"),
    # issue 15 §3: the schema is an integer, a file without runs is an error, and so is JSON Python refuses
    (json.dumps({**DOC, "schema": "2", "runs": []}).encode(),
     "field 'schema': got '2'; must be an integer from 1 to 2"),
    (json.dumps({**DOC, "schema": True, "runs": []}).encode(), "field 'schema': got True; must be an integer"),
    (json.dumps({**DOC, "schema": 0, "runs": []}).encode(), "field 'schema': got 0; must be an integer"),
    (json.dumps({"kind": "apextui-results", "runs": []}).encode(), "field 'schema': missing; must be an integer"),
    (json.dumps({**DOC, "runs": []}).encode(), "no finished runs in this file"),
    (START, "no finished runs: `apextui --json` output with no `start` line followed by an `end` line"),
    (b'{"event": "step", "step": 1}\n' * 3, "no finished runs"),
    (b'{"kind": "apextui-results", "schema": 1, "runs": [' + b"1" * 5000 + b"]}",
     "not an apextui results file: a JSON value Python cannot read (Exceeds the limit (4300 digits)"),
    (START + b'{"event": "end", "status": "ok", "summary": {"steps": ' + b"9" * 5000 + b"}}\n",
     "line 2: a JSON value Python cannot read (Exceeds the limit"),
])
def test_broken_results_files_raise_results_error_with_path_and_reason(tmp_path: Path, make, needle):
    path = tmp_path / "results.json"
    if callable(make):
        make(path)
    elif make is not None:
        path.write_bytes(make)
    with pytest.raises(ResultsError) as info:
        load_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert needle in message, message


def test_headless_output_loads(tmp_path: Path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(START + b'{"event": "step", "step": 1}\n{"event": "end", "status": "stopped", '
                             b'"summary": {"median_ms": 2.5}}\n')
    (r,) = load_results(path)
    assert (r.preset, r.workload, r.status, r.median_ms, r.source) == ("p", "layer_norm", "stopped", 2.5,
                                                                       str(path))  # "norm" read as it is now


def test_a_folder_is_not_a_results_file(tmp_path: Path):
    with pytest.raises(ResultsError, match="is a directory"):
        load_results(tmp_path)


def test_a_results_file_with_a_utf8_bom_loads(tmp_path: Path):  # as preset files with a BOM do
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(results.results_document(ROWS_A)).encode())
    assert [r.median_ms for r in load_results(path)] == [r.median_ms for r in ROWS_A]
    lines = tmp_path / "bom.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + START + b'{"event": "end", "status": "ok", "summary": {"median_ms": 2.0}}\n')
    assert [r.median_ms for r in load_results(lines)] == [2.0]


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _sparse(path: Path) -> Path:  # one byte over the limit, without writing 64 MiB
    with path.open("wb") as f:
        f.truncate(results.MAX_RESULTS_BYTES + 1)
    return path


@pytest.mark.parametrize("make, needle", [
    (_fifo, "not a regular file (a FIFO); a results file must be a regular file"),
    (lambda p: Path(os.devnull), "/dev/null: not a regular file (a character device)"),
    (lambda p: p.parent, "is a directory, not a results file"),
    (_sparse, f"too large for a results file ({64 * 2**20 + 1} bytes; at most {64 * 2**20} bytes allowed)"),
])
def test_only_a_regular_file_of_sane_size_is_read(tmp_path: Path, make, needle):
    """A FIFO would block the read forever, a device can be endless, a huge file fills memory."""
    path = make(tmp_path / "r.json")
    with pytest.raises(ResultsError) as info:
        load_results(path)
    assert str(info.value).startswith(f"{path}: ") and needle in str(info.value)
    assert "\n" not in str(info.value)


def test_any_exception_while_parsing_is_a_results_error(tmp_path: Path, monkeypatch):
    """The loader is total: whatever the parser trips over (here an error it never expected) is the file's."""
    path = saved(tmp_path / "r.json")

    def broken(*a, **kw):
        raise RuntimeError("something\nunforeseen")

    monkeypatch.setattr(results, "_row", broken)
    with pytest.raises(ResultsError, match=r"not an apextui results file \(RuntimeError: something unforeseen\)$"):
        load_results(path)


def test_results_error_is_a_value_error():  # callers that catch ValueError keep working
    assert issubclass(ResultsError, ValueError)


# ---- fuzz ------------------------------------------------------------------------------------------

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
              st.sampled_from(["apextui-results", "start", "end", "transformer", "norm", "fp32"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["kind", "schema", "runs", "event", "preset", "workload",
                                                             "variant", "device", "summary", "status", "env", "x"]),
                                            inner, max_size=6)),
    max_leaves=20,
)


@st.composite
def result_files(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "text", "json", "lines", "prefix"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "text":
        return draw(st.text(max_size=300)).encode()
    if kind == "json":
        doc = draw(JSONISH)
        if draw(st.booleans()):
            doc = {"kind": "apextui-results", "runs": draw(st.lists(JSONISH, max_size=3))}
        return json.dumps(doc).encode()
    if kind == "lines":
        return "".join(json.dumps(draw(JSONISH)) + "\n" for _ in range(draw(st.integers(1, 4)))).encode()
    full = json.dumps(results.results_document(ROWS_A), indent=2).encode()
    return full[: draw(st.integers(0, len(full)))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results-fuzz")


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(content=result_files())
@pytest.mark.slow
def test_fuzz_load_results_returns_rows_or_results_error(folder: Path, content: bytes):
    path = folder / "fuzz.json"
    path.write_bytes(content)
    try:
        rows = load_results(path)
    except ResultsError as exc:
        assert str(exc).startswith(f"{path}: ")
        return
    assert isinstance(rows, list) and all(isinstance(r, ResultRow) for r in rows)
    for r in rows:  # what the table reads from a row never raises
        r.median_ms, r.p10_ms, r.final_loss, r.max_error, r.comparable_key, r.to_dict()


def _unwritable(tmp_path: Path) -> Path:
    """A folder this process cannot create files in (a 0555 one; as root, who may write anywhere, /sys or /proc)."""
    ro = tmp_path / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    for candidate in (ro, Path("/sys"), Path("/proc")):
        try:
            (candidate / ".apextui-probe").touch()
        except OSError:
            return candidate
        (candidate / ".apextui-probe").unlink()
    pytest.skip("every folder here can be written to")


def test_save_session_falls_back_to_the_user_data_folder(tmp_path: Path, monkeypatch):
    """A read-only working folder: the runs go to the user's data folder, and the caller learns why."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    here = _unwritable(tmp_path)
    try:
        ok = results.save_session([row()], tmp_path)
        assert ok.path.parent == tmp_path and ok.fallback_reason == ""
        moved = results.save_session([row()], here)
        assert moved.path.parent == tmp_path / "data" / "apextui" == results.fallback_dir()
        assert moved.fallback_reason.startswith(f"cannot write to {here.resolve()}: ")
        assert [r.preset for r in load_results(moved.path)] == ["fp32"]
        monkeypatch.setenv("XDG_DATA_HOME", str(here / "data"))  # none can be written: one error names each
        monkeypatch.setattr(tempfile, "tempdir", str(here))
        with pytest.raises(OSError, match=f"cannot write to {here.resolve()}: .*; nor to {here / 'data'}"):
            results.save_session([row()], here)
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_two_saves_in_the_same_second_keep_both_files(tmp_path: Path, monkeypatch):
    """Two TUIs quitting in one second: the second file gets a new name; a file already there is never replaced."""
    monkeypatch.setattr(results.time, "strftime", lambda fmt, *a: "20261201-120000" if "%H" in fmt else "x")
    theirs = tmp_path / "apextui-results-20261201-120000.json"
    theirs.write_text("another apextui's file\n")
    first = results.save_session([row(median=1.0)], tmp_path)
    second = results.save_session([row(median=2.0)], tmp_path)
    assert theirs.read_text() == "another apextui's file\n"
    assert (first.path.name, second.path.name) == ("apextui-results-20261201-120000-2.json",
                                                   "apextui-results-20261201-120000-3.json")
    assert medians(first.path) == [1.0] and medians(second.path) == [2.0]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_write_new_refuses_an_existing_file(tmp_path: Path):
    target = tmp_path / "f.json"
    target.write_text("mine")
    with pytest.raises(FileExistsError):
        atomic.write_new(target, "yours")
    assert target.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_the_history_save_falls_back_when_its_folder_cannot_be_made(tmp_path: Path, monkeypatch):
    """$XDG_DATA_HOME a regular file: the runs go to the working folder, and the reason says where not."""
    from apextui.ui import history as run_history

    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "not-a-dir"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    saved = run_history.save_to_history([row()])
    assert saved.path.parent.resolve() == work.resolve()
    assert saved.fallback_reason.startswith("cannot write to ") and "Not a directory" in saved.fallback_reason
    assert medians(saved.path) == [10.0]
    work.chmod(0o555)  # nor the working folder: the temporary folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    try:
        if os.access(work, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        saved = run_history.save_to_history([row()])
        assert saved.path.parent == tmp_path / "tmp" and "nor to" in saved.fallback_reason
    finally:
        work.chmod(0o755)


# ---- big histories: linear work -------------------------------------------------------------------------


def history(n: int) -> list[ResultRow]:
    """`n` runs over two groups; every tenth baseline run stopped (passed over, so the notes are non-trivial)."""
    out = []
    for i in range(n):
        variant = ("fp32", "fused_amp", "fused_fp32")[i % 3]
        status = "stopped" if variant == "fp32" and i % 10 == 0 else "ok"
        out.append(ResultRow(preset=variant, workload="transformer", config=named("transformer", variant),
                             device="cuda",
                             size="default" if i % 2 else "cpu", status=status,
                             summary=Summary.from_dict({"steps": 50 if status == "ok" else 3, "median_ms": 10.0 + i % 7,
                                      "p10_ms": 9.0, "p90_ms": 18.0, "measured_steps": 40, "warmup": 10})))
    return out


def key_lookups(monkeypatch, n: int) -> int:
    """How often a row's group (`comparable_key`) is looked at while everything a loaded history needs is made:
    the saved document (labels, baselines, speed-ups, notes for each run) and the notes of the subtitle."""
    calls = 0
    real = ResultRow.comparable_key

    def counted(self):
        nonlocal calls
        calls += 1
        return real.fget(self)

    monkeypatch.setattr(ResultRow, "comparable_key", property(counted))
    rows = history(n)
    results.results_document(rows)
    results.RunIndex(rows).notes()
    monkeypatch.setattr(ResultRow, "comparable_key", real)
    return calls


def test_a_big_history_takes_linear_work(monkeypatch):
    """Timing-free: twice the runs, twice the look-ups (quadratic was 4x: a 2,000-run file took minutes)."""
    small, big = key_lookups(monkeypatch, 300), key_lookups(monkeypatch, 600)
    assert big <= 2.1 * small, (small, big)
    assert small <= 20 * 300  # a few look-ups per run, not one per pair of runs


def test_a_note_names_at_most_a_few_passed_over_runs():
    stopped = [ResultRow(preset="fp32", workload="transformer", config=named("transformer", "fp32"), device="cuda",
                         size="default",
                         status="stopped", summary=Summary(steps=3)) for _ in range(8)]
    rows = stopped + [row("a", "fused_amp")]
    [note] = results.RunIndex(rows).notes()
    assert note.startswith("no speed-up: fp32 run 1 stopped") and note.endswith("; and 3 more passed over")
    assert note.count("not a baseline") == results.MAX_NOTED
