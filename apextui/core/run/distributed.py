"""Data-parallel runs under torchrun: the process group, the one stop decision, and the ranks' side channel.

Why this shape (docs/distributed.md):

- **PyTorch's launcher and collectives.** torchrun starts the ranks and sets RANK, WORLD_SIZE, LOCAL_RANK and
  the rendezvous; `Group` joins them with `torch.distributed.rendezvous("env://")` and `init_process_group`
  (NCCL on CUDA, each rank on cuda:LOCAL_RANK; gloo on CPU), with a timeout on every collective.
- **No collective added to a training step.** The ranks agree on three things only: the warm-up's step time
  (once, so that every rank times the same blocks), and whether to stop, at a *boundary* about every
  `HARVEST_INTERVAL_S` (a one-int all-reduce on a gloo side group, on the CPU, never on the GPU's stream).
  Their step records go to rank 0 through the rendezvous store (`Channel`), from each rank's delivery thread:
  the training thread never waits for them.
- **Never a hang.** Every collective (the model's and the boundary's) times out after `timeout_s()`; a rank
  that raises writes its error to the store before it exits, so rank 0 names it.

Imports torch.distributed lazily: the CLI imports this module to find out whether it runs under torchrun.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Mapping

from ..workloads.parallel import backend_for
from .runner import HARVEST_INTERVAL_S

TIMEOUT_ENV = "APEXTUI_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0  # a first step that compiles takes minutes on some ranks; a hang is found after this
KEY_PREFIX = "apextui/"


def timeout_s(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds any collective may wait ($APEXTUI_DIST_TIMEOUT, default 300); ValueError names a bad value."""
    text = environ.get(TIMEOUT_ENV)
    if text is None or text == "":
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1 <= value <= 86400):
        raise ValueError(f"${TIMEOUT_ENV}: got {text!r}; must be a number of seconds from 1 to 86400")
    return value


@dataclass(frozen=True)
class DistEnv:
    """What torchrun tells each rank through the environment."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "DistEnv | None":
        """The rank's place, or None outside torchrun (no RANK and WORLD_SIZE). ValueError on nonsense."""
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            return None
        try:
            rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
            local = int(environ.get("LOCAL_RANK", rank))
        except ValueError:
            raise ValueError("RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers (set by torchrun)") from None
        if not (world >= 1 and 0 <= rank < world and local >= 0):
            raise ValueError(f"RANK {rank} / WORLD_SIZE {world} / LOCAL_RANK {local} do not fit together")
        return cls(rank, world, local)


class Group:
    """The ranks of one run: the default process group (the model's collectives), a gloo side group for the
    boundary decisions, and the store. `close()` destroys both groups."""

    def __init__(self, env: DistEnv, device: str, timeout: float) -> None:
        import torch
        import torch.distributed as dist

        self.env, self.device, self.timeout = env, device, timeout
        self.backend = backend_for(device)
        if device == "cuda":
            torch.cuda.set_device(env.local_rank)  # "cuda" is cuda:LOCAL_RANK from here on
        store, rank, world = next(dist.rendezvous("env://", timeout=timedelta(seconds=timeout)))
        kw: dict[str, Any] = {"device_id": torch.device("cuda", env.local_rank)} if device == "cuda" else {}
        dist.init_process_group(self.backend, store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout), **kw)
        self.side = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout))
        self.store = dist.PrefixStore(KEY_PREFIX, store)

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    def close(self) -> None:
        import torch.distributed as dist

        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a group broken by a failed peer: the process exits anyway
            pass


class Coordinator:
    """The ranks' agreements, made on the training thread at the same step on every rank.

    `agree_ms` (at the end of the warm-up): the largest rank's warm-up step time, so that every rank times the
    same blocks and the boundaries fall every ~`HARVEST_INTERVAL_S`. `should_stop(step, local)`: at a boundary,
    whether any rank wants to stop; between boundaries False, so every rank stops after the same step."""

    def __init__(self, group: Group) -> None:
        self.group = group
        self.every = 1  # steps between boundaries: every step until the warm-up has measured one
        self.next = 1
        self.boundaries = 0

    def _max(self, value: float) -> float:
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group.side)
        return float(t.item())

    def agree_ms(self, step_ms: float) -> float:
        agreed = self._max(step_ms if math.isfinite(step_ms) else 0.0)
        if agreed > 0:
            self.every = max(1, math.ceil(HARVEST_INTERVAL_S * 1000.0 / agreed))
        return agreed

    def should_stop(self, step: int, local: bool) -> bool:
        if step < self.next:
            return False
        self.next = step + self.every
        self.boundaries += 1
        return self._max(1.0 if local else 0.0) > 0


class Channel:
    """Rank r's records and end to rank 0 through the rendezvous store (no collective): rank r `send`s batches
    (keys rec/r/i, count n/r) and then its `end`; rank 0 `receive`s what is new and reads the ends, a rank's end
    before its rows (then every row sent before the end is read), one reader at a time (the read positions are the
    reader's own)."""

    def __init__(self, store: Any, world_size: int) -> None:
        self.store, self.world_size = store, world_size
        self._sent = 0
        self._read = [0] * world_size
        self._lock = threading.Lock()

    def send(self, rank: int, rows: list[list[Any]]) -> None:
        with self._lock:
            self.store.set(f"rec/{rank}/{self._sent}", json.dumps(rows))
            self._sent += 1
            self.store.add(f"n/{rank}", 1)

    def end(self, rank: int, result: Mapping[str, Any]) -> None:
        with self._lock:
            self.store.set(f"end/{rank}", json.dumps(dict(result)))

    def receive(self, rank: int) -> list[list[Any]]:
        """Rows rank `rank` sent since the last call."""
        rows: list[list[Any]] = []
        count = int(self.store.add(f"n/{rank}", 0))
        while self._read[rank] < count:
            key = f"rec/{rank}/{self._read[rank]}"
            rows.extend(json.loads(self.store.get(key)))
            self.store.delete_key(key)
            self._read[rank] += 1
        return rows

    def ended(self, rank: int) -> dict[str, Any] | None:
        if not self.store.check([f"end/{rank}"]):
            return None
        return json.loads(self.store.get(f"end/{rank}"))


__all__ = ["Channel", "Coordinator", "DEFAULT_TIMEOUT_S", "DistEnv", "Group", "TIMEOUT_ENV", "backend_for",
           "timeout_s"]
