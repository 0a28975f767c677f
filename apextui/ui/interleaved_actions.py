"""`m` marks presets in the picker, `c` compares the marked ones interleaved (`interleaved.InterleavedJob`); a mixin
of `ApexTuiApp`. Each run the comparison makes joins the comparison table as it ends; the pooled intervals show
on a screen of their own when it is done."""

from __future__ import annotations

from typing import Any

from .app_base import AppBase
from .run_actions import HANGUP_SAVE_LOCK

POLL_S = 0.5


class InterleavedActions(AppBase):
    def action_compare(self) -> None:
        """`c`: run the marked presets (and their baseline) A/B/B/A with repeats, as `apextui advise` does."""
        from .interleaved import InterleavedJob, selection

        busy = self.measuring()
        if busy == "interleaved":
            self.notify("the interleaved comparison is measuring (s stops it)", timeout=3)
            return
        if busy is not None:
            self.notify("a run or the advice is measuring: stop it first (s)", severity="warning", timeout=4)
            return
        if self.probe is None or not self.doctor_done:
            self.notify("waiting for the device probe and the Apex doctor…", timeout=3)
            return
        presets, why = selection(self.picker.marked, self.presets)
        if why is not None:
            self.notify(why, severity="warning", timeout=5)
            return
        unavailable = [p.name for p in presets if not self.probe.availability.get(p.name, None) or
                       not self.probe.availability[p.name].ok]
        if len(presets) - len(unavailable) < 2:
            self.notify(f"cannot compare: {', '.join(unavailable)} cannot run here", severity="error", timeout=6)
            return

        def on_row(row: Any) -> None:  # the job's thread: the table is the UI thread's
            self.call_from_thread(self._add_interleaved_row, row)

        self.interleaved_job = InterleavedJob(
            device=self.probe.device, presets=presets, availability=self.probe.availability,
            runner_factory=self.runner_factory, steps=self.settings.steps,
            sample_interval=self.settings.sample_interval,
            on_row=on_row, env=self.probe.env if self.probe else None).start()
        self.notify(f"interleaved comparison of {', '.join(p.name for p in presets)}: "
                    f"{self.interleaved_job.advisor.total_runs} runs", timeout=4)
        self.set_timer(POLL_S, self._poll_interleaved)

    def _add_interleaved_row(self, row: Any) -> None:
        env = self.probe.env if self.probe else None
        with HANGUP_SAVE_LOCK:
            self.table.add_result(type(row)(**{**row.__dict__, "env": env}))

    def _poll_interleaved(self) -> None:
        job = self.interleaved_job
        if job is None:
            return
        if not job.done:  # the run pane's subtitle says how far it is (`_show_advice_measuring`, once a second)
            self.set_timer(POLL_S, self._poll_interleaved)
            return
        from .screens.interleaved_screen import InterleavedScreen

        self.push_screen(InterleavedScreen(job))

    def stop_interleaved(self) -> bool:
        """`s` while the comparison measures: stop it (the partial result is shown). True when there was one."""
        job = self.interleaved_job
        if job is None or not job.running:
            return False
        job.stop()
        self.notify("stopping the interleaved comparison after the current step…", timeout=3)
        return True
