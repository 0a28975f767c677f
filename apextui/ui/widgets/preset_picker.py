"""All presets grouped by workload; unavailable ones disabled, with the reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from apextui.core.availability import Availability
from apextui.core.presets import BASELINE_NAMES, Preset
from apextui.core.workloads.spec import WORKLOADS
from apextui.core.workloads.user_model import model_name

GROUP_PREFIX = "group:"


class PresetPicker(OptionList):
    """Enter starts the highlighted preset (the app handles `OptionList.OptionSelected`).

    Unavailable presets are listed with ✗ and the reason, and cannot be started; they can still be
    highlighted so that the run pane shows the full reason and the fix.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Start", show=True),
        Binding("m", "mark", "Mark", show=False),  # for `c`, the interleaved comparison of the marked presets
    ]

    def __init__(self, presets: Sequence[Preset], *, id: str | None = None) -> None:
        self.presets = list(presets)
        self.marked: list[str] = []  # `m`: presets marked for the interleaved comparison (`c`), in marking order
        self._by_name = {p.name: p for p in self.presets}
        self._avail: Mapping[str, Availability] | None = None
        super().__init__(*self._build_options(), id=id)
        self.border_title = "Presets"
        self.border_subtitle = "probing…"

    def preset(self, name: str | None) -> Preset | None:
        return self._by_name.get(name) if name else None

    @property
    def highlighted_preset(self) -> Preset | None:
        option = self.highlighted_option
        return self.preset(option.id) if option is not None else None

    def _build_options(self) -> list[Option]:
        options: list[Option] = []
        order = list(WORKLOADS)
        workloads = sorted({p.workload for p in self.presets}, key=order.index)
        for workload in workloads:
            models = sorted({p.model for p in self.presets if p.workload == workload and p.model})
            title = f"{workload} {model_name(models[0])}" if len(models) == 1 else workload  # --model: its name
            head = Text.assemble((title, "bold"), (f"  vs {BASELINE_NAMES[workload]}", "dim"))
            options.append(Option(head, id=GROUP_PREFIX + workload, disabled=True))
            for p in (p for p in self.presets if p.workload == workload):
                options.append(self._preset_option(p))
        return options

    def _preset_option(self, p: Preset) -> Option:
        tag = f" {p.config.autocast}" if p.config.autocast != "none" else ""
        if self._avail is None:
            return Option(Text.assemble(("  ", ""), (p.name, ""), (tag, "dim")), id=p.name)
        if p.name in self.marked:
            return Option(Text.assemble(("● ", "bold cyan"), (p.name, "bold cyan"), (tag, "dim")), id=p.name)
        if self.is_available(p.name):
            return Option(Text.assemble(("✓ ", "green"), (p.name, "bold"), (tag, "dim")), id=p.name)
        # still highlightable, so the run pane can show the whole reason and the fix; enter refuses it
        reason = self._avail[p.name].reason if p.name in self._avail else "not checked"
        text = Text.assemble(("✗ ", "red"), (p.name, "dim strike"), (tag, "dim"), (f" {reason}", "dim italic"),
                             no_wrap=True, overflow="ellipsis")
        return Option(text, id=p.name)

    def action_mark(self) -> None:
        """`m`: mark (or unmark) the highlighted preset for the interleaved comparison (`c`)."""
        p = self.highlighted_preset
        if p is None:
            return
        if p.name in self.marked:
            self.marked.remove(p.name)
        else:
            self.marked.append(p.name)
        self.replace_option_prompt(p.name, self._preset_option(p).prompt)
        self.border_subtitle = (f"{len(self.marked)} marked · c compares interleaved" if self.marked else
                                self.border_subtitle if "marked" not in str(self.border_subtitle) else "")

    def is_available(self, name: str) -> bool:
        """Known to be runnable on the probed device (False while probing)."""
        return self._avail is not None and name in self._avail and self._avail[name].ok

    def set_availability(self, avail: Mapping[str, Availability], device: str) -> None:
        """Show each preset's availability; keeps the highlight on the same preset where possible."""
        self._avail = avail
        current = self.highlighted_option.id if self.highlighted_option is not None else None
        self.set_options(self._build_options())
        n_ok = sum(1 for p in self.presets if self.is_available(p.name))
        self.border_subtitle = f"{n_ok}/{len(self.presets)} runnable on {device}"
        self.highlight_preset(current)

    def add_preset(self, preset: Preset) -> None:
        """A preset from a file given on the command line."""
        if preset.name in self._by_name:
            return
        self.presets.append(preset)
        self._by_name[preset.name] = preset
        self.set_options(self._build_options())

    def highlight_preset(self, name: str | None) -> None:
        """Highlight `name` if it is enabled, else the first enabled preset."""
        options = self.options
        index = None
        if name is not None:
            index = next((i for i, o in enumerate(options) if o.id == name and not o.disabled), None)
        if index is None:
            index = next((i for i, o in enumerate(options) if not o.disabled), None)
        self.highlighted = index
        self.call_after_refresh(self.scroll_to_highlight)  # before the first layout it cannot scroll yet

    def on_resize(self) -> None:
        """Keep the highlighted preset in view when the terminal shrinks (200x60 -> 80x24 lost it)."""
        self.call_after_refresh(self.scroll_to_highlight)
