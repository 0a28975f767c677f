"""What each part of the answer buys: the answer against itself without each of its values, side by side.

Why: a search moves on single runs, and a value that joined on a 0.2 % difference stayed in the answer for good
(HF GPT-2 on an H200: Apex's fused norms joined bf16 + fused AdamW at 56.37 against 56.47 ms, and the answer with
compile was credited to Apex: "2.50x", compile's gain; without the norms the same point ran as fast). So before the
answer is given, it runs in interleaved rounds beside the answer without each of its values (`without`), and a
value stays only where taking it out makes the answer slower beyond noise (`compare.compare`, round by round);
otherwise the simpler point is the answer: a tie goes to fewer changes, and to torch over Apex.

"Without" a value is its axis's default, except for an Apex value: that is measured against its torch counterpart
(`axes.Value.torch_twin`; the Apex question is "does Apex's kernel beat torch's here", so FusedAdam is weighed
against torch's fused AdamW, not against the unfused default).

Memory beside time: each part carries the peak memory of the answer and of the answer without it (the runs' peaks,
CUDA only). A value that buys no time (within noise) but takes the peak down by `MEMORY_SAVING` or more (Liger's
fused linear cross-entropy, which never holds the logits whole) is "saves_memory": kept, and said so, not taken out
as a tie would be (the memory it frees is room for a larger batch). One that is slower beyond noise is taken out
whatever it saves, and its row says what it saved. A value that never joined the answer (the search moves on time
alone) but saved memory where it ran beside the answer, or as a single change beside fp32, is listed apart
(`memory_savers`), so that it is not lost with the points the search left behind.

Pure: timings and points in, rows out; `search.Search` runs the rounds and calls `decide`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from ..measure.compare import Comparison, fields, format_speedup, ms
from ..config.axes import axis
from ..config.point import Config

PartVerdict = Literal["earns", "within_noise", "saves_memory", "hurts", "needed", "not_measured", "disturbed"]
MEMORY_SAVING = 0.05  # a part that buys no time stays where it takes the peak memory down by this share or more
PART_WORDS = {"earns": "earns its place", "within_noise": "within noise: taken out",
              "saves_memory": "no faster (within noise) but less peak memory: kept",
              "hurts": "slower with it: taken out", "needed": "kept: without it the point fails",
              "not_measured": "kept, unconfirmed: not measured without it",
              "disturbed": "kept, unconfirmed: other work disturbed the runs"}

Versus = Callable[[Config, Config], "Comparison | None"]
Median = Callable[[Config], "float | None"]
Memory = Callable[[Config], "int | None"]


@dataclass(frozen=True)
class Part:
    """One value of an answer, and the answer measured without it (`comparison`: the answer against `without`;
    above 1 the value makes the answer faster)."""

    axis: str
    value: str
    answer: Config  # the answer it was a part of when it was measured
    without: Config
    comparison: Comparison | None
    without_ms: float | None
    without_failed: bool = False  # the point without it failed or was unavailable: the value is needed
    disturbed: bool = False  # the comparison rests on runs other work disturbed: it decides nothing
    peak_bytes: int | None = None  # the answer's peak memory (None: not measured, as on CPU)
    without_peak_bytes: int | None = None  # the answer's without it

    @property
    def memory_saved(self) -> float | None:
        """The share of the peak memory the value saves (above 0: less with it), None where either is unmeasured."""
        if not self.peak_bytes or not self.without_peak_bytes:
            return None
        return 1 - self.peak_bytes / self.without_peak_bytes

    @property
    def apex(self) -> bool:
        return bool(axis(self.axis).value(self.value).apex)

    @property
    def verdict(self) -> PartVerdict:
        c = self.comparison
        if self.without_failed:
            return "needed"
        if self.disturbed:
            return "disturbed"
        if c is None or c.basis != "paired":  # measured only side by side in the rounds: never on single runs
            return "not_measured"
        if c.verdict == "faster":
            return "earns"
        if c.verdict == "slower":
            return "hurts"
        saved = self.memory_saved
        return "saves_memory" if saved is not None and saved >= MEMORY_SAVING else "within_noise"

    @property
    def kept(self) -> bool:
        """It stays in the answer: it earns its place, the point fails without it, or it could not be measured
        without it (then the answer is unconfirmed: `confirmed`)."""
        return self.verdict in ("earns", "saves_memory", "needed", "not_measured", "disturbed")

    @property
    def confirmed(self) -> bool:
        return self.verdict not in ("not_measured", "disturbed")

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "value": self.value, "apex": self.apex, "in": self.answer.label,
                "without": self.without.label, "without_config": self.without.as_dict(),
                "without_median_ms": ms(self.without_ms), **fields(self.comparison, "speedup"),
                "speedup_text": format_speedup(self.comparison) if self.comparison else None,
                "peak_memory_bytes": self.peak_bytes, "without_peak_memory_bytes": self.without_peak_bytes,
                "memory_saved": self.memory_saved, "verdict": self.verdict, "kept": self.kept}


def without(answer: Config, ax: str) -> Config:
    """`answer` with axis `ax` set back: to its default, or for an Apex value to its torch counterpart
    (`axes.Value.torch_twin`: FusedAdam's is torch's fused AdamW), so that Apex is weighed against torch's own kernel
    for the same job, never against a slower default."""
    value = axis(ax).value(getattr(answer, ax))
    back = (value.torch_twin or axis(ax).default.name) if value.apex else axis(ax).default.name
    return answer.with_(ax, back)


def without_apex(answer: Config) -> Config:
    """`answer` with every Apex value set back (`without`): the point the Apex verdict weighs it against."""
    out = answer
    for ax in answer.changes():
        if axis(ax).value(getattr(answer, ax)).apex:
            out = without(out, ax)
    return out


def points(answer: Config) -> list[Config]:
    """The points the answer is measured beside: the answer without each of its values, and without all its Apex
    values at once where it has more than one."""
    out = [without(answer, ax) for ax in answer.changes()]
    no_apex = without_apex(answer)
    if no_apex != answer and no_apex not in out:
        out.append(no_apex)
    return out


def parts(answer: Config, versus: Versus, median: Median, failed: Callable[[Config], bool] = lambda c: False,
          disturbed: Callable[[Config], bool] = lambda c: False, memory: Memory = lambda c: None) -> list[Part]:
    """Every value of `answer` against the answer without it, by the one noise rule (`versus(a, b)`: a against b);
    `failed(point)`: it failed or was unavailable (and never ran ok); `disturbed(point)`: its runs all rest on other
    work's disturbance (`compare.DISTURBED_RULE`); `memory(point)`: its peak memory (None: not measured)."""
    out = []
    for ax in answer.changes():
        w = without(answer, ax)
        out.append(Part(ax, getattr(answer, ax), answer, w, versus(answer, w), median(w), failed(w),
                        disturbed(answer) or disturbed(w), memory(answer), memory(w)))
    return out


def to_drop(ps: Sequence[Part]) -> Part | None:
    """The value to take out first, or None where every value stays (`Part.kept`): Apex's before torch's (a tie goes
    to torch), then the one that buys least (its comparison's speed-up)."""
    out = [p for p in ps if not p.kept and p.comparison is not None]
    if not out:
        return None
    return min(out, key=lambda p: (not p.apex, p.comparison.speedup))  # type: ignore[union-attr]


def memory_savers(answer: Config, ran: Sequence[Config], versus: Versus, median: Median, memory: Memory) -> list[Part]:
    """The values not in `answer` that took the peak memory down by `MEMORY_SAVING` or more without being slower
    beyond noise, each once: measured as the answer with it against the answer where that ran (`ran`: the points that
    ran ok), else as its single change against fp32. Each is a `Part` of the point that holds it (`answer`), weighed
    against the point without it (`without`)."""
    from ..config.point import BASELINE

    out: dict[tuple[str, str], Part] = {}
    for base in (answer, BASELINE):
        for point in ran:
            changed = [ax for ax in point.changes() + base.changes() if getattr(point, ax) != getattr(base, ax)]
            if len(set(changed)) != 1:
                continue
            ax = changed[0]
            value = getattr(point, ax)
            if value == axis(ax).default or (ax, value.name) in out or getattr(answer, ax) == value:
                continue
            part = Part(ax, value.name, point, base, versus(point, base), median(base), peak_bytes=memory(point),
                        without_peak_bytes=memory(base))
            saved = part.memory_saved
            if saved is not None and saved >= MEMORY_SAVING and (part.comparison is None
                                                                 or part.comparison.verdict != "slower"):
                out[(ax, value.name)] = part
    return list(out.values())
