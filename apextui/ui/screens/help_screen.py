"""`?` / F1: every key of the main screen and what each pane shows (the same words as docs/tui.md)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from .text_screen import TextScreen

KEYS: tuple[tuple[str, str], ...] = (
    ("↑ ↓ home end", "move in the preset list or the comparison table"),
    ("tab shift+tab", "move between the panes"),
    ("enter", "presets: start the highlighted preset · comparison: the run's full record"),
    ("i", "the full record of the highlighted comparison row (as enter there)"),
    ("s", "stop the run after its current step (s again: end its worker at once)"),
    ("m c", "presets: m marks the highlighted one · c runs the marked ones (and their baseline) interleaved, "
            "A/B/B/A with repeats, and shows their pooled intervals"),
    ("t x u [ ]", "comparison: t sorts (run order, median, speed-up, preset) · x hides the row · u shows the "
                  "hidden ones · [ ] older / newer page of a long history"),
    ("r", "run the highlighted comparison row's preset again (after a run: the one that just ended)"),
    ("n", "the steps of the next runs (as --steps; empty: each preset's own)"),
    ("d", "the full Apex doctor report"),
    ("a", "the Advice screen: which presets to use here"),
    ("o", "the worker's output: compile messages, warnings, errors of every run"),
    ("w", "save all rows as JSON in the start folder (a copy goes to the run history)"),
    ("e", "export the comparison table as CSV and Markdown in the start folder"),
    ("p", "save an SVG screenshot in the start folder"),
    ("l", "load results: pick a recent file (run history, start folder) or type a path"),
    ("ctrl+p", "the command palette: every action, start <preset> for every preset"),
    ("? f1", "this help"),
    ("q ctrl+q ctrl+c", ("quit: a running run is stopped first; runs not saved with w are saved "
                        "automatically to the run history")),
)

PANES: tuple[tuple[str, str], ...] = (
    ("Apex doctor", ("where runs go (GPU, or CPU at small sizes), Apex's status, each fused feature ✓/✗ "
                    "with its reason; d opens the full report with fixes")),
    ("Presets", "every preset by workload, with its baseline; ✗ cannot run here (highlight it for why)"),
    ("Run", ("ms per step now / median / p10 / p90 (warm-up excluded), progress, throughput, step-time "
            "sparkline, loss curve against the data's entropy floor, AMP loss scale and skipped steps")),
    ("GPU · process", "GPU utilisation, memory, power, temperature, SM clock (NVML); process CPU % and RSS"),
    ("Comparison", ("every finished run (■ stopped, ✗ failed, f1 f2 … loaded from files): median, p10–p90, "
                   "speed-up vs the workload's baseline (≈ within noise; a failed run has none), the last "
                   "batch's loss (the data's floor in brackets), "
                   "norm check max error; narrow terminals keep the main columns, wide ones add more")),
    ("Worker output", ("150 columns or more, beside the comparison table: what the runs' workers print (o: full "
                      "screen)")),
)

HISTORY = ("Run history: results saved with w, and runs saved automatically on quit, accumulate in the user's "
           "data folder ($XDG_DATA_HOME/apextui, else ~/.local/share/apextui); l lists the recent ones. "
           "If the terminal hangs up (SIGHUP) the runs are saved to the start folder (or that data folder) "
           "and apextui exits 129.")


def help_body() -> Table:
    """Keys, then panes, as one two-column grid."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text("Keys", style="bold underline"), "")
    for key, what in KEYS:
        grid.add_row(key, what)
    grid.add_row("", "")
    grid.add_row(Text("Panes", style="bold underline"), "")
    for pane, what in PANES:
        grid.add_row(pane, what)
    grid.add_row("", "")
    grid.add_row(Text("History", style="bold underline"), HISTORY)
    return grid


class HelpScreen(TextScreen):
    """A modal over the main screen; esc, q, ? or F1 close it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("f1", "dismiss", "Close", show=False),
    ]
    SCROLL_ID = "help-scroll"
    BODY_ID = "help-body"
    BOX_TITLE = "apextui — keys and panes"

    def body(self) -> Static:
        return Static(help_body(), id=self.BODY_ID)
