"""How a workload's model trains on several ranks, with PyTorch's own tools: DDP, FSDP2 (`fully_shard`), or
Apex's DistributedFusedAdam (which reduces the gradients itself, so the model is not wrapped).

A point's `parallel` value says which (`config/axes.py`; Apex's DistributedFusedAdam, an optimizer value, is its
own way); at its default a workload that trains a model runs under DDP when a process group exists (torchrun), and
alone otherwise. A distributed point outside torchrun runs on a world of one (`ensure_single_group`), so that its
preset runs anywhere. The parallel stage wraps the model (`apply.py`), for the workloads that train data-parallel.

Imports torch when a model is wrapped: run/distributed.py (imported by the CLI to find out whether it runs under
torchrun) reads `backend_for` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Literal

if TYPE_CHECKING:
    from torch import nn

    from ..config.point import Config

# how a model trains on several ranks
Parallel = Literal["ddp", "fsdp2", "distributed_optimizer"]


def world() -> tuple[int, int]:
    """(rank, world size) of this process's group; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def backend_for(device: str) -> str:
    """The process group's backend: NCCL on CUDA, gloo on the CPU."""
    return "nccl" if device == "cuda" else "gloo"


_single_group = False  # this process's world of one, made by `ensure_single_group` (not torchrun's group)


def ensure_single_group(device: str) -> None:
    """A world of one for a distributed preset run outside torchrun (the TUI, advise, a plain `--json`):
    DDP, FSDP2 and Apex's DistributedFusedAdam need a process group, here one rank on an in-process store.
    The run that made it ends it (`release_single_group`)."""
    global _single_group
    import torch.distributed as dist

    if dist.is_initialized():
        return
    dist.init_process_group(backend_for(device), store=dist.HashStore(), rank=0, world_size=1)
    _single_group = True


def release_single_group() -> None:
    """End the world of one that `ensure_single_group` made, at the end of its run: left in place, every later run
    in the same process (a reusable worker's next point, a run in a thread) would find a process group and train
    under DDP (`kind`), and the next distributed preset's `init_process_group` would raise. Torchrun's group is
    not this module's to end."""
    global _single_group
    if not _single_group:
        return
    import torch.distributed as dist

    _single_group = False
    if dist.is_initialized():
        dist.destroy_process_group()


def kind(config: Config) -> Parallel | None:
    """How `config` trains: its own way (`Config.parallel_way`), else DDP under a process group, else nothing (one
    process)."""
    import torch.distributed as dist

    own = config.parallel_way
    if own is not None:
        return own  # type: ignore[return-value]  # the parallel axis's values and the sharded optimizer's way
    return "ddp" if dist.is_available() and dist.is_initialized() else None


def wrap(model: nn.Module, how: Parallel | None, device: str, shards: Iterable[nn.Module] = ()) -> nn.Module:
    """The model to train (build the optimizer on its parameters afterwards: FSDP2 replaces them with
    sharded ones). `shards`: the submodules FSDP2 shards one by one (the Transformer's blocks), before the root."""
    if how is None:
        return model
    import torch

    ensure_single_group(device)
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [torch.cuda.current_device()] if device == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    if how == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for module in shards:
            fully_shard(module)
        fully_shard(model)
        return model
    return model  # distributed_optimizer: the optimizer reduce-scatters the gradients itself


__all__ = ["Parallel", "backend_for", "ensure_single_group", "kind", "release_single_group", "world", "wrap"]
