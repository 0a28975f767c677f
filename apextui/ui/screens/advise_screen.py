"""`a`: what to use on this machine (`apextui advise` in the TUI).

The advice runs in an `AdviceJob`: a background thread of the app drives `core.advise.Advisor` through
the app's runner factory (so each run trains in a worker process, as the app's own runs do). The job
belongs to the app (`app.advice_job`), not to the screen: closing the screen (escape) leaves it
measuring, and the app says when it is done; `s` on the screen stops it (the partial advice is kept).
The screen polls the job's state a few times a second (never per step), and redraws the verdicts once.
Opening the screen reuses the advice stored for this environment when there is one, saying when, with how
many steps and repeats and on which device it was measured, and warning when its runs were too short to
trust (`core.advise.provenance`, `trust_note`); `r` measures again.

With `--model` (the app's presets hold a model's), the advice is the model's configuration search, the very
engine `apextui advise --model` runs (`Advisor(search_budget_s=...)`, core/advise/search.py): the screen shows
which point is measured and why, and the budget used and left; then the same answer as the CLI's
(`AdviceView.answer`: the winning configuration, its snippet, the speed-ups, peak memory). A model's advice
is never stored nor reused (its code may change), as on the command line. Before its search the job looks at the
model (`core.model_scope`: in a worker process of its own, this process never imports the user's code) and hands
the Advisor the same arguments the CLI does, so that the search leaves out the same values that do not apply to it.

Times that go on between updates (a compile sends no update for minutes) are counted here, from when the
latest update came (`AdviceJob.clock`), not frozen at the update's own figure.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Footer, ProgressBar, Static

from apextui.core.advise import DEFAULT_REPEATS, Advisor, Progress, store
from apextui.core.advise.advice_view import AdviceView, view
from apextui.core.advise.search import DEFAULT_BUDGET_S
from apextui.core.run.runner import thread_runner_factory
from apextui.core.run.worker import WHERE_ENV

from .. import widget_format as fmt
from ..doctor_view import wrap_line

if TYPE_CHECKING:
    from ..app_base import AppBase

POLL_S = 0.25  # how often the screen looks at the job
FINISHED_LINES = 200  # finished-run lines kept for the screen


class AdviceJob:
    """One advice measured (or reused) in a background thread; its state is read by the UI thread.
    `search_budget_s`: the model's search (then `workloads` is the model's); `clock`: what times the updates."""

    def __init__(self, *, device: str, presets: Sequence[Any], availability: Mapping[str, Any],
                 runner_factory: Any, steps: int | None = None, repeats: int = DEFAULT_REPEATS,
                 workloads: Sequence[str] | None = None, sample_interval: float = 1.0, reuse: bool = True,
                 env: Mapping[str, Any] | None = None, search_budget_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.searches = search_budget_s is not None
        self.reuse = reuse and not self.searches
        self.steps_given = steps
        self.clock = clock

        def available(p: Any) -> Any:  # a point the search makes is not in the probe's table: checked here
            known = availability.get(p.name)
            if known is None and p.point is not None:
                from apextui.core.availability import availability as check

                return check(p, device)
            return known

        self.advisor = Advisor(device, steps=steps, repeats=repeats, workloads=workloads, presets=presets,
                               availability_fn=available, runner_factory=runner_factory,
                               on_progress=self._on_progress, sample_interval=sample_interval, env=env,
                               search_budget_s=search_budget_s)
        # the user's model, looked at before its search (`_scope`): in a worker process of its own unless the runs
        # train in this one (then it is imported here anyway)
        self.model = next((p.model for p in presets if p.workload == "model" and p.model), None)
        self.probe_apart = runner_factory is not thread_runner_factory and os.environ.get(WHERE_ENV) != "thread"
        self.probing = False
        self._lock = threading.Lock()
        self.latest: Progress | None = None  # the current run's latest update
        self.latest_at = 0.0  # when it came (`clock`)
        self.total = 0
        self.finished_runs = 0
        self.lines: list[str] = []  # one a finished run (its numbers), and the presets not run
        self.doc: dict[str, Any] | None = None
        self.error: str | None = None
        self.reuse_note: str | None = None  # why stored advice was not reused
        self.store_note: str | None = None
        self.started = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="apextui-advice", daemon=True)

    # ---- background thread ----------------------------------------------------------------
    def _on_progress(self, p: Progress) -> None:
        with self._lock:
            if p.event == "plan":
                self.total = p.total
            elif p.event == "run":
                self.latest, self.latest_at = p, self.clock()
            elif p.event == "run_end":
                self.finished_runs += 1
                self.total = max(self.total, self.finished_runs)  # a search: its runs so far
                self.lines.append(p.line())
            elif p.event in ("skip", "search"):
                self.lines.append(p.message)
            del self.lines[:-FINISHED_LINES]

    def _main(self) -> None:
        try:
            if self.reuse:
                doc, why = self.advisor.reusable(steps=self.steps_given)
                if doc is not None:
                    self.doc = doc
                    return
                self.reuse_note = why
            if self.searches and self.model is not None and not self._scope(self.model):
                return
            doc = self.advisor.run()
            if not self.searches:  # a model's advice is never stored (its code may change)
                try:
                    store(doc)
                except OSError as exc:
                    self.store_note = f"could not store the advice: {exc}"
            self.doc = doc
        except Exception as exc:  # noqa: BLE001 - shown on the screen, never kills the app
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def _scope(self, spec: str) -> bool:
        """Before the model's search: what the model has (its SDPA calls, convolutions, norms, loss), so that the
        search leaves out what does not apply to it, as `apextui advise --model` does (`model_scope`): the same
        facts, the same Advisor arguments. Its time counts against the budget, as on the command line. False where
        there is nothing to search: the model cannot be built (`error` says why, as the CLI's exit 2 or 1 would).
        A stop meanwhile leaves the search to end at once, its partial advice as any stopped one."""
        from apextui.core.model_presets import ProbeTimeout
        from apextui.core.model_scope import ModelRaised, advisor_args, probe_model
        from apextui.core.workloads.user_model import ModelSpecError

        advisor = self.advisor
        advisor.budget_started = advisor.clock()
        budget = advisor.search_budget_s
        self.probing = True
        try:
            facts = probe_model(spec, advisor.device, apart=self.probe_apart, stopped=lambda: advisor.stopping,
                                deadline=time.monotonic() + budget if budget is not None else None, budget_s=budget)
        except (ModelSpecError, ModelRaised) as exc:
            self.error = "\n".join([str(exc), *("  " + line for line in exc.detail.splitlines())])
            return False
        except ProbeTimeout as exc:  # a build that never returns: no longer than the budget, as on the CLI
            self.error = str(exc)
            return False
        finally:
            self.probing = False
        if facts is None:  # stopped: the search runs nothing
            return True
        # every argument the CLI hands its Advisor (`advisor_args`), by the same names: none left behind here
        for name, value in advisor_args(facts, advisor.device, fallback=advisor.availability_fn).items():
            setattr(advisor, name, value)
        return True

    # ---- any thread -----------------------------------------------------------------------
    def start(self) -> AdviceJob:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.advisor.stop()

    @property
    def stopping(self) -> bool:
        return self.advisor.stopping

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._done.is_set()

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def shutdown(self, timeout: float | None) -> bool:
        """Stop and wait up to `timeout` s (0: do not wait); True when the job is over."""
        if self.done or self._thread.ident is None:
            return True
        self.stop()
        return self.join(timeout) if timeout else self.done

    def state(self) -> tuple[Progress | None, int, int, list[str]]:
        with self._lock:
            return self.latest, self.finished_runs, self.total, list(self.lines)

    def since_latest(self) -> float:
        """Seconds since the latest run update came: what the run's own times have grown by since."""
        with self._lock:
            return max(0.0, self.clock() - self.latest_at) if self.latest is not None else 0.0


def start_job(app: AppBase, *, reuse: bool = True, workloads: Sequence[str] | None = None,
              repeats: int = DEFAULT_REPEATS, steps: int | None = None,
              env: Mapping[str, Any] | None = None, budget: float | None = None) -> str | None:
    """Start an advice for `app` (if it can start now); None when started, else why not. With a model among
    the app's presets: the model's search within `budget` s (default `search.DEFAULT_BUDGET_S`)."""
    if app.measuring() == "advice":
        return "the advice is already measuring"
    if app.probe_error:
        return f"cannot advise: {app.probe_error}"
    if app.probe is None or not app.doctor_done:
        return "waiting for the device probe and the Apex doctor…"
    if app.active is not None:
        return f"{app.active.preset.name} is running: stop it (s on the main screen) first, then press r here"
    device = app.probe.device
    model = any(p.workload == "model" for p in app.presets)  # --model: its search, as `advise --model` runs it
    app.advice_job = AdviceJob(
        device=device, presets=app.presets, availability=app.probe.availability,
        runner_factory=app.runner_factory, steps=steps if steps is not None else app.settings.steps, repeats=repeats,
        workloads=workloads if workloads is not None or not model else ("model",),
        sample_interval=app.settings.sample_interval, reuse=reuse, env=env,
        search_budget_s=(budget if budget is not None else DEFAULT_BUDGET_S[device]) if model else None,
    ).start()
    _watch(app, app.advice_job)
    return None


def _watch(app: Any, job: AdviceJob) -> None:
    """Tell the user when a job finishes while its screen is closed."""
    timer: Any = None

    def check() -> None:
        if not job.done:
            return
        timer.stop()
        if not app.is_running:  # the app is closing: its screen stack is taken down after it stops running
            return
        if not isinstance(app.screen, AdviseScreen):
            what = "failed" if job.error else ("stopped (partial)" if job.doc and job.doc["status"] == "partial"
                                               else "ready")
            app.notify(f"the advice is {what}: press a to see it", title="advice", timeout=10)
        app.refresh_bindings()

    timer = app.set_interval(0.5, check)


def open_advice(app: Any, **kw: Any) -> AdviseScreen:
    """`a`: show the advice screen (it starts or reuses an advice when there is none yet)."""
    screen = AdviseScreen(**kw)
    app.push_screen(screen)
    return screen


# ---- rendering ----------------------------------------------------------------------------------
def render_progress(job: AdviceJob) -> Text:
    """The current run: which (a search: which point, and the budget used and left), and how far; its times
    counted on from the latest update (a compile sends none for minutes)."""
    latest, _done, total, _ = job.state()
    later = job.since_latest()
    t = Text()
    if job.stopping:
        t.append("stopping after the current step… ", style="bold yellow")
    if latest is None:
        t.append("looking at your model (building it once)…" if job.probing else "starting…" if not job.reuse
                 else "looking for stored advice…", style="dim")
        return t
    if latest.budget_s is not None and latest.spent_s is not None:
        spent = min(latest.spent_s + later, latest.budget_s)
        t.append(f"search run {latest.index} ", style="bold")
        t.append(f"{latest.preset} · budget {spent:.0f} of {latest.budget_s:.0f} s "
                 f"({latest.budget_s - spent:.0f} s left) · ")
    else:
        t.append(f"run {latest.index}/{total} ", style="bold")
        t.append(f"{latest.workload} · {latest.preset} · repeat {latest.repeat}/{latest.repeats} · ")
    if latest.status == "compiling":
        el = f" {latest.elapsed_s + later:.0f} s" if latest.elapsed_s is not None else ""
        t.append(f"compiling…{el} (not counted in ms/step)", style="bold magenta")
    elif latest.status in ("starting", "profiling"):
        t.append(f"{latest.status}…", style="dim")
    else:
        t.append(f"{latest.status} {latest.steps_done}/{latest.steps} steps")
    return t


def render_lines(lines: Sequence[str]) -> Text:
    """The finished runs, then the presets not run on one line: eight "not run" lines (one a preset, each
    with its reason) used to push the progress off an 80x24 screen; the verdict gives the reasons."""
    finished = [line for line in lines if ": not run:" not in line]
    skipped = [line.split(":", 1)[0].split()[-1] for line in lines if ": not run:" in line]
    t = Text("Finished runs (evidence so far):\n", style="bold")
    for line in finished[-30:]:
        t.append(line + "\n")
    if skipped:
        t.append(f"not run ({len(skipped)}): {', '.join(skipped)}\n", style="dim")
    return t


ROW_WIDTH = 84  # columns a preset's row takes with every column; narrower, p10–p90 is left out (70)


def hanging(text: Text, width: int) -> Text:
    """`text` wrapped at words to `width` with a hanging indent (each line's continuations under its own indent
    plus 4, `doctor_view.wrap_line`): at 80 columns the Static's own wrap started them at column 0, so a
    verdict's second line read as a new line of its own."""
    if width < 20:
        return text
    lines = text.split("\n", allow_blank=True)
    return Text("\n").join([piece for line in lines for piece in wrap_line(line, width)])


def render_doc(v: AdviceView, narrow: bool = False, width: int = 0) -> Text:
    """The verdict per workload with its evidence, and the Apex line: the TUI's layout of the one view of the
    advice (`core.advise.advice_view.view`, which the CLI's text lays out too). `narrow` (a box under
    ROW_WIDTH columns, as at 80 columns): the rows leave out p10–p90, so that none wraps mid-row. `width`: the
    verdicts wrapped to it (`hanging`); the search's answer, a code snippet to copy, is never re-indented."""
    t = Text()
    style = {"worth_it": "bold green", "mixed": "bold yellow", "not_worth_it": "bold", "not_measurable": "yellow"}
    t.append("Apex here: ", style="bold")
    t.append(v.apex + "\n", style=style.get(v.apex_status, ""))
    for w in v.workloads:
        t.append("\n")
        t.append(f"{w.workload}", style="bold underline")
        t.append(f"  baseline {w.baseline}", style="dim")
        if w.status_label:
            t.append(f"  [{w.status_label}]", style="bold yellow")
        t.append("\n")
        if w.recommended:
            t.append("  ➜ use ", style="bold")
            t.append(w.recommended, style="bold green")
            if w.recommended_vs_base is not None:
                t.append(f"  {w.recommended_vs_base} the baseline")
            if w.why_recommended:
                t.append(f"  ({w.why_recommended})", style="yellow")
            if w.within_noise:
                t.append(f"  ({', '.join(w.within_noise)} within noise of it)", style="yellow")
            t.append("\n")
        t.append(f"  {w.verdict}\n")
        if w.configuration:
            t.append(f"  {w.configuration}\n", style="dim")
        for f in w.flags:
            t.append(f"  ⚑ {f}\n", style="bold red")
        if w.apex is not None:
            t.append("  Apex: ", style="bold")
            t.append(w.apex + "\n")
        spread_head = "" if narrow else f" {'p10–p90':>13}"
        t.append(f"  {'preset':<22}{'median':>8}{spread_head} {'n':>2} {'spread':>7} {'vs base (95 %)':>18} "
                 f"{'loss':>7}\n", style="dim")
        for r in w.rows:
            if r.kind != "measured":
                t.append(f"  ✗ {r.preset}: {r.why}\n", style="dim")
                continue
            name = r.preset[:20] + (" *" if r.is_baseline else "") + (" ⚑" if r.flagged else "")
            t.append(f"  {name:<22}", style="bold" if r.recommended else "")
            p10_p90 = "" if narrow else f" {r.p10_p90:>13}"
            t.append(f"{r.median:>8}{p10_p90} {r.repeats:>2} {r.spread:>7} {r.vs_base:>18} {r.loss:>7}\n")
            extra = [x for x in (r.roofline if r.roofline != fmt.DASH else None, r.compile) if x]
            if extra:
                t.append(f"      {' · '.join(extra)}\n", style="dim")
        for n in w.notes:
            t.append(f"  note: {n}\n", style="italic")
    t.append(f"\nms = median of the repeats' median ms/step · * baseline · ⚑ flagged · ≈ within noise: "
             f"{v.noise_rule}\n", style="dim")
    if v.competed_legend:
        t.append(f"{v.competed_legend}\n", style="yellow")
    if width:
        t = hanging(t, width)
    if v.answer:  # the model's search and its answer: the CLI's lines (`answer.answer_lines`)
        t.append("\n")
        for line in v.answer:
            bold = line.startswith(("fastest configuration:", "fastest so far, unconfirmed:",
                                    "use your model as written"))
            t.append(line + "\n", style="bold green" if bold else "")
    return t


def render_head(job: AdviceJob, v: AdviceView) -> Text:
    """Where the advice comes from (measured now, or reused: when, how, where), and its warnings."""
    head = Text()
    if v.reused:
        head.append(v.reuse_note, style="cyan")
        head.append("  · r measures again", style="dim")
    elif v.searched:  # the model's search: it makes its own repeats
        head.append(f"measured {v.measured_at} on {v.device}: a configuration search, {v.runs_ok} of "
                    f"{v.runs_total} runs ok, {v.steps} steps a run, in {v.elapsed_s:.0f} s")
    else:
        head.append(f"measured {v.measured_at} on {v.device}: {v.runs_ok} of {v.runs_total} runs ok, "
                    f"{v.repeats} repeat(s) × {v.steps} steps, in {v.elapsed_s:.0f} s")
        if job.reuse_note:
            head.append(f"\n(nothing to reuse: {job.reuse_note})", style="dim")
    if v.trust_note:
        head.append(f"\n⚠ {v.trust_note}", style="bold yellow")
    if v.status == "partial":
        head.append("\nPARTIAL: stopped before every run was made; the verdicts use what was measured",
                    style="bold yellow")
    if job.store_note:
        head.append(f"\n{job.store_note}", style="red")
    return head


class AdviseScreen(ModalScreen[None]):
    """Progress of the running advice, then the verdict per workload with its evidence."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("a", "dismiss", "Close", show=False),
        Binding("s", "stop_advice", "Stop advice"),
        Binding("r", "remeasure", "Measure again"),
    ]

    def __init__(self, *, workloads: Sequence[str] | None = None, repeats: int = DEFAULT_REPEATS,
                 steps: int | None = None, env: Mapping[str, Any] | None = None,
                 budget: float | None = None) -> None:
        super().__init__()
        self.budget = budget  # the model's search: its budget in seconds (None: the device's default)
        self.workloads = workloads
        self.repeats = repeats
        self.steps = steps
        self.env = env
        self._pending = False  # start (or reuse) as soon as the app can
        self._shown: Any = None
        self.message = ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="advise-scroll") as scroll:
            scroll.border_title = "Advice — what to use on this machine"
            scroll.border_subtitle = "s stop · r measure again · esc close"
            yield Static(id="advise-status")
            yield ProgressBar(id="advise-progress", show_eta=False)
            yield Static(id="advise-body")
        yield Footer()

    @property
    def job(self) -> AdviceJob | None:
        return cast("AppBase", self.app).advice_job  # the main app's, which alone opens this screen

    def on_mount(self) -> None:
        self.query_one("#advise-scroll").focus()
        job = self.job
        if job is None or (not job.running and job.doc is None and job.error is None):
            self._pending = True
        self._tick()
        self.set_interval(POLL_S, self._tick)

    def _start(self, reuse: bool) -> None:
        app = cast("AppBase", self.app)
        why = start_job(app, reuse=reuse, workloads=self.workloads, repeats=self.repeats, steps=self.steps,
                        env=self.env, budget=self.budget)
        waiting = app.probe is None or not app.doctor_done
        if why is None or not waiting or app.probe_error:
            self._pending = False  # started, or blocked by something only the user can change (r retries)
        if why is None:
            self._shown = None
        self.message = why or ""
        self.app.refresh_bindings()

    def _tick(self) -> None:
        if self._pending:
            self._start(reuse=True)
        job = self.job
        try:
            status = self.query_one("#advise-status", Static)
            body = self.query_one("#advise-body", Static)
            bar = self.query_one("#advise-progress", ProgressBar)
        except NoMatches:  # being torn down (the app is exiting)
            return
        if job is None:
            status.update(Text(self.message or "…", style="yellow"))
            bar.display = False
            return
        if job.running:
            latest, done, total, lines = job.state()
            status.update(render_progress(job))
            bar.display = True
            if latest is not None and latest.budget_s is not None and latest.spent_s is not None:  # the search
                bar.update(total=latest.budget_s, progress=min(latest.budget_s, latest.spent_s + job.since_latest()))
            else:
                bar.update(total=max(total, 1), progress=done)
            body.update(render_lines(lines) if lines else Text(""))
            self._shown = None
            return
        bar.display = False
        if self._shown is job:
            return
        self._shown = job
        head = Text()
        if self.message and self._pending:
            head.append(self.message + "\n", style="yellow")
        if job.error:
            head.append(f"the advice failed: {job.error}", style="bold red")
            status.update(head)
            body.update("")
            return
        v = view(job.doc or {})
        scroll = self.query_one("#advise-scroll")
        width = scroll.size.width - scroll.styles.gutter.width - 1
        status.update(hanging(head + render_head(job, v), width))
        body.update(render_doc(v, narrow=width < ROW_WIDTH, width=width))

    def on_resize(self) -> None:
        self._shown = None  # laid out again for the new width (render_doc's narrow rows)
        self._tick()

    def action_stop_advice(self) -> None:
        job = self.job
        if job is None or not job.running:
            self.app.notify("the advice is not measuring", timeout=2)
            return
        job.stop()
        self._tick()

    def action_remeasure(self) -> None:
        job = self.job
        if job is not None and job.running:
            self.app.notify("the advice is measuring already (s stops it)", timeout=3)
            return
        self._start(reuse=False)
        if self.message:
            self.app.notify(self.message, severity="warning", timeout=5)
        self._tick()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        job = self.job
        running = job is not None and job.running
        if action == "stop_advice" and not running:
            return None
        if action == "remeasure" and running:
            return None
        return True
