"""The two trainer callbacks on tiny real models, CPU, a few steps: each run streams its steps, its loss and its
learning rate, and ends ok; a Trainer whose train() raises (caught by a sweep) ends its run failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apextui.core.watch import reader
from helpers import ROOT, cli_env


def stream(mon):
    return reader.Follower(mon.path).poll()


@pytest.mark.slow  # importing transformers' Trainer alone takes seconds
def test_the_transformers_callback_streams_a_trainer_run(tmp_path):
    transformers = pytest.importorskip("transformers")
    from apextui.integrations.hf import WatchCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (16, 16))]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=8, per_device_train_batch_size=2, logging_steps=2, report_to=[],
        use_cpu=True, save_strategy="no", disable_tqdm=True, include_num_input_tokens_seen=True)
    callback = WatchCallback(name="hf-tiny")
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    evs = stream(callback.mon)
    assert evs[0]["event"] == "start" and evs[0]["steps"] == 8 and evs[-1]["status"] == "ok"
    # what it trains, for attach: the Trainer's model, and its batch as a loop's `mon.step(batch=)` records it (the
    # first forward's inputs: no batch reaches a callback), so the two are compared
    assert evs[0]["watch"]["model"] == {"class": "GPT2LMHeadModel", "params": model.num_parameters()}
    assert evs[0]["watch"]["batch"] == {"shape": [2, 16]}
    import apextui
    from apextui.core.watch.workload import Workload

    mon = apextui.watch(name="own-loop", model=model, where=tmp_path / "runs")
    mon.step(loss=1.0, batch={"input_ids": torch.zeros(2, 16, dtype=torch.long)})
    mon.close()
    own = reader.Follower(mon.path).poll()[0]
    assert Workload.of(own).group("own-loop") == Workload.of(evs[0]).group("hf-tiny") == \
        f"GPT2LMHeadModel, {model.num_parameters():,} params, batch 2×16"
    assert not any(h for h in model._forward_pre_hooks.values())  # the hook went after the first forward
    steps = [e for e in evs if e["event"] == "step"]
    assert sum(e["steps"] for e in steps) == 7 and steps[-1]["step"] == 8
    assert [e["loss"] is not None for e in steps].count(True) >= 3  # the loss logged every 2 steps
    metrics = [e["values"] for e in evs if e["event"] == "metric"]
    assert metrics and "learning_rate" in metrics[-1]
    assert evs[-1]["summary"]["throughput_unit"] == "tokens/s"


@pytest.mark.slow  # Lightning and its Trainer: about 2 s
def test_the_lightning_callback_streams_a_trainer_run(tmp_path):
    pytest.importorskip("pytorch_lightning")
    from apextui.integrations.lightning import Callback, WatchCallback

    pl = __import__(Callback.__module__.split(".")[0])
    if pl.__name__ == "lightning":
        pl = pl.pytorch

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    callback = WatchCallback(name="lightning-tiny")
    trainer = pl.Trainer(max_steps=12, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
                         default_root_dir=str(tmp_path))
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    evs = stream(callback.mon)
    assert evs[0]["steps"] == 12 and evs[-1]["status"] == "ok"
    assert evs[0]["watch"]["model"] == {"class": "Tiny", "params": 8 + 1} and evs[0]["watch"]["batch"] == {
        "shape": [4, 8]}  # the LightningModule, and the first batch's first tensor
    steps = [e for e in evs if e["event"] == "step"]
    assert sum(e["steps"] for e in steps) == 11 and all(e["loss"] is not None for e in steps)
    assert [e["values"] for e in evs if e["event"] == "metric"][-1] == {"lr": 0.1}
    assert evs[-1]["summary"]["throughput_unit"] == "samples/s"


def tiny_trainer(transformers, tmp_path, callback, fail_at: int | None = None):
    """A GPT-2 of one layer on random tokens, 8 steps; `fail_at`: the data collator raises at that batch (a
    sweep's failing trial)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (16, 16))]
    batches = []

    def collate(features):
        batches.append(1)
        if fail_at is not None and len(batches) >= fail_at:
            raise RuntimeError("a bad batch")
        return {k: torch.stack([f[k] for f in features]) for k in features[0]}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=8, per_device_train_batch_size=2, logging_steps=2, report_to=[],
        use_cpu=True, save_strategy="no", disable_tqdm=True)
    return transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=data,
                                data_collator=collate, callbacks=[callback])


@pytest.mark.slow
def test_a_sweep_trial_whose_train_raises_is_closed_failed_when_the_next_begins(tmp_path):
    """Issue 41 row 14: a sweep catches one failed train(); its run was left live and closed `ok` at exit."""
    transformers = pytest.importorskip("transformers")
    from apextui.core.watch import store
    from apextui.integrations.hf import WatchCallback

    failed = WatchCallback(name="trial-1")
    with pytest.raises(RuntimeError, match="a bad batch"):
        tiny_trainer(transformers, tmp_path, failed, fail_at=4).train()
    ok = WatchCallback(name="trial-2")
    tiny_trainer(transformers, tmp_path, ok).train()
    first, second = stream(failed.mon), stream(ok.mon)
    assert first[-1]["event"] == "end" and first[-1]["status"] == "failed", first[-1]
    assert "on_train_end" in first[-1]["error"] and second[-1]["status"] == "ok"
    assert [m.name for m in store.live_runs()] == []


@pytest.mark.slow
def test_the_last_trial_whose_train_raised_is_closed_failed_at_exit(tmp_path):
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import transformers
from pathlib import Path
from test_watch_callbacks import tiny_trainer
from apextui.integrations.hf import WatchCallback
callback = WatchCallback(name="last-trial", where={str(tmp_path / "watch")!r})
try:
    tiny_trainer(transformers, Path({str(tmp_path)!r}), callback, fail_at=4).train()
except RuntimeError:
    pass
print(callback.mon.path, flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    end = reader.last_end(Path(proc.stdout.strip().splitlines()[-1]))
    assert end is not None and end["status"] == "failed" and "on_train_end" in end["error"]


@pytest.mark.slow  # importing transformers' Trainer alone takes seconds
def test_the_transformers_callback_puts_each_logged_loss_in_its_own_steps_line_never_in_a_metric(tmp_path):
    """The Trainer logs a step's loss just after that step's end: the loss logged at step 8 (the last) is step 8's,
    in its step line and the summary's final loss, not a `metric` (a one-point "loss" plot); 8 steps are 8 done."""
    transformers = pytest.importorskip("transformers")
    from apextui.integrations.hf import WatchCallback

    callback = WatchCallback(name="hf-losses")
    trainer = tiny_trainer(transformers, tmp_path, callback)
    trainer.train()
    logged = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    assert sorted(logged) == [2, 4, 6, 8]
    evs = stream(callback.mon)
    steps = {e["step"]: e["loss"] for e in evs if e["event"] == "step" and e["loss"] is not None}
    assert steps == pytest.approx(logged, abs=1e-6)
    assert all("loss" not in e["values"] for e in evs if e["event"] == "metric")
    end = evs[-1]
    assert end["summary"]["final_loss"] == pytest.approx(logged[8], abs=1e-6) and end["summary"]["steps"] == 8


@pytest.mark.slow  # importing transformers' Trainer alone takes seconds
def test_a_train_that_ends_before_its_first_forward_leaves_no_hook_on_the_model(tmp_path):
    """The callback reads the first forward's input shape with a pre-hook that goes once it fired; a train() that
    ended before any training forward (max_steps reached on resume, an error in the data loader) left it on the
    user's model, running on every later forward."""
    from types import SimpleNamespace

    import torch

    pytest.importorskip("transformers")
    from apextui.integrations.hf import WatchCallback

    model = torch.nn.Linear(4, 2)
    args = SimpleNamespace(run_name="no-forward", per_device_train_batch_size=2, gradient_accumulation_steps=1)
    state = SimpleNamespace(max_steps=0, num_input_tokens_seen=0)
    for _ in range(2):  # the same callback over two train() calls: no hook piles up either
        callback = WatchCallback(name="no-forward", where=str(tmp_path / "watch"))
        callback.on_train_begin(args, state, None, model=model)
        assert len(model._forward_pre_hooks) == 1
        callback.on_train_end(args, state, None, model=model)
        assert len(model._forward_pre_hooks) == 0
