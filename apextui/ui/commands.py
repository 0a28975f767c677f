"""The command palette's entries (ctrl+p): every action of the main screen, and start <preset> for each preset.

`ApexTuiApp.get_system_commands` yields these after Textual's own, less those apextui has its own of
(`REPLACED_SYSTEM_COMMANDS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.app import SystemCommand

# Textual's commands that an entry below replaces: its Quit (which skips saving the unsaved runs), Keys (Help)
# and Screenshot (SVG screenshot, saved where apextui saves its files)
REPLACED_SYSTEM_COMMANDS = frozenset({"Quit", "Keys", "Screenshot"})

ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Stop the run", "s: stop after the current step (again while compiling: end its worker)", "stop"),
    ("Run again", "r: the highlighted comparison row's preset, run again", "rerun"),
    ("Steps of the next runs", "n: as --steps; empty: each preset's own", "steps"),
    ("Doctor report", "d: the full Apex doctor report with fixes", "doctor"),
    ("Advise", "a: which presets to use on this machine", "advise"),
    ("Save results (JSON)", "w: all rows to apextui-results-*.json; a copy goes to the run history", "save"),
    ("Export CSV and Markdown", "e: the comparison table as .csv and .md", "export"),
    ("Export CSV", "the comparison table as apextui-results-*.csv", "export_csv"),
    ("Export Markdown", "the comparison table as apextui-results-*.md", "export_markdown"),
    ("Load results", "l: a recent results file, or a path", "load"),
    ("Compare interleaved", "c: the presets marked with m (and their baseline), A/B/B/A with repeats", "compare"),
    ("Worker output log", "o: compile messages, warnings and errors of every run", "log"),
    ("Run details", "i: the full record of the highlighted comparison row", "details"),
    ("SVG screenshot", "p: save the screen as apextui-*.svg", "screenshot"),
    ("Help", "? / F1: every key and pane", "help"),
    ("Quit apextui", "q / ctrl+c: stop the run, save unsaved runs to the run history, exit", "quit"),
)


def app_commands(app: Any) -> Iterator[SystemCommand]:
    """Commands for `app` (an ApexTuiApp): each runs the action its key runs."""
    for title, help_text, action in ACTIONS:
        yield SystemCommand(title, help_text, partial(app.run_action, action))
    for preset in app.presets:
        what = f"{preset.workload}: {preset.description}" if getattr(preset, "description", "") else preset.workload
        yield SystemCommand(f"start {preset.name}", f"run the {preset.name} preset ({what})",
                            partial(app.start_preset, preset.name), discover=False)
