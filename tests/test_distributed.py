"""Data-parallel runs on CPU: 2 gloo ranks started by torchrun (real processes, real collectives).

What a data-parallel run promises (docs/distributed.md): one merged JSON stream from rank 0 with the contract of
docs/json.md, the slowest rank's ms per interval; every rank stops after the same step on a signal; a rank that
raises, dies or hangs ends the run as `failed` naming that rank, within a timeout, never a hang. The merge itself
is tested without processes. Kept few: each subprocess test starts 2-3 Python processes that import torch.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from apextui.cli.launch import strip_nproc
from apextui.core.run.distributed import DistEnv, timeout_s
from apextui.core.measure.summary import Summary
from apextui.core.measure.details import ScalingBaseline
from apextui.core.run.merge import Baseline, Merger, RankEnd, overall
from apextui.core.run.timing import StepRecord
from apextui.core.run.request import RunRequest

from helpers import ROOT, cli_env, json_lines

FAULT = str(ROOT / "tests" / "dist_fault.py")
RUN = ["--preset", "fp32", "--json", "--device", "cpu"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args: str, nproc: int = 2, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
            "127.0.0.1", "--master-port", str(free_port()), *extra, *args]


def env(**more: str) -> dict[str, str]:
    e = cli_env()
    e.update(more)
    return e


def run(cmd: list[str], timeout: float, **more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env(**more), cwd=ROOT)


def end_of(stdout: str) -> dict:
    lines = json_lines(stdout)
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end", stdout[-2000:]
    assert [line["event"] for line in lines].count("end") == 1
    return lines[-1]


# ---- the merge, without processes -----------------------------------------------------------------
def rec(step: int, ms: float, steps: int = 1) -> StepRecord:
    return StepRecord(step=step, ms=ms, loss=1.0, steps=steps)


def test_an_interval_is_merged_once_every_rank_timed_it_with_the_slowest_ms() -> None:
    m = Merger(world_size=2, warmup=1)
    m.units_per_step = 200
    m.add(0, [rec(1, 10.0), rec(2, 10.0), rec(3, 12.0)])
    m.add(1, [rec(1, 11.0), rec(2, 9.0)])
    out = m.merged()
    assert [(r.step, r.ms, r.slowest_rank, r.rank_ms) for r in out] == [(1, 11.0, 1, (10.0, 11.0)),
                                                                       (2, 10.0, 0, (10.0, 9.0))]
    assert out[1].spread_ms == 1.0 and out[1].throughput == pytest.approx(200 * 1000 / 10.0)
    assert m.merged() == ()  # step 3 waits for rank 1
    m.add(1, [rec(3, 15.0)])
    assert [(r.step, r.ms) for r in m.merged()] == [(3, 15.0)]
    assert m.done == 3 and m.stats.read().count == 2  # step 1 was warm-up


def test_scaling_efficiency_is_the_one_gpu_median_over_the_merged_one_with_the_noise_rule() -> None:
    m = Merger(world_size=2, warmup=0)
    for i in range(1, 41):
        m.add(0, [rec(i, 10.0 + (i % 3) * 0.1)])
        m.add(1, [rec(i, 10.5 + (i % 3) * 0.1)])
    m.merged()
    ends = [RankEnd(0, "ok"), RankEnd(1, "ok")]
    base = Baseline(Summary(median_ms=9.5, median_low_ms=9.4, median_high_ms=9.6, timed_intervals=40), "f")
    d = m.distributed("gloo", 400, ends, base)
    assert d.scaling_efficiency is not None
    assert d.scaling_efficiency.speedup == pytest.approx(9.5 / 10.6, rel=1e-3)
    assert d.scaling_efficiency.low < d.scaling_efficiency.speedup < d.scaling_efficiency.high
    assert d.scaling_efficiency.verdict == "slower"
    assert d.slowest_rank_share == {"0": 0.0, "1": 1.0}
    assert d.baseline == ScalingBaseline(9.5, 9.4, 9.6, "f")
    assert m.distributed("gloo", 400, ends, None).scaling_efficiency is None


def test_the_baseline_json_is_read_as_its_runs_summary_with_its_source(tmp_path) -> None:
    """`--baseline-json`: the single-process run's `Summary` as the file holds it, and the file it came from (what
    the `distributed.baseline` object names); a run that cannot be a baseline is refused in one line."""
    from apextui.cli.torchrun import read_baseline
    from apextui.core.presets import load_builtin

    preset = next(p for p in load_builtin() if p.name == "fp32")
    start = {"event": "start", "preset": "fp32", "workload": preset.workload, "config": preset.config.as_dict(),
             "device": "cpu", "size": "cpu", "amp": "none"}
    summary = {"steps": 45, "measured_steps": 40, "timed_intervals": 40, "median_ms": 9.5, "median_low_ms": 9.4,
               "median_high_ms": 9.6}
    path = tmp_path / "one.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in (start, {"event": "end", "status": "ok", "summary": summary})))
    base = read_baseline(str(path), preset, "cpu")
    assert base == Baseline(Summary.from_dict(summary), str(path)) and base.summary.timing.known
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(json.dumps(e) for e in (start, {"event": "end", "status": "stopped",
                                                                 "summary": dict(summary, steps=3)})))
    with pytest.raises(ValueError, match="stopped after 3 steps; it cannot be a baseline"):
        read_baseline(str(short), preset, "cpu")


def test_rank_0_reads_every_row_a_rank_sent_before_its_end() -> None:
    """Rank 1's last rows and its end land in the (real, in-process) store just after rank 0 counted rank 1's
    batches: rank 0 still merges all 45 steps (it once took the end as the last word and printed 38)."""
    import torch.distributed as dist

    from apextui.core.run.data_parallel import Collector
    from apextui.core.run.distributed import Channel
    from apextui.core.run.merge import to_row
    from apextui.core.run.snapshot import Snapshot

    store = dist.HashStore()
    rank_1 = Channel(store, 2)

    class Racing:
        """The store as rank 0 sees it: rank 1 sends its last batch and its end right after rank 0's first count."""

        raced = False

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(store, name)

        def add(self, key: str, amount: int) -> int:
            count = store.add(key, amount)
            if key == "n/1" and amount == 0 and not self.raced:
                self.raced = True
                rank_1.send(1, [to_row(rec(41, 9.0, steps=5))])
                rank_1.end(1, {"status": "ok", "error": None, "steps": 45})
            return count

    blocks = [rec(1, 10.0, steps=40), rec(41, 10.0, steps=5)]
    rank_1.send(1, [to_row(blocks[0])])
    printed: list[Snapshot] = []
    collector = Collector(Channel(Racing(), 2), 2, 0, printed.append, "gloo", None, grace=30)
    local = Snapshot(status="ok", info=None, steps_done=45, new_steps=tuple(blocks), stats=None, throughput=None,
                     skipped_steps=0, monitor=None, elapsed_s=1.0)
    collector.on_local(local)
    assert collector.finish(local) == "ok"
    assert collector.merger.done == 45 and [r.step for r in printed[-1].new_steps] == [1, 41]


def test_finish_reads_the_channel_after_the_collectors_thread_not_beside_it() -> None:
    """The collector's thread is inside a read of rank 1's first batch when the run ends: `finish` waits for that
    read instead of reading beside it (it once read the batch too and deleted its key, and the thread's read then
    waited on a key that was gone until the store's timeout, and failed)."""
    import datetime
    import threading

    import torch.distributed as dist

    from apextui.core.run.data_parallel import Collector
    from apextui.core.run.distributed import Channel
    from apextui.core.run.merge import to_row
    from apextui.core.run.snapshot import Snapshot

    store = dist.HashStore()
    store.set_timeout(datetime.timedelta(seconds=2))
    rank_1 = Channel(store, 2)
    blocks = [rec(1, 10.0, steps=40), rec(41, 10.0, steps=5)]
    for block in blocks:
        rank_1.send(1, [to_row(block)])
    rank_1.end(1, {"status": "ok", "error": None, "steps": 45})
    inside, release = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    class Held:
        """The store as rank 0 sees it: the collector thread's first read of a batch waits for `release`."""

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(store, name)

        def get(self, key: str) -> bytes:
            if key.startswith("rec/") and threading.current_thread().name == "apextui-collect" and not inside.is_set():
                inside.set()
                release.wait(30)
            try:
                return store.get(key)
            except BaseException as exc:
                failed.append(exc)
                raise

    printed: list[Snapshot] = []
    collector = Collector(Channel(Held(), 2), 2, 0, printed.append, "gloo", None, grace=30)
    local = Snapshot(status="ok", info=None, steps_done=45, new_steps=tuple(blocks), stats=None, throughput=None,
                     skipped_steps=0, monitor=None, elapsed_s=1.0)
    collector.on_local(local)
    collector.start()
    assert inside.wait(30)
    status: list[str] = []
    finishing = threading.Thread(target=lambda: status.append(collector.finish(local)))
    finishing.start()
    finishing.join(1.0)  # before: finish read both batches meanwhile; now it waits for the thread's read
    release.set()
    finishing.join(30)
    collector._thread.join(30)  # its read, done
    assert status == ["ok"] and not failed, failed
    assert collector.merger.done == 45 and [r.step for r in printed[-1].new_steps] == [1, 41]


def test_a_rank_that_failed_by_itself_is_named_before_the_ranks_it_took_down() -> None:
    status, error = overall([RankEnd(0, "failed", "RuntimeError: Connection closed by peer (at step 5)"),
                             RankEnd(1, "failed", "ValueError: injected fault (at step 5)")])
    assert status == "failed" and error is not None and error.startswith("rank 1: ValueError: injected fault")
    assert overall([RankEnd(0, "stopped"), RankEnd(1, "ok")])[0] == "stopped"
    assert overall([RankEnd(0, "ok"), RankEnd(1, "ok")]) == ("ok", None)


def test_torchrun_environment_and_timeout_are_checked() -> None:
    assert DistEnv.from_env({}) is None
    assert DistEnv.from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == DistEnv(1, 2, 1)
    with pytest.raises(ValueError, match="do not fit"):
        DistEnv.from_env({"RANK": "2", "WORLD_SIZE": "2"})
    assert timeout_s({}) == 300.0 and timeout_s({"APEXTUI_DIST_TIMEOUT": "12"}) == 12.0
    with pytest.raises(ValueError, match="APEXTUI_DIST_TIMEOUT"):
        timeout_s({"APEXTUI_DIST_TIMEOUT": "0"})
    assert strip_nproc(["--nproc", "2", "--preset", "x", "--nproc=3", "--json"]) == ["--preset", "x", "--json"]


# ---- 2 gloo ranks under torchrun -------------------------------------------------------------------
def test_two_ranks_print_one_merged_stream_with_the_contract(tmp_path) -> None:
    single = run([sys.executable, "-m", "apextui", *RUN, "--steps", "45"], timeout=240)
    assert single.returncode == 0, single.stderr[-2000:]
    base = tmp_path / "one.jsonl"
    base.write_text(single.stdout)
    proc = run(torchrun("-m", "apextui", *RUN, "--steps", "45", "--baseline-json", str(base)), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = json_lines(proc.stdout)  # every stdout line is JSON: rank 1 printed nothing there
    assert [line["event"] for line in lines[:2]] == ["start", "setup"]
    assert lines[0]["distributed"] == {"world_size": 2, "backend": "gloo", "local_world_size": 2}
    assert lines[1]["units_per_step"] == 2 * json_lines(single.stdout)[1]["units_per_step"]  # both ranks' tokens
    steps = [line for line in lines if line["event"] == "step"]
    assert sum(s["steps"] for s in steps) == 45 and [s["step"] for s in steps] == sorted(s["step"] for s in steps)
    for s in steps:
        assert len(s["rank_ms"]) == 2 and s["ms"] == max(s["rank_ms"])
        assert s["rank_ms"][s["slowest_rank"]] == s["ms"] and s["spread_ms"] >= 0 and s["throughput"] > 0
    end = end_of(proc.stdout)
    assert end["status"] == "ok" and end["summary"]["steps"] == 45
    d = end["summary"]["distributed"]
    assert [r["status"] for r in d["ranks"]] == ["ok", "ok"] and d["world_size"] == 2
    assert d["baseline"]["source"] == str(base) and d["scaling_efficiency"] > 0
    assert d["scaling_efficiency_verdict"] in ("faster", "slower", "within_noise")


def test_a_rank_that_raises_fails_the_run_naming_it() -> None:
    t0 = time.monotonic()
    proc = run(torchrun(FAULT, "raise", "1", "5", "--", *RUN, "--steps", "40"), timeout=150,
               APEXTUI_DIST_TIMEOUT="20")
    end = end_of(proc.stdout)
    assert end["status"] == "failed", end
    assert end["error"].startswith("rank 1: ValueError: injected fault (at step 5)"), end["error"]
    assert proc.returncode != 0 and time.monotonic() - t0 < 140
    ranks = end["summary"]["distributed"]["ranks"]
    assert ranks[1]["status"] == "failed" and "injected fault" in ranks[1]["error"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hang", "die"])
def test_a_rank_that_hangs_or_dies_fails_the_run_within_the_timeout(mode: str) -> None:
    t0 = time.monotonic()
    proc = run(torchrun(FAULT, mode, "1", "5", "--", *RUN, "--steps", "40"), timeout=170,
               APEXTUI_DIST_TIMEOUT="8")
    end = end_of(proc.stdout)
    assert end["status"] == "failed" and "rank 1" in end["error"], end
    assert proc.returncode != 0 and time.monotonic() - t0 < 160


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_every_rank_after_the_same_step(sig: signal.Signals, code: int) -> None:
    """`apextui --nproc 2` (torchrun's API) exits 130/143 as a single run does; torchrun itself forwards the signal
    to the ranks in the same way but exits with its own status."""
    proc = subprocess.Popen([sys.executable, "-m", "apextui", "--nproc", "2", *RUN, "--steps", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=ROOT)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the start line: the ranks are up
    deadline = time.monotonic() + 120
    line = ""
    while '"event": "step"' not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    proc.send_signal(sig)
    # not communicate(): it reads the pipe itself and would skip what readline() already buffered (with fast steps
    # the tail of a line here); stderr has a line or two, so reading stdout to its end first cannot block; a run
    # that never ends is killed
    killer = threading.Timer(120, proc.kill)
    killer.start()
    try:
        out = proc.stdout.read()
        err = proc.stderr.read()
    finally:
        killer.cancel()
    proc.wait(timeout=120)
    assert proc.returncode == code, err[-3000:]
    end = end_of(first + line + out)
    assert end["status"] == "stopped"
    ranks = end["summary"]["distributed"]["ranks"]
    assert [r["status"] for r in ranks] == ["stopped", "stopped"] and ranks[0]["steps"] == ranks[1]["steps"]
    assert 0 < end["summary"]["steps"] < 400


@pytest.mark.slow
def test_two_nodes_meet_on_a_localhost_rendezvous() -> None:
    """Two torchrun processes, one rank each, as two nodes would: `--nnodes 2 --node-rank R --rdzv-endpoint`."""
    endpoint = f"127.0.0.1:{free_port()}"
    cmds = [[sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(r),
             "--nproc-per-node", "1", "--rdzv-endpoint", endpoint, "-m", "apextui", *RUN, "--steps", "20"]
            for r in (0, 1)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=ROOT)
             for c in cmds]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    assert outs[1][0] == ""  # node 1 holds rank 1: nothing on stdout
    end = end_of(outs[0][0])
    assert end["status"] == "ok" and end["summary"]["distributed"]["world_size"] == 2



@pytest.mark.slow
def test_advise_on_two_ranks_gives_the_verdict_from_the_merged_runs() -> None:
    proc = run([sys.executable, "-m", "apextui", "advise", "--nproc", "2", "--workloads", "optimizer", "--steps", "30",
                "--repeats", "1", "--device", "cpu", "--json"], timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)  # one document: rank 1 printed nothing
    assert doc["distributed"] == {"world_size": 2, "backend": "gloo"} and doc["runs"]["ok"] == 2
    w = doc["workloads"][0]
    assert w["fastest"] in ("adamw", "adamw_fused") and w["verdict"].startswith("optimizer: ")
    graph = next(p for p in w["presets"] if p["preset"] == "adamw_capturable_graph")
    assert graph["status"] != "ok" and "data-parallel" in graph["reason"]

# ---- GPU (skipped without CUDA): NCCL ------------------------------------------------------------------
def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpus() < 1, reason="needs a CUDA GPU")
@pytest.mark.parametrize("preset", ["ddp_adamw_fused", "fp32", "fsdp2_adamw_fused"])
def test_gpu_world_of_one_under_torchrun_with_nccl(preset: str) -> None:
    proc = run(torchrun("-m", "apextui", "--preset", preset, "--json", "--steps", "60", nproc=1), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = json_lines(proc.stdout)
    assert lines[0]["distributed"]["backend"] == "nccl" and lines[0]["device"] == "cuda"
    end = end_of(proc.stdout)
    assert end["status"] == "ok" and end["summary"]["distributed"]["world_size"] == 1


@pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("preset", ["ddp_adamw_fused", "fsdp2_adamw_fused"])
def test_gpu_two_ranks_each_on_its_own_gpu(tmp_path, preset: str) -> None:
    one = run([sys.executable, "-m", "apextui", "--preset", preset, "--json", "--steps", "100"], timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    (tmp_path / "one.jsonl").write_text(one.stdout)
    proc = run([sys.executable, "-m", "apextui", "--nproc", "2", "--preset", preset, "--json", "--steps", "100",
                "--baseline-json", str(tmp_path / "one.jsonl")], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = end_of(proc.stdout)["summary"]["distributed"]
    assert [r["status"] for r in d["ranks"]] == ["ok", "ok"] and d["scaling_efficiency"] > 0


@pytest.mark.slow
def test_the_tuis_data_parallel_runner_turns_the_merged_lines_into_snapshots_and_stops_every_rank() -> None:
    import threading

    from apextui.core.presets import resolve
    from apextui.core.run.launched import LaunchedRunner

    snaps = []
    stepped = threading.Event()

    def callback(snap) -> None:
        snaps.append(snap)
        if snap.new_steps and snap.steps_done >= 25:
            stepped.set()

    r = LaunchedRunner(RunRequest(resolve("fp32"), "cpu", 400), callback, nproc=2).start()
    assert stepped.wait(240), r.log_path
    r.stop()
    assert r.join(120)
    final = r.result
    assert final is not None and final.status == "stopped" and 25 <= final.steps_done < 400
    assert final.distributed is not None and [x.status for x in final.distributed.ranks] == ["stopped"] * 2
    recs = [rec for s in snaps for rec in s.new_steps]
    assert recs and all(len(rec.rank_ms) == 2 and rec.ms == max(rec.rank_ms) for rec in recs)
    assert final.info is not None and final.info.units_per_step == 2 * 8 * 32  # both ranks' tokens
