"""How the GPUs of this machine are linked: NVLink, NVLink through NVSwitch, or PCIe only.

Read from NVML (nvmlDeviceGetNvLinkState and the remote end of each active link; for pairs without NVLink,
nvmlDeviceGetTopologyCommonAncestor), which is what `nvidia-smi topo -m` prints too: parsing that command would
add a second source that fails wherever NVML does. NA-tolerant: a GPU whose NVML calls fail makes its own pairs
"n/a" with the reason; the other pairs are still classified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .nvml import Nvml, all_gpus

LinkKind = Literal["nvlink", "nvswitch", "pcie", "n/a"]
TopologyKind = Literal["none", "single", "nvlink", "nvswitch", "pcie", "mixed", "n/a"]

# nvmlDeviceGetTopologyCommonAncestor's levels in nvidia-smi topo -m's words, and what they mean
PCIE_PATHS: dict[int, tuple[str, str]] = {
    0: ("BOARD", "on one board"),
    10: ("PIX", "through one PCIe switch"),
    20: ("PXB", "through several PCIe switches"),
    30: ("PHB", "through a PCIe host bridge"),
    40: ("NODE", "across host bridges of one NUMA node"),
    50: ("SYS", "across NUMA nodes"),
}
_PATH_ORDER = [word for word, _ in PCIE_PATHS.values()]


@dataclass(frozen=True)
class GpuLink:
    """One pair of GPUs (NVML indices a < b) and how they reach each other."""

    a: int
    b: int
    kind: LinkKind
    nvlinks: int | None = None  # nvlink: NVLinks between the two; nvswitch: the fewer of the two GPUs' into it
    pcie: str | None = None  # pcie: the path in nvidia-smi's words (PIX, PXB, PHB, NODE, SYS; BOARD)
    reason: str = ""  # n/a: why

    @property
    def label(self) -> str:
        """The pair's cell in a matrix like `nvidia-smi topo -m`'s (NVSW: NVLink through NVSwitch)."""
        if self.kind == "nvlink":
            return f"NV{self.nvlinks}"
        if self.kind == "nvswitch":
            return "NVSW"
        if self.kind == "pcie" and self.pcie:
            return self.pcie
        return "n/a"


@dataclass(frozen=True)
class Topology:
    """Every pair of the GPUs NVML sees; `kind` sums them up and `summary` says it in one line."""

    kind: TopologyKind
    gpus: int  # GPUs NVML sees (the whole machine, whatever CUDA_VISIBLE_DEVICES says)
    links: tuple[GpuLink, ...]
    summary: str


@dataclass(frozen=True)
class _Ends:
    """One GPU's active NVLinks: to which GPUs (by NVML index), how many into switches, or why unknown."""

    to_gpu: Counter[int]
    to_switch: int
    error: str


def _ends(gpu: Nvml, index_of_bus: dict[str, int]) -> _Ends:
    links = gpu.nvlinks()
    if not links.ok:
        reason = links.reason
        if reason == "not supported on this GPU":  # no NVLink at all: PCIe decides
            return _Ends(Counter(), 0, "")
        return _Ends(Counter(), 0, reason)
    to_gpu: Counter[int] = Counter()
    to_switch = 0
    for kind, bus in links.value:
        if kind is None:  # NVML cannot name the remote end's kind: a GPU's bus id says it is one
            kind = "gpu" if bus in index_of_bus else ("switch" if bus else None)
        if kind == "gpu" and bus in index_of_bus:
            to_gpu[index_of_bus[bus]] += 1
        elif kind == "switch":
            to_switch += 1
    return _Ends(to_gpu, to_switch, "")


def _pair(a: Nvml, b: Nvml, ends: dict[int, _Ends]) -> GpuLink:
    ea, eb = ends[a.index], ends[b.index]
    direct = max(ea.to_gpu[b.index], eb.to_gpu[a.index])
    if direct:
        return GpuLink(a.index, b.index, "nvlink", nvlinks=direct)
    if ea.to_switch and eb.to_switch:
        return GpuLink(a.index, b.index, "nvswitch", nvlinks=min(ea.to_switch, eb.to_switch))
    if ea.error or eb.error:  # their NVLinks are unknown: PCIe alone could be wrong
        failed = a if ea.error else b
        return GpuLink(a.index, b.index, "n/a", reason=f"GPU {failed.index}: {ends[failed.index].error}")
    level = a.common_ancestor(b)
    if not level.ok:
        return GpuLink(a.index, b.index, "n/a", reason=level.reason)
    word = PCIE_PATHS.get(level.value, (f"level {level.value}", ""))[0]
    return GpuLink(a.index, b.index, "pcie", pcie=word)


def _summary(n: int, links: Sequence[GpuLink]) -> tuple[TopologyKind, str]:
    known = [link for link in links if link.kind != "n/a"]
    unknown = [link for link in links if link.kind == "n/a"]
    kinds = {link.kind for link in known}
    na = f"; {len(unknown)} of {len(links)} pairs n/a ({unknown[0].reason})" if unknown else ""
    if not known:
        return "n/a", f"n/a: {unknown[0].reason}"
    if kinds == {"nvswitch"}:
        per_gpu = min(link.nvlinks or 0 for link in known)
        return "nvswitch", f"NVSwitch: all {n} GPUs over NVLink through NVSwitch ({per_gpu} NVLinks a GPU){na}"
    if kinds == {"nvlink"}:
        counts = sorted({link.nvlinks or 0 for link in known})
        each = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        what = "the 2 GPUs are joined" if n == 2 else f"every pair of the {n} GPUs is joined"
        return "nvlink", f"NVLink: {what} directly by {each} NVLinks{na}"
    if kinds == {"pcie"}:
        worst = max((link.pcie or "" for link in known), key=lambda w: _PATH_ORDER.index(w) if w in _PATH_ORDER else 99)
        meaning = dict(PCIE_PATHS.values()).get(worst)
        farthest = f"{worst}, {meaning}" if meaning else worst
        return "pcie", f"PCIe only: no NVLink between the {n} GPUs (farthest pair {farthest}){na}"
    nv = sum(1 for link in known if link.kind in ("nvlink", "nvswitch"))
    pcie = len(known) - nv
    return "mixed", f"mixed: {nv} of {len(links)} pairs over NVLink, {pcie} over PCIe only{na}"


def probe_topology(gpus: Sequence[Nvml] | None = None) -> Topology:
    """The link topology of `gpus` (default: every GPU NVML sees); never raises."""
    if gpus is None:
        listed, error = all_gpus()
        if error:
            return Topology("n/a", 0, (), f"n/a: {error}")
        gpus = listed
    n = len(gpus)
    if n == 0:
        return Topology("none", 0, (), "no NVIDIA GPU")
    if n == 1:
        return Topology("single", 1, (), "one GPU: nothing to link")
    buses = {g.index: g.bus_id().value for g in gpus}
    index_of_bus = {bus: index for index, bus in buses.items() if bus}
    ends = {g.index: _ends(g, index_of_bus) for g in gpus}
    links = tuple(_pair(a, b, ends) for i, a in enumerate(gpus) for b in gpus[i + 1:])
    kind, summary = _summary(n, links)
    return Topology(kind, n, links, summary)


def matrix(topology: Topology) -> list[str]:
    """The pairs as a matrix in the manner of `nvidia-smi topo -m` (rows and columns by NVML index); [] for
    fewer than two GPUs."""
    if topology.gpus < 2:
        return []
    cells = {(link.a, link.b): link.label for link in topology.links}
    cells.update({(b, a): label for (a, b), label in cells.items()})
    indices = sorted({i for pair in cells for i in pair})
    width = max(5, *(len(label) + 1 for label in cells.values()))
    head = " " * 6 + "".join(f"GPU{i}".ljust(width) for i in indices)
    rows = [f"GPU{i}".ljust(6) + "".join(("X" if i == j else cells.get((i, j), "?")).ljust(width) for j in indices)
            for i in indices]
    return [head.rstrip(), *(row.rstrip() for row in rows)]
