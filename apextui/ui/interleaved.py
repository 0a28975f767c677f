"""`c`: an interleaved comparison of the presets marked in the picker (`m`), A/B/B/A with repeats.

Why: the comparison table's rows are single runs made one after another, and the host drifts between them (the
same preset measured 65.3 and 36.6 ms/step minutes apart on a busy box); `core.measure.compare` widens their
intervals by that drift. Interleaving the runs (repeat 1 in order, repeat 2 reversed, ...) spreads the drift over
every preset alike, and the hull of each preset's repeats holds it. The runs are `core.advise.Advisor`'s (its
interleaving, its pooled intervals, the one noise rule): this module only runs it in a background thread with the
marked presets and their workload's baseline, never stores the result as the machine's advice, and puts every run
it made in the comparison table as well. `lines` is what the result screen shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apextui.core.advise import DEFAULT_REPEATS, WorkloadVerdict, versus
from apextui.core.measure.compare import format_speedup
from apextui.core.number_format import ms as fmt_ms
from apextui.core.presets import Preset
from apextui.core.results import ResultRow, row_from_snapshot
from apextui.core.run.request import RunRequest

from .screens.advise_screen import AdviceJob

MIN_PRESETS = 2  # with their baselines: one marked preset runs against its workload's baseline


def selection(marked: Sequence[str], presets: Sequence[Preset]) -> tuple[list[Preset], str | None]:
    """The presets to interleave: the marked ones and, where missing, their workload's baseline; or why not (one
    marked preset is enough: it runs against its baseline; the baseline alone has nothing to be compared with)."""
    by_name = {p.name: p for p in presets}
    chosen = [by_name[n] for n in marked if n in by_name]
    for workload in dict.fromkeys(p.workload for p in chosen):
        if not any(p.is_baseline for p in chosen if p.workload == workload):
            found = next((p for p in presets if p.workload == workload and p.is_baseline), None)
            if found is not None:
                chosen.append(found)
    if len(chosen) < MIN_PRESETS:
        alone = f"{chosen[0].name} is its workload's baseline: " if chosen else ""
        return [], f"{alone}mark a preset (or several) with m in the preset list, then press c: each runs against " \
                   "its workload's baseline"
    return chosen, None


class InterleavedJob(AdviceJob):
    """One interleaved comparison, measured in a daemon thread: the Advice screen's job (its thread, progress,
    stop and shutdown) over the marked presets, never reusing stored advice nor storing its own; each run's final
    snapshot also goes to `on_row` as a comparison-table row."""

    def __init__(self, *, device: str, presets: Sequence[Preset], availability: Mapping[str, Any],
                 runner_factory: Any, steps: int | None, repeats: int = DEFAULT_REPEATS,
                 sample_interval: float = 1.0, on_row: Callable[[ResultRow], None] | None = None,
                 env: Mapping[str, Any] | None = None) -> None:
        self.on_row = on_row
        self.verdicts: list[WorkloadVerdict] = []  # the measured result (`lines`), once run
        super().__init__(device=device, presets=presets, availability=availability,
                         runner_factory=self._factory(runner_factory), steps=steps, repeats=repeats,
                         workloads=list(dict.fromkeys(p.workload for p in presets)), sample_interval=sample_interval,
                         reuse=False, env=env or {"device": device, "key": "interleaved"})

    def _factory(self, inner: Any) -> Any:
        """The app's runner factory, each run's final snapshot also made a comparison-table row."""
        def factory(request: RunRequest, callback: Callable[[Any], None], /) -> Any:
            def tee(snap: Any) -> None:
                callback(snap)
                if snap.finished and self.on_row is not None:
                    try:
                        self.on_row(row_from_snapshot(snap, request.preset, request.device))
                    except Exception:  # noqa: BLE001 - the comparison goes on without that row
                        pass

            return inner(request, tee)

        return factory

    def _main(self) -> None:
        """Measure; unlike the advice, the result is not the machine's advice and is never stored."""
        try:
            self.doc = self.advisor.run()
            self.verdicts = self.advisor.verdicts()
        except Exception as exc:  # noqa: BLE001 - shown to the user, never kills the app
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def progress_line(self) -> str:
        latest, done, total, _ = self.state()
        if latest is None:
            return f"interleaved comparison: starting ({total} runs)"
        return (f"interleaved comparison: run {min(done + 1, total)}/{total}: {latest.preset} "
                f"repeat {latest.repeat}/{latest.repeats} · {latest.status}")


def lines(doc: Mapping[str, Any], verdicts: Sequence[WorkloadVerdict]) -> list[str]:
    """The result: per workload, each preset's median (of its repeats) and interval, and its speed-up against the
    baseline with the interval that holds the run-to-run spread (`compare.timing_from_runs` via the advice). The
    numbers are the verdicts' own (`records.versus`), not the document's fields read back; the heading is the
    document's settings."""
    s = doc.get("settings") or {}
    out = [f"interleaved A/B/B/A: {s.get('repeats')} repeat(s) × {s.get('steps')} steps on {doc.get('device')}"
           + (" (PARTIAL: stopped)" if doc.get("status") == "partial" else "")]
    for w in verdicts:
        out.append("")
        out.append(f"{w.workload} (against {w.baseline})")
        base = w.measurement(w.baseline)
        for m in w.measurements:
            timing = m.timing
            if m.median_ms is None or timing is None:
                out.append(f"  {m.preset}: {m.reason or m.status or 'not measured'}")
                continue
            interval = f" ({fmt_ms(timing.low_ms)}–{fmt_ms(timing.high_ms)})" if timing.known else ""
            if m.preset == w.baseline:
                up = "base"
            else:
                up = format_speedup(versus(m, base)) if base is not None and base.measured else "—"
            out.append(f"  {m.preset}: {fmt_ms(m.median_ms)} ms{interval} over {len(m.ok_runs)} run(s) · {up}")
    out.append("")
    out.append("≈ within noise; each interval holds every repeat's own noise and the spread between the repeats")
    return out
