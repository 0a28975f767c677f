"""Quitting (q, ctrl+q, ctrl+c) and the terminal hanging up (SIGHUP): stop the run, keep its results, exit
(a mixin of `ApexTuiApp`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..core import results
from ..core.exits import EXIT_HANGUP
from .hangup_watchdog import HANGUP_SAVE_LOCK, HangupWatchdog, terminal_fd
from .results_actions import ResultsActions

QUIT_JOIN_S = 30.0  # how long quitting waits for a stopped run to wind down, at most
QUIT_GRACE_S = 5.0  # a stopped run's current step gets this long; then its worker process is ended (`end_run`)
KILL_JOIN_S = 10.0  # an ended worker: how long its last snapshot may take to arrive
SAVE_RETRY_S = 35.0  # after a hang-up, how long the watchdog keeps trying to save (hangup_watchdog.SAVE_LIMIT_S: 40)
ENDED_ON_QUIT = "stopped on quitting (its step did not end within the grace)"
ENDED_ON_HANGUP = "the terminal hung up"
__all__ = ["QUIT_JOIN_S", "Quitting", "end_run"]


def end_run(runner: Any, reason: str, grace: float = QUIT_GRACE_S, limit: float = QUIT_JOIN_S) -> bool:
    """Stop `runner` and wait `grace` s for its current step; then end its worker process (`kill`, with `reason`:
    the run is kept as stopped, with the steps it had sent) and wait for its last snapshot. Why: a step that never
    returns (a user's forward doing `while True: pass`) kept quitting waiting, then the process's exit, for good.
    A run in a thread of this process cannot be ended: it gets up to `limit` s in all. Blocking (call it from a
    thread); True when the run is over."""
    runner.stop()
    if runner.join(grace):
        return True
    if runner.kill(reason):
        return bool(runner.join(KILL_JOIN_S))
    return bool(runner.join(max(0.0, limit - grace)))


class Quitting(ResultsActions):
    """Also `shutdown_runs` (run_app calls it however the app ended) and `last_result` (for scripts)."""

    async def action_quit(self) -> None:
        """Stop an active run and wait for it (the UI keeps drawing; its worker ended after a grace: `end_run`),
        then exit. Again while it waits: its worker ended now."""
        active = self.active
        if active is not None:
            again = self._quitting
            self._quitting = True
            active.stopping = True
            if not again:
                self.live.show_stopping()
            await asyncio.to_thread(end_run, active.runner, ENDED_ON_QUIT, 0.0 if again else QUIT_GRACE_S)
        self.save_unsaved_on_quit(active)
        self.shutdown_runs(0)
        self.exit()

    def start_hangup_watchdog(self) -> None:
        """On mount: the thread that bounds a hang-up (hangup_watchdog.py) even when Textual's shutdown blocks."""
        self._hangup_rows = self.table.rows_data  # the table's own list: readable from a thread, even unmounted
        self.hangup_watchdog = HangupWatchdog(self._save_for_watchdog, self._kill_runs, terminal_fd()).start()

    def _save_for_watchdog(self) -> str:
        """The watchdog's save: returns once the session's runs are saved (by either caller), or after tries
        up to SAVE_RETRY_S: its forced exit must never come while the other caller is still saving."""
        deadline = time.monotonic() + SAVE_RETRY_S
        message = self.save_after_hangup()
        while not self._hangup_done and time.monotonic() < deadline:
            time.sleep(0.5)
            message = self.save_after_hangup()
        return message

    def on_hangup(self) -> None:
        """SIGHUP: the terminal is gone. Stop the run, save every result of the session, exit 129."""
        if not self._hung_up:
            self._hung_up = True
            if self.hangup_watchdog is not None:
                self.hangup_watchdog.trigger()
            asyncio.get_running_loop().create_task(self._save_and_exit_after_hangup())

    async def _save_and_exit_after_hangup(self) -> None:
        await asyncio.to_thread(self.save_after_hangup)
        self.shutdown_runs(0)
        self.exit(return_code=EXIT_HANGUP)

    def save_after_hangup(self) -> str:
        """Stop the active run, wait for it (up to QUIT_JOIN_S), save every result of the session once; the line
        that says where they went (also in `hangup_message`). From the loop's SIGHUP handler or the watchdog's
        thread, whichever comes first; the second gets the first's line."""
        with HANGUP_SAVE_LOCK:
            if self._hangup_done:
                return self.hangup_message
            try:
                self._save_after_hangup()
            except Exception as exc:  # noqa: BLE001 - the other caller tries again; the line says what failed
                self.hangup_message = f"terminal hung up; could not save the results: {type(exc).__name__}: {exc}"
            else:
                self._hangup_done = True
            return self.hangup_message

    def _save_after_hangup(self) -> None:
        active = self.active
        rows = []
        if active is not None:
            active.stopping = True
            end_run(active.runner, ENDED_ON_HANGUP)  # a hung step too: its worker ended, its steps kept
            final = getattr(active.runner, "result", None)
            if final is not None and self.active is active:  # its last update is not in the table yet
                rows.append(results.row_from_snapshot(final, active.preset, self.probe.device if self.probe
                                                      else "cpu", self.probe.env if self.probe else None))
        table_rows = self._hangup_rows if self._hangup_rows is not None else self.table.rows_data
        rows = [r for r in table_rows if r.source == results.SESSION] + rows  # as w saves
        if rows:
            try:
                saved = results.save_session(rows, self.save_dir, env=self.probe.env if self.probe else None)
            except OSError as exc:
                self.hangup_message = f"terminal hung up; could not save the results: {exc}"
            else:
                self.hangup_saved = saved.path
                why = f"{saved.fallback_reason}; " if saved.fallback_reason else ""
                self.hangup_message = (f"terminal hung up; {why}saved {len(rows)} run(s) to "
                                       f"{saved.path.resolve()}")

    def _kill_runs(self) -> None:
        """The watchdog's last step: end the run's worker at once (its process would stop by itself later)."""
        active = self.active
        if active is not None and hasattr(active.runner, "kill"):
            active.runner.kill(ENDED_ON_HANGUP)
        for job in self.background_jobs():
            job.shutdown(0)
        from ..core.apex.doctor import end_children

        end_children()  # a doctor probe still hanging (a broken Apex import)

    def shutdown_runs(self, timeout: float = QUIT_JOIN_S) -> bool:
        """Stop any active run (and advice) and wait up to `timeout` s (the run's worker ended after a grace:
        `end_run`); True when nothing is left running."""
        advice_over = all([job.shutdown(timeout) for job in self.background_jobs()])  # each asked, none skipped
        active = self.active
        if active is None:
            return advice_over
        active.bridge.close()
        if not timeout:
            active.runner.stop()
            return not active.runner.is_alive() and advice_over
        return end_run(active.runner, ENDED_ON_QUIT, min(timeout, QUIT_GRACE_S), timeout) and advice_over

    def last_result(self) -> dict[str, Any] | None:
        """The last run finished in this session as the headless `end` event has it: its summary plus
        status, preset and device (None before any run finished). For scripts and benchmarks."""
        rows = [r for r in self.table.rows_data if r.source == results.SESSION]
        if not rows:
            return None
        r = rows[-1]
        return {**r.summary.to_dict(), "status": r.status, "error": r.error, "preset": r.preset, "device": r.device}
