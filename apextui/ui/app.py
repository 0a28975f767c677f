"""The apextui terminal UI: doctor status, preset picker, live run, comparison table.

The UI only shows and controls: a run trains in a worker process
(`core.worker.ProcessRunner`; its snapshots come back on a reader thread) and
its snapshots go to a `RunBridge`, which coalesces them into at most
one pending `RunUpdated` message; the app redraws the live numbers at most every
`refresh_interval` (0.5 s) and the sparklines every `spark_interval` (1 s).
Nothing here imports torch on the UI thread: the device probe (which does) and
the Apex doctor run in background threads started after the first paint.

`make_app(...)` builds the app with injectable parts (doctor report provider,
runner factory, device probe, preset list) so tests can run it with fakes;
`run_app(...)` is what `apextui` (without --json) calls.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, OptionList

from apextui.core.atomic import write_atomic as write_text_atomic
from apextui.core.presets import Preset
from apextui.core.run.runner import RunHandle, RunnerFactory, thread_runner_factory

from ..core import results
from . import contrast, history, scrollbars
from .bridge import RunBridge, RunView
from .doctor_view import DoctorLike, ReportProvider, default_report_provider
from .messages import DoctorFailed, DoctorReady, ProbeDone, ProbeFailed, RunUpdated
from .probe import EXIT_UNAVAILABLE, Probe, ProbeFn, probe_environment
from .run_log import RunLog
from .widgets.comparison_table import ComparisonTable
from .widgets.live_run import LiveRun
from .widgets.monitor_panel import MonitorPanel
from .widgets.preset_picker import PresetPicker
from .widgets.status_pane import StatusPane

REFRESH_S = 0.5  # live numbers: at most 2 redraws a second (the issue allows ~10; each costs the training GIL time)
SPARK_REFRESH_S = 1.0  # the loss and step-time sparklines, the costly part of a redraw: once a second
QUIT_JOIN_S = 30.0  # how long quitting waits for a stopped run to wind down
MAX_RUN_LOGS = 50  # the log screen (o) keeps the output of the last 50 runs (each at most 256 KiB)

EXIT_HANGUP = 128 + signal.SIGHUP

_gc_frozen = False


def _stderr(message: str) -> None:
    """Best effort: after a hang-up there may be no terminal left to print to."""
    try:
        print(f"apextui: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def freeze_gc_once() -> None:
    """Move everything alive now (torch, Textual, the widgets) out of the cyclic GC's reach, once per process.

    A full collection otherwise walks those few hundred thousand long-lived objects, holding the GIL for
    ~100 ms in whichever thread triggers it, the training thread included; after `gc.freeze()` it only
    walks what was allocated since (about 50 ms -> a few ms on the development machine).
    """
    global _gc_frozen
    if _gc_frozen:
        return
    _gc_frozen = True
    gc.collect()
    gc.freeze()


def default_runner_factory(preset: Preset, device: str, callback: Callable[[Any], None], *,
                           steps: int | None = None, sample_interval: float = 1.0) -> Any:
    """Train in a worker process: a training thread beside the UI's cost a host-bound step 5-8 % on
    the H200 (GIL), and a crash or out-of-memory in the worker cannot take the UI down."""
    from apextui.core.run.worker import ProcessRunner

    return ProcessRunner(preset, device, callback, steps=steps, sample_interval=sample_interval)


def env_runner_factory() -> RunnerFactory:
    """The worker process, or a thread of this process when APEXTUI_WORKER=thread."""
    return thread_runner_factory if os.environ.get("APEXTUI_WORKER") == "thread" else default_runner_factory


STOPPED_WHILE_COMPILING = "stopped while compiling (s pressed twice)"


@dataclass
class ActiveRun:
    run_id: int
    preset: Preset
    runner: RunHandle
    bridge: RunBridge
    stopping: bool = False


class ApexTuiApp(App[None]):
    """Use `make_app` to build one."""

    CSS_PATH = "app.tcss"
    TITLE = "apextui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: every action (commands.py), start <preset> for each preset
    BINDINGS = [
        Binding("s", "stop", "Stop"),
        Binding("d", "doctor", "Doctor"),
        Binding("a", "advise", "Advise"),
        Binding("w", "save", "Save JSON"),
        Binding("p", "screenshot", "SVG"),
        Binding("l", "load", "Load"),
        Binding("q", "quit", "Quit"),
        # help, details, log, export (help_screen.py lists them; the footer has room for ? only at 80 columns)
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", show=False),
        Binding("i", "details", "Details", show=False),
        Binding("o", "log", "Log", show=False),
        Binding("e", "export", "Export", show=False),
        # Textual binds ctrl+c to a "press ctrl+q to quit" hint; here it quits, as q does (priority: even
        # from the load screen's input)
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, *, presets: Sequence[Preset], report_provider: ReportProvider,
                 runner_factory: RunnerFactory, probe: ProbeFn, device: str = "auto",
                 steps: int | None = None, sample_interval: float = 1.0, preselect: str | None = None,
                 autostart: bool = False, load: Iterable[str | Path] = (), save_dir: str | Path = ".",
                 refresh_interval: float = REFRESH_S, spark_interval: float = SPARK_REFRESH_S,
                 preset_errors: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__()
        scrollbars.install()
        contrast.install(self)  # NO_COLOR: greys, but a red "NOT INSTALLED" stays readable
        self.preset_errors = [tuple(e) for e in preset_errors]  # (path, message): user files that did not load
        self.refresh_interval = refresh_interval
        self.spark_interval = max(spark_interval, refresh_interval)
        self.presets = list(presets)
        self.report_provider = report_provider
        self.runner_factory = runner_factory
        self.probe_fn = probe
        self.requested_device = device
        self.steps = steps
        self.sample_interval = sample_interval
        self.preselect = preselect
        self.autostart = autostart
        self.load_paths = [Path(p) for p in load]
        self.save_dir = Path(save_dir)

        self.probe: Probe | None = None
        self.probe_error: str | None = None
        self.report: DoctorLike | None = None
        self.report_error: str | None = None
        self.active: ActiveRun | None = None
        self.latest_view: RunView | None = None
        self.renders = 0  # live-pane redraws (tests check the rate limit)
        self._run_id = 0
        self._pending_start: str | None = None
        self._last_render = 0.0
        self._last_spark = 0.0
        self._render_timer: Timer | None = None
        self._drawn_view: RunView | None = None
        self._poll_timer: Timer | None = None
        self._spark_timer: Timer | None = None
        self._spark_stale = False
        self._quitting = False
        self.hangup_saved: Path | None = None  # where the results went when the terminal hung up
        # what became of them, printed on stderr once Textual has given the terminal back (run_app): while the
        # app runs, Textual captures sys.stderr
        self.hangup_message = ""
        self.advice_job: Any = None  # `a`: the advice measuring in the background (screens/advise_screen.py)
        self._hung_up = False
        self.run_logs: list[RunLog] = []  # every run's worker output, for the log screen (o)
        self._saved_session_rows = 0  # session rows already in a results file (w, or the save on quit)
        self.quit_saved: Path | None = None  # where quitting saved the unsaved runs
        self._toasts_until: dict[tuple[str, str], float] = {}  # (message, title) -> its toast's expiry

    # ---- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            with Vertical(id="left"):
                yield StatusPane(id="status")
                yield PresetPicker(self.presets, id="picker")
            with Vertical(id="right"):
                yield LiveRun(id="live")
                yield MonitorPanel(id="monitor")
        yield ComparisonTable(id="table")
        yield Footer(show_command_palette=False)  # 80 columns hold the keys and "? Help", not "^p palette" too

    @property
    def picker(self) -> PresetPicker:
        return self.query_one(PresetPicker)

    @property
    def live(self) -> LiveRun:
        return self.query_one(LiveRun)

    @property
    def table(self) -> ComparisonTable:
        return self.query_one(ComparisonTable)

    def on_mount(self) -> None:
        picker = self.picker
        picker.highlight_preset(self.preselect)
        picker.focus()
        self._show_highlighted()
        for _path, message in self.preset_errors:  # user preset files that did not load; the app runs on
            self.notify(message, title="preset file skipped", severity="error", timeout=30, markup=False)
        for path in self.load_paths:
            self.load_results(path)
        if self.autostart and self.preselect:
            self._pending_start = self.preselect
            self._show_highlighted()
        self.set_interval(1.0, self._show_advice_measuring)
        # torch (device probe) and the doctor only after the first frame is on screen
        self.call_after_refresh(self._start_probes)
        try:  # the SSH connection drops: stop the run, save the results, exit
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.on_hangup)
        except (NotImplementedError, RuntimeError, ValueError):  # not on the main thread, or not POSIX
            pass

    def on_unmount(self) -> None:
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def _start_probes(self) -> None:
        # Daemon threads rather than Textual thread workers: those run in the loop's default executor,
        # which the interpreter joins at exit, so quitting during a slow doctor (its child process can
        # take up to minutes on a broken install) would hang the terminal until it finished.
        for target, name in ((self._probe_worker, "apextui-probe"), (self._doctor_worker, "apextui-doctor")):
            threading.Thread(target=target, name=name, daemon=True).start()

    # ---- background probes (daemon threads; they only post messages) -----------------------
    def _post_from_thread(self, message: Message) -> None:
        try:
            self.post_message(message)
        except RuntimeError:  # the app has exited and its event loop is closed: nobody to tell
            pass

    def _probe_worker(self) -> None:
        from apextui.core.env import DeviceUnavailable

        try:
            probe = self.probe_fn(self.requested_device, self.presets)
        except DeviceUnavailable as exc:
            self._post_from_thread(ProbeFailed(str(exc), EXIT_UNAVAILABLE))
            return
        except Exception as exc:  # noqa: BLE001
            self._post_from_thread(ProbeFailed(f"device probe failed: {type(exc).__name__}: {exc}", 1))
            return
        self._post_from_thread(ProbeDone(probe))
        if self.runner_factory is default_runner_factory:
            try:  # fork the workers from a server that has imported torch: later runs start at once
                from apextui.core.run.worker import prestart

                prestart()
            except Exception:  # noqa: BLE001 - the first run then starts the server itself
                pass

    def _doctor_worker(self) -> None:
        try:
            report = self.report_provider()
        except Exception as exc:  # noqa: BLE001
            self._post_from_thread(DoctorFailed(f"{type(exc).__name__}: {exc}"))
            return
        self._post_from_thread(DoctorReady(report))

    def on_probe_done(self, message: ProbeDone) -> None:
        freeze_gc_once()  # torch is imported now; no run is active yet
        probe = self.probe = message.probe
        self.query_one(StatusPane).set_device(probe.device_line, gpu=probe.gpu)
        self.picker.set_availability(probe.availability, probe.device)
        if probe.device == "cpu" and self.requested_device != "cpu":
            self.notify(probe.device_note, title="no GPU", severity="warning", timeout=8)
        self._show_highlighted()
        self._start_pending()

    @property
    def doctor_done(self) -> bool:
        return self.report is not None or self.report_error is not None

    def _start_pending(self) -> None:
        if self._pending_start is not None and self.probe is not None and self.doctor_done:
            name, self._pending_start = self._pending_start, None
            self.start_preset(name)

    def on_probe_failed(self, message: ProbeFailed) -> None:
        self.probe_error = message.error
        self._pending_start = None
        self.query_one(StatusPane).set_device_error(message.error)
        if message.exit_code == EXIT_UNAVAILABLE:
            self.exit(return_code=EXIT_UNAVAILABLE, message=f"apextui: error: {message.error}")
        else:
            self.notify(message.error, severity="error", timeout=10)

    def on_doctor_ready(self, message: DoctorReady) -> None:
        self.report = message.report
        self._show_highlighted()
        try:
            self.query_one(StatusPane).set_report(message.report)
        except Exception as exc:  # noqa: BLE001 - an unexpected report shape must not kill the UI
            self.report_error = f"cannot show the report: {type(exc).__name__}: {exc}"
            self.query_one(StatusPane).set_error(self.report_error)
        self._start_pending()

    def on_doctor_failed(self, message: DoctorFailed) -> None:
        self.report_error = message.error
        self.query_one(StatusPane).set_error(message.error)
        self._start_pending()

    # ---- preset picker -------------------------------------------------------------------
    def _show_highlighted(self) -> None:
        if self.active is not None or self.latest_view is not None:
            return
        preset = self.picker.highlighted_preset
        avail = self.probe.availability.get(preset.name) if (self.probe and preset) else None
        waiting = None
        if preset is not None and self._pending_start == preset.name:  # not "enter: start": it will start
            waiting = "device probe" if self.probe is None else "Apex doctor"
        self.live.show_preset(preset, avail, self.probe.device if self.probe else None, waiting=waiting)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if self.active is None:
            self.latest_view = None  # the pane describes the highlighted preset again
            self._show_highlighted()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.start_preset(event.option.id)

    # ---- runs ----------------------------------------------------------------------------
    def start_preset(self, name: str) -> bool:
        """Start a preset by name; False (with a notification) when it cannot start now."""
        preset = self.picker.preset(name)
        if preset is None:
            self.notify(f"unknown preset {name!r}", severity="error")
            return False
        if self.active is not None:
            self.notify(f"{self.active.preset.name} is running: press s to stop it first", severity="warning")
            return False
        if self.advice_job is not None and self.advice_job.running:
            self.notify("the advice is measuring: press a, then s to stop it first", severity="warning")
            return False
        if self.probe_error is not None:
            self.notify(f"{name} cannot start: {self.probe_error}", severity="error", timeout=10)
            return False
        if self.probe is None or not self.doctor_done:
            # the doctor's CUDA smoke tests (and its torch import) would disturb the timing
            self._pending_start = name
            what = "device probe" if self.probe is None else "Apex doctor"
            self.notify(f"{name} starts as soon as the {what} finishes…", timeout=3)
            self._show_highlighted()
            return False
        avail = self.probe.availability.get(name)
        if avail is None or not avail.ok:
            reason = avail.reason if avail else "not checked"
            fix = f"\nfix: {avail.fix}" if avail and avail.fix else ""
            self.notify(f"{name} cannot run here: {reason}{fix}", title="unavailable", severity="error", timeout=10)
            return False
        from apextui.core.memory import refusal

        too_big = refusal(preset, self.probe.device, self.steps or preset.steps)
        if too_big:
            self.notify(too_big.replace(", or --force to run anyway", ""), title="does not fit",
                        severity="error", timeout=15)
            return False
        self._run_id += 1
        bridge = RunBridge(self._run_id, self.post_message, min_interval=self.refresh_interval)
        log: RunLog | None = None
        try:
            runner = self.runner_factory(preset, self.probe.device, bridge, steps=self.steps,
                                         sample_interval=self.sample_interval)
            log = RunLog.of_runner(f"{name} (run {self._run_id})", runner)  # open before the worker writes
            runner.start()
        except Exception as exc:  # noqa: BLE001
            if log is not None:
                log.close()
            self.notify(f"{name} could not start: {type(exc).__name__}: {exc}", severity="error", timeout=10,
                        markup=False)
            return False
        self.active = ActiveRun(self._run_id, preset, runner, bridge)
        self.run_logs.append(log)
        del self.run_logs[:-MAX_RUN_LOGS]
        self.latest_view = None
        self._last_spark = 0.0  # a run's first redraw always draws its sparklines
        self.query_one(MonitorPanel).reset()
        self.live.begin(preset)
        self.refresh_bindings()
        return True

    def on_run_updated(self, message: RunUpdated) -> None:
        active = self.active
        if active is None or message.bridge is not active.bridge:
            message.bridge.take()
            return
        self._pull(active)

    def _pull(self, active: ActiveRun) -> None:
        """Take the bridge's latest state; while the run lasts, look again refresh_interval later."""
        view = active.bridge.take()
        if view is None:
            return
        self.latest_view = view
        if view.finished:
            self._render_view()
            self._finish(active, view)
            return
        self._request_render()
        if self._poll_timer is None:
            self._poll_timer = self.set_timer(self.refresh_interval, self._poll)

    def _poll(self) -> None:
        self._poll_timer = None
        active = self.active
        if active is not None and active.bridge.dirty:
            self._pull(active)

    def _request_render(self) -> None:
        """Redraw now if the last redraw is refresh_interval old, else once when it will be (never more often)."""
        now = time.monotonic()
        due = self._last_render + self.refresh_interval
        if now >= due:
            self._render_view()
        elif self._render_timer is None:
            self._render_timer = self.set_timer(due - now, self._render_due)

    def _render_due(self) -> None:
        self._render_timer = None
        if self.active is not None and (self.latest_view is not self._drawn_view or self._spark_stale):
            self._request_render()

    def _spark_due(self) -> None:
        """The sparklines were left out of the last redraw and are due now: redraw (rate limit kept)."""
        self._spark_timer = None
        if self.active is not None and self._spark_stale:
            self._request_render()

    def _render_view(self) -> None:
        view = self.latest_view
        if view is None:
            return
        if self._render_timer is not None:
            self._render_timer.stop()
            self._render_timer = None
        now = time.monotonic()
        self._last_render = now
        self._drawn_view = view
        self.renders += 1
        stopping = self.active is not None and self.active.stopping
        sparklines = view.finished or now - self._last_spark >= self.spark_interval
        self._spark_stale = not sparklines
        if sparklines:
            self._last_spark = now
            if self._spark_timer is not None:
                self._spark_timer.stop()
                self._spark_timer = None
        elif self._spark_timer is None:  # draw them once they are due, even if no new data comes
            self._spark_timer = self.set_timer(self._last_spark + self.spark_interval - now, self._spark_due)
        self.live.show_view(view, stopping=stopping, sparklines=sparklines)
        self.query_one(MonitorPanel).update_reading(view.snapshot.monitor, view.monitor)

    def _finish(self, active: ActiveRun, view: RunView) -> None:
        for timer in (self._poll_timer, self._render_timer, self._spark_timer):
            if timer is not None:
                timer.stop()
        self._poll_timer = self._render_timer = self._spark_timer = None
        active.bridge.close()
        self.active = None
        if self.run_logs:
            self.run_logs[-1].drain()  # the worker may delete its log now: read the rest first
        snap = view.snapshot
        device = self.probe.device if self.probe else "cpu"
        env = self.probe.env if self.probe else None
        self.table.add_result(results.row_from_snapshot(snap, active.preset, device, env))
        if snap.status == "failed":
            self.notify(f"{active.preset.name} failed: {snap.error}", severity="error", timeout=10, markup=False)
        self.refresh_bindings()

    def action_stop(self) -> None:
        active = self.active
        if active is None:
            self.notify("nothing is running", timeout=2)
            return
        compiling = self._compiling(active)
        if not active.stopping:
            active.stopping = True
            active.runner.stop()
            self.live.show_stopping(compiling=compiling)
        elif compiling and active.runner.kill(STOPPED_WHILE_COMPILING):  # a worker process: ended, compile and all
            self.notify(f"ended {active.preset.name}'s worker process while it compiled", timeout=4)
        elif compiling:
            self.notify("this run trains in the app's own process: it stops once compilation ends", timeout=4)

    def _compiling(self, active: ActiveRun) -> bool:
        view = self.latest_view
        return view is not None and view.run_id == active.run_id and view.snapshot.status == "compiling"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # s and w stay enabled with nothing to stop or save: pressed, they say so (a disabled key said nothing)
        return True

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """As App.notify, but a toast already on screen with the same words is not stacked again (rapid
        Enter or s pressed four times showed four identical toasts over the run pane)."""
        key, now = (message, title), time.monotonic()
        if self._toasts_until.get(key, 0.0) > now:
            return
        self._toasts_until = {k: t for k, t in self._toasts_until.items() if t > now}
        self._toasts_until[key] = now + (self.NOTIFICATION_TIMEOUT if timeout is None else timeout)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def clear_notifications(self) -> None:
        self._toasts_until.clear()
        super().clear_notifications()

    # ---- quitting ------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Stop an active run and wait for it (the UI keeps drawing), then exit. Again: exit now."""
        active = self.active
        if active is not None and not self._quitting:
            self._quitting = True
            active.stopping = True
            active.runner.stop()
            self.live.show_stopping()
            await asyncio.to_thread(active.runner.join, QUIT_JOIN_S)
        self.save_unsaved_on_quit(active)
        self.shutdown_runs(0)
        self.exit()

    def on_hangup(self) -> None:
        """SIGHUP: the terminal is gone. Stop the run, save every result of the session, exit 129."""
        if not self._hung_up:
            self._hung_up = True
            asyncio.get_running_loop().create_task(self._save_and_exit_after_hangup())

    async def _save_and_exit_after_hangup(self) -> None:
        active = self.active
        rows = []
        if active is not None:
            active.stopping = True
            active.runner.stop()
            await asyncio.to_thread(active.runner.join, QUIT_JOIN_S)
            final = getattr(active.runner, "result", None)
            if final is not None and self.active is active:  # its last update is not in the table yet
                rows.append(results.row_from_snapshot(final, active.preset, self.probe.device if self.probe else
                                                      "cpu", self.probe.env if self.probe else None))
        rows = [r for r in self.table.rows_data if r.source == results.SESSION] + rows  # as w saves
        if rows:
            try:
                saved = results.save_session(rows, self.save_dir, env=self.probe.env if self.probe else None)
            except OSError as exc:
                self.hangup_message = f"terminal hung up; could not save the results: {exc}"
            else:
                self.hangup_saved = saved.path
                why = f"{saved.fallback_reason}; " if saved.fallback_reason else ""
                self.hangup_message = f"terminal hung up; {why}saved {len(rows)} run(s) to {saved.path.resolve()}"
        self.shutdown_runs(0)
        self.exit(return_code=EXIT_HANGUP)

    def shutdown_runs(self, timeout: float = QUIT_JOIN_S) -> bool:
        """Stop any active run (and advice) and wait up to `timeout` s; True when nothing is left running."""
        advice_over = self.advice_job.shutdown(timeout) if self.advice_job is not None else True
        active = self.active
        if active is None:
            return advice_over
        active.runner.stop()
        active.bridge.close()
        return (bool(active.runner.join(timeout)) if timeout else not active.runner.is_alive()) and advice_over

    def last_result(self) -> dict[str, Any] | None:
        """The last run finished in this session as the headless `end` event has it: its summary plus
        status, preset and device (None before any run finished). For scripts and benchmarks."""
        rows = [r for r in self.table.rows_data if r.source == results.SESSION]
        if not rows:
            return None
        r = rows[-1]
        return {**r.summary, "status": r.status, "error": r.error, "preset": r.preset, "device": r.device}

    def _show_advice_measuring(self) -> None:
        """Once a second: while the advice measures in the background, the run pane's subtitle says so."""
        job = self.advice_job
        text = ""
        if job is not None and job.running:
            _latest, done, total, _lines = job.state()
            text = f"advice measuring · {done}/{total or '…'} runs · a: show"
        live = self.live
        if (live.border_subtitle or "") != text:
            live.border_subtitle = text

    # ---- doctor, results, screenshot -----------------------------------------------------
    def action_advise(self) -> None:
        from .screens.advise_screen import open_advice

        open_advice(self)

    def action_doctor(self) -> None:
        from .screens.report_screen import ReportScreen

        self.push_screen(ReportScreen(self.report, self.report_error))

    def action_save(self) -> None:
        # this session's runs only: loaded rows are in their own files already, and saved again they came
        # back as duplicates that could not be told apart
        rows = [r for r in self.table.rows_data if r.source == results.SESSION]
        if not rows:
            loaded = " (loaded runs are in their own files)" if self.table.rows_data else ""
            self.notify(f"no finished runs of this session to save yet{loaded}", severity="warning", timeout=4)
            return
        try:
            saved = results.save_session(rows, self.save_dir, env=self.probe.env if self.probe else None)
        except OSError as exc:
            self.notify(f"could not save results: {exc}", severity="error", timeout=10, markup=False)
            return
        why = f"{saved.fallback_reason}; " if saved.fallback_reason else ""
        self._saved_session_rows = sum(r.source == results.SESSION for r in rows)
        self._copy_to_history(saved.path)
        self.notify(f"{why}saved {len(rows)} run{'s' if len(rows) != 1 else ''} to\n{_short_path(saved.path)}",
                    title="results saved", severity="warning" if why else "information", timeout=8, markup=False)

    def action_screenshot(self) -> None:
        filename = f"apextui-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        try:
            path = self.save_screenshot(filename=filename, path=str(self.save_dir))
        except OSError as exc:
            self.notify(f"could not save the screenshot: {exc}", severity="error", timeout=10)
            return
        self.notify(f"screenshot saved to\n{_short_path(Path(path))}", title="SVG saved", timeout=8, markup=False)

    def action_load(self) -> None:
        from .screens.load_screen import LoadScreen

        def loaded(path: str | None) -> None:
            if path:
                self.load_results(path)

        self.push_screen(LoadScreen(history.recent_results([history.history_dir(), self.save_dir])), loaded)

    def load_results(self, path: str | Path) -> int:
        """Add a results file's runs to the comparison table; the number added (0 on error)."""
        try:
            rows = results.load_results(path)
        except results.ResultsError as exc:
            self.notify(str(exc), title="cannot load results", severity="error", timeout=10, markup=False)
            return 0
        shown = self.table.rows_data
        new = [r for r in rows if r not in shown]  # the same file loaded again adds nothing twice
        self.table.add_results(new)
        again = f" ({len(rows) - len(new)} already shown)" if len(new) < len(rows) else ""
        self.notify(f"loaded {len(new)} run{'s' if len(new) != 1 else ''} from {path}{again}", timeout=4,
                    markup=False)
        self.refresh_bindings()
        return len(new)


    # ---- help, command palette, run details, worker log, export, history ---------------------
    def action_help(self) -> None:
        from .screens.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands (theme, keys, quit…), then every action of apextui and start <preset>."""
        from .commands import app_commands

        yield from super().get_system_commands(screen)
        yield from app_commands(self)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a comparison row: its full record."""
        if isinstance(event.data_table, ComparisonTable):
            self.show_details(event.cursor_row)

    def action_details(self) -> None:
        self.show_details(self.table.cursor_row)

    def show_details(self, index: int) -> None:
        from .screens.run_details_screen import RunDetailsScreen

        rows = self.table.rows_data
        if not rows:
            self.notify("no finished runs yet: their details appear here once they end", timeout=3)
            return
        row = rows[min(max(index, 0), len(rows) - 1)]
        self.push_screen(RunDetailsScreen(row, rows))

    def action_log(self) -> None:
        from .screens.log_screen import LogScreen

        self.push_screen(LogScreen(lambda: self.run_logs))

    def action_export(self, kinds: str = "csv,md") -> None:
        """CSV and Markdown of the comparison table, in the start folder (the data folder if it is read-only)."""
        from . import export

        rows = self.table.rows_data
        if not rows:
            self.notify("no finished runs to export yet", severity="warning", timeout=3)
            return
        written = []
        stem = f"apextui-results-{time.strftime('%Y%m%d-%H%M%S')}"
        texts = {"csv": export.to_csv, "md": export.to_markdown}
        for kind in kinds.split(","):
            text = texts[kind](rows)
            for folder in (self.save_dir, history.history_dir()):
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    written.append(write_text_atomic(folder / f"{stem}.{kind}", text))
                    break
                except OSError as exc:
                    error = exc
            else:
                self.notify(f"could not export {kind}: {error}", severity="error", timeout=10, markup=False)
        if written:
            self.notify("\n".join(str(p.resolve()) for p in written), title="exported", timeout=8, markup=False)

    def action_export_csv(self) -> None:
        self.action_export("csv")

    def action_export_markdown(self) -> None:
        self.action_export("md")

    def _copy_to_history(self, path: Path) -> None:
        """Saved results accumulate in the run history folder too (best effort: it is a copy)."""
        try:
            target = history.history_dir() / path.name
            if path.resolve().parent != target.parent.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomic(target, path.read_text(encoding="utf-8"))
        except OSError:
            pass

    @property
    def unsaved_rows(self) -> list[results.ResultRow]:
        """Session runs finished since the last save (loaded rows are in their file already)."""
        return [r for r in self.table.rows_data if r.source == results.SESSION][self._saved_session_rows:]

    def save_unsaved_on_quit(self, stopped: ActiveRun | None = None) -> Path | None:
        """Quitting (q, ctrl+q, ctrl+c) saves the session's runs to the run history folder when some were not
        saved with w, like a hang-up does, so no run is lost; the path is printed once the terminal is back."""
        extra = []
        if stopped is not None and self.active is stopped:  # its last update has not reached the table yet
            final = getattr(stopped.runner, "result", None)
            if final is not None:
                extra.append(results.row_from_snapshot(final, stopped.preset, self.probe.device if self.probe
                                                       else "cpu", self.probe.env if self.probe else None))
        if not self.unsaved_rows and not extra:
            return None
        rows = [r for r in self.table.rows_data if r.source == results.SESSION] + extra
        try:
            saved = history.save_to_history(rows, env=self.probe.env if self.probe else None)
        except OSError as exc:
            self.hangup_message = f"could not save the unsaved runs on quitting: {exc}"
            return None
        self.quit_saved = saved.path
        self._saved_session_rows = len(rows)
        self.hangup_message = f"saved {len(rows)} run(s) of this session to {saved.path.resolve()}"
        return saved.path

def _short_path(path: Path) -> str:
    """The path relative to the working directory (or ~) when inside it: a toast then shows the file's name
    on one line rather than breaking it."""
    resolved = path.resolve()
    for base, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return prefix + str(resolved.relative_to(base))
        except ValueError:
            continue
    return str(resolved)


def make_app(*, preset: Preset | None = None, device: str = "auto", steps: int | None = None,
             sample_interval: float = 1.0, presets: Sequence[Preset] | None = None,
             report_provider: ReportProvider | None = None, runner_factory: RunnerFactory | None = None,
             probe: ProbeFn | None = None, autostart: bool | None = None, load: Iterable[str | Path] = (),
             save_dir: str | Path = ".", refresh_interval: float = REFRESH_S,
             spark_interval: float = SPARK_REFRESH_S,
             preset_errors: Iterable[tuple[str, str]] | None = None) -> ApexTuiApp:
    """Build the app. `preset` is preselected and (unless autostart=False) started once the device is
    known. `refresh_interval` / `spark_interval`: the least time between redraws of the live numbers /
    of the loss and step-time sparklines, in seconds. Without `presets`: the shipped and the user's
    presets (`core.presets.load_all`); user files that do not load are shown as errors."""
    found: Iterable[tuple[str, str]] = ()
    if presets is None:
        from apextui.core.presets import load_all

        presets, found = load_all()
    presets = list(presets)
    if preset is not None:  # a preset file given on the command line joins (or replaces) the list
        names = [p.name for p in presets]
        if preset.name in names:
            presets[names.index(preset.name)] = preset
        else:
            last = max((i for i, p in enumerate(presets) if p.workload == preset.workload), default=len(presets) - 1)
            presets.insert(last + 1, preset)
    return ApexTuiApp(
        presets=presets,
        report_provider=report_provider or default_report_provider,
        runner_factory=runner_factory or env_runner_factory(),
        probe=probe or probe_environment,
        device=device, steps=steps, sample_interval=sample_interval,
        preselect=preset.name if preset else None,
        autostart=(preset is not None) if autostart is None else autostart,
        load=load, save_dir=save_dir, refresh_interval=refresh_interval, spark_interval=spark_interval,
        preset_errors=found if preset_errors is None else preset_errors,
    )


def run_app(preset: Preset | None = None, device: str = "auto", steps: int | None = None,
            sample_interval: float = 1.0, load: Sequence[str | Path] = (), nproc: int | None = None) -> int:
    """Run the TUI in this terminal; the process exit code (0, or 3 when --device cuda is unavailable).
    `nproc`: every run data-parallel on that many ranks (core/run/launched.py)."""
    factory = None
    if nproc is not None:
        from apextui.core.run.launched import launched_factory

        factory = launched_factory(nproc)
    app = make_app(preset=preset, device=device, steps=steps, sample_interval=sample_interval, load=load,
                   runner_factory=factory)
    if app.runner_factory is default_runner_factory:
        from apextui.core.run.worker import prestart

        prestart()  # before Textual takes over sys.stderr; torch loads in the server meanwhile
    try:
        app.run()
    finally:
        app.shutdown_runs(QUIT_JOIN_S)  # however the app ended, never leave a run training
        if app.hangup_message:
            _stderr(app.hangup_message)
    return app.return_code or 0
