"""Driving the app from the keyboard in headless runs (tests, tools/tui_screenshot.py)."""

from __future__ import annotations

from typing import Any


async def highlight_preset(pilot: Any, app: Any, name: str) -> bool:
    """Move the preset picker's highlight to `name` with home and down, as a user would; False if absent."""
    from .widgets.preset_picker import PresetPicker

    picker = app.query_one(PresetPicker)
    picker.focus()
    await pilot.press("home")
    for _ in range(len(picker.options)):
        if picker.highlighted_preset is not None and picker.highlighted_preset.name == name:
            return True
        await pilot.press("down")
    return False
