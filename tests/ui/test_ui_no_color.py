"""Rough edge 6: under NO_COLOR, "NOT INSTALLED" and the ✗ marks (red) came out grey 237 on 234/235."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import Monochrome
from ui_fakes import cpu_app, wait_for

from apextui.ui.contrast import MIN_CONTRAST, ReadableMonochrome

PANE = Color.parse("#1e1e1e")


def _brightness(style: Style) -> float:
    return Color.from_rich_color(style.color).brightness


@pytest.mark.parametrize("colour", ["red", "#cc3333", "bold red"])
def test_red_on_a_dark_pane_stays_readable(colour):
    seg = [Segment("NOT INSTALLED", Style.parse(colour))]
    plain = Monochrome().apply(seg, PANE)[0].style
    assert abs(_brightness(plain) - PANE.brightness) < MIN_CONTRAST  # what Textual alone draws: too dark
    readable = ReadableMonochrome().apply(seg, PANE)[0].style
    assert abs(_brightness(readable) - PANE.brightness) >= MIN_CONTRAST
    assert readable.bold == Style.parse(colour).bold
    assert Color.from_rich_color(readable.color).monochrome == Color.from_rich_color(readable.color)  # still grey


def test_light_text_is_left_alone():
    seg = [Segment("ok", Style.parse("#e0e0e0"))]
    assert ReadableMonochrome().apply(seg, PANE)[0].style == Monochrome().apply(seg, PANE)[0].style


@pytest.mark.asyncio
async def test_the_app_uses_the_readable_filter_under_no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = cpu_app()
    assert any(isinstance(f, ReadableMonochrome) for f in app._filters)
    assert not any(type(f) is Monochrome for f in app._filters)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.report is not None, what="report")
