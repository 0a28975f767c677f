"""The TUI never outlives its terminal: after a hang-up it saves, then ends within a bounded time, even where
Textual's own shutdown blocks (hangup_watchdog.py)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest
from ui_fakes import alive, read_pty_until

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "OMP_NUM_THREADS": "1"}


def test_a_blocked_shutdown_is_ended_after_the_save():
    """The main thread blocked for good (as in Textual's writer queue): the watchdog saves, then exits 129."""
    script = (
        "import sys, time, threading\n"
        "from apextui.ui.hangup_watchdog import HangupWatchdog\n"
        "w = HangupWatchdog(lambda: 'terminal hung up; saved 2 run(s) to /x', lambda: print('killed', flush=True),"
        " None).start()\n"
        "w.trigger()\n"
        "threading.Event().wait()  # blocked, as App._shutdown was\n"
    )
    # blocked for good without the watchdog: ending within the timeout (a bound on a hang, not a speed) is the test
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 129, proc.stderr
    assert proc.stdout == "killed\n" and "apextui: terminal hung up; saved 2 run(s) to /x" in proc.stderr


def _controlling_tty() -> None:  # in the child, after setsid: the pty becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_until_drawn(fd: int, seconds: float) -> bool:
    """Drain the TUI's output until it has drawn a screen (a fair amount of output) or `seconds` pass."""
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                got += len(os.read(fd, 65536))
            except OSError:
                return False
            if got > 20000:
                return True
    return got > 0


@pytest.mark.slow
def test_closing_the_terminal_under_load_leaves_no_process(tmp_path):
    """Three TUIs on real ptys (each its controlling terminal), two CPU burners; the pty's master closes (the
    terminal window or SSH connection goes away): every TUI and its children are gone within seconds."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    procs, masters = [], []
    try:
        for i in range(3):
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, b"\x18\x00\x50\x00\x00\x00\x00\x00")  # 24x80
            work = tmp_path / str(i)
            work.mkdir()
            procs.append(subprocess.Popen([sys.executable, "-m", "apextui", "--device", "cpu"], stdin=slave,
                                          stdout=slave, stderr=slave, cwd=work, env=ENV, start_new_session=True,
                                          preexec_fn=_controlling_tty))
            os.close(slave)
            masters.append(master)
        for master in masters:
            assert _read_until_drawn(master, 60), "the TUI drew nothing"
        family = {p.pid: [c.pid for c in psutil.Process(p.pid).children(recursive=True)] for p in procs}
        for master in masters:
            os.close(master)  # the terminal goes away: the kernel sends SIGHUP to its foreground processes
        deadline = time.monotonic() + 60  # a bound on a hang: the TUIs end within seconds unless the box is loaded
        for p in procs:
            p.wait(max(0.1, deadline - time.monotonic()))
        left = [pid for p in procs for pid in (p.pid, *family[p.pid]) if alive(pid)]
        end = time.monotonic() + 30  # the worker and the forkserver notice their parent's end by polling: wait for it
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = [pid for pid in left if alive(pid)]
        assert left == []
        assert all(p.returncode in (129, 0) for p in procs), [p.returncode for p in procs]
    finally:
        for b in burners:
            b.kill()
            b.wait()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_sigcont_restarts_the_driver_only_after_its_own_suspend():
    """The kernel sends SIGCONT with a hang-up's SIGHUP: Textual's SIGCONT handler (restart application mode)
    runs only after its own SIGTSTP (ctrl+z)."""
    import signal

    from apextui.ui.hangup_watchdog import resume_only_after_suspend

    calls: list[str] = []
    saved = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    signal.signal(signal.SIGTSTP, lambda *_: calls.append("tstp"))  # as Textual's driver: its own handlers
    signal.signal(signal.SIGCONT, lambda *_: calls.append("cont"))
    try:
        restore = resume_only_after_suspend()
        signal.raise_signal(signal.SIGCONT)  # a hang-up's: no restart
        assert calls == []
        signal.raise_signal(signal.SIGTSTP)  # ctrl+z, then fg
        signal.raise_signal(signal.SIGCONT)
        signal.raise_signal(signal.SIGCONT)  # a stray one after the resume: nothing
        assert calls == ["tstp", "cont"]
        restore()
        signal.raise_signal(signal.SIGCONT)
        assert calls == ["tstp", "cont", "cont"]
    finally:
        signal.signal(signal.SIGTSTP, saved[0])
        signal.signal(signal.SIGCONT, saved[1])


@pytest.mark.slow
def test_closing_the_terminal_ends_the_tui_without_the_watchdog(tmp_path):
    """Textual's own shutdown finishes after a hang-up: with the watchdog's forced exit 10 minutes away, the TUI
    still exits 129 within the 2 minutes that bound a hang (seconds on a quiet box). Before, the hang-up's SIGCONT
    restarted Textual's driver, whose new writer thread died on the gone terminal, and the shutdown blocked in
    Queue.put until the watchdog ended the process."""
    wrapper = ("import sys; import apextui.ui.hangup_watchdog as w; w.EXIT_GRACE_S = 600.0; "
               "from apextui.cli import main; sys.argv[0] = 'apextui'; sys.exit(main())")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, b"\x18\x00\x50\x00\x00\x00\x00\x00")  # 24x80
    # a run going: its redraws keep the writer queue busy (an idle screen wrote too little to fill it)
    proc = subprocess.Popen([sys.executable, "-c", wrapper, "--device", "cpu", "--preset", "fp32", "--steps",
                             "10000000"], stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, env=ENV,
                            start_new_session=True, preexec_fn=_controlling_tty)
    os.close(slave)
    try:
        assert read_pty_until(master, rb"/10000000", 90), "the run never showed its steps"
        os.close(master)
        proc.wait(120)  # TimeoutExpired (the test fails) where the shutdown blocked until the watchdog
        assert proc.returncode == 129
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
