"""What a watched run trains, in its start line (the model's class and parameter count, the batch's shape or size),
and `attach`'s table comparing a run only with runs of the same model and batch (else of its name): real watched
loops on CPU. An HF GPT-2 Trainer run was shown `≈0.62×` against an MLP loop marked base. A stream of an older
version, without these fields, still reads, compared by its name as before."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

import apextui
from apextui.core.results import RunIndex
from apextui.core.watch import reader, rows, stream, workload
from apextui.core.watch.workload import Workload

MLP_PARAMS = 16 * 32 + 32 + 32 * 1 + 1  # Linear(16, 32) and Linear(32, 1)


def mlp(width: int = 32) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))


def train(name: str, net: torch.nn.Module | None = None, batch: int = 64, steps: int = 40, give_batch: bool = True,
          **options) -> apextui.Watch:
    """A real training loop of `net` (default: an MLP) on a batch of `batch` rows, watched as `name` with the hook's
    `options` (`model=`, `batch_size=`); the batch goes to every step when `give_batch`."""
    net = net if net is not None else mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    x, y = torch.randn(batch, 16), torch.randn(batch, 1)
    with apextui.watch(name=name, warmup=2, **options) as mon:
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss=loss.detach(), batch=(x, y) if give_batch else None, lr=0.05)
    return mon


def start_line(mon) -> dict:
    first = reader.Follower(mon.path).poll()[0]
    assert first["event"] == "start"
    return first


def test_the_start_line_records_the_models_class_and_parameters_and_the_batchs_shape_or_size():
    model = mlp()
    mon = train("shape", model, model=model)
    watched = start_line(mon)["watch"]
    assert watched["model"] == {"class": "Sequential", "params": MLP_PARAMS}
    assert watched["batch"] == {"shape": [64, 16]}  # the first tensor of (x, y)
    evs = reader.Follower(mon.path).poll()
    assert all("batch" not in e["values"] for e in evs if e["event"] == "metric")  # never a metric
    assert start_line(train("size", batch_size=8, give_batch=False))["watch"]["batch"] == {"size": 8}
    neither = start_line(train("neither", give_batch=False))["watch"]
    assert neither["model"] is None and neither["batch"] is None


def test_a_lazy_models_parameters_are_counted_at_the_first_step_and_a_bad_batch_size_is_left_out(caplog):
    """The model is read at the first step (a lazy module has its parameters by then); `batch_size=0` is left out
    with one warning, and the run goes on and ends ok."""
    lazy = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    x = torch.randn(8, 16)
    with caplog.at_level(logging.WARNING, logger="apextui.watch"):
        with apextui.watch(name="lazy", warmup=2, model=lazy, batch_size=0) as mon:  # no parameters yet
            for _ in range(20):
                loss = lazy(x).square().mean()
                loss.backward()
                mon.step(loss=loss.detach())
    watched = start_line(mon)["watch"]
    assert watched["model"] == {"class": "Sequential", "params": 16 * 4 + 4 + 4 + 1} and watched["batch"] is None
    warned = [r.getMessage() for r in caplog.records if "batch" in r.getMessage()]
    assert len(warned) == 1 and "batch_size=0 is not a positive integer" in warned[0]
    assert reader.last_end(mon.path)["status"] == "ok"


def test_runs_of_one_model_and_batch_compare_whatever_their_names_and_other_runs_show_no_speed_up():
    runs = (("fp32", 32, 64), ("fused", 32, 64), ("gpt2", 256, 8), ("fp32", 32, 128), ("wide", 64, 64),
            ("gpt2-compiled", 256, 8))
    for name, width, batch in runs:
        model = mlp(width)
        train(name, model, batch, model=model)
    table = [r for _, r in rows.Table().rows()]
    index = RunIndex(table)
    fp32, fused, gpt2, fp32_big, wide, gpt2_compiled = table
    assert index.is_base(fp32) and index.baseline(fused) is fp32 and index.comparison(fused) is not None
    assert index.is_base(gpt2) and index.baseline(gpt2_compiled) is gpt2
    assert fused.model == f"Sequential, {MLP_PARAMS:,} params, batch 64×16"
    for alone in (wide, fp32_big):  # another model; the same name with another batch
        assert index.baseline(alone) is None and index.comparison(alone) is None and not index.is_base(alone)
    # two groups on one device read alike: said once
    assert index.drift_notes() == ["watch on cpu: single runs, one after another: drift unknown"]


def as_older_version(folder) -> None:
    """Rewrite a run's stream as the version before wrote it: its start lines without `model` and `batch`."""
    for _, path in stream.segments(folder):
        out = []
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "start":
                for key in ("model", "batch"):
                    del e["watch"][key]
            out.append(json.dumps(e) + "\n")
        path.write_text("".join(out))


def test_an_older_stream_reads_and_is_compared_by_its_name_as_before():
    older = [train("mlp", m, model=m).path for m in (mlp(), mlp())]
    for folder in older:
        as_older_version(folder)
        assert "model" not in json.loads(stream.segments(folder)[0][1].read_text().splitlines()[0])["watch"]
    train("other-name", give_batch=False)  # records nothing either: another name, not compared
    model = mlp()
    train("mlp", model, model=model)  # records both: never compared with the runs that record neither
    table = [r for _, r in rows.Table().rows()]
    index = RunIndex(table)
    first, second, other, new = table
    assert first.model == second.model == "runs named 'mlp'" and index.baseline(second) is first
    assert index.comparison(second) is not None
    assert index.baseline(other) is None and index.baseline(new) is None


@pytest.mark.parametrize("watched", [
    {"model": [1], "batch": {"shape": ["a", 2]}},
    {"model": {"class": 7, "params": 5}, "batch": {"size": True}},
    {"model": {"class": "", "params": None}, "batch": {"shape": [], "size": -3}},
    {"model": "Sequential", "batch": [64, 16]},
    "not an object",
])
def test_a_damaged_start_lines_model_or_batch_reads_as_not_recorded(watched):
    assert Workload.of({"event": "start", "watch": watched}) == Workload()
    assert Workload.of({"event": "start", "watch": watched}).group("mlp") == "runs named 'mlp'"


def test_a_params_count_of_another_shape_keeps_the_class_and_the_batch():
    work = Workload.of({"watch": {"model": {"class": "GPT2LMHeadModel", "params": "many"}, "batch": {"size": 8}}})
    assert work == Workload(("GPT2LMHeadModel", None), ("size", (8,)))
    assert work.group("x") == "GPT2LMHeadModel, batch size 8"


@pytest.mark.parametrize("size, taken", [(8, {"size": 8}), (np.int64(8), {"size": 8}), (None, None)])
def test_batch_size_takes_a_positive_integer_of_python_or_numpy(size, taken):
    assert workload.batch_fields(size=size) == taken


@pytest.mark.parametrize("size", [0, -2, 8.0, True, "8", 2**70])
def test_batch_size_refuses_what_is_not_a_positive_integer(size):
    with pytest.raises(workload.BadBatch, match="is not a positive integer"):
        workload.batch_fields(size=size)


@pytest.mark.slow  # importing torch.compile's machinery: seconds
def test_the_model_is_named_through_ddp_fsdp2_and_torch_compile(tmp_path):
    """Compiled or not, data-parallel or not, the model is the same: the wrappers are seen through (a world of one
    process on gloo: the real wrappers on CPU)."""
    from torch.distributed.fsdp import fully_shard

    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        expected = {"class": "Sequential", "params": MLP_PARAMS}
        ddp = torch.nn.parallel.DistributedDataParallel(mlp())
        assert workload.model_fields(ddp) == workload.model_fields(torch.compile(ddp)) == expected
        sharded = mlp()
        fully_shard(sharded)  # its class becomes FSDPSequential
        assert type(sharded).__name__ == "FSDPSequential" and workload.model_fields(sharded) == expected
    finally:
        dist.destroy_process_group()
