"""What do the CUDA calls of apextui's clock cost, alone and inside a host-bound training loop?

    python benchmarks/clock_calls.py [--presets adamw,torch_amp,fused_layernorm] [--rounds 10]

Part 1, alone: the CPU and wall time of single calls from Python on an idle GPU (2,000 calls, median of 5):
a tiny kernel, `Event.record()` with and without a stream, `torch.cuda.current_stream()`, the 4-byte copy of
a loss into pinned memory, and a few others. It shows what looking the stream up costs each record.

Part 2, in the loop: per preset, blocks of about 300 ms of plain steps (`benchlib.bare`), in rotating
order, round after round: `bare`; `rec` (one event record after each step); `copy` (one loss copy after each
step; a 0-d tensor on the GPU where the step returns no loss); `both`. Per variant: ms/step (wall and the
training thread's CPU time), its ratio to the round's bare block, and the calls' own time a step. Then the
real `CudaClock`'s measured cost of one interval in a 400-step run and the block it chose. The calls' own
time inside the loop includes waits for room in the GPU's launch queue, which the loop would wait anyway;
the wall ratio is what the calls cost the loop. Prints a JSON object a preset (CUDA only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

VARIANTS = ("bare", "rec", "copy", "both")


def alone(torch: Any) -> None:
    x = torch.zeros(16, device="cuda")
    loss = torch.ones((), device="cuda") * 3
    slots = torch.empty((64, 2), dtype=torch.float32, pin_memory=True)[:, 0].unbind(0)
    ev, untimed = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=False)
    stream = torch.cuda.current_stream()
    ring = torch.zeros(64, device="cuda")
    view = ring[3]

    def cost(name: str, fn: Callable[[], Any], n: int = 2000) -> None:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(5):
            c0, w0 = time.thread_time(), time.perf_counter()
            for _ in range(n):
                fn()
            out.append(((time.thread_time() - c0) * 1e6 / n, (time.perf_counter() - w0) * 1e6 / n))
            torch.cuda.synchronize()
        print(f"{name:38s} cpu {statistics.median(o[0] for o in out):7.2f} us  "
              f"wall {statistics.median(o[1] for o in out):7.2f} us")

    cost("tiny kernel x.add_(1)", lambda: x.add_(1))
    cost("event.record()", lambda: ev.record())
    cost("event.record(stream)", lambda: ev.record(stream))
    cost("_CudaEventBase.record(ev, stream)", lambda: torch._C._CudaEventBase.record(ev, stream))  # the C call alone
    cost("no-timing event.record(stream)", lambda: untimed.record(stream))
    cost("torch.cuda.current_stream()", lambda: torch.cuda.current_stream())
    cost("copy_ D2H 0-d non_blocking", lambda: slots[3].copy_(loss, non_blocking=True))
    cost("copy_ D2D into device ring", lambda: ring[3].copy_(loss))
    cost("copy_ D2D into ring view (made once)", lambda: view.copy_(loss))
    cost("loss.detach()", lambda: loss.detach())
    cost("ev.query()", lambda: ev.query())
    cost("time.perf_counter()", time.perf_counter)


def in_loop(torch: Any, name: str, rounds: int) -> dict[str, Any]:
    from benchlib import bare as bare_loop
    from apextui.core.run.timing import CudaClock
    from apextui.core.measure.marker import NoMark

    _, workload = bare_loop.build(name, "cuda", 100000)
    step, mark = workload.step, NoMark()
    bare_loop.plain_steps(step, 20)
    torch.cuda.synchronize()
    slots = torch.empty((64, 2), dtype=torch.float32, pin_memory=True)[:, 0].unbind(0)
    dummy = torch.ones((), device="cuda")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(64)]
    t0 = time.perf_counter()
    bare_loop.plain_steps(step, 20)
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 50
    steps = max(20, int(300 / step_ms))
    res: dict[str, dict[str, list[float]]] = {v: {"wall": [], "cpu": [], "call_wall_us": [], "call_cpu_us": []}
                                              for v in VARIANTS}
    for r in range(rounds):
        for v in VARIANTS[r % 4:] + VARIANTS[:r % 4]:
            torch.cuda.synchronize()
            call_wall = call_cpu = 0.0
            t0, c0 = time.perf_counter(), time.thread_time()
            for i in range(steps):
                loss, _ = step(mark)
                if v != "bare":
                    a, b = time.perf_counter(), time.thread_time()
                    if v in ("copy", "both"):
                        t = (loss if loss is not None else dummy).detach()
                        slots[i % 64].copy_(t.reshape(()) if t.dim() else t, non_blocking=True)
                    if v in ("rec", "both"):
                        events[i % 64].record()
                    call_wall += time.perf_counter() - a
                    call_cpu += time.thread_time() - b
            torch.cuda.synchronize()
            res[v]["wall"].append((time.perf_counter() - t0) * 1000 / steps)
            res[v]["cpu"].append((time.thread_time() - c0) * 1000 / steps)
            res[v]["call_wall_us"].append(call_wall * 1e6 / steps)
            res[v]["call_cpu_us"].append(call_cpu * 1e6 / steps)
    out: dict[str, Any] = {}
    for v, d in res.items():
        out[v] = {
            "wall_ms": statistics.median(d["wall"]), "cpu_ms": statistics.median(d["cpu"]),
            "wall_ratio": statistics.median(w / b for w, b in zip(d["wall"], res["bare"]["wall"], strict=True)),
            "cpu_ratio": statistics.median(c / b for c, b in zip(d["cpu"], res["bare"]["cpu"], strict=True)),
            "call_wall_us": statistics.median(d["call_wall_us"]), "call_cpu_us": statistics.median(d["call_cpu_us"]),
        }
    clock = CudaClock(torch, warmup=20, steps=400)  # as a run of 20 warm-up and 380 measured steps sets it
    clock.start()
    for s in range(1, 401):
        loss, scale = step(clock)
        clock.end_step(s, loss, scale)
        if s % 25 == 0:
            clock.harvest()
    clock.close()
    clock.harvest(wait=True)
    out["clock"] = {"interval_cost_us": clock.schedule.interval_cost_ms * 1000, "block": clock.schedule.block,
                    "target_ms": clock.schedule.target_ms, "step_ms": step_ms, "steps_per_block": steps}
    del workload
    torch.cuda.empty_cache()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="adamw,torch_amp,fused_layernorm")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    import torch

    torch.cuda.init()
    alone(torch)
    for name in args.presets.split(","):
        print(name, json.dumps(in_loop(torch, name, args.rounds), indent=1))


if __name__ == "__main__":
    main()
