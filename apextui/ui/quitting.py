"""Quitting (q, ctrl+q, ctrl+c) and the terminal hanging up (SIGHUP): stop the run, keep its results, exit
(a mixin of `ApexTuiApp`)."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from ..core import results
from .results_actions import ResultsActions

QUIT_JOIN_S = 30.0  # how long quitting waits for a stopped run to wind down
EXIT_HANGUP = 128 + signal.SIGHUP


class Quitting(ResultsActions):
    """Also `shutdown_runs` (run_app calls it however the app ended) and `last_result` (for scripts)."""

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
        return {**r.summary.to_dict(), "status": r.status, "error": r.error, "preset": r.preset, "device": r.device}
