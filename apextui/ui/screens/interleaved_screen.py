"""The interleaved comparison's result (`c`): each preset's pooled median and interval, its speed-up against the
baseline (`ui/interleaved.lines`)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..interleaved import lines
from .text_screen import TextScreen


class InterleavedScreen(TextScreen):
    SCROLL_ID = "interleaved-scroll"
    BODY_ID = "interleaved-body"
    BOX_TITLE = "Interleaved comparison (A/B/B/A)"

    def __init__(self, job: Any) -> None:
        super().__init__()
        self.job = job

    def body(self) -> Static:
        if self.job.error:
            return Static(Text(f"the comparison failed: {self.job.error}", style="bold red"), id=self.BODY_ID)
        return Static(Text("\n".join(lines(self.job.doc or {}, self.job.verdicts))), id=self.BODY_ID)
