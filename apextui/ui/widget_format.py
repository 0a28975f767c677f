"""Number formatting shared by the widgets (presentation only)."""

from __future__ import annotations

from apextui.core.number_format import DASH, ms
from apextui.core.number_format import finite as _finite

__all__ = ["DASH", "VERDICT_MARK", "LEGEND", "ms", "si", "verdict_mark"]

# A speed-up's verdict as a symbol beside its colour (green faster, red slower): under NO_COLOR, or for a reader
# who cannot tell the two colours apart, the symbol alone tells them apart (within noise has its ≈ already)
VERDICT_MARK = {"faster": "▲", "slower": "▼"}
LEGEND = "▲ faster ▼ slower ≈ within noise"
COMPETED = " ⚠"  # after a speed-up (the table and the exports): other work competed with the run or its baseline
COMPETED_NOTE = "⚠ measured while other work competed"


def verdict_mark(verdict: str | None) -> str:
    """'▲' for faster, '▼' for slower, '' otherwise (a within-noise speed-up starts with ≈)."""
    return VERDICT_MARK.get(verdict or "", "")


def si(value: float | None, unit: str = "") -> str:
    """1234567 -> '1.23 M'; with a unit: '1.23 M tokens/s'."""
    if not _finite(value):
        return DASH
    v = float(value)  # type: ignore[arg-type]
    for factor, prefix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(v) >= factor:
            text = f"{v / factor:.3g}{prefix}"
            break
    else:
        text = f"{v:.3g}"
    return f"{text} {unit}" if unit else text


def loss(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return f"{float(value):.4f}"  # type: ignore[arg-type]


def error(value: float | None) -> str:
    if not _finite(value):
        return DASH
    return f"{float(value):.1e}"  # type: ignore[arg-type]


def seconds(value: float | None) -> str:
    if not _finite(value):
        return DASH
    v = float(value)  # type: ignore[arg-type]
    if v < 60:
        return f"{v:.1f} s"
    minutes, secs = divmod(int(v), 60)
    return f"{minutes}:{secs:02d} min"


def mib(value: float | None) -> str:
    """MiB, switching to GiB above 10 GiB."""
    if not _finite(value):
        return DASH
    v = float(value)  # type: ignore[arg-type]
    return f"{v / 1024:.1f} GiB" if v >= 10 * 1024 else f"{v:.0f} MiB"
