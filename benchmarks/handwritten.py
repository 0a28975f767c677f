"""A hand-written training loop of a model's best-known configurations, with nothing of apextui in it: the
reference an `advise --model` verdict is checked against, side by side in one process.

    python benchmarks/handwritten.py --model examples/gpt.py:build [--configs fp32,bf16,bf16+fused,...]
        [--steps 40] [--warmup 10] [--rounds 3] [--json OUT.json] [--advice ADVICE.json]

A configuration is `+`-joined parts: a precision (`fp32`, `tf32`, `bf16`, `fp16`), optionally `fused` (torch
`AdamW(fused=True)`) or `foreach` (`AdamW(foreach=True)`; else AdamW's default, foreach on CUDA only), `apexadam`
(Apex `FusedAdam(adam_w_mode=True)`), `compile` (`torch.compile(model)`, mode default), `autotune` (mode
`max-autotune-no-cudagraphs`), `cd` (`torch.compile(options={"coordinate_descent_tuning": True})`) or `reduce` (mode
`reduce-overhead`), `apexnorm` (every nn.LayerNorm / nn.RMSNorm, and every module of a class named `…RMSNorm` with a
`weight` and an `eps` or `variance_epsilon`, as a Llama-style codebase's own, swapped for Apex's fused one, by class:
the hand-written way), `ligernorm` (Liger-Kernel: on a Hugging Face model of a family Liger patches, its family patch,
`_apply_liger_kernel_to_instance(model=...)` as HF Trainer's `use_liger_kernel` applies it, its loss left alone; on
another model, GPT-2 among them, its norms swapped for LigerLayerNorm / LigerRMSNorm by class, as `apexnorm`),
`ligerflce` (Liger's fused linear cross-entropy by the same patch), `channelslast` (the model and each batch's 4-D
tensors in channels_last, `cudnn.benchmark` on), `flash`, `efficient`, `cudnn` or `math` (the forward under
`sdpa_kernel` with that backend). Each configuration builds the model afresh (same seed), warms up (compiling there),
then the configurations are timed in `--rounds` interleaved rounds (ABBA order), `--steps` steps each, with CUDA events
around the whole block and one synchronisation at its end. The table reports the median ms/step over rounds and the
speed-up against the first configuration.

`--advice ADVICE.json` (the output of `apextui advise --model … --json`) adds the advice's answer, written the
hand-written way, as one more configuration in the same interleaved rounds, and prints its time against the fastest
of the others: whether the verdict is within 3 % of the best hand-written combination, measured side by side in one
process (runs in separate processes minutes apart drift by more than that on a host-bound model).

Only the model file's `build` function is used (a `ModelSetup`: model, make_batch, loss_fn, lr), loaded with
importlib, not through apextui's runner.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

DEFAULT_CONFIGS = "fp32,bf16,bf16+fused,bf16+fused+compile"
SDPA_PARTS = ("flash", "efficient", "cudnn", "math")
PARTS = ("fused", "foreach", "apexadam", "compile", "autotune", "cd", "reduce", "apexnorm", "ligernorm", "ligerflce",
         "channelslast", *SDPA_PARTS)
COMPILE_PARTS = {"compile": None, "autotune": "max-autotune-no-cudagraphs", "reduce": "reduce-overhead", "cd": None}
PRECISIONS = {"fp32": None, "tf32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def load_build(spec: str) -> Any:
    where, _, func = spec.rpartition(":")
    path = Path(where)
    sys.path.insert(0, str(path.resolve().parent))
    module_spec = importlib.util.spec_from_file_location(f"handwritten_{path.stem}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # torch.compile looks the module up by name
    module_spec.loader.exec_module(module)
    return getattr(module, func)


def call(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def swap_apex_norms(model: nn.Module) -> int:
    from apex.normalization import FusedLayerNorm, FusedRMSNorm

    n = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.LayerNorm:
                new: nn.Module = FusedLayerNorm(child.normalized_shape, eps=child.eps)
            elif type(child) is nn.RMSNorm:
                new = FusedRMSNorm(child.normalized_shape, eps=child.eps or 1e-6)
            elif type(child).__name__.endswith("RMSNorm") and isinstance(getattr(child, "weight", None), nn.Parameter):
                eps = getattr(child, "eps", getattr(child, "variance_epsilon", 1e-6))  # the model's own class
                new = FusedRMSNorm(child.weight.shape, eps=eps)
            else:
                continue
            new.load_state_dict(child.state_dict())
            setattr(parent, name, new.to(next(child.parameters()).device))
            n += 1
    return n


def liger_patch(model: nn.Module, **flags: bool) -> bool:
    """Liger's patch of a Hugging Face model family it knows, on this model; False for any other model (GPT-2 among
    them: Liger's table has no "gpt2", and its patch then changes nothing, so the norms are swapped by class)."""
    kind = getattr(getattr(model, "config", None), "model_type", None)
    from liger_kernel.transformers import _apply_liger_kernel_to_instance
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN

    if kind not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        return False

    _apply_liger_kernel_to_instance(model=model, cross_entropy=False, **flags)
    return True


def swap_liger_norms(model: nn.Module) -> int:
    """Another model's norms swapped for Liger's, by class (`swap_apex_norms`' way)."""
    from liger_kernel.transformers import LigerLayerNorm, LigerRMSNorm

    n = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            weight = getattr(child, "weight", None)
            if type(child) is nn.LayerNorm and child.bias is not None:
                new: nn.Module = LigerLayerNorm(child.normalized_shape[0], eps=child.eps, bias=True)
            elif (type(child) is nn.RMSNorm or type(child).__name__.endswith("RMSNorm")) \
                    and isinstance(weight, nn.Parameter):
                eps = getattr(child, "eps", None) or getattr(child, "variance_epsilon", 1e-6)
                new = LigerRMSNorm(weight.shape[0], eps=eps)
            else:
                continue
            new.load_state_dict(child.state_dict(), strict=False)
            setattr(parent, name, new.to(next(child.parameters()).device))
            n += 1
    return n


def channels_last(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.contiguous(memory_format=torch.channels_last) if batch.dim() == 4 else batch
    if isinstance(batch, dict):
        return {k: channels_last(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(channels_last(v) for v in batch)
    return batch


class Trainer:
    """One configuration: its model, optimizer and step, written as a user would."""

    def __init__(self, build: Any, config: str, device: str, seed: int) -> None:
        parts = config.split("+")
        self.config, self.precision = config, parts[0]
        if self.precision not in PRECISIONS:
            raise SystemExit(f"--configs: {config!r}: the first part must be one of {', '.join(PRECISIONS)}")
        unknown = set(parts[1:]) - set(PARTS)
        if unknown:
            raise SystemExit(f"--configs: {config!r}: unknown part(s) {sorted(unknown)}; allowed: {', '.join(PARTS)}")
        torch.manual_seed(seed)
        setup = build(small=device == "cpu") if "small" in inspect.signature(build).parameters else build()
        self.setup = setup
        self.model = setup.model.to(device).train()
        self.kernels = ""  # what the norm parts changed, printed with the build: a part that changed nothing shows
        if "apexnorm" in parts:
            self.kernels = f"{swap_apex_norms(self.model)} norms swapped for Apex's"
        if "ligernorm" in parts:
            patched = liger_patch(self.model, fused_linear_cross_entropy="ligerflce" in parts)
            self.kernels = "Liger's family patch" if patched else \
                f"{swap_liger_norms(self.model)} norms swapped for Liger's"
        elif "ligerflce" in parts and "ligernorm" not in parts:
            liger_patch(self.model, rope=False, rms_norm=False, swiglu=False, fused_linear_cross_entropy=True)
        self.channels_last = "channelslast" in parts
        if self.channels_last:
            self.model.to(memory_format=torch.channels_last)
        backends = [p for p in parts if p in SDPA_PARTS]
        self.backend = backends[0] if backends else None
        self.device = device
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        self.batches = [setup.make_batch(torch.device(device), gen) for _ in range(8)]
        params = [p for p in self.model.parameters() if p.requires_grad]
        if "apexadam" in parts:
            from apex.optimizers import FusedAdam

            self.opt: Any = FusedAdam(params, lr=setup.lr or 1e-3, adam_w_mode=True)
        else:
            kind = {"fused": True} if "fused" in parts else {"foreach": True} if "foreach" in parts else {}
            self.opt = torch.optim.AdamW(params, lr=setup.lr or 1e-3, **kind)
        self.dtype = PRECISIONS[self.precision]
        self.scaler = torch.amp.GradScaler(device) if self.precision == "fp16" else None
        forward = self.forward
        modes = [COMPILE_PARTS[p] for p in parts if p in COMPILE_PARTS]
        if "cd" in parts:
            forward = torch.compile(forward, options={"coordinate_descent_tuning": True})
        elif modes:
            forward = torch.compile(forward, mode=modes[0])
        self.run_forward = forward
        self.i = 0
        self.peak = 0

    def forward(self, batch: Any) -> torch.Tensor:
        from contextlib import nullcontext

        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}.get(self.backend or "")
        with torch.autocast(self.device, dtype=self.dtype, enabled=self.dtype is not None), \
                (sdpa_kernel(backend) if backend is not None else nullcontext()):
            if self.setup.loss_fn is None:
                out = call(self.model, batch)
                return out if isinstance(out, torch.Tensor) else out["loss"] if isinstance(out, dict) else out.loss
            inputs, targets = batch
            return self.setup.loss_fn(call(self.model, inputs), targets)

    def set_flags(self) -> None:
        on = self.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        torch.backends.cudnn.benchmark = self.channels_last

    def step(self) -> torch.Tensor:
        batch = self.batches[self.i % len(self.batches)]
        self.i += 1
        if self.channels_last:
            batch = channels_last(batch)
        self.opt.zero_grad(set_to_none=True)
        loss = self.run_forward(batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        return loss.detach()

    def block(self, steps: int) -> float:
        """ms per step over `steps` steps: events around the block, one synchronisation at its end."""
        self.set_flags()
        if self.device != "cuda":
            t0 = time.perf_counter()
            for _ in range(steps):
                self.step()
            return (time.perf_counter() - t0) * 1e3 / steps
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.reset_peak_memory_stats()
        start.record()
        for _ in range(steps):
            self.step()
        end.record()
        end.synchronize()
        self.peak = max(self.peak, torch.cuda.max_memory_allocated())
        return start.elapsed_time(end) / steps


# an apextui configuration's axis values, written the hand-written way (`Trainer`'s parts)
ADVICE_PARTS = {("optimizer", "fused"): "fused", ("optimizer", "foreach"): "foreach",
                ("optimizer", "apex"): "apexadam", ("norms", "apex"): "apexnorm",
                ("compile", "default"): "compile", ("compile", "max-autotune-no-cudagraphs"): "autotune",
                ("compile", "coordinate-descent"): "cd", ("compile", "reduce-overhead"): "reduce",
                ("norms", "liger"): "ligernorm", ("loss", "liger_flce"): "ligerflce",
                ("memory_format", "channels_last"): "channelslast",
                **{("attention", backend): backend for backend in SDPA_PARTS}}
# torch AdamW's own default ("adamw") is foreach on CUDA only, so foreach is a part of its own
# (each axis's default: an answer names every axis; the data-parallel ways are never a one-GPU answer)
NO_CHANGE = {("optimizer", "adamw"), ("norms", "torch"), ("compile", "none"), ("memory_format", "contiguous"),
             ("attention", "default"), ("loss", "model"), ("parallel", "auto")}


def advice_config(path: str) -> str:
    """The answer of an `apextui advise --model … --json` document as a configuration here (`Trainer`'s parts)."""
    try:
        answer = json.loads(Path(path).read_text())["answer"]["config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--advice: {path}: not an advice document with an answer "
                         f"({type(exc).__name__}: {exc})") from None
    if answer.get("precision") not in PRECISIONS:
        raise SystemExit(f"--advice: the answer's precision {answer.get('precision')!r} has no hand-written form "
                         f"here (allowed: {', '.join(PRECISIONS)})")
    parts = [answer["precision"]]
    for axis_name, value in answer.items():
        if axis_name == "precision" or (axis_name, value) in NO_CHANGE:
            continue
        if (axis_name, value) not in ADVICE_PARTS:
            raise SystemExit(f"--advice: the answer's {axis_name}={value} has no hand-written form here")
        parts.append(ADVICE_PARTS[(axis_name, value)])
    return "+".join(parts)


def raise_recompile_limit(configs: int) -> None:
    """Room in dynamo's cache for every configuration's graphs. They live in one process so that they can be timed
    in interleaved rounds, and they compile the same code objects (the model's forward, each block's): with its
    default limit (8 graphs a code object) HF GPT-2's third compiled configuration pushed the first back to eager
    (315 ms/step in its first round on an H100, 27.5 alone). A user's own loop compiles one configuration."""
    config = torch._dynamo.config
    for name, per in (("recompile_limit", 8), ("cache_size_limit", 8), ("accumulated_recompile_limit", 256),
                      ("accumulated_cache_size_limit", 256)):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), per * max(1, configs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="FILE.py:FUNC returning an apextui.ModelSetup")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="write every round's figures here")
    parser.add_argument("--advice", help="an `apextui advise --model … --json` document: its answer runs beside")
    args = parser.parse_args(argv)
    build = load_build(args.model)
    configs = [c.strip() for c in args.configs.split(",")]
    raise_recompile_limit(len(configs))
    advised = advice_config(args.advice) if args.advice else None
    if advised is not None and advised not in configs:
        configs.append(advised)
    trainers = []
    for config in configs:
        t0 = time.perf_counter()
        trainer = Trainer(build, config, args.device, seed=0)
        trainer.set_flags()
        first = None
        for k in range(args.warmup):
            loss = trainer.step()
            first = float(loss) if k == 0 else first
        if args.device == "cuda":
            torch.cuda.synchronize()
        kernels = f", {trainer.kernels}" if trainer.kernels else ""
        print(f"{config}: built and warmed up in {time.perf_counter() - t0:.1f} s (first loss {first:.4f}{kernels})",
              flush=True)
        trainers.append(trainer)
    times: dict[str, list[float]] = {t.config: [] for t in trainers}
    for r in range(args.rounds):
        order = trainers if r % 2 == 0 else trainers[::-1]
        for trainer in order:
            times[trainer.config].append(trainer.block(args.steps))
    base = statistics.median(times[trainers[0].config])
    print(f"\n{'config':32} {'ms/step':>9} {'rounds (ms/step)':>28} {'vs first':>9} {'peak GiB':>9}")
    rows = []
    for trainer in trainers:
        ms = statistics.median(times[trainer.config])
        rounds = " ".join(f"{x:.2f}" for x in times[trainer.config])
        print(f"{trainer.config:32} {ms:9.2f} {rounds:>28} {base / ms:8.2f}x {trainer.peak / 2**30:9.2f}")
        rows.append({"config": trainer.config, "median_ms": ms, "rounds_ms": times[trainer.config],
                     "speedup_vs_first": base / ms, "peak_bytes": trainer.peak})
    verdict = None
    if advised is not None:
        others = [r for r in rows if r["config"] != advised]
        best = min(others, key=lambda r: r["median_ms"]) if others else None
        ms = next(r["median_ms"] for r in rows if r["config"] == advised)
        if best is not None:
            ratio = ms / best["median_ms"]
            verdict = {"advised": advised, "advised_ms": ms, "best_other": best["config"],
                       "best_other_ms": best["median_ms"], "ratio": ratio, "within_3pct": ratio <= 1.03}
            print(f"\nthe advice's answer {advised}: {ms:.2f} ms/step, {ratio:.3f}x the fastest other "
                  f"({best['config']}, {best['median_ms']:.2f}): {'within' if ratio <= 1.03 else 'NOT within'} 3 %")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "device": args.device, "steps": args.steps,
                                               "rounds": args.rounds, "torch": torch.__version__, "rows": rows,
                                               "advice": verdict}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
