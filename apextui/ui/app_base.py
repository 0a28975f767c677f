"""The state every part of the app shares: its settings, the run in progress, the panes, the toasts.

`ApexTuiApp` (app.py) is this class plus one mixin per subject (run_actions.py, results_actions.py,
quitting.py, screen_actions.py); they all subclass `AppBase`, so each sees the same attributes, typed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from textual.app import App
from textual.screen import ModalScreen
from textual.timer import Timer

from apextui.core.presets import Preset
from apextui.core.run.handle import RunHandle, RunnerFactory
from apextui.core.run.request import RunSettings

from . import contrast, history, scrollbars
from .bridge import RunBridge, RunView
from .doctor_view import DoctorLike, ReportProvider
from .probe import Probe, ProbeFn
from .run_log import RunLog
from .widgets.comparison_table import ComparisonTable
from .widgets.live_run import LiveRun
from .widgets.preset_picker import PresetPicker

REFRESH_S = 0.5  # live numbers: at most 2 redraws a second (the issue allows ~10; each costs the training GIL time)
SPARK_REFRESH_S = 1.0  # the loss and step-time sparklines, the costly part of a redraw: once a second



Measuring = Literal["run", "advice", "interleaved"]  # what a session measures, one at a time (`AppBase.measuring`)

@dataclass
class ActiveRun:
    run_id: int
    preset: Preset
    runner: RunHandle
    bridge: RunBridge
    stopping: bool = False


class AppBase(App[None]):
    """Settings and state; the panes; toasts without duplicates. No key bindings or actions here."""

    def __init__(self, *, presets: Sequence[Preset], report_provider: ReportProvider,
                 runner_factory: RunnerFactory, probe: ProbeFn, settings: RunSettings,
                 preselect: str | None = None,
                 autostart: bool = False, load: Iterable[str | Path] = (), save_dir: str | Path | None = None,
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
        self.settings = settings  # --device as asked, --steps (n changes it), --sample-interval
        self.preselect = preselect
        self.autostart = autostart
        self.load_paths = [Path(p) for p in load]
        self.save_dir = Path(save_dir) if save_dir is not None else history.output_dir()

        self.probe: Probe | None = None
        self.probe_error: str | None = None
        self.device_toast: Any = None  # the start-up "no GPU" toast (a Notification), until a run starts
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
        # what measures in the background, one at a time with the active run (`measuring`): `a`'s advice
        # (screens/advise_screen.py) and `c`'s interleaved comparison (interleaved.py); each the running or last one
        self.advice_job: Any = None
        self.interleaved_job: Any = None
        self._hung_up = False
        self._hangup_done = False  # the session's runs were saved after a hang-up (Quitting.save_after_hangup)
        self.hangup_watchdog: Any = None  # hangup_watchdog.HangupWatchdog, from mount on
        self._hangup_rows: list[Any] | None = None  # the comparison table's rows, for a save from another thread
        self.run_logs: list[RunLog] = []  # every run's worker output, for the log screen (o)
        self._saved_session_rows = 0  # session rows already in a results file (w, or the save on quit)
        self.quit_saved: Path | None = None  # where quitting saved the unsaved runs
        self._history_copy: Path | None = None  # this session's latest file in the run history (w's copy, quit's)
        self._toasts_until: dict[tuple[str, str], float] = {}  # (message, title) -> its toast's expiry

    def measuring(self) -> Measuring | None:
        """What measures now, of the three things a session runs one at a time (a preset's run, the advice, the
        interleaved comparison): each action that starts one asks this, and none finds the others' jobs itself."""
        if self.active is not None:
            return "run"
        if self.advice_job is not None and self.advice_job.running:
            return "advice"
        if self.interleaved_job is not None and self.interleaved_job.running:
            return "interleaved"
        return None

    def background_jobs(self) -> list[Any]:
        """The advice's and the interleaved comparison's jobs held (running or done), for a quit or a hang-up."""
        return [job for job in (self.advice_job, self.interleaved_job) if job is not None]

    def panes_up(self) -> bool:
        """Whether the panes are there to draw on. The probe's and the doctor's results arrive from their threads
        as messages, and one that lands while the app exits (quit during start-up) found its panes taken down and
        raised NoMatches out of the app. The app stops running before Textual removes any pane."""
        return self.is_running

    @property
    def picker(self) -> PresetPicker:
        return self.query_one(PresetPicker)

    @property
    def live(self) -> LiveRun:
        return self.query_one(LiveRun)

    @property
    def table(self) -> ComparisonTable:
        return self.query_one(ComparisonTable)

    @property
    def doctor_done(self) -> bool:
        return self.report is not None or self.report_error is not None

    def _show_highlighted(self) -> None:
        if self.active is not None or self.latest_view is not None:
            return
        preset = self.picker.highlighted_preset
        avail = self.probe.availability.get(preset.name) if (self.probe and preset) else None
        waiting = None
        if preset is not None and self._pending_start == preset.name:  # not "enter: start": it will start
            waiting = "device probe" if self.probe is None else "Apex doctor"
        self.live.show_preset(preset, avail, self.probe.device if self.probe else None, waiting=waiting,
                              steps=self.settings.steps)

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

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        """A dialog opens on a clean screen: the toasts of the screen below ("SVG saved", "next runs: 100
        steps") covered its input or its first lines at 80x24 for seconds. What the dialog itself says shows."""
        if isinstance(screen, ModalScreen):
            self.clear_notifications()
        return super().push_screen(screen, *args, **kwargs)
