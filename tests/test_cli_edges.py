"""Issue 15, sections 1 and 4: a stdout that cannot be written, and signals at every moment, end with the
documented exit code and never a traceback (subprocess tests: `python -m apextui`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import apextui

from helpers import ROOT, cli_env

CASES = {
    "run": ["--preset", "adamw", "--json", "--steps", "5", "--device", "cpu"],
    "unavailable": ["--preset", "fused_adam", "--json", "--device", "cpu"],
    "list": ["list", "--device", "cpu"],
    "list_json": ["list", "--json", "--device", "cpu"],
    "doctor_json": ["doctor", "--json"],
}


def _run(args: list[str], stdout, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apextui", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=cli_env(), cwd=ROOT, **kw)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.slow
def test_full_disk_ends_with_one_line_and_exit_1(case):
    with open("/dev/full", "w") as full:
        proc = _run(CASES[case], full)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot write to stdout: No space left on device" in proc.stderr


@pytest.mark.parametrize("case", ["run", "list_json"])
@pytest.mark.slow
def test_closed_stdout_ends_with_one_line_and_exit_1(case):
    proc = _run(CASES[case], None, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot write to stdout: it is closed" in proc.stderr


@pytest.mark.parametrize("case", ["list_json", "doctor_json", "unavailable"])
@pytest.mark.slow
def test_reader_gone_exits_141_quietly(case):
    r, w = os.pipe()
    os.close(r)  # the reader has gone before the first write: EPIPE
    try:
        proc = _run(CASES[case], w)
    finally:
        os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.mark.slow
def test_reader_gone_stops_a_long_run_at_once():
    r, w = os.pipe()
    os.close(r)
    t0 = time.monotonic()
    try:
        proc = _run(["--preset", "adamw", "--json", "--steps", "1000000", "--device", "cpu"], w)
    finally:
        os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 60  # a million steps would take many minutes


def _popen(args: list[str], env: dict[str, str] | None = None, sigint=signal.SIG_DFL) -> subprocess.Popen[str]:
    """`python -m apextui ARGS`, started with SIGINT at `sigint` (SIG_IGN: as a background job of a script), set
    here so that a pytest started in the background does not pass its ignored SIGINT on."""
    env = {**(env or cli_env()), "PYTHONFAULTHANDLER": "1"}  # a run that hangs shows its threads (_communicate)
    return subprocess.Popen([sys.executable, "-m", "apextui", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def _communicate(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """Its output once it ended; a run still going after `timeout` is killed and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler (_popen) writes every thread's stack to stderr, then ends it
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"still running {timeout} s after the signal (it was lost); stdout begins {out[:300]!r}; "
                    f"stderr (the threads' stacks at the end): {err[-6000:]}")


def test_sigint_while_importing_exits_130_without_traceback():
    """Ctrl-C while the command's modules import: the first one ends the run. A signal that lands while Python
    itself still starts (`site`, the editable-install finder: no apextui code has run) is out of apextui's reach;
    on a loaded machine 0.15 s can still be that early, so the signal is sent later, up to 3 times, until apextui's
    code has it."""
    for delay in (0.15, 0.3, 0.6, 1.2):
        proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"])
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = _communicate(proc, 20)
        if not in_pythons_startup(err, proc.returncode):
            break
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = [json.loads(line) for line in out.splitlines()]
    if lines:  # the start line came first: then an end line too
        assert lines[-1]["event"] == "end" and lines[-1]["status"] == "stopped"


def in_pythons_startup(err: str, returncode: int) -> bool:
    """The signal landed in Python's own start-up (`site`, the editable-install finder) and no frame of apextui's
    package ran: its package's folder, not a path that merely contains "apextui" (a clone is often in a folder of that
    name, and then every path of its virtual environment does)."""
    package = str(Path(apextui.__file__).resolve().parent) + os.sep
    in_startup = "init_import_site" in err or returncode == -signal.SIGINT
    return in_startup and package not in err and package.replace(os.sep, "/") not in err


def test_a_signal_in_pythons_startup_is_told_from_one_in_apextui_wherever_the_clone_lives():
    package = Path(apextui.__file__).resolve().parent
    venv_site = package.parent / ".venv" / "lib" / "python3.11" / "site.py"  # under a clone named apextui too
    startup = (f'Traceback (most recent call last):\n  File "{venv_site}", line 1, in init_import_site\n'
               "KeyboardInterrupt\n")
    ours = startup + f'  File "{package / "cli" / "main.py"}", line 3, in main\n'
    assert in_pythons_startup(startup, -signal.SIGINT)
    assert in_pythons_startup(startup.replace(str(package.parent), "/home/me/apextui"), 1)
    assert not in_pythons_startup(ours, -signal.SIGINT)
    assert not in_pythons_startup("apextui: stopped\n", 130)


# sitecustomize for the next test: SIGINT to itself as `apextui.cli.command` starts to import, the handler running
# (the loop checks for signals) inside `exec` of a string, as a dataclass's generated methods run, or inside a
# weakref callback, as importlib runs one after every import
SIGNAL_AT_IMPORT = r"""
import os, signal, sys, weakref


def send():
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass


class SignalAt:
    def find_spec(self, name, path=None, target=None):
        if name == "apextui.cli.command":
            sys.meta_path.remove(self)
            if WHERE == "exec":
                exec("send()")
            else:
                obj = SignalAt()
                ref = weakref.ref(obj, lambda ref: send())
                del obj
        return None


sys.meta_path.insert(0, SignalAt())
"""


@pytest.mark.parametrize("where", ["exec", "weakref_callback"])
@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint_default", "sigint_ignored"])
def test_sigint_as_main_starts_importing_exits_130(tmp_path, sigint, where):
    """A Ctrl-C at the first import of `cli.main` ends with 130 and one line. Inherited ignored (a background job
    of a script), Python leaves SIGINT ignored: the signal was dropped until the command's handlers were in, and
    the run went on. With the default handler, a KeyboardInterrupt out of an `exec` of a string made `python -m`
    end by SIGINT (-2) even though it was caught, and one in a weakref callback was printed and dropped."""
    (tmp_path / "sitecustomize.py").write_text(f"WHERE = {where!r}\n{SIGNAL_AT_IMPORT}")
    env = cli_env()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"], env, sigint)
    out, err = _communicate(proc, 20)
    assert (proc.returncode, out, err) == (130, "", "apextui: interrupted\n")


# SIGINT as `apextui.cli.command` starts to import, and SIGTERM held back until apextui writes its one line: the
# second signal lands in the middle of the first one's clean-up (a write to stderr)
TERM_MID_LINE = r"""
import os, signal, sys


class TermMidLine:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        if text.startswith("apextui:"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            for _ in range(1000):
                pass
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


class IntAt:
    def find_spec(self, name, path=None, target=None):
        if name == "apextui.cli.command":
            sys.meta_path.remove(self)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            os.kill(os.getpid(), signal.SIGTERM)  # pending until the line is written
            sys.stderr = TermMidLine(sys.stderr)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
        return None


sys.meta_path.insert(0, IntAt())
"""


def test_a_second_early_signal_during_the_first_ones_line_is_no_traceback(tmp_path):
    """A second signal landing in the first early one's clean-up raised there: a traceback (EarlySignal: 15)
    and exit 1 (1 of 12 INT+TERM start-ups, issue 28)."""
    (tmp_path / "sitecustomize.py").write_text(TERM_MID_LINE)
    env = cli_env()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"], env)
    out, err = _communicate(proc, 20)
    assert (proc.returncode, out, err) == (130, "", "apextui: interrupted\n")


def test_two_early_signals_are_named_together():
    from apextui.cli.signals import EarlySignal, early_signals

    early = early_signals()
    with pytest.raises(EarlySignal) as caught:
        early._handle(signal.SIGINT, None)
    early._handle(signal.SIGTERM, None)  # recorded, not raised
    assert early.finish(caught.value) == 143


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.slow
def test_second_signal_just_after_start_still_prints_an_end_line(sig, code):
    proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"])
    first = json.loads(proc.stdout.readline())
    assert first["event"] == "start"
    proc.send_signal(sig)
    time.sleep(0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err
    last = json.loads(out.splitlines()[-1])
    assert last["event"] == "end" and last["status"] == "stopped"


def test_two_signals_during_a_long_c_call_are_both_counted_and_the_second_quits_at_once():
    """SIGINT and SIGTERM 10 ms apart while the main thread is inside one long C call (as importing torch or building
    a model is): Python would run its handler once, after the call; StopOnSignals counts both and quits then.
    The C call would last an hour or more (2e9 PBKDF2 rounds): quitting at once is told from quitting after it by the
    process ending at all within the timeout, not by a number of seconds a loaded machine could exceed."""
    script = (
        "import hashlib, os, signal, sys, threading, time\n"
        "from apextui.cli.signals import StopOnSignals\n"
        "def first(s): print('first', s, flush=True)\n"
        "def again(s): print('again', s, flush=True)\n"
        "def send():\n"
        "    time.sleep(0.3); os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.01); os.kill(os.getpid(), signal.SIGTERM)\n"
        "with StopOnSignals(first, again) as sig:\n"
        "    threading.Thread(target=send).start()\n"
        "    hashlib.pbkdf2_hmac('sha256', b'x', b'y', 2_000_000_000)  # an hour or more inside C\n"
        "print('not quit', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    # both counted, in the order their bytes reached the wakeup pipe, and the second's code is the exit status. That
    # order is the kernel's, not the sender's: a signal to a process goes to any of its threads that does not block
    # it, and on a loaded box the thread that took SIGINT was once preempted before its C handler wrote the byte,
    # after SIGTERM's (seen beside two CPU burners: "first 15, again 2", exit 130)
    int_, term = int(signal.SIGINT), int(signal.SIGTERM)
    assert proc.stdout.splitlines() in ([f"first {int_}", f"again {term}"], [f"first {term}", f"again {int_}"]), (
        proc.stdout + proc.stderr)
    second = int(proc.stdout.splitlines()[1].split()[1])
    assert proc.returncode == 128 + second, proc.stdout + proc.stderr


def test_early_signals_swallowed_on_their_way_to_main_are_acted_on_once_the_work_is_in():
    """Before the work's own handlers are in, the first signal raises EarlySignal and a second is only recorded.
    Code on the way to main that swallows the first (a library catching BaseException, C code clearing whatever a
    call raised) lost both, and the run trained on, deaf to two Ctrl-Cs: StopOnSignals now takes both as it comes
    in (the first stops the work, the second quits with its code)."""
    script = (
        "import os, signal, time\n"
        "from apextui.cli.signals import StopOnSignals, early_signals\n"
        "def first(s): print('first', s, flush=True)\n"
        "def again(s): print('again', s, flush=True)\n"
        "with early_signals():\n"
        "    try:  # a library that swallows whatever its call raised\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(60)  # the handler raises in here at the latest\n"
        "    except BaseException:\n"
        "        pass\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # recorded: as far as the handler knows, the first unwinds\n"
        "    time.sleep(0)\n"
        "    with StopOnSignals(first, again):\n"
        "        time.sleep(60)  # the work: the signals taken as it comes in end it\n"
        "    print('not quit', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    assert proc.stdout.splitlines() == [f"first {int(signal.SIGINT)}", f"again {int(signal.SIGTERM)}"], (
        proc.stdout + proc.stderr)
    assert proc.returncode == 143, proc.stdout + proc.stderr


def test_an_early_signal_swallowed_in_a_del_is_sent_again_unless_a_later_one_is_recorded(monkeypatch):
    """EarlySignal raised inside a `__del__` or weakref callback is only printed: alone, the signal is sent again
    (from another thread, to land once the callback returned); with a later signal already recorded (both were
    pending at once), sent again it would come after that one, so both stay recorded in the order they came, for
    StopOnSignals (the signal-level path is in the swallowed test above)."""
    from types import SimpleNamespace

    from apextui.cli import signals as sig

    sent: list[tuple[object, tuple[int, int]]] = []
    monkeypatch.setattr(sig._thread, "start_new_thread", lambda fn, args: sent.append((fn, args)))
    early = sig.early_signals()
    early.received = [signal.SIGINT]
    early._unraisable(SimpleNamespace(exc_value=sig.EarlySignal(signal.SIGINT)))
    assert early.received == [] and sent == [(os.kill, (os.getpid(), signal.SIGINT))]
    sent.clear()
    early.received = [signal.SIGINT, signal.SIGTERM]
    early._unraisable(SimpleNamespace(exc_value=sig.EarlySignal(signal.SIGINT)))
    assert early.received == [signal.SIGINT, signal.SIGTERM] and sent == []


def test_twice_names_the_signals_received():
    from apextui.cli.signals import StopOnSignals

    s = StopOnSignals(lambda n: None, lambda n: None)
    s.received = [signal.SIGINT, signal.SIGTERM]
    assert s.twice() == "interrupted, then terminated (SIGTERM)"
    s.received = [signal.SIGINT, signal.SIGINT]
    assert s.twice() == "interrupted twice"


@pytest.mark.slow
def test_two_signals_at_start_up_never_give_an_end_without_a_start():
    """INT then TERM 10 ms apart at moments through start-up: no JSON at all, or `start` first and one `end`
    naming both signals; never a traceback. A signal that lands while Python itself still starts (`site`: no
    apextui code has run, as in test_sigint_while_importing_exits_130_without_traceback) is out of apextui's reach;
    on a loaded box the first moments can all be that early, so later ones are tried until one is apextui's."""
    delays, reached = [0.2, 0.5, 0.9, 1.4, 2.0], 0
    while delays:
        delay = delays.pop(0)
        proc = _popen(["--preset", "adamw", "--json", "--steps", "100000", "--device", "cpu"])
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        out, err = _communicate(proc, 120)
        if "init_import_site" in err and in_pythons_startup(err, proc.returncode):  # Python's own start-up had it
            if not delays and not reached and delay < 60:
                delays.append(delay * 2)
            continue
        reached += 1
        assert proc.returncode in (130, 143), (delay, err)
        assert "Traceback" not in err, (delay, err)
        events = [json.loads(line) for line in out.splitlines()]
        if events:
            assert events[0]["event"] == "start" and events[-1]["event"] == "end", (delay, out)
            assert [e["event"] for e in events].count("end") == 1
            if events[-1]["error"] is not None:
                assert events[-1]["error"] == "interrupted, then terminated (SIGTERM)", (delay, events[-1])
    assert reached, "every signal landed in Python's own start-up, before any apextui code"


def test_a_printer_closed_before_its_start_line_prints_nothing_more_and_after_it_may_end():
    """A second signal's rule for json_run and torchrun's rank 0 alike (`JsonLinePrinter.close_unstarted`): before
    the `start` line, no JSON at all (neither the start line later nor an end line); after it, an end line."""
    import io

    from apextui.cli.json_lines import JsonLinePrinter

    out = io.StringIO()
    unstarted = JsonLinePrinter(out)
    assert unstarted.close_unstarted() is True
    unstarted.emit({"event": "start"})
    unstarted.emit({"event": "end", "status": "stopped"})
    assert out.getvalue() == ""
    started = JsonLinePrinter(out)
    started.emit({"event": "start"})
    assert started.close_unstarted() is False
    started.emit({"event": "end", "status": "stopped"})
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["start", "end"]
