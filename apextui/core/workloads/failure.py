"""The `error` a failed run reports: what went wrong and where, with an out-of-memory made actionable (how much was
asked for, what was free, which size table to shrink)."""

from __future__ import annotations

import re

from ..errors import ApextuiError

_OOM_ALLOC = re.compile(r"[Tt]ried to allocate ([\d.]+ ?[KMGTPE]?i?B|\d+ bytes)")
_OOM_GPU = re.compile(r"GPU (\d+) has a total capacity of ([\d.]+ \w+) of which ([\d.]+ \w+) is free")


def exception_text(exc: BaseException) -> str:
    """`str(exc)`, or its repr where the user's `__str__` raises, or "" where both do: reporting an exception never
    raises one of its own."""
    for words in (str, repr):
        try:
            return words(exc)
        except Exception:  # noqa: BLE001 - their exception class's own code
            continue
    return ""


def first_line(exc: BaseException) -> str:
    """'ValueError: its message's first line' (`exception_text`), or the type's name alone where it says nothing."""
    lines = exception_text(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), MemoryError, or an allocator's OOM RuntimeError."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = exception_text(exc).lower()
    return "out of memory" in text or "can't allocate memory" in text


def _amount(text: str) -> str:
    """'70368744177664 bytes' -> '64.0 TiB'; torch's own '64.00 GiB' is kept."""
    if not text.endswith(" bytes"):
        return text
    n = float(text.split()[0])
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return text


def describe_failure(exc: BaseException, step: int, device: str, workload: str | None = None) -> str:
    """The `error` of a failed run: what went wrong and at which step (0: while setting up); `workload`
    "model" (the user's own) gets its own advice on out-of-memory."""
    where = f"at step {step}" if step else "while setting up the workload"
    if is_out_of_memory(exc):
        text = exception_text(exc)
        alloc, gpu = _OOM_ALLOC.search(text), _OOM_GPU.search(text)
        first_line = (text.splitlines() or [type(exc).__name__])[0]
        detail = f"tried to allocate {_amount(alloc.group(1))}" if alloc else first_line
        if gpu:
            detail += f"; GPU {gpu.group(1)} has {gpu.group(3)} free of {gpu.group(2)}"
        if workload == "model":
            smaller = ("build a smaller model or batch (your function's small=True size, which CPU runs use)"
                       if device == "cpu" else "build a smaller model or batch in your function")
            return f"out of memory {where} ({detail[:300]}): {smaller}, or free the memory other processes hold"
        table = "[cpu_size]" if device == "cpu" else "[size]"
        return (f"out of memory {where} ({detail[:300]}): use a smaller size (lower batch, seq, d_model/width "
                f"or layers in the preset's {table}), or free the memory other processes hold")
    said = exception_text(exc) if isinstance(exc, ApextuiError) else f"{type(exc).__name__}: {exception_text(exc)}"
    lines = said.strip().split("\n", 1)  # an apextui error is its own words; anything else says what it is
    lines[0] += f" ({where})"
    return "\n".join(lines)
