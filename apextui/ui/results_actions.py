"""Results files: w (save JSON), l (load), e (export CSV and Markdown), the run history, and the save of
unsaved runs on quitting (a mixin of `ApexTuiApp`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from apextui.core.atomic import write_atomic as write_text_atomic
from apextui.core.atomic import write_new_numbered

from ..core import results
from . import history
from .app_base import ActiveRun, AppBase


class ResultsActions(AppBase):
    """Only this session's rows are saved: loaded rows are in their own files already."""

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
        self.notify(saved_message(f"{why}saved {len(rows)} run{'s' if len(rows) != 1 else ''}", [saved.path]),
                    title="results saved", severity="warning" if why else "information", timeout=8, markup=False)

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
            what = " and ".join({"csv": "CSV", "md": "Markdown"}[p.suffix[1:]] for p in written)
            self.notify(saved_message(f"exported {len(rows)} run{'s' if len(rows) != 1 else ''} as {what}", written),
                        title="exported", timeout=8, markup=False)

    def action_export_csv(self) -> None:
        self.action_export("csv")

    def action_export_markdown(self) -> None:
        self.action_export("md")

    def _copy_to_history(self, path: Path) -> None:
        """Saved results accumulate in the run history folder too (best effort: it is a copy). Each save holds
        every run of the session, so the copy replaces the one an earlier `w` of this session left there: the
        history lists each run once."""
        try:
            target = history.history_dir() / path.name
            if path.resolve().parent != target.parent.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                copy = write_new_numbered(target, path.read_text(encoding="utf-8"))  # never over another's file
                self._supersede_history_copy(copy)
        except OSError:
            pass

    def _supersede_history_copy(self, newest: Path | None) -> None:
        """`newest` (a file in the history holding every run of the session) replaces this session's previous
        one: the copy `w` made. Never a file whose path was shown (w's own file, even where it fell back to
        the history folder)."""
        previous, self._history_copy = self._history_copy, newest
        if previous is not None and previous != newest:
            try:
                previous.unlink()
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
        self._supersede_history_copy(saved.path)  # the copy of an earlier w: its runs are in this file too
        why = f"{saved.fallback_reason}; " if saved.fallback_reason else ""
        self.hangup_message = f"{why}saved {len(rows)} run(s) of this session to {saved.path.resolve()}"
        return saved.path


def saved_message(what: str, paths: Sequence[Path]) -> str:
    """One wording for every file the app writes (w, e, p): what, then each file's full path on a line of its
    own ("saved 2 runs to\n/home/me/apextui-results-….json")."""
    return f"{what} to\n" + "\n".join(str(p.resolve()) for p in paths)
