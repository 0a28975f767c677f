"""Where a preset's GPU time goes: ms/step, then its CUDA kernels grouped by kind, from torch.profiler.

    python benchmarks/kernel_breakdown.py PRESET [--steps 200] [--profile-steps 10] [--top 25]
                                          [--inductor KEY=VALUE ...]

Builds the preset's workload (its CUDA size), runs its warm-up (compile / capture), times `--steps` steps
with two CUDA events, then profiles `--profile-steps` more and prints the kernels' time per step by kind
(GEMM, attention, optimizer, Triton (inductor's fused kernels), other) and the top kernels.
`--inductor coordinate_descent_tuning=True` sets torch._inductor.config values before compiling, to try a
knob without a preset of its own. CUDA only.
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys


KINDS = (  # first match wins: attention kernels' names also mention sm90
    ("attention", ("flash", "fmha", "sdpa", "cudnn")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "triton_tem")),
    ("optimizer", ("adam", "multi_tensor_apply")),
    ("triton", ("triton_",)),
)


def kind(name: str) -> str:
    low = name.lower()
    for label, needles in KINDS:
        if any(n in low for n in needles):
            return label
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--profile-steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--inductor", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("kernel_breakdown: needs a CUDA GPU", file=sys.stderr)
        return 3
    from benchlib import bare as bare_loop
    from apextui.core.presets import resolve

    for item in args.inductor:
        import torch._inductor.config as inductor_config

        key, _, value = item.partition("=")
        setattr(inductor_config, key, ast.literal_eval(value))
    preset = resolve(args.preset)
    w = bare_loop.build_workload(preset, "cuda", args.steps + args.profile_steps + preset.warmup, warm_up=False)
    compile_s = bare_loop.compile_once(w)
    bare_loop.plain_steps(w.step, preset.warmup)
    step_ms, (loss, _) = bare_loop.event_timed_steps(w, args.steps, "cuda")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        bare_loop.plain_steps(w.step, args.profile_steps)
        torch.cuda.synchronize()
    total: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            total[ev.name] += ev.device_time_total
            calls[ev.name] += 1
    n = args.profile_steps
    kernel_us = sum(total.values()) / n
    by_kind: collections.Counter[str] = collections.Counter()
    for name, us in total.items():
        by_kind[kind(name)] += us / n
    print(f"{args.preset}: {step_ms:.3f} ms/step over {args.steps} steps (loss {float(loss):.4f}); "
          f"kernels {kernel_us / 1000:.3f} ms/step ({kernel_us / 1000 / step_ms:.0%} of the step)"
          + (f"; warm-up {compile_s:.1f} s" if compile_s is not None else ""))
    print("by kind (ms/step): " + ", ".join(f"{k} {us / 1000:.3f}" for k, us in by_kind.most_common()))
    for name, us in total.most_common(args.top):
        print(f"  {us / n:8.1f} us/step  {calls[name] / n:5.1f} calls  {name[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
