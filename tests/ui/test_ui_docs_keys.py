"""docs/tui.md's key tables say what the code binds: the main screen's keys (the app, the preset list, the
comparison table, Textual's ctrl+q and ctrl+p) and each screen's over it; the help screen lists the same keys.
A binding added, removed or moved without its line in docs/tui.md fails here."""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import App

from apextui.ui.app import ApexTuiApp
from apextui.ui.screens import help_screen
from apextui.ui.screens.advise_screen import AdviseScreen
from apextui.ui.screens.help_screen import HelpScreen
from apextui.ui.screens.interleaved_screen import InterleavedScreen
from apextui.ui.screens.load_screen import LoadScreen
from apextui.ui.screens.log_screen import LogScreen
from apextui.ui.screens.report_screen import ReportScreen
from apextui.ui.screens.run_details_screen import RunDetailsScreen
from apextui.ui.screens.steps_screen import StepsScreen
from apextui.ui.widgets.comparison_table import ComparisonTable
from apextui.ui.widgets.preset_picker import PresetPicker

DOC = Path(__file__).resolve().parents[2] / "docs" / "tui.md"
SHOWN = {"escape": "esc", "question_mark": "?", "up": "↑", "down": "↓", "left_square_bracket": "[",
         "right_square_bracket": "]"}  # key names as the docs write them
SCREENS = {"doctor report": ReportScreen, "advice": AdviseScreen, "help": HelpScreen,
           "run details": RunDetailsScreen, "worker output": LogScreen, "load": LoadScreen,
           "interleaved comparison": InterleavedScreen, "steps": StepsScreen}


def shown(key: str) -> str:
    return SHOWN.get(key, key).lower()


def bound(*classes: type) -> set[str]:
    """The keys bound by apextui's own classes among `classes` and their bases (BINDINGS merge along them)."""
    keys = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__.startswith("apextui."):
                for binding in klass.__dict__.get("BINDINGS", ()):
                    keys.update(shown(k.strip()) for k in binding.key.split(","))
    return keys


def table_after(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line `heading` (its header and rule left out)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def test_the_main_keys_table_lists_exactly_the_bound_keys():
    documented = {key.lower() for row in table_after("## Keys") for key in row[0].split()}
    textual = {shown(b.key) for b in App.BINDINGS if b.key == "ctrl+q"} | {App.COMMAND_PALETTE_BINDING}
    assert textual == {"ctrl+q", "ctrl+p"}
    expected = bound(ApexTuiApp, PresetPicker, ComparisonTable) | textual | {"↑", "↓"}  # the lists' own ↑ ↓
    assert documented == expected


def test_the_help_screen_lists_the_documented_keys():
    in_help = {key.lower() for keys, _what in help_screen.KEYS for key in keys.split()}
    documented = {key.lower() for row in table_after("## Keys") for key in row[0].split()}
    assert in_help == documented | {"tab", "shift+tab"}


def test_each_screens_keys_are_documented():
    rows = {row[0]: row[1] for row in table_after("In the screens over the main one")}
    assert len(rows) == len(SCREENS)
    for label, keys in rows.items():
        cls = next(c for name, c in SCREENS.items() if label.startswith(name))
        documented = set()
        for part in re.sub(r"\(.*?\)", "", keys).split(";"):
            documented.update(k.lower() for k in part.split("—")[0].split())
        assert documented == bound(cls), label
