"""`apextui attach` without a name: pick a watched run (live ones first, then finished ones, newest first).

The list is read again every `REFRESH_S` while the picker is open: a run started after it opened (the usual
order: open attach, then start the training) is listed as it starts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from apextui.core.watch.store import RunMeta

REFRESH_S = 1.0  # how often the list of runs is read again
Runs = tuple[Sequence[RunMeta], Sequence[RunMeta]]  # (live, finished)


class RunPicker(ModalScreen["RunMeta | None"]):
    """Dismissed with the chosen run, or None (escape). `load` reads the (live, finished) runs again (every
    `REFRESH_S`); `leaving`: what escape does, for its label (`back` to the run shown, `quit` with none)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Back"), Binding("q", "cancel", "Back")]
    DEFAULT_CSS = """
    RunPicker { align: center middle; }
    #picker-box { width: 90%; max-width: 100; height: auto; max-height: 80%; border: round $accent;
                  background: $surface; padding: 0 1; }
    /* Rich crops the list's lines by its width: it keeps 12 columns, however few the terminal has */
    #picker-list { height: auto; max-height: 20; min-width: 12; }
    """

    def __init__(self, live: Sequence[RunMeta], finished: Sequence[RunMeta],
                 load: Callable[[], Runs] | None = None, leaving: str = "back",
                 refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.runs = [*live, *finished]
        self.live = len(live)
        # every run listed since the picker opened, by folder: an option is its run's folder, so an enter pressed on a
        # list drawn before a reload (a new live run pushed the rows down) takes the run it was pressed on
        self._listed = {m.path: m for m in self.runs}
        self.load = load
        self.leaving = leaving
        self.refresh_s = refresh_s

    def on_mount(self) -> None:
        if self.load is not None:
            self.set_interval(self.refresh_s, self._reload)

    async def _reload(self) -> None:
        """The runs read again; the list redrawn only when they changed (the highlighted run kept)."""
        assert self.load is not None
        live, finished = self.load()
        runs = [*live, *finished]
        if [m.path for m in runs] == [m.path for m in self.runs] and len(live) == self.live:
            return
        lists = self.query(OptionList)
        old = lists.first().highlighted if lists else None
        kept = self.runs[old].path if old is not None and old < len(self.runs) else None
        self.runs, self.live = runs, len(live)
        self._listed.update((m.path, m) for m in runs)
        await self.recompose()
        at = next((i for i, m in enumerate(runs) if m.path == kept), 0)
        for options in self.query(OptionList):
            options.highlighted = at
            options.focus()

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box"):
            if not self.runs:
                yield Static("No watched runs yet (a run that starts is listed here). In your training loop:\n\n"
                             "    mon = apextui.watch(name=\"my-run\")\n    ...  mon.step(loss=loss)\n\n"
                             f"escape: {self.leaving}", id="picker-empty")
                return
            yield Static(Text(f"watched runs · enter: attach · escape: {self.leaving}", style="bold"))
            options = []
            for i, meta in enumerate(self.runs):
                mark = ("● live", "bold green") if i < self.live else ("  done", "dim")
                options.append(Option(Text.assemble(mark, "  ", (meta.name, "bold"), "  ",
                                                    (meta.describe().removeprefix(meta.name).strip(), "dim")),
                                      id=meta.path))
            yield OptionList(*options, id="picker-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        chosen = self._listed.get(event.option.id or "")
        if chosen is not None:
            self.dismiss(chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)
