"""Starting, following and stopping a run: the app's side of the `RunBridge` (a mixin of `ApexTuiApp`).

A run's snapshots reach the UI thread as at most one pending `RunUpdated`; `_pull` takes the latest state,
and the live pane is redrawn at most every `refresh_interval` s, its sparklines every `spark_interval` s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core import results
from .app_base import ActiveRun, AppBase
from .bridge import RunBridge, RunView
from .hangup_watchdog import HANGUP_SAVE_LOCK
from .messages import RunUpdated
from .run_log import RunLog
from .widgets.monitor_panel import MonitorPanel

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from ..core.presets import Preset
    from ..core.run.request import RunRequest

MAX_RUN_LOGS = 50  # the log screen (o) keeps the output of the last 50 runs (each at most 256 KiB)
STOPPED_WHILE_COMPILING = "stopped while compiling (s pressed twice)"
STOPPED_AT_ONCE = "stopped at once (s pressed twice): its step had not ended"
IDLE_READINGS = "no run now · readings start with the next"


# why a preset cannot start now, by what measures (`AppBase.measuring`)
BUSY_WORDS = {"run": "{running} is running: press s to stop it first",
              "advice": "the advice is measuring: press a, then s to stop it first",
              "interleaved": "the interleaved comparison is measuring: s stops it"}


@dataclass(frozen=True)
class Refusal:
    """Why a preset does not start now, as the notification says it ("": said already, nothing more to say)."""

    message: str
    title: str = ""
    severity: SeverityLevel = "error"
    timeout: float | None = None


class RunActions(AppBase):
    """The app's run actions: start_preset, the redraw rate limits, the end of a run, s (the engine's own stop
    and wait is core/run/handle.py's `RunControl`)."""

    def start_preset(self, name: str) -> bool:
        """Start a preset by name; False (with a notification) when it cannot start now."""
        preset = self.picker.preset(name)
        refused = self._refusal(name, preset)
        if refused is not None:
            if refused.message:
                self.notify(refused.message, title=refused.title, severity=refused.severity,
                            timeout=refused.timeout)
            return False
        assert preset is not None and self.probe is not None  # `_refusal` refuses without either
        return self._launch(preset, self.settings.request(preset, self.probe.device))

    def _refusal(self, name: str, preset: Preset | None) -> Refusal | None:
        """Why `name` cannot start now (unknown, something else measuring, the device probe failed or unfinished,
        unavailable here, too big for the free memory), or None. An unfinished probe or doctor holds the start until
        they are done (their CUDA smoke tests and torch import would disturb the timing)."""
        if preset is None:
            return Refusal(f"unknown preset {name!r}")
        busy = self.measuring()
        if busy is not None:
            running = self.active.preset.name if self.active is not None else ""
            return Refusal(BUSY_WORDS[busy].format(running=running), severity="warning")
        if self.probe_error is not None:
            return Refusal(f"{name} cannot start: {self.probe_error}", timeout=10)
        if self.probe is None or not self.doctor_done:
            self._pending_start = name
            what = "device probe" if self.probe is None else "Apex doctor"
            self.notify(f"{name} starts as soon as the {what} finishes…", timeout=3)
            self._show_highlighted()
            return Refusal("")
        avail = self.probe.availability.get(name)
        if avail is None or not avail.ok:
            fix = f"\nfix: {avail.fix}" if avail and avail.fix else ""
            return Refusal(f"{name} cannot run here: {avail.reason if avail else 'not checked'}{fix}",
                           title="unavailable", timeout=10)
        from apextui.core.memory import refusal

        request = self.settings.request(preset, self.probe.device)
        too_big = refusal(preset, request.device, request.steps or preset.steps)
        if too_big:
            return Refusal(too_big.replace(", or --force to run anyway", ""), title="does not fit", timeout=15)
        return None

    def _launch(self, preset: Preset, request: RunRequest) -> bool:
        """Start `request`'s run in its worker, its log opened first; False (said) where it could not start."""
        assert self.probe is not None
        name = preset.name
        self._run_id += 1
        bridge = RunBridge(self._run_id, self.post_message, min_interval=self.refresh_interval)
        log: RunLog | None = None
        try:
            runner = self.runner_factory(request, bridge)
            # named as the table, the details and the files name it: this preset's next run number here
            number = 1 + sum(1 for r in self.table.rows_data
                             if r.preset == name and r.source == results.SESSION and r.device == self.probe.device)
            log = RunLog.of_runner(results.run_name(name, number), runner)  # open before the worker writes
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
        self._begin(preset)
        return True

    def _begin(self, preset: Preset) -> None:
        """The panes given to the run that started."""
        self.latest_view = None
        self._last_spark = 0.0  # a run's first redraw always draws its sparklines
        self.query_one(MonitorPanel).reset()
        self.live.begin(preset)
        if self.device_toast is not None:  # said before the run: its pane and chart are the run's now
            self._unnotify(self.device_toast)
            self.device_toast = None
        self.refresh_bindings()

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
        self.query_one(MonitorPanel).update_reading(view.snapshot.monitor, view.monitor, view.gpu_util)

    def _finish(self, active: ActiveRun, view: RunView) -> None:
        for timer in (self._poll_timer, self._render_timer, self._spark_timer):
            if timer is not None:
                timer.stop()
        self._poll_timer = self._render_timer = self._spark_timer = None
        active.bridge.close()
        if self.run_logs:
            self.run_logs[-1].drain()  # the worker may delete its log now: read the rest first
        snap = view.snapshot
        device = self.probe.device if self.probe else "cpu"
        env = self.probe.env if self.probe else None
        row = results.row_from_snapshot(snap, active.preset, device, env)
        with HANGUP_SAVE_LOCK:  # a hang-up's save finds the run as active or in the table
            self.table.add_result(row)
            self.active = None
        self.query_one(MonitorPanel).reset(IDLE_READINGS)  # nothing runs now: no stale CPU/RSS on screen
        if snap.status == "failed":
            self.notify(f"{active.preset.name} failed: {snap.error}", severity="error", timeout=10, markup=False)
        self.refresh_bindings()

    def action_stop(self) -> None:
        active = self.active
        if active is None:
            stop_interleaved = getattr(self, "stop_interleaved", None)
            if not (callable(stop_interleaved) and stop_interleaved()):
                self.notify("nothing is running", timeout=2)
            return
        compiling = self._compiling(active)
        if not active.stopping:
            active.stopping = True
            active.runner.stop()
            self.live.show_stopping(compiling=compiling)
        elif active.runner.kill(STOPPED_WHILE_COMPILING if compiling else STOPPED_AT_ONCE):
            # a worker process: ended, compile or hung step and all; the run is kept with the steps it had sent
            self.notify(f"ended {active.preset.name}'s worker process{' while it compiled' if compiling else ''}",
                        timeout=4)
        else:
            self.notify("this run trains in the app's own process: it stops once "
                        f"{'compilation ends' if compiling else 'its current step ends'}", timeout=4)

    def _compiling(self, active: ActiveRun) -> bool:
        view = self.latest_view
        return view is not None and view.run_id == active.run_id and view.snapshot.status == "compiling"
