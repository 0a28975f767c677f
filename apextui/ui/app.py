"""The apextui terminal UI: doctor status, preset picker, live run, comparison table.

The UI only shows and controls: a run trains in a worker process
(`core.worker.ProcessRunner`; its snapshots come back on a reader thread) and
its snapshots go to a `RunBridge`, which coalesces them into at most
one pending `RunUpdated` message; the app redraws the live numbers at most every
`refresh_interval` (0.5 s) and the sparklines every `spark_interval` (1 s).
Nothing here imports torch on the UI thread: the device probe (which does) and
the Apex doctor run in background threads started after the first paint.

The app is `AppBase` (app_base.py: settings, state, panes) with one mixin per subject: run_actions.py
(start, follow, stop a run), results_actions.py (save, load, export, run history), quitting.py (quit,
hang-up), screen_actions.py (the screens behind a, d, ?, i, o, ctrl+p, and the p screenshot).

`make_app(...)` builds the app with injectable parts (doctor report provider,
runner factory, device probe, preset list) so tests can run it with fakes;
`run_app(...)` is what `apextui` (without --json) calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
import textwrap
import threading
from dataclasses import replace
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import OptionList

from apextui.core.presets import Preset
from apextui.core.run.handle import RunnerFactory
from apextui.core.run.request import RunSettings
from apextui.core.run.worker import env_runner_factory, process_runner_factory as default_runner_factory

from .app_base import REFRESH_S, SPARK_REFRESH_S, ActiveRun, AppBase
from .doctor_view import ReportProvider, default_report_provider
from .hangup_watchdog import resume_only_after_suspend
from .interleaved_actions import InterleavedActions
from .messages import DoctorFailed, DoctorReady, ProbeDone, ProbeFailed
from .probe import ProbeFn, probe_environment
from .quitting import QUIT_JOIN_S, Quitting
from .run_actions import MAX_RUN_LOGS, STOPPED_WHILE_COMPILING, RunActions
from .screen_actions import ScreenActions
from .widgets.comparison_table import ComparisonTable
from .widgets.key_footer import KeyFooter
from .widgets.live_run import LiveRun
from .widgets.log_pane import LogPane
from .widgets.monitor_panel import MonitorPanel
from .widgets.preset_picker import PresetPicker
from .widgets.status_pane import StatusPane

__all__ = [
    "MAX_RUN_LOGS", "QUIT_JOIN_S", "REFRESH_S", "SPARK_REFRESH_S", "STOPPED_WHILE_COMPILING",
    "ActiveRun", "ApexTuiApp", "default_runner_factory", "env_runner_factory", "freeze_gc_once", "make_app",
    "run_app",
]

NARROW_COLS = 80  # below: fewer table columns, the key hints that matter, the main GPU/process metrics only
SHORT_ROWS = 24  # below: no AMP line in the run pane, so the loss curve keeps a line
WIDE_COLS = 150  # from: the worker output beside the comparison table
NOTE_COLUMNS = 44  # the start-up "no GPU" toast's lines: it stays right of the preset list (28 columns) at 80

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


class ApexTuiApp(InterleavedActions, RunActions, Quitting, ScreenActions, AppBase):
    """Use `make_app` to build one."""

    CSS_PATH = "app.tcss"
    TITLE = "apextui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: every action (commands.py), start <preset> for each preset
    _restore_sigcont: Callable[[], None] = staticmethod(lambda: None)  # Textual's SIGTSTP/SIGCONT, put back
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "stop", "Stop"),
        Binding("d", "doctor", "Doctor"),
        Binding("a", "advise", "Advise"),
        Binding("w", "save", "Save JSON"),
        Binding("e", "export", "Export"),  # CSV + Markdown of the table (and under 100 columns `p SVG` gives it room)
        Binding("p", "screenshot", "SVG"),
        Binding("l", "load", "Load"),
        Binding("q", "quit", "Quit"),
        # help, details, log (help_screen.py lists them; the footer has room for ? only at 80 columns)
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", show=False),
        Binding("i", "details", "Details", show=False),
        Binding("o", "log", "Log", show=False),
        Binding("c", "compare", "Compare", show=False),  # the presets marked with m, interleaved
        Binding("r", "rerun", "Again", show=False),  # the highlighted comparison row's preset, run again
        Binding("n", "steps", "Steps", show=False),  # the steps of the next runs (as --steps)
        # Textual binds ctrl+c to a "press ctrl+q to quit" hint; here it quits, as q does (priority: even
        # from the load screen's input)
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    # ---- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            with Vertical(id="left"):
                yield StatusPane(id="status")
                yield PresetPicker(self.presets, id="picker")
            with Vertical(id="right"):
                yield LiveRun(id="live")
                yield MonitorPanel(id="monitor")
        with Horizontal(id="bottom"):
            yield ComparisonTable(id="table")
            yield LogPane(lambda: self.run_logs, id="log-pane")  # shown from WIDE_COLS columns (app.tcss)
        yield KeyFooter()

    def on_resize(self, event: events.Resize) -> None:
        self._size_classes(event.size.width, event.size.height)

    def _size_classes(self, width: int, height: int) -> None:
        """-narrow, -short, -wide on the app: app.tcss lays the panes out by them (docs/tui.md, "Sizes")."""
        self.set_class(width < NARROW_COLS, "-narrow")
        self.set_class(height < SHORT_ROWS, "-short")
        self.set_class(width >= WIDE_COLS, "-wide")
        try:
            self.query_one(KeyFooter).set_width(width, NARROW_COLS)
            self.live.set_short(height < SHORT_ROWS)
            self.live.set_narrow(width < NARROW_COLS)
        except NoMatches:  # a resize before the main screen is composed: on_mount applies it
            pass

    def on_mount(self) -> None:
        self._size_classes(self.size.width, self.size.height)
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
        self.start_hangup_watchdog()  # a hang-up ends the process even if Textual's shutdown blocks
        try:  # the SSH connection drops: stop the run, save the results, exit
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.on_hangup)
            self._restore_sigcont = resume_only_after_suspend()  # a hang-up's SIGCONT must not restart the driver
        except (NotImplementedError, RuntimeError, ValueError):  # not on the main thread, or not POSIX
            pass

    def on_unmount(self) -> None:
        if self.hangup_watchdog is not None and not self._hung_up:  # quit: nothing to watch (a hang-up: run_app)
            self.hangup_watchdog.stop()
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            self._restore_sigcont()
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
            probe = self.probe_fn(self.settings.device, self.presets)
        except DeviceUnavailable as exc:
            self._post_from_thread(ProbeFailed(exc.line, ends=exc))
            return
        except Exception as exc:  # noqa: BLE001
            self._post_from_thread(ProbeFailed(f"device probe failed: {type(exc).__name__}: {exc}"))
            return
        self._post_from_thread(ProbeDone(probe))
        if self.runner_factory is default_runner_factory:
            # fork the workers from a server that has imported torch: later runs start at once (if this fails,
            # the first run starts the server itself)
            with contextlib.suppress(Exception):
                from apextui.core.run.worker import prestart

                prestart()

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
        if not self.panes_up():
            return
        self.query_one(StatusPane).set_device(probe.device_line, gpu=probe.gpu)
        self.picker.set_availability(probe.availability, probe.device)
        if probe.device == "cpu" and self.settings.device != "cpu":
            # a toast is as wide as its longest line: at 80x24 the note on one line covered the preset list for 8 s;
            # it goes when a run starts (it sat over the run pane and its loss chart), the status pane says the device
            from textual.notifications import Notification, Notify

            self.device_toast = Notification(textwrap.fill(probe.device_note, NOTE_COLUMNS), "no GPU", "warning", 8)
            self.post_message(Notify(self.device_toast))
        self._show_highlighted()
        self._start_pending()

    def _start_pending(self) -> None:
        if self._pending_start is not None and self.probe is not None and self.doctor_done:
            name, self._pending_start = self._pending_start, None
            self.start_preset(name)

    def on_probe_failed(self, message: ProbeFailed) -> None:
        self.probe_error = message.error
        self._pending_start = None
        if not self.panes_up():
            return
        self.query_one(StatusPane).set_device_error(message.error)
        if message.ends is not None:
            self.exit(return_code=message.ends.exit_code, message=f"apextui: error: {message.ends.line}")
        else:
            self.notify(message.error, severity="error", timeout=10)

    def on_doctor_ready(self, message: DoctorReady) -> None:
        self.report = message.report
        if not self.panes_up():
            return
        self._show_highlighted()
        try:
            self.query_one(StatusPane).set_report(message.report)
        except Exception as exc:  # noqa: BLE001 - an unexpected report shape must not kill the UI
            self.report_error = f"cannot show the report: {type(exc).__name__}: {exc}"
            self.query_one(StatusPane).set_error(self.report_error)
        self._start_pending()

    def on_doctor_failed(self, message: DoctorFailed) -> None:
        self.report_error = message.error
        if not self.panes_up():
            return
        self.query_one(StatusPane).set_error(message.error)
        self._start_pending()

    # ---- r (run again), n (steps) -----------------------------------------------------------
    def action_rerun(self) -> None:
        """r: start the preset of the highlighted comparison row again (after a run: the one that just ended)."""
        rows = self.table.rows_data
        if not rows:
            self.notify("no finished run to run again yet: enter starts the highlighted preset", timeout=3)
            return
        row = rows[min(max(self.table.cursor_row, 0), len(rows) - 1)]
        if self.picker.preset(row.preset) is None:
            self.notify(f"{row.preset} is not a preset here (its row was loaded from a file)", severity="warning",
                        timeout=4, markup=False)
            return
        self.start_preset(row.preset)

    def action_steps(self) -> None:
        """n: how many steps every next run takes (None: each preset's own), as --steps sets it."""
        from .screens.steps_screen import StepsChoice, StepsScreen

        def chosen(choice: StepsChoice) -> None:
            if choice is None:
                return
            self.settings = replace(self.settings, steps=choice[1])
            steps = self.settings.steps
            self.notify(f"next runs: {steps} steps" if steps else "next runs: each preset's own steps", timeout=3)
            self._show_highlighted()

        self.push_screen(StepsScreen(self.settings.steps), chosen)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if self.active is None:
            self.latest_view = None  # the pane describes the highlighted preset again
            try:
                self._show_highlighted()
            except NoMatches:  # highlighted while the main screen still mounts (--preset FILE): on_mount shows it
                pass

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.start_preset(event.option.id)


def make_app(*, preset: Preset | None = None, device: str = "auto", steps: int | None = None,
             sample_interval: float = 1.0, presets: Sequence[Preset] | None = None,
             report_provider: ReportProvider | None = None, runner_factory: RunnerFactory | None = None,
             probe: ProbeFn | None = None, autostart: bool | None = None, load: Iterable[str | Path] = (),
             save_dir: str | Path | None = None, refresh_interval: float = REFRESH_S,
             spark_interval: float = SPARK_REFRESH_S,
             preset_errors: Iterable[tuple[str, str]] | None = None, highlight: str | None = None) -> ApexTuiApp:
    """Build the app. `preset` is preselected and (unless autostart=False) started once the device is
    known. `refresh_interval` / `spark_interval`: the least time between redraws of the live numbers /
    of the loss and step-time sparklines, in seconds. Without `presets`: the shipped and the user's
    presets (`core.presets.load_all`); user files that do not load are shown as errors. `highlight`: the preset
    the cursor starts on when no `preset` is given (`--model`: the model's first configuration, in its group), not
    started."""
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
        settings=RunSettings(device, steps, sample_interval),
        preselect=preset.name if preset else highlight,
        autostart=(preset is not None) if autostart is None else autostart,
        load=load, save_dir=save_dir, refresh_interval=refresh_interval, spark_interval=spark_interval,
        preset_errors=found if preset_errors is None else preset_errors,
    )


def run_app(settings: RunSettings, preset: Preset | None = None, load: Sequence[str | Path] = (),
            extra: Sequence[Preset] = (), nproc: int | None = None) -> int:
    """Run the TUI in this terminal, every run as `settings` asks; the process exit code (0, or 3 when --device
    cuda is unavailable).
    `extra`: presets listed after the shipped and the user's ones (the configurations of `--model`); `nproc`: every
    run data-parallel on that many ranks (core/run/launched.py)."""
    presets, errors = None, None
    if extra:
        from apextui.core.presets import load_all

        found, errors = load_all()
        presets = [*found, *extra]
    factory = None
    if nproc is not None:
        from apextui.core.run.launched import launched_factory

        factory = launched_factory(nproc)
    app = make_app(preset=preset, device=settings.device, steps=settings.steps,
                   sample_interval=settings.sample_interval, load=load,
                   presets=presets, preset_errors=errors, runner_factory=factory,
                   highlight=extra[0].name if extra else None)  # --model: the cursor on the model's group
    if app.runner_factory is default_runner_factory:
        from apextui.core.run.worker import prestart

        prestart()  # before Textual takes over sys.stderr; torch loads in the server meanwhile
    try:
        app.run()
    finally:
        app.shutdown_runs(QUIT_JOIN_S)  # however the app ended, never leave a run training
        if app.hangup_watchdog is not None:  # after a hang-up: once its save is done (the watchdog bounds it)
            app.hangup_watchdog.stop()
        if app.hangup_message:
            if app.hangup_watchdog is not None:
                app.hangup_watchdog.reported = True
            _stderr(app.hangup_message)
    return app.return_code or 0
