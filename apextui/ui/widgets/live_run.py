"""The running (or last) preset: step timing, progress, throughput, loss against its floor, AMP scale.

The floor (the data's entropy rate) bounds the *expected* loss; a single batch's loss can dip below it. So
the pane sets the floor against the smoothed loss (`bridge.LossAverage`, "avg") and shows the last batch's
loss under it, dimmed ("batch")."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import ProgressBar, Static

from apextui.core.availability import Availability
from apextui.core.monitor.contention import competing, describe
from apextui.core.presets import Preset
from apextui.core.run.merge import MergedRecord
from apextui.core.run.snapshot import RunInfo
from apextui.core.workloads.spec import WORKLOADS

from .. import widget_format as fmt
from ..bridge import RunView
from .axis_chart import AxisChart

STATUS_STYLE = {
    "starting": ("◌ starting", "bold cyan"), "running": ("● running", "bold green"),
    "compiling": ("◐ compiling", "bold magenta"), "profiling": ("◔ profiling", "bold cyan"),
    "ok": ("✓ finished", "bold green"), "stopped": ("■ stopped", "bold yellow"), "failed": ("✗ failed", "bold red"),
}


def _ms_label(value: float) -> str:
    return fmt.ms(value)


def _loss_label(value: float) -> str:
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def competed_text(snap: object) -> str:
    """The run pane's warning: while running, the latest sample's (`monitor.contention`); once finished, the whole
    run's record ('busy in 3 of 5 samples: …'); '' when nothing competed."""
    reading = getattr(snap, "monitor", None)
    if reading is None:
        return ""
    if getattr(snap, "finished", False):
        record = reading.run_contention
        if record is None or not competing(record):
            return ""
        n = record.busy_samples if record.level == "busy" else record.throttled_samples
        return f"{record.level} in {n} of {record.samples} samples" if n else describe(record)
    c = reading.contention
    return c.short if c is not None else ""


# 42 columns: whole in the run pane of an 80-column terminal (48 wide); the longer wording was cut at "end …"
STOPPING_COMPILE = "■ stops once compiled · s again: end it now"


class LiveRun(Vertical):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Run"
        self._cache: dict[str, object] = {}
        self._preset: Preset | None = None  # the run's preset, known before its RunInfo (compiling)
        self._started = 0.0  # time.monotonic() at begin(): the elapsed time while no snapshot comes
        self._status = ""
        self._ticker: Timer | None = None
        self._amp = False  # the run uses a GradScaler: the AMP line has something to say
        self._short = False  # a short terminal: no AMP line, so the loss curve keeps its line
        self._narrow = False  # a narrow terminal: the rate's field (16 columns) has no room for "step ms"
        self.trains = ""  # a watched run: what it trains, where its stream says (`watch/workload.py`), for the title

    def compose(self) -> ComposeResult:
        yield Static("select a preset and press enter", id="run-title")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=None, show_eta=False, id="run-progress")
            yield Static("", id="run-steps")
        yield Static(self._timing(None, None), id="run-timing")
        with Horizontal(id="rate-row"):
            yield Static("— /s", id="run-rate")
            yield AxisChart(label=_ms_label, id="ms-spark")
        yield Static("", id="amp-row")
        yield Static("", id="ranks-row")  # a data-parallel run: each rank's ms/step and the slowest
        with Horizontal(id="loss-row"):
            with Vertical(id="loss-labels"):
                yield Static("loss —", id="loss-value")
                yield Static("", id="loss-floor")
            yield AxisChart(label=_loss_label, id="loss-spark")

    def on_mount(self) -> None:
        self.query_one("#amp-row").display = False
        self.query_one("#ranks-row").display = False
        self.set_class(True, "-idle")

    # ---- helpers -------------------------------------------------------------------------
    def _set(self, wid: str, content: object, layout: bool = False) -> None:
        """Update a Static only when its content changed; without a relayout unless asked (the rows
        have fixed sizes), so a redraw repaints only what changed."""
        key = content.plain + repr(content.spans) if isinstance(content, Text) else content
        if self._cache.get(wid) != key:
            self._cache[wid] = key
            self.query_one(f"#{wid}", Static).update(content, layout=layout)  # type: ignore[arg-type]

    def _spark(self, wid: str, data: tuple[float, ...], floor: float | None = None) -> None:
        if self._cache.get(wid) != (data, floor):
            self._cache[wid] = (data, floor)
            self.query_one(f"#{wid}", AxisChart).set_data(data, floor)

    @staticmethod
    def _timing(now: float | None, stats: object) -> Text:
        """now 4.90  med 5.12  p10 4.91  p90 5.30 ms (fits 48 columns even for sub-ms steps)."""
        t = Text()
        for label, value in (("now", now), ("med", getattr(stats, "median_ms", None)),
                             ("p10", getattr(stats, "p10_ms", None)), ("p90", getattr(stats, "p90_ms", None))):
            t.append(f"{label} ", style="dim")
            t.append(fmt.ms(value), style="bold" if label == "med" else "")
            t.append("  ")
        t.append("ms/step", style="dim")
        return t

    # ---- idle ----------------------------------------------------------------------------
    def show_preset(self, preset: Preset | None, avail: Availability | None, device: str | None,
                    waiting: str | None = None, steps: int | None = None) -> None:
        """Nothing running: describe the highlighted preset (and why it cannot run, with the fix); `waiting`:
        it starts by itself once that (the device probe, the Apex doctor) finishes; `steps`: the steps set with
        n (or --steps) in place of the preset's own."""
        self.set_class(False, "-running")
        self.set_class(True, "-idle")
        if preset is None:
            self._set("run-title", Text("select a preset and press enter", style="dim"), layout=True)
            return
        self._title(f"Run · {preset.name}")
        t = Text.assemble((preset.name, "bold"), " ", (preset.description, "dim"))
        if waiting:
            t.append(f"\nstarts as soon as the {waiting} finishes…", style="bold cyan")
        elif avail is not None and not avail.ok:
            t.append(f"\n✗ {avail.reason}", style="red")
            if avail.fix:
                t.append(f"\nfix: {avail.fix}", style="cyan")
        elif avail is not None and device == "cpu":
            t.append("\nCPU run: the preset's small size · enter: start", style="yellow")
        elif avail is not None:
            t.append("\nenter: start", style="dim")
        if steps is not None and avail is not None and avail.ok:
            t.append(f"\n{steps} steps (n: change)", style="dim")
        self._set("run-title", t, layout=True)

    def show_unattached(self) -> None:
        """`apextui attach` following no run yet (its picker open, or closed with nothing chosen)."""
        self.set_class(False, "-running")
        self.set_class(True, "-idle")
        self._set("run-title", Text.assemble(("no watched run attached", "bold"),
                                             ("\nr: pick a run (one that starts is listed as it starts) · q: quit",
                                              "dim")), layout=True)

    def show_waiting(self, who: str) -> None:
        """Following a run that has written nothing yet (`apextui attach` on a watched run before its first
        `step()`: its stream starts there): say so, with no gauges, until its first snapshot."""
        self.set_class(False, "-running")
        self.set_class(True, "-idle")
        self._set("run-title", Text.assemble(("◌ waiting for the first step", "bold cyan"), "  ", (who, "bold"),
                                             ("\nits stream starts at its first step()", "dim")), layout=True)

    # ---- running -------------------------------------------------------------------------
    def begin(self, preset: Preset) -> None:
        """A run of `preset` starts: name it, and clear the previous run's bar, numbers and charts
        (a compile can take a minute before the first snapshot with a RunInfo)."""
        self._preset = preset
        self._started = time.monotonic()
        self._status = "starting"
        self._title(f"Run · {preset.name}")
        self._set("run-title", Text.assemble(STATUS_STYLE["starting"], "  ", (preset.name, "bold")))
        self._set("run-steps", self._steps_text(None, 0, 0.0))
        bar = self.query_one("#run-progress", ProgressBar)
        bar.update(total=None, progress=0)
        self._percentage(bar, False)
        for wid in ("ms-spark", "loss-spark"):
            self._cache.pop(wid, None)
            self.query_one(f"#{wid}", AxisChart).set_data(())
        if self._ticker is None:
            self._ticker = self.set_interval(1.0, self._tick)

    @staticmethod
    def _percentage(bar: ProgressBar, shown: bool) -> None:
        """Hide the bar's percentage while the total is unknown (it would read --%)."""
        for status in bar.query("#percentage"):
            if status.display != shown:
                status.display = shown

    def _tick(self) -> None:
        """Once a second: the elapsed time goes on while compiling (no snapshots come meanwhile)."""
        if self._status in ("starting", "compiling"):
            self._set("run-steps", self._steps_text(None, 0, 0.0))

    def _steps_text(self, info: RunInfo | None, done: int, elapsed: float) -> str:
        """' 150/400 · 7.5 s'; before the RunInfo (compiling) ' … · 12 s', counted here in whole seconds."""
        if info is None:
            return f" … · {int(max(elapsed, time.monotonic() - self._started if self._started else 0.0))} s"
        return f" {done}{f'/{info.steps}' if info.steps > 0 else ''} · {fmt.seconds(elapsed)}"

    def _title(self, title: str) -> None:
        if self.border_title != title:
            self.border_title = title

    def show_view(self, view: RunView, stopping: bool = False, sparklines: bool = True) -> None:
        """Show a run's state; the sparklines (the costly part of a redraw) only when `sparklines`."""
        self.set_class(True, "-running")
        self.set_class(False, "-idle")
        snap = view.snapshot
        info = snap.info
        self._status = snap.status
        label, style = STATUS_STYLE.get(snap.status, (snap.status, "bold"))
        if stopping and not snap.finished:
            label, style = (STOPPING_COMPILE if snap.status == "compiling" else "■ stopping…"), "bold yellow"
        title = Text.assemble((label, style), "  ")
        if snap.error:  # first, where the one-line title cannot cut it off
            title.append(f"{snap.error}  ", style="red")
        busy = competed_text(snap)
        if busy:  # next: other work competing makes every number of this run suspect
            title.append(f"⚠ {busy}  ", style="bold yellow")
        if info is not None:
            size = "small size" if info.size_name == "cpu" else "full size"
            title.append(f"{info.preset}", style="bold")
            if snap.status == "running" and snap.steps_done < info.warmup:
                title.append(" warm-up", style="cyan")
            mfu = info.mfu(getattr(snap.stats, "median_ms", None))
            if mfu.value is not None:  # early in the line: the title is cut at the pane's width
                title.append(" · MFU ", style="dim")
                title.append(mfu.percent or "", style="bold cyan")
            title.append(f" · {info.device} · {size if info.workload != 'watch' else self.trains or 'watched'}",
                         style="dim")
            if info.params:
                title.append(f" · {fmt.si(info.params, 'params')}", style="dim")
        elif self._preset is not None:
            title.append(self._preset.name, style="bold")
            if snap.status == "compiling":
                title.append(" · compile time is not counted in ms/step", style="dim")
        self._set("run-title", title)
        name = info.preset if info else (self._preset.name if self._preset else None)
        self._title(f"Run · {name}" if name else "Run")

        bar = self.query_one("#run-progress", ProgressBar)
        if info is not None:
            # a watched run may not say how long it is: the bar moves without a total until it ends
            total = info.steps if info.steps > 0 else (snap.steps_done or 1) if snap.finished else None
            if bar.total != total:
                bar.update(total=total)
                self._percentage(bar, total is not None)
            elif total is None:  # the bar starts without a total: its "--%" stays hidden
                self._percentage(bar, False)
            if bar.progress != snap.steps_done:
                bar.update(progress=snap.steps_done)
        self._set("run-steps", self._steps_text(info, snap.steps_done, snap.elapsed_s))
        self._set("run-timing", self._timing(view.last_ms, snap.stats))

        unit = f"{info.units}/s" if info else "/s"
        wall = snap.wall_throughput  # the rate a trainer's own samples/s counts (the median step's: the details)
        self._set("run-rate", Text.assemble((fmt.si(wall if wall is not None else snap.throughput, unit), "bold"),
                                            ("  " if self._narrow else "  step ms ", "dim")))
        if sparklines:
            self._spark("ms-spark", view.step_ms)

        floor = info.loss_floor if info else None
        if view.losses:
            self._set("loss-value", Text.assemble(("avg ", "bold"), (fmt.loss(view.smooth_loss), "bold"),
                                                  ("\nbatch ", "dim"), (fmt.loss(view.last_loss), "dim")),
                      layout="loss-value" not in self._cache or "avg" not in str(self._cache["loss-value"]))
            if sparklines:
                self._spark("loss-spark", view.losses, floor)
            self._set("loss-floor", Text.assemble(("floor ", "dim"), (fmt.loss(floor), "bold cyan"))
                      if floor is not None else "")
        elif _kernel_only(info):  # a norm benchmark times forward + backward and has no loss
            self._set("loss-value", Text("loss n/a", style="dim"), layout=True)
            self._set("loss-floor", Text("fwd+bwd only", style="dim"))
        else:  # no loss yet (compiling, or no step finished); one line where the last run's had two: relayout
            self._set("loss-value", Text("loss —", style="dim"), layout=True)
            self._set("loss-floor", Text.assemble(("floor ", "dim"), (fmt.loss(floor), "bold cyan"))
                      if floor is not None else Text("floor —", style="dim"))
        spark = self.query_one("#loss-spark")
        chart = bool(view.losses) or not _kernel_only(info)  # empty until steps come
        if spark.display != chart:
            spark.display = chart

        self._show_ranks(view.last_ranks)

        amp = self._amp = bool(info and info.uses_grad_scaler)
        self._show_amp_row()
        if amp and info is not None:
            scale = fmt.si(view.loss_scale) if view.loss_scale is not None else "—"
            self._set("amp-row", Text.assemble(
                (f"AMP {info.autocast}", "bold"), (" · loss scale ", "dim"), (scale, ""),
                (" · skipped ", "dim"), (str(snap.skipped_steps), "bold yellow" if snap.skipped_steps else ""),
                (" step" if snap.skipped_steps == 1 else " steps", "dim"),
            ))

    def set_narrow(self, narrow: bool) -> None:
        """Under 80 columns the rate's field is 16 wide: "245 samples/s  step ms" was cut to "245 samples/s  s",
        which ran into the chart's range ("s3.26–740"); narrow, the rate stands alone before the chart."""
        self._narrow = narrow

    def set_short(self, short: bool) -> None:
        """Under 24 rows the AMP line gives its line to the loss curve (the scale stays in the run's details)."""
        self._short = short
        self._show_amp_row()

    def _show_amp_row(self) -> None:
        row = self.query_one("#amp-row")
        shown = self._amp and not self._short
        if row.display != shown:
            row.display = shown

    def _show_ranks(self, last: MergedRecord | None) -> None:
        """Each rank's ms/step in the run's latest merged interval and the slowest rank (data-parallel runs only;
        the row stays hidden for others)."""
        row = self.query_one("#ranks-row")
        if last is None:
            if row.display:
                row.display = False
            return
        if not row.display:
            row.display = True
        text = Text.assemble((f"{len(last.rank_ms)} ranks", "bold"), (" · ms/step ", "dim"))
        for r, ms in enumerate(last.rank_ms):
            text.append(f"{'' if r == 0 else ' · '}{r}: ", style="dim")
            text.append(_ms_label(ms), style="bold yellow" if r == last.slowest_rank else "")
        text.append(f" · slowest rank {last.slowest_rank}", style="dim")
        self._set("ranks-row", text)

    def show_stopping(self, compiling: bool = False) -> None:
        title = self.query_one("#run-title", Static)
        self._cache.pop("run-title", None)
        title.update(Text(STOPPING_COMPILE if compiling else "■ stopping after the current step…",
                          style="bold yellow"), layout=False)


def _kernel_only(info: RunInfo | None) -> bool:
    """The run times one kernel (a norm benchmark: `WorkloadSpec.kernel_only`), so it has no loss to show."""
    spec = WORKLOADS.get(info.workload) if info is not None else None
    return spec is not None and spec.kernel_only
