"""`apextui.watch(name=...)`: time the user's own training loop and stream it, at a bounded cost to that loop.

```python
mon = apextui.watch(name="gpt-finetune", model=model)  # or: with apextui.watch(name=...) as mon:
for batch in loader:
    loss = train_step(batch)
    mon.step(loss=loss, tokens=batch_tokens, batch=batch, lr=sched.get_last_lr()[0])
mon.close()
```

What a `step()` costs the loop is what the runner's steps cost it (`run/timing.py`): the clock is the runner's
(CUDA events in blocks, never a synchronisation; `time.perf_counter` on CPU). Inside a block a step is a
comparison and a counter; at the end of a block, one event record and one asynchronous 4-byte copy of the loss
(and of each tensor metric) into pinned host memory, read once the block's event has completed: the loss is
never `.item()`-ed in the loop. Every `HARVEST_INTERVAL_S` the training thread hands the finished blocks to the
runner's delivery thread (`run/delivery.py`: statistics, snapshots), whose callback writes the JSON lines
(`lines.py`) to the run's stream (`stream.py`).

Blocks: the first call starts the clock (step 1 is never timed: it holds lazy set-up); steps are timed one by
one until `warmup` steps are in, then the block size is set from those steps and from the clock's own measured
cost, by the runner's rule (`BlockSchedule.calibrate`), from the finished intervals only: no synchronisation.
From then on each hand-over resizes the blocks to the steps' time (`calibration.py`): a slow warm-up, or steps that
became faster or much slower, never leave a line a step (or a block of minutes).

Faults never reach the training: a failure inside the monitor is logged once and the hook becomes a no-op;
`step()` from a thread other than the first caller's is ignored (with one warning: the clock times one stream);
a loss on CUDA after steps on the host moves the clock to CUDA events (once; a note says so); a Python float,
a 0-d tensor and a NaN loss are all taken (a non-finite loss is a note, and null in its step line); a value
that is not a number (a loss vector, a string, NaN tokens: `values.py`) is left out with one warning a kind; a bad
option of `watch()` or `close()` (`warmup="x"`, `where=5`, `status="weird"`: `options.py`) is one warning and its
default, and the run is streamed with its `end` line all the same.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import queue
import sys
import threading
import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..run.delivery import Delivery
from ..run.snapshot import FinalStatus, RunInfo
from ..run.timing import CpuClock, CudaClock, StepRecord
from . import lines, mfu_inputs, options, store, values, workload
from .calibration import Calibration
from .held import LOSS, Held, UnitCount
from .stream import DEFAULT_MAX_BYTES, Opener, Stream, append
from .writer import Backlog, LineWriter

log = logging.getLogger("apextui.watch")

WARMUP = options.WARMUP  # timed steps left out of the statistics; their second half sizes the blocks
HARVEST_INTERVAL_S = 0.25  # as the runner's (run/runner.py): finished blocks handed over 4 times a second
HAND_OVER_INTERVALS = 64  # intervals closed since the last hand-over that make one at once (blocks too short)
MAX_BACKLOG = 10_000  # step records waiting for it; beyond, each hand-over's are merged into one record
JOIN_S = 10.0  # close(): how long the writer thread may take to write the end


_MAX_COUNT = values.MAX_COUNT


def _cuda(x: Any) -> bool:
    return values.is_tensor(x) and bool(getattr(x, "is_cuda", False))


class Watch:
    """A watched run; make one with `apextui.watch`. Use it, and `close()` it, from the training thread (a run never
    closed is closed at interpreter exit)."""

    def __init__(self, name: str | None = None, *, steps: int | None = None, warmup: int = WARMUP,
                 sample_interval: float = 1.0, max_bytes: int = DEFAULT_MAX_BYTES, where: str | Path | None = None,
                 model: Any = None, batch_size: int | None = None, rank: int | None = None,
                 opener: Opener | None = None, flops_per_token: float | None = None, precision: str | None = None,
                 now: Callable[[], float] = time.perf_counter, **unknown: Any) -> None:
        self._warned: set[str] = set()
        # what the warnings name the run by, until the options are checked (a name that is not a string is replaced)
        self.name = name if isinstance(name, str) and name else options.default_name()
        # a bad option is one warning and its default, never an error in the training (`options.py`)
        opts = options.checked(self._warn, name=name, steps=steps, warmup=warmup, sample_interval=sample_interval,
                               max_bytes=max_bytes, where=where, rank=rank, default_max_bytes=DEFAULT_MAX_BYTES,
                               unknown=unknown)
        self.name = opts.name
        # what the run trains, for `attach` to compare it only with runs of the same (`workload.py`): read at the
        # first step (a lazy module has its parameters by then), then let go
        self._model = model
        self._batch_size = batch_size
        self.steps = opts.steps
        self.warmup = opts.warmup
        self.sample_interval = opts.sample_interval
        self._now = now  # the host clock: steps on CPU, hand-overs (a test's fake clock makes timing exact)
        self.live = True  # False: a no-op from now on (failed, or closed)
        self.failure: str | None = None
        self.meta: store.RunMeta | None = None
        self.stream: Stream | None = None
        self._closed = False
        self._pid = os.getpid()  # a forked child's copy of this monitor is not the run's (`_forked`)
        self._owner: int | None = None
        self._clock: Any = None
        self._torch: Any = None
        self._n = 0
        self._next_harvest = 0.0
        self._intervals = 0  # closed since the last hand-over
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        # what waits for the writer thread, bounded (log() from other threads in a loop once grew it without end)
        self._backlog = Backlog()
        self._held: StepRecord | None = None  # records merged while the writer is behind, not handed over yet
        self._delivery: Delivery | None = None
        self._thread: threading.Thread | None = None
        self._sampler: Any = None
        self._info: RunInfo | None = None
        self._writer = LineWriter(None, self._backlog, self._warn)
        self._values = Held(self._warn)  # what the steps gave, until their block is read
        self._units = UnitCount(self._warn)
        self._cal = Calibration(self.warmup, 0)  # the current clock's block sizing (a new clock, a new one)
        self._cuda_seen = False  # CUDA came into use after steps on the host clock
        self._on_host = False  # the clock is the host's (CpuClock)
        # what MFU rests on (`mfu_inputs.py`): read from the options and the model at the first step, as the model's
        # fields are (a lazy module has its parameters by then)
        self._mfu_options = (flops_per_token, precision)
        self._flops = mfu_inputs.FlopsPerToken(None, "none", reason=mfu_inputs.NOT_GIVEN)
        self._precision = mfu_inputs.DEFAULT_PRECISION
        self.where = opts.where
        self._earlier_exc = getattr(sys, "last_value", None)  # an interactive session's earlier error, not this run's
        try:
            rank = opts.rank if opts.rank is not None else options.env_rank(self._warn)
            self.meta = store.new_run(self.name, rank, self.where)
            self.stream = self._writer.stream = Stream(Path(self.meta.path), opts.max_bytes, opener or append,
                                                       self.name)
            self.stream.reserve()
            store.register(self.meta, self.where)
            store.prune(where=self.where)
            atexit.register(self._at_exit)
            _monitors.add(self)
        except Exception as exc:  # noqa: BLE001 - a monitor that cannot start must not stop the training
            self._fail("could not start", exc)

    # ---- the user's loop --------------------------------------------------------------------------------------
    def step(self, loss: Any = None, *, tokens: Any = None, samples: Any = None, batch: Any = None,
             **metrics: Any) -> None:
        """One training step done: `loss` (a tensor on any device, a 0-d tensor, a Python float; never read
        here), `tokens` or `samples` in this step (Python numbers), `batch` (the step's inputs: the first call's
        first tensor's shape is recorded, `workload.py`; later calls' are not looked at), and any extras (`lr=`,
        `grad_norm=`: numbers or 1-element tensors) kept at the end of each timed block. Never raises, never
        synchronises."""
        if not self.live:
            return
        if self._owner != threading.get_ident():
            if self._owner is None:
                self._owner = threading.get_ident()
            else:
                self._warn("thread", f"step() called from thread {threading.current_thread().name!r}: the "
                           "monitor times the thread that called it first; this call is ignored")
                return
        try:
            self._step(loss, tokens if tokens is not None else samples, "tokens" if tokens is not None else
                       "samples" if samples is not None else None, metrics, batch)
        except Exception as exc:  # noqa: BLE001 - never into the user's training
            self._fail(f"failed at step {self._n}", exc)

    def log(self, **metrics: Any) -> None:
        """Extras that are not tied to a step's timing (an evaluation's score): a `metric` line at the current
        step. Numbers only (a tensor is read with `float`, which synchronises: pass numbers)."""
        if not self.live or self._closed or self._clock is None:
            return
        try:
            taken = {k: v for k, value in metrics.items() if (v := self._values.metric(k, value, None)) is not None}
            if taken:
                self._extra(lines.metric_event(self._n, taken))
        except Exception as exc:  # noqa: BLE001
            self._warn("log", f"log() ignored: {type(exc).__name__}: {exc}")

    def _step(self, loss: Any, units: Any, kind: str | None, metrics: dict[str, Any], batch: Any = None) -> None:
        """What a step costs the loop (a few attribute reads and one comparison inside a block): kept short."""
        clock = self._clock
        if clock is None:
            self._begin(loss, batch)
            return
        if self._on_host and (self._cuda_seen or getattr(loss, "is_cuda", False)):
            self._switch_to_cuda()
            return
        n = self._n = self._n + 1
        closes = clock.schedule.closes(n)
        held = self._values
        if loss is not None and not hasattr(loss, "detach"):
            value = loss if type(loss) is float else held.real("the loss", loss, LOSS)
            if value is not None:
                if closes:
                    held.floats[n] = value
                held.last_float = (n, value)
            loss = None
        elif loss is not None and closes:
            loss = held.checked_loss(loss)
        if closes and metrics:
            held.keep(n, metrics)
        held.last_metrics = (n, metrics)  # a block closed early (close()) keeps its last step's
        if kind is not None:
            counted = self._units
            if kind == counted.kind and type(units) in (int, float) and 0 < units < _MAX_COUNT:  # inline
                counted.total += units
                counted.steps += 1
            else:
                counted.count(kind, units)
        if not closes:
            clock.end_step(n, loss)
        else:
            if self._cal.costing(n):
                t0 = self._now()
                clock.end_step(n, loss)
                self._cal.costs.append(self._now() - t0)
            else:
                clock.end_step(n, loss)
            self._intervals += 1
            if self._intervals >= HAND_OVER_INTERVALS:  # many short intervals: hand them over (and resize) now
                self._next_harvest = 0.0
        now = self._now()
        # until the blocks are sized, every step after the warm-up looks for its intervals (sized sooner)
        if now >= self._next_harvest or (not self._cal.done and n >= self._cal.until()):
            self._next_harvest = now + HARVEST_INTERVAL_S
            self._harvest()

    # ---- clocks ----------------------------------------------------------------------------------------------
    def _begin(self, loss: Any, batch: Any = None) -> None:
        """The first call: pick the clock (CUDA once CUDA is in use, or the loss is on it), start it, start the
        writer thread; record what the run trains (its model, its batch). Step 1 is not timed."""
        torch = self._torch = self._values.torch = sys.modules.get("torch")
        cuda = torch is not None and (_cuda(loss) or bool(torch.cuda.is_initialized()))
        device = "cuda" if cuda else "cpu"
        self._n = 1
        self._clock = self._new_clock(device)
        self._on_host = device == "cpu"
        self._sampler = self._new_sampler(device)
        from ..env import describe

        assert self.meta is not None
        self._mfu_inputs()
        self._info = self._with_mfu(RunInfo(
            preset=self.name, workload=lines.WORKLOAD, config=None, device=device, size_name="default", size={},
            steps=self.steps or 0, warmup=self.warmup, autocast="none", units="steps", units_per_step=1, baseline=""))
        # a loop without torch (JAX, NumPy) is not made to import it: its env has no torch fields
        env = describe(device) if torch is not None else {"python": platform.python_version(),
                                                           "platform": sys.platform, "torch": None}
        model, batch_fields = self._workload(batch)
        self._writer.start_line = lines.start_event(self.meta, device, self.steps, self.warmup, env, model,
                                                    batch_fields)
        self._delivery = Delivery(self._inbox, self._writer, self.warmup, device, lambda: self._sampler)
        self._delivery.t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._delivery.loop, name="apextui-watch", daemon=True)
        self._thread.start()
        self._inbox.put(("info", self._info))
        self._clock.start()  # last: the sampler, the environment and the thread are not in step 2's time
        self._next_harvest = self._now() + HARVEST_INTERVAL_S

    def _mfu_inputs(self) -> None:
        """The FLOPs a token and the peak's precision from the options and the model (`mfu_inputs.py`): what cannot
        be read is one warning and no MFU; the run is streamed all the same."""
        flops_per_token, precision = self._mfu_options
        try:
            self._flops = mfu_inputs.FlopsPerToken.given(flops_per_token, self._model, self._warn)
            self._precision = mfu_inputs.precision_of(precision, self._model, self._warn)
        except Exception as exc:  # noqa: BLE001 - an odd value: no MFU, the monitor goes on
            why = f"the MFU's inputs could not be read ({type(exc).__name__}: {exc})"
            self._warn("mfu", f"{why}: no MFU")
            self._flops = mfu_inputs.FlopsPerToken(None, "none", reason=why)

    def _workload(self, batch: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The model's and the batch's fields for the start line (`workload.py`); what cannot be read is left out,
        with one warning, and the run goes on. The model is let go here (the monitor holds no reference to it)."""
        model, self._model = self._model, None
        return (self._recorded("the model", lambda: workload.model_fields(model)),
                self._recorded("the batch", lambda: workload.batch_fields(batch, self._batch_size)))

    def _recorded(self, what: str, read: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - an odd object: not recorded, the monitor goes on
            why = str(exc) if isinstance(exc, workload.BadBatch) else f"{type(exc).__name__}: {exc}"
            self._warn(f"workload:{what}", f"{what} is not recorded ({why}): attach compares this run with the runs "
                       "of its name")
            return None

    def _new_clock(self, device: str) -> Any:
        clock: Any = CudaClock(self._torch) if device == "cuda" else CpuClock(now=self._now)
        clock.schedule.last = sys.maxsize  # open-ended: no last step closes a block early
        self._cal = Calibration(self.warmup, self._n)
        return clock  # started by the caller once the monitor's own set-up is done (not in the first interval)

    def _new_sampler(self, device: str) -> Any:
        from ..env import pci_bus_id
        from ..monitor.sampler import Sampler

        gpu = device == "cuda"
        return Sampler(self.sample_interval, gpu=gpu, pci_bus_id=pci_bus_id() if gpu else None).start()

    def _switch_to_cuda(self) -> None:
        """Steps ran on the host clock before any CUDA work; now CUDA is in use (the loss is on it, or CUDA was
        initialised): time with CUDA events from here (a host clock would `float()` a CUDA loss: a
        synchronisation)."""
        self._cuda_seen = False
        self._torch = self._values.torch = self._torch or sys.modules.get("torch")
        self._close_block()
        self._hand_over(self._clock.harvest())
        self._n += 1
        self._clock = self._new_clock("cuda")
        self._on_host = False
        old, self._sampler = self._sampler, self._new_sampler("cuda")
        old.stop()
        assert self._info is not None
        self._info = self._with_mfu(replace(self._info, device="cuda"))
        self._inbox.put(("info", self._info))
        self._extra(lines.note_event(self._n, f"CUDA is in use from step {self._n}: timed with CUDA events from "
                                                   "here (the steps before were timed on the host)"))
        self._clock.start()

    def _close_block(self) -> None:
        """End the open block now (its last step's loss was never checked: a step inside a block is not)."""
        clock = self._clock
        loss, scale = clock._last
        if loss is not None and clock.schedule.open:
            clock._last = (self._values.checked_loss(loss), scale)
        clock.close()

    def _harvest(self) -> None:
        self._intervals = 0
        self._hand_over(self._clock.harvest())
        if self._on_host:  # CUDA since? (one look 4 times a second)
            torch = sys.modules.get("torch")
            self._cuda_seen = torch is not None and bool(torch.cuda.is_initialized())

    def _extra(self, line: dict[str, Any]) -> None:
        """A metric or note line for the writer thread; dropped (and counted) when it is this far behind."""
        self._backlog.put_line(line)

    def _hand_over(self, records: list[StepRecord], last: bool = False) -> None:
        if not records:
            if last and self._held is not None:  # the end: what was held back goes now
                self._put_steps([], last)
            return
        for line in self._values.fill(records):
            self._extra(line)
        self._put_steps(records, last)
        self._units_info()
        self._cal.take(records, self._clock.schedule)

    def _put_steps(self, records: list[StepRecord], last: bool) -> None:
        """Records to the writer thread. While it is more than `MAX_BACKLOG` records behind (a slow disk), they are
        merged into one held record (the steps and their time kept, their lines dropped and counted), handed over
        once it has caught up, or at the end: what waits for the writer stays bounded."""
        if self._held is not None:
            records = [self._held, *records]
            self._held = None
        if self._backlog.behind > MAX_BACKLOG and not last:
            self._held = _merged(records)
            self._backlog.drop(len(records) - 1)
            return
        self._backlog.handed += len(records)
        self._inbox.put(("steps", records))

    def _units_info(self) -> None:
        per_step, kind = self._units.per_step(), self._units.kind
        if per_step is None or kind is None or self._info is None:
            return
        info = self._info
        if info.units != kind or abs(per_step - info.units_per_step) > 0.01 * info.units_per_step:
            self._info = self._with_mfu(replace(info, units=kind, units_per_step=per_step))
            self._inbox.put(("info", self._info))

    def _with_mfu(self, info: RunInfo) -> RunInfo:
        """`info` with what its MFU rests on: the FLOPs a step (a token's, given or 6N, times the step's tokens) and
        the GPU's dense peak for the run's precision."""
        return replace(info, model_flops=self._flops.per_step(info.units, info.units_per_step),
                       peak=mfu_inputs.peak_of(info.device, self._precision, self._torch))

    # ---- the end ---------------------------------------------------------------------------------------------
    def close(self, status: FinalStatus = "ok", error: str | None = None) -> None:
        """End the run: the open block is timed, the `end` line written (it waits for the GPU once, here).
        Idempotent; never raises. A status other than ok, stopped or failed ends the run `failed` with the status
        given in its error, and an error that is not a string is written as its text (one warning each,
        `options.end_status`): an end line a reader does not know is as lost as none."""
        if self._closed or os.getpid() != self._pid:  # a forked child never ends its parent's run
            return
        self._closed = True
        end_status, end_error = options.end_status(status, error, self._warn)
        self._model = None  # never stepped: the monitor lets the model go here
        try:
            if self._clock is not None and self._thread is not None:
                if self.live:
                    held = self._values
                    n, metrics = held.last_metrics
                    if n == self._n and metrics and n not in held.metrics and self._clock.schedule.open:
                        held.keep(n, metrics)
                    self._close_block()
                    self._hand_over(self._clock.harvest(wait=True), last=True)
                    if self._info is not None and self._info.device == "cuda":
                        self._inbox.put(("peak_memory", int(self._torch.cuda.max_memory_allocated())))
                self._inbox.put(("end", (end_status, end_error)))
                self._thread.join(JOIN_S)  # the writer drains what waits (bounded) and writes the end line
        except Exception as exc:  # noqa: BLE001
            self._warn("close", f"could not end the stream: {type(exc).__name__}: {exc}")
        finally:
            self.live = False
            if self._thread is not None and self._thread.is_alive():  # held in a write (a hung disk): never close
                self._warn("close", f"the stream's writer did not finish within {JOIN_S:.0f} s (a slow or hung "
                           "disk?): the end line may be missing; the file is left to it")
            elif self.stream is not None:
                self.stream.close()
            if self.meta is not None:
                try:
                    store.unregister(self.meta, self.where)
                except Exception:  # noqa: BLE001
                    pass
            try:
                atexit.unregister(self._at_exit)
            except Exception:  # noqa: BLE001
                pass

    def _at_exit(self) -> None:
        """Never closed: the program ends. After an uncaught exception (Python keeps it in `sys.last_value` before
        the exit handlers run) the run ended `failed` (Ctrl-C: `stopped`), not `ok`."""
        exc = getattr(sys, "last_value", None)
        if exc is self._earlier_exc:
            exc = None
        if isinstance(exc, KeyboardInterrupt):
            self.close("stopped", "interrupted")
        elif isinstance(exc, BaseException):
            self.close("failed", f"{type(exc).__name__}: {exc}")
        else:
            self.close()

    def _forked(self) -> None:
        """In a forked child (`os.fork`, multiprocessing's fork): the run is the parent's, whose writer thread the
        child has not got. The child's copy does nothing from now on: its `step()` calls are no-ops, and neither
        `close()` nor the exit handlers it inherited end the parent's run or take it out of the live index."""
        self.live, self._closed = False, True
        try:
            atexit.unregister(self._at_exit)
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        elif issubclass(kind, KeyboardInterrupt):
            self.close("stopped", "interrupted")
        elif issubclass(kind, SystemExit):
            self.close("stopped", f"exited (code {exc.code})")
        else:
            self.close("failed", f"{kind.__name__}: {exc}")

    @property
    def path(self) -> Path | None:
        """The run folder (None when the monitor could not start)."""
        return Path(self.meta.path) if self.meta is not None else None

    # ---- faults ----------------------------------------------------------------------------------------------
    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("apextui: watch %s: %s", self.name, message)

    def _fail(self, what: str, exc: BaseException) -> None:
        """A fault of the monitor's own: logged once; from now on the hook does nothing (the training goes on)."""
        self.failure = f"{what}: {type(exc).__name__}: {exc}"
        self._warn("failed", f"the monitor {self.failure}; it stops, the training goes on")
        was_live, self.live = self.live, False
        if was_live and self._thread is not None:
            self._extra(lines.note_event(self._n, f"the monitor {self.failure}; it stopped here"))
            self._inbox.put(("end", ("stopped", f"the monitor stopped at step {self._n}: {self.failure}")))


def _merged(records: list[StepRecord]) -> StepRecord:
    """Consecutive intervals as one: their steps, their mean time a step, the last one's loss."""
    steps = sum(r.steps for r in records)
    last = records[-1]
    return StepRecord(step=last.step, ms=sum(r.ms * r.steps for r in records) / steps, loss=last.loss,
                      loss_scale=last.loss_scale, steps=steps)


_monitors: "weakref.WeakSet[Watch]" = weakref.WeakSet()  # every started monitor of this process


def _after_fork_in_child() -> None:
    for mon in list(_monitors):
        mon._forked()
    _monitors.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def watch(name: str | None = None, **options: Any) -> Watch:
    """Watch your own training loop: `mon.step(loss=..., tokens=...)` each step, `mon.close()` at the end (or use
    it as a context manager). `apextui attach NAME` shows it live. Options: `steps` (the run's total, for the
    progress bar), `warmup`, `sample_interval`, `max_bytes` (the stream on disk), `where` (the folder of runs;
    default the user data dir's `watch`), `model` and `batch_size` (what the run trains: `attach` compares runs
    of the same model and batch; `mon.step(batch=...)` gives the batch's shape instead);
    for MFU, with `tokens=` in `mon.step`: `flops_per_token` (a training step's model FLOPs a token, forward and
    backward) or `model` (then 6N a token), and `precision` (the peak it is measured against: fp32, tf32, bf16, fp16,
    fp8; default the model's parameters' bf16/fp16, else bf16). A bad option (a wrong type, NaN, out of range, an
    unknown keyword) is one warning and its default, never an error. docs/watch.md."""
    return Watch(name, **options)
