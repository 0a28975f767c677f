"""Number formatting shared by the text front ends (the advice text, the TUI's widgets)."""

from __future__ import annotations

import math

DASH = "—"


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a word's end with "…" where it is longer: a reason is never cut
    mid-word ("Both fused kern")."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ;,:") + "…"


def finite(value: float | None) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def ms(value: float | None) -> str:
    """Milliseconds with three significant digits: 0.116, 7.12, 71.2, 712."""
    if not finite(value):
        return DASH
    v = float(value)  # type: ignore[arg-type]
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def pct(fraction: float) -> str:
    """A fraction as a percentage with one decimal: 0.0123 -> '1.2 %' (noise thresholds, roofline fractions)."""
    return f"{100 * fraction:.1f} %"
