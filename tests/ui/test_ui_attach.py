"""`apextui attach` in the TUI (Pilot): attached to a live watched run of a real training loop, the run pane shows
its steps and loss, the metrics pane its extras; once the run ends the table lists it; without a name the picker
lists the runs; a run killed without an end line is shown failed, with when it last wrote."""

from __future__ import annotations

import threading

import pytest
import torch
from helpers import killed_watched_run
from ui_fakes import static_text, wait_for, wait_for_screen

import apextui
from apextui.core.watch import store
from apextui.ui.attach_app import AttachApp
from apextui.ui.screens.run_picker import RunPicker
from apextui.ui.widgets.comparison_table import ComparisonTable
from apextui.ui.widgets.metric_plots import MetricPlots

pytestmark = pytest.mark.asyncio


def loop(mon, stop: threading.Event, started: threading.Event) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    while not stop.is_set():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(loss=loss.detach(), samples=32, lr=0.05)
        started.set()
    mon.close()


@pytest.mark.slow
async def test_attach_follows_a_live_run_and_shows_its_steps_and_loss():
    mon = apextui.watch(name="live-mlp")
    stop, started = threading.Event(), threading.Event()
    trainer = threading.Thread(target=loop, args=(mon, stop, started))
    trainer.start()
    try:
        started.wait(30)
        app = AttachApp(store.find("live-mlp")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2)
        async with app.run_test(size=(100, 32)) as pilot:
            table = app.query_one(ComparisonTable)  # the live run in the table, its figures so far
            await wait_for(pilot, lambda: [r.preset.split()[-1] for r in table.rows_data] == ["●"], what="live row")
            await wait_for(pilot, lambda: "running" in static_text(app, "#run-title"), what="the run running")
            await wait_for(pilot, lambda: "avg" in static_text(app, "#loss-value"), what="a loss")
            steps = static_text(app, "#run-steps")
            assert int(steps.split("·")[0]) > 0 and "live-mlp" in static_text(app, "#run-title")
            await wait_for(pilot, lambda: "samples/s" in static_text(app, "#run-rate"), what="the throughput")
            assert "med" in static_text(app, "#run-timing")
            await wait_for(pilot, lambda: app.query_one(MetricPlots).names == ["lr"], what="the lr plot")
            stop.set()
            trainer.join(30)
            await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the end")
            await wait_for(pilot, lambda: "●" not in table.rows_data[0].preset, what="the finished row")
            assert [r.preset.split()[0] for r in table.rows_data] == ["live-mlp"]
            assert table.rows_data[0].status == "ok"
    finally:
        stop.set()
        trainer.join(30)


async def test_without_a_name_the_picker_lists_the_runs_and_attaches_the_chosen_one():
    mon = apextui.watch(name="picked")
    try:
        app = AttachApp(None, poll_s=0.05, refresh_s=0.1)
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for_screen(pilot, app, RunPicker, "the picker")
            assert [m.name for m in app.screen.runs] == ["picked"] and app.screen.live == 1
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.meta is not None and app.meta.name == "picked", what="attached")
    finally:
        mon.close()


@pytest.mark.slow
async def test_a_run_killed_without_an_end_line_is_shown_failed_with_its_last_write():
    folder, pid = killed_watched_run()
    app = AttachApp(store.read_meta(folder), poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_for(pilot, lambda: "ended without an end line" in static_text(app, "#run-title"), what="the end")
        title = static_text(app, "#run-title")
        assert "failed" in title and f"process {pid} is gone" in title
        assert int(static_text(app, "#run-steps").split("·")[0]) > 0


@pytest.mark.slow
async def test_a_torchrun_run_shows_every_ranks_ms_per_step_on_rank_0s_pane():
    mons = [apextui.watch(name="ddp-mlp", rank=r) for r in (0, 1)]
    stop, started = threading.Event(), [threading.Event(), threading.Event()]
    trainers = [threading.Thread(target=loop, args=(m, stop, s)) for m, s in zip(mons, started, strict=True)]
    for t in trainers:
        t.start()
    try:
        for s in started:
            s.wait(30)
        chosen, others = store.find("ddp-mlp")
        assert chosen.rank == 0 and [m.rank for m in others] == [1]
        app = AttachApp(chosen, poll_s=0.05, refresh_s=0.1)
        async with app.run_test(size=(120, 32)) as pilot:
            await wait_for(pilot, lambda: "2 ranks" in static_text(app, "#ranks-row"), what="the ranks row")
            row = static_text(app, "#ranks-row")
            assert "0: " in row and "1: " in row and "slowest rank" in row
    finally:
        stop.set()
        for t in trainers:
            t.join(30)


async def test_b_makes_the_highlighted_finished_run_the_baseline():
    for _ in range(2):
        with apextui.watch(name="same", warmup=2) as mon:
            for i in range(40):
                mon.step(loss=1.0 / (i + 1))
    app = AttachApp(store.find("same")[0], poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(120, 32)) as pilot:
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: len(table.rows_data) == 2, what="two rows")
        assert [r.picked_baseline for r in table.rows_data] == [True, False]  # the oldest is the baseline
        table.move_cursor(row=1)
        await pilot.press("b")
        assert [r.picked_baseline for r in table.rows_data] == [False, True]


def mlp_loop(name: str, width: int, batch: int, stop: threading.Event | None = None,
             started: threading.Event | None = None, steps: int = 40) -> None:
    """A watched MLP training loop that gives the hook its model and batch: `steps` steps, or until `stop`."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(batch, 16), torch.randn(batch, 1)
    with apextui.watch(name=name, warmup=2, model=model) as mon:
        i = 0
        while (stop is None and i < steps) or (stop is not None and not stop.is_set()):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss=loss.detach(), batch=(x, y))
            i += 1
            if started is not None:
                started.set()


def cell(table: ComparisonTable, run: str, column: str) -> str:
    """The text of `column` in the row of the run named `run` (the first word of its preset cell)."""
    (i,) = [i for i in range(table.row_count) if str(table.get_row_at(i)[0]).split()[0] == run]
    return str(table.get_cell_at((i, table.get_column_index(column))))


@pytest.mark.slow
async def test_a_run_is_compared_only_with_runs_of_its_model_and_batch_live_and_after_its_end():
    """An HF GPT-2 Trainer run was shown ≈0.62× against an MLP loop marked base. A live run of the same model and
    batch as a finished one is compared with it under another name, the baseline named (the `vs` column, and the
    subtitle for the highlighted row where the column has no room); a run of another model shows no speed-up."""
    mlp_loop("fp32", 32, 64)
    mlp_loop("gpt2", 256, 8)
    stop, started = threading.Event(), threading.Event()
    trainer = threading.Thread(target=mlp_loop, args=("fused", 32, 64, stop, started))
    trainer.start()
    try:
        started.wait(30)
        app = AttachApp(store.find("fused")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2)
        async with app.run_test(size=(120, 32)) as pilot:
            table = app.query_one(ComparisonTable)
            await wait_for(pilot, lambda: table.row_count == 3 and "×" in cell(table, "fused", "speedup"),
                           what="the live run compared")
            assert cell(table, "fused", "vs").startswith("fp32 ") and "●" in cell(table, "fused", "preset")
            assert (cell(table, "fp32", "speedup"), cell(table, "fp32", "vs")) == ("base", "—")
            assert (cell(table, "gpt2", "speedup"), cell(table, "gpt2", "vs")) == ("—", "—")
            await wait_for(pilot, lambda: "Sequential, 577 params, batch 64×16" in static_text(app, "#run-title"),
                           what="what the run trains on its pane")
            stop.set()
            trainer.join(30)
            await wait_for(pilot, lambda: "●" not in cell(table, "fused", "preset"), what="the finished row")
            assert cell(table, "fused", "vs").startswith("fp32 ") and "×" in cell(table, "fused", "speedup")
            assert (cell(table, "gpt2", "speedup"), cell(table, "gpt2", "vs")) == ("—", "—")
        app = AttachApp(store.find("fused")[0], poll_s=0.05, refresh_s=0.1)
        async with app.run_test(size=(80, 24)) as pilot:  # no room for `vs`: the subtitle names the baseline
            table = app.query_one(ComparisonTable)
            await wait_for(pilot, lambda: table.row_count == 3, what="three rows")
            assert "vs" not in [c.key.value for c in table.columns.values()]
            table.move_cursor(row=2)
            await wait_for(pilot, lambda: str(table.border_subtitle).startswith("vs fp32 "), what="fused's note")
            assert "Sequential, 577 params, batch 64×16" in str(table.border_subtitle)
            table.move_cursor(row=1)
            await wait_for(pilot, lambda: str(table.border_subtitle).startswith("no speed-up: no other finished run "
                                                                                 "of Sequential, 4,609 params"),
                           what="gpt2's note")
    finally:
        stop.set()
        trainer.join(30)


async def test_b_takes_the_highlighted_run_when_rows_above_it_are_hidden():
    """`b` took the run at the cursor's screen row in the list of runs: with a row hidden (`x`) above it, another run
    became the baseline."""
    for _ in range(3):
        with apextui.watch(name="same", warmup=2) as mon:
            for i in range(40):
                mon.step(loss=1.0 / (i + 1))
    app = AttachApp(store.find("same")[0], poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(120, 32)) as pilot:
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: len(table.rows_data) == 3, what="three rows")
        table.move_cursor(row=0)
        await pilot.press("x")  # the oldest hidden: the screen's row 1 is the third run
        table.move_cursor(row=1)
        await pilot.press("b")
        assert [r.picked_baseline for r in table.rows_data] == [False, False, True]


async def test_docs_name_every_key_of_attach():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "watch.md").read_text()
    keys_line = doc.split("Keys:")[1][:200]  # "Keys: `r` another run, `b` ..."
    for cls in (AttachApp, RunPicker):
        for binding in cls.BINDINGS:
            if binding.show is not False and binding.key not in ("ctrl+c", "escape"):
                assert f"`{binding.key}`" in keys_line, binding.key


async def test_a_live_run_that_stops_writing_is_called_out_on_the_run_pane():
    mon = apextui.watch(name="stalled")
    try:
        for i in range(30):
            mon.step(loss=1.0 / (i + 1))  # then nothing: a hung step
        app = AttachApp(store.find("stalled")[0], poll_s=0.05, refresh_s=0.1, stall_s=0.5)
        async with app.run_test(size=(100, 32)) as pilot:
            live = app.query_one("#live")
            await wait_for(pilot, lambda: str(live.border_subtitle).startswith("no new line for"), what="stall")
    finally:
        mon.close()


async def test_the_timers_ticking_after_the_panes_are_taken_down_at_exit_change_nothing():
    """A timer's tick between the panes' removal and the app's end raised NoMatches (seen in .ci/run): each timer's
    callback, called once the app has exited, leaves the view waiting in the bridge and raises nothing."""
    mon = apextui.watch(name="exiting")
    try:
        for i in range(30):
            mon.step(loss=1.0 / (i + 1))
        app = AttachApp(store.find("exiting")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2)
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: static_text(app, "#run-steps").split("·")[0].strip() not in ("", "0"),
                           what="steps")
        assert not app.query(ComparisonTable)  # taken down
        app.bridge(app.replay.snapshot())  # a snapshot arriving as the app exits
        assert app.bridge.dirty
        for tick in (app._show_rows, app._show_stall, app._pull):
            tick()
        assert app.bridge.dirty  # the pull left the view for a next one
    finally:
        mon.close()


async def test_attach_shows_a_run_with_damaged_lines_beside_a_damaged_run_and_names_the_line():
    """Issue 41 row 5: another run's stream nested 200,000 deep (it crashed the table) and damaged lines in the
    followed run's own stream (they killed the reader thread: an empty pane): the run is shown finished with its
    steps, the damaged line named in a notification, and both runs are in the table."""
    from apextui.core.watch import stream

    folders = []
    for name in ("neighbour", "followed"):
        with apextui.watch(name=name, warmup=2) as mon:
            for i in range(40):
                mon.step(loss=1.0 / (i + 1))
        folders.append(mon.path)
    neighbour = stream.segments(folders[0])[-1][1]
    neighbour.write_text("[" * 200_000 + "\n" + neighbour.read_text())
    own = stream.segments(folders[1])[-1][1]
    lines = own.read_text().splitlines(keepends=True)
    own.write_text("".join(lines[:-1]) + "[" * 200_000 + "\n" + '{"event": "step", "step": 9, "ms": 1e999}\n'
                   + lines[-1])
    app = AttachApp(store.find("followed")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2)
    async with app.run_test(size=(120, 32)) as pilot:
        await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the end")
        assert int(static_text(app, "#run-steps").split("·")[0]) > 0
        await wait_for(pilot, lambda: any(f"line {len(lines)} of events-000001.jsonl" in n.message
                                          for n in app._notifications), what="the damaged line named")
        table = app.query_one(ComparisonTable)
        await wait_for(pilot, lambda: len(table.rows_data) == 2, what="both runs in the table")


async def test_before_the_runs_first_step_the_pane_says_it_waits_for_it():
    """Issue 41 row 18: `watch()` and no step yet (the stream is empty): the pane said "select a preset and press
    enter"; it says it waits for the first step, then shows the steps once they come."""
    mon = apextui.watch(name="not-yet", warmup=2)
    try:
        app = AttachApp(store.find("not-yet")[0], poll_s=0.05, refresh_s=0.1)
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: "waiting for the first step" in static_text(app, "#run-title"),
                           what="the waiting title")
            assert "select a preset" not in static_text(app, "#run-title")
            assert "not-yet" in static_text(app, "#run-title")
            for i in range(40):
                mon.step(loss=1.0 / (i + 1))
            mon.close()
            await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the end")
            assert int(static_text(app, "#run-steps").split("·")[0]) > 0
    finally:
        mon.close()


async def test_a_metric_plot_shows_the_whole_run_from_its_start_downsampled():
    """Re-attached to a finished run whose learning rate followed a cosine schedule from 1e-3 over 1,000 steps:
    the lr plot starts at the schedule's start (it kept the newest 240 values, from 0.000343), in bounded room."""
    import math

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    steps = 1000
    lrs = [0.5e-3 * (1 + math.cos(math.pi * i / steps)) for i in range(steps)]
    with apextui.watch(name="cosine", warmup=2) as mon:
        for lr in lrs:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            mon.step(loss=loss.detach(), samples=32)
            mon.log(lr=lr)  # one metric line a step
    app = AttachApp(store.find("cosine")[0], poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(120, 32)) as pilot:
        plots = app.query_one(MetricPlots)
        await wait_for(pilot, lambda: "finished" in static_text(app, "#run-title"), what="the end")
        await wait_for(pilot, lambda: plots.names == ["lr"] and plots._shown.get("lr"), what="the lr plot")
        shown = plots._shown["lr"]
        assert len(shown) <= 241 and shown[0] > 0.99e-3 and shown[-1] < 1e-6  # from 1e-3 down to about 0
        assert list(shown) == sorted(shown, reverse=True)  # the whole schedule, in order


async def test_attach_with_no_runs_lists_a_run_that_starts_while_the_picker_is_open():
    """`apextui attach` before any run: the picker lists a run started while it is open; behind it the run pane says
    no run is attached (not "select a preset") and the table's headers are a watched run's (no loss floor, no
    `max err`); escape, with no run attached, says it quits, and does."""
    from apextui.ui.screens import run_picker

    app = AttachApp(None, poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for_screen(pilot, app, RunPicker, "the picker")
        picker = app.screen
        assert "escape: quit" in static_text(picker, "#picker-empty")
        title = static_text(app, "#run-title")
        assert "no watched run attached" in title and "select a preset" not in title
        headers = [str(c.label) for c in app.query_one(ComparisonTable).columns.values()]
        assert "last loss" in headers and not {"last loss (floor)", "max err", "err", "preset"} & set(headers)
        mon = apextui.watch(name="late")
        try:
            mon.step(loss=1.0)
            await wait_for(pilot, lambda: [m.name for m in picker.runs] == ["late"] and picker.live == 1,
                           timeout=10 * run_picker.REFRESH_S + 30, what="the run started after the picker opened")
            def ready() -> bool:  # the list is drawn, then highlighted and focused after the recompose
                lists = app.screen.query("#picker-list")
                return bool(lists) and app.screen.focused is lists.first() and lists.first().highlighted == 0

            await wait_for(pilot, ready, what="the list drawn and focused")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.meta is not None and app.meta.name == "late", what="attached")
        finally:
            mon.close()


async def test_escape_from_the_empty_picker_quits_as_it_says():
    app = AttachApp(None, poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for_screen(pilot, app, RunPicker, "the picker")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.return_code == 0, what="the app quit")


@pytest.mark.parametrize("size", [(8, 3), (1, 1)])
async def test_the_run_list_open_survives_a_terminal_resized_to_a_few_cells(size):
    """At 8×3 with the run list open the app ended (`range() arg 3 must not be zero` in rich's `chop_cells`, from
    `OptionList.get_content_height`: the list had no column left); 20×5 survived. A resize never ends the app: the
    list is still open, and at a usable size again it attaches the chosen run."""
    mon = apextui.watch(name="tiny")
    try:
        app = AttachApp(None, poll_s=0.05, refresh_s=0.1)
        async with app.run_test(size=(100, 32)) as pilot:
            picker = await wait_for_screen(pilot, app, RunPicker, "the picker")
            await wait_for(pilot, lambda: bool(picker.query("#picker-list")), what="the run list")
            await pilot.resize_terminal(*size)
            await wait_for(pilot, lambda: app.size == size, what="the resize")
            await pilot.pause()
            assert app.is_running and app.screen is picker
            await pilot.resize_terminal(100, 32)
            await wait_for(pilot, lambda: app.size == (100, 32), what="the size back")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.meta is not None and app.meta.name == "tiny", what="attached")
    finally:
        mon.close()
