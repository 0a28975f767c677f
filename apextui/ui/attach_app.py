"""`apextui attach [NAME|PATH]`: the run pane on a watched run (live or finished), fed from its stream.

A reader thread follows the run folder (`core/watch/reader.follow`), folds the events into snapshots
(`core/watch/replay.Replay`) and hands them to a `RunBridge`, the same bridge and the same `LiveRun` and
`MonitorPanel` panes a preset's run has; the extra metrics go to `MetricPlots`. The table below lists the
finished watched runs of this machine, each against the baseline of its group (the runs of its model and batch,
else of its name: `core/watch/rows.py`; the oldest by default; b makes the highlighted row its group's baseline),
by the one noise rule; `vs` names that baseline, and a run alone in its group has no speed-up. A run whose process
died without an `end` line is shown failed, with when its last line was written. Keys: r (another run), b
(baseline), p (SVG screenshot), q (quit)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal

from apextui.core.results import RunIndex
from apextui.core.watch import reader, rows, store
from apextui.core.watch.replay import RankTimes, Replay
from apextui.core.watch.workload import Workload

from . import contrast, history, scrollbars
from .bridge import RunBridge
from .messages import RunUpdated
from .screen_actions import save_svg
from .screens.run_picker import RunPicker
from .widgets.comparison_table import ComparisonTable
from .widgets.live_run import LiveRun
from .widgets.metric_plots import MetricPlots
from .widgets.monitor_panel import MonitorPanel

POLL_S = 0.25  # how often the stream is read
REFRESH_S = 0.5  # the run pane's redraws, at most (as the main app's)
TABLE_S = 5.0  # the table's live rows: their figures so far, this often
STALL_S = 10.0  # a live run whose stream got no line for this long: the run pane says so (a hung training)


class WatchedTable(ComparisonTable):
    """The comparison table of watched runs: a watched run has no loss floor, no norm check and no compile time;
    its name and start are its preset column; `vs` names the run each speed-up is against (its group's baseline:
    the runs of one model and batch, else of one name, `core/watch/rows.py`)."""

    LEFT_OUT = frozenset({"err", "compile"})
    LABELS = {"preset": "watched run", "loss": "last loss"}  # one batch's, as the pane's `batch` (its `avg`: smoothed)
    user_moved = False  # the user moved the cursor (keys, mouse): from then on it stays where they put it

    def place(self, row: int) -> None:
        """The cursor on `row` (scrolled into view), moved by the app, not by the user."""
        self.move_cursor(row=row)

    def _moved_by_user(self) -> None:
        self.user_moved = True

    async def _on_click(self, event: Any) -> None:
        self._moved_by_user()
        await super()._on_click(event)

    def watch_cursor_coordinate(self, old: object, new: object) -> None:
        super().watch_cursor_coordinate(old, new)
        if self.rows_data:
            self._update_subtitle()

    def _cursor_note(self, index: RunIndex) -> str | None:
        """The highlighted run's group and its baseline, named first in the subtitle: at 80 columns the `vs` column
        is not shown (its names take 20 columns)."""
        row = self.row_at(self.cursor_row)
        if row is None:
            return None
        base = index.baseline(row)
        if base is row:
            return f"the baseline of {row.model}"
        if base is None:
            return f"no speed-up: no other finished run of {row.model}"
        return f"vs {base.preset}: {row.model}"


# the table's actions that move its cursor (DataTable's keys and the comparison table's home/end): each one is the
# user's move, after which a refresh leaves the cursor where they put it
USER_MOVES = ("cursor_up", "cursor_down", "page_up", "page_down", "first_row", "last_row", "scroll_top",
              "scroll_bottom")


def _by_user(name: str) -> Any:
    def action(self: WatchedTable) -> Any:
        self._moved_by_user()
        return getattr(super(WatchedTable, self), f"action_{name}")()

    action.__name__ = f"action_{name}"
    return action


for _move in USER_MOVES:
    setattr(WatchedTable, f"action_{_move}", _by_user(_move))


class AttachApp(App[int]):
    CSS_PATH: ClassVar[Any] = ["app.tcss", "attach.tcss"]
    TITLE = "apextui attach"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "runs", "Runs"), Binding("b", "baseline", "Baseline"), Binding("p", "screenshot", "SVG"),
        Binding("q", "quit", "Quit"), Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, meta: store.RunMeta | None = None, where: Path | None = None, poll_s: float = POLL_S,
                 refresh_s: float = REFRESH_S, save_dir: str | Path | None = None, stall_s: float = STALL_S,
                 table_s: float = TABLE_S, follow_name: str | None = None) -> None:
        super().__init__()
        # `attach NAME`: the name is followed, not the run it named at start: a newer run of that name (live first,
        # `store.newest`) is attached once it appears; a run picked by hand (`r`) is followed alone
        self.follow_name = follow_name
        scrollbars.install()
        contrast.install(self)
        self.meta = meta
        self.where = where
        self.poll_s = poll_s
        self.refresh_s = refresh_s
        self.save_dir = Path(save_dir) if save_dir is not None else history.output_dir()
        self.stall_s = stall_s
        self.table_s = table_s
        self.bridge: RunBridge | None = None
        self.replay: Replay | None = None
        self.baseline: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._metrics: dict[str, tuple[float, ...]] = {}
        self._notes_shown = 0
        self._run_id = 0
        self._runs: list[store.RunMeta] = []  # the table's runs, row by row
        self._table = rows.Table(where)

    def compose(self) -> ComposeResult:
        from textual.widgets import Footer

        with Horizontal(id="attach-top"):
            yield LiveRun(id="live")
            yield MonitorPanel(id="monitor")
        yield MetricPlots(id="metrics")
        with Horizontal(id="attach-bottom"):
            yield WatchedTable(id="table")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ComparisonTable).border_title = "Watched runs"
        self._show_rows()
        self.set_interval(self.refresh_s, self._pull)
        self.set_interval(1.0, self._show_stall)
        self.set_interval(self.table_s, self._show_rows)
        if self.meta is not None:
            self.attach(self.meta)
        else:
            self.query_one(LiveRun).show_unattached()
            self.action_runs()

    # ---- following a run (the reader thread) ------------------------------------------------------------------
    def attach(self, meta: store.RunMeta) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.meta, self._notes_shown = meta, 0
        self._stop = threading.Event()
        self._run_id += 1
        self.bridge = RunBridge(self._run_id, self.post_message, min_interval=self.refresh_s)
        self.replay = Replay()
        self.query_one(MonitorPanel).reset()
        self.query_one(MetricPlots).reset()
        self._metrics = {}
        live = self.query_one(LiveRun)
        live.border_title = f"Run · {meta.name}"
        live.show_waiting(meta.describe())  # until the reader's first snapshot (none before the run's first step)
        self._thread = threading.Thread(target=self._follow, args=(meta, self.bridge, self.replay, self._stop),
                                        name="apextui-attach", daemon=True)
        self._thread.start()

    def _follow(self, meta: store.RunMeta, bridge: RunBridge, replay: Replay, stop: threading.Event) -> None:
        follower = reader.Follower(Path(meta.path))
        others = [m for m in store.ranks(meta, where=self.where) if m.path != meta.path]
        ranks = RankTimes([meta, *others]) if others else None

        told = 0  # the reader's notes handed to the replay (said as they come: a live run's damaged line)

        def take_notes() -> None:
            nonlocal told
            replay.notes.extend(follower.notes[told:])
            told = len(follower.notes)

        def handle(events: list[dict[str, Any]]) -> None:
            take_notes()
            replay.add(events)
            self._metrics = replay.metric_history()
            snap = replay.snapshot()
            if ranks is not None:  # a torchrun run: every rank's latest ms/step on rank 0's pane
                ranks.poll()
                snap = ranks.with_ranks(snap)
            bridge(snap)

        try:
            ending = reader.follow(Path(meta.path), meta, handle, stop, self.poll_s, follower=follower)
        except Exception as exc:  # noqa: BLE001 - said on the pane, never a reader thread that dies silently
            take_notes()
            replay.notes.append(f"stopped reading the stream: {type(exc).__name__}: {exc}")
            bridge(replay.snapshot())
            return
        take_notes()
        if ending.outcome == "gone":
            replay.gone(ending.words(meta))
        if ending.outcome != "stopped":  # the final snapshot (the end line's, or "gone"), and any notes
            bridge(replay.snapshot())

    # ---- the UI thread ----------------------------------------------------------------------------------------
    def on_run_updated(self, message: RunUpdated) -> None:
        if message.bridge is not self.bridge:
            message.bridge.take()
            return
        self._pull()

    def _panes_up(self) -> bool:
        """Whether the panes are there: a timer ticks after they are taken down as the app exits (each tick at exit
        raised NoMatches), so every timer's callback asks this first. The app stops running before Textual removes
        any pane (side by side, so one pane found would say nothing of the others); the timers start on mount."""
        return self.is_running

    def _pull(self) -> None:
        bridge = self.bridge
        if bridge is None or not bridge.dirty or not self._panes_up():  # the view waits in the bridge
            return
        view = bridge.take()
        if view is None:
            return
        live = self.query_one(LiveRun)
        live.trains = Workload.of(self.replay.start if self.replay is not None else None).label()
        live.show_view(view)
        self.query_one(MonitorPanel).update_reading(view.snapshot.monitor, view.monitor, view.gpu_util)
        self.query_one(MetricPlots).show(self._metrics)
        replay = self.replay
        if replay is not None and len(replay.notes) > self._notes_shown:
            for note in replay.notes[self._notes_shown:]:
                self.notify(note, title=replay.name, timeout=10, markup=False)
            self._notes_shown = len(replay.notes)
        if view.finished:
            bridge.close()
            self._show_rows()

    def _show_stall(self) -> None:
        """A live run that writes nothing (its steps stopped: a hang, a long evaluation): the run pane's border
        says for how long, once a second."""
        if not self._panes_up():
            return
        live = self.query_one(LiveRun)
        last = reader.last_write(Path(self.meta.path)) if self.meta is not None else None
        done = self.replay is None or self.replay.status in ("ok", "stopped", "failed")
        age = time.time() - last if last is not None and not done else 0.0
        subtitle = f"no new line for {age:.0f} s" if age >= self.stall_s else ""
        if live.border_subtitle != subtitle:
            live.border_subtitle = subtitle

    def _show_rows(self) -> None:
        if not self._panes_up():
            return
        self._follow_newest()
        table = self.query_one(ComparisonTable)
        found = self._table.rows(self.baseline)
        new = [row for _, row in found]
        if new == table.rows_data:
            return
        on = self._cursor_run()
        cursor = table.cursor_row if table.rows_data else -1
        self._runs = [meta for meta, _ in found]
        table.rows_data = new
        table.add_results([])
        assert isinstance(table, WatchedTable)
        if not table.user_moved and self.meta is not None:  # the followed run stays in view (at 80x24 three rows
            on = self.meta  # are: it was the fourth, below them), until the user moves the cursor
        at = next((i for i, m in enumerate(self._runs) if on is not None and m.path == on.path), None)
        if at is not None and at in table.shown:  # a refresh keeps the run the user is on (a live run ending
            table.place(table.shown.index(at))  # leaves the rows a moment: its row's place moved)
        elif 0 <= cursor < len(new):
            table.place(cursor)

    def _follow_newest(self) -> None:
        """Under `attach NAME`: where the name's newest run (live first) is another run, newer than the one shown, it
        is attached (a run restarted under its name is followed; never an older one)."""
        if self.follow_name is None or self.meta is None:
            return
        now = store.newest(self.follow_name, self.where)
        if now is None or now.path == self.meta.path:
            return
        if now.start > self.meta.start:  # never back to an older run of the name (the followed one ended)
            self.notify(f"a newer run named {now.name!r} started ({now.describe()}): following it", timeout=6,
                        markup=False)
            self.attach(now)

    def _cursor_run(self) -> store.RunMeta | None:
        """The run of the highlighted row (the table's rows are `_runs`, one for one)."""
        table = self.query_one(ComparisonTable)
        row = table.row_at(table.cursor_row)
        at = next((i for i, r in enumerate(table.rows_data) if r is row), None)
        return self._runs[at] if at is not None and at < len(self._runs) else None

    # ---- keys -------------------------------------------------------------------------------------------------
    def _runs_now(self) -> tuple[list[store.RunMeta], list[store.RunMeta]]:
        """(live, finished): the picker's lists."""
        live = store.live_runs(self.where)
        paths = {m.path for m in live}
        return live, [m for m in store.all_runs(self.where) if m.path not in paths]

    def action_runs(self) -> None:
        live, finished = self._runs_now()

        def chosen(meta: store.RunMeta | None) -> None:
            if meta is not None:
                self.follow_name = None  # picked by hand: this run, not its name
                self.attach(meta)
            elif self.meta is None:
                self.exit(0)

        self.push_screen(RunPicker(live, finished, self._runs_now, "back" if self.meta is not None else "quit"),
                         chosen)

    def action_baseline(self) -> None:
        table = self.query_one(ComparisonTable)
        meta, row = self._cursor_run(), table.row_at(table.cursor_row)
        if meta is None or row is None:
            self.notify("no finished watched run to take as the baseline", timeout=3)
            return
        if row.preset.endswith(rows.LIVE_MARK):
            self.notify("a live run cannot be the baseline: its median still moves", timeout=4)
            return
        self.baseline = meta.path
        self._show_rows()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        save_svg(self, self.save_dir, filename, path)

    def on_unmount(self) -> None:
        self._stop.set()


def run_attach(meta: store.RunMeta | None, where: Path | None = None, follow_name: str | None = None) -> int:
    """The TUI on `meta` (None: the picker first), following `follow_name`'s newest run where given; its exit code
    (0)."""
    app = AttachApp(meta, where, follow_name=follow_name)
    app.run()
    return app.return_code or 0
