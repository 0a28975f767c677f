"""`attach` follows the run the user means: `attach NAME` follows the name's newest run (live first) as it starts,
runs of one name are numbered in order, and an enter pressed in the picker as the list moves takes the run it was
pressed on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from ui_fakes import wait_for, wait_for_screen

import apextui
from apextui.core.results import RunIndex
from apextui.core.watch import rows, store
from apextui.ui.attach_app import AttachApp
from apextui.ui.screens.run_picker import RunPicker


def finished(name: str, steps: int = 30) -> store.RunMeta:
    mon = apextui.watch(name=name, warmup=2)
    for i in range(steps):
        mon.step(loss=1.0 / (i + 1))
    mon.close()
    assert mon.path is not None
    return store.load_meta(mon.path)


class Live:
    """A live watched run whose steps take 20 ms each on a fake clock (the monitor's host clock, moved by the test
    alone): its blocks and hand-overs come as they would, whatever the machine's load."""

    def __init__(self, name: str) -> None:
        self.t = 1000.0
        self.mon = apextui.watch(name=name, warmup=2, now=lambda: self.t)
        self.path = self.mon.path

    def step(self, loss: float = 0.5) -> None:
        self.mon.step(loss=loss)
        self.t += 0.020

    def close(self) -> None:
        self.mon.close()


def started(name: str, steps: int = 30) -> Live:
    live = Live(name)
    for i in range(steps):
        live.step(loss=1.0 / (i + 1))
    return live


@pytest.mark.asyncio
async def test_attach_name_follows_a_newer_run_of_that_name_as_it_starts():
    old = finished("again")
    app = AttachApp(store.find("again")[0], poll_s=0.05, refresh_s=0.1, table_s=0.2, follow_name="again")
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.meta is not None and app.meta.path == old.path, what="the finished run")
        new = started("again")
        try:
            await wait_for(pilot, lambda: app.meta is not None and app.meta.path == str(new.path),
                           what="the new live run of the name followed")
        finally:
            new.close()


@pytest.mark.asyncio
async def test_a_run_attached_by_its_folder_or_picked_stays_the_one_followed():
    old = finished("kept")
    assert store.is_run_folder(old.path) and not store.is_run_folder("kept")
    app = AttachApp(store.load_meta(Path(old.path)), poll_s=0.05, refresh_s=0.1, table_s=0.2)  # no name: a folder
    async with app.run_test(size=(100, 32)) as pilot:
        new = started("kept")
        try:
            def listed() -> bool:
                new.step(loss=0.5)  # the live run goes on, so its steps reach the stream
                return len(app._runs) == 2

            await wait_for(pilot, listed, what="the new run in the table")
            assert app.meta is not None and app.meta.path == old.path
        finally:
            new.close()


def test_the_runs_of_one_name_are_numbered_in_order_the_live_one_last():
    first, second = finished("series"), finished("series")
    live = started("series", steps=60)
    try:
        table = rows.Table()
        deadline = time.monotonic() + 60
        while len(found := table.rows()) < 3 and time.monotonic() < deadline:
            live.step(loss=0.5)
            time.sleep(0.05)
        index = RunIndex([r for _, r in found])
        assert [m.path for m, _ in found] == [first.path, second.path, str(live.path)]
        assert [index.number(r) for _, r in found] == [1, 2, 3]
        assert found[-1][1].preset.endswith(rows.LIVE_MARK)
    finally:
        live.close()


@pytest.mark.asyncio
async def test_enter_on_a_list_drawn_before_a_new_run_appeared_attaches_the_run_it_was_pressed_on():
    done = finished("done")
    app = AttachApp(None, poll_s=0.05, refresh_s=0.1)
    async with app.run_test(size=(100, 32)) as pilot:
        picker = await wait_for_screen(pilot, app, RunPicker, "the picker")
        old_list = picker.query_one("#picker-list")
        pressed_on = old_list.get_option_at_index(0)
        newcomer = started("newcomer")
        try:
            await wait_for(pilot, lambda: [m.name for m in picker.runs] == ["newcomer", "done"],
                           what="the new live run at the top")
            # the enter pressed on the old list's first row (`done`) arrives after the list moved
            picker.post_message(old_list.OptionSelected(old_list, pressed_on, 0))
            await wait_for(pilot, lambda: app.meta is not None, what="attached")
            assert app.meta.path == done.path
        finally:
            newcomer.close()


@pytest.mark.asyncio
async def test_at_80x24_the_followed_run_stays_in_view_whatever_rows_come_after_it():
    """At 80x24 the watched-runs table shows three rows, and the cursor went to the newest: the followed run (here the
    first of seven) was out of view. It stays in view until the user moves the cursor."""
    followed = finished("many")
    for _ in range(5):
        finished("many")
    live = started("other", steps=60)
    try:
        app = AttachApp(store.load_meta(Path(followed.path)), poll_s=0.05, refresh_s=0.1, table_s=0.2)
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.query_one("#table")

            def followed_in_view() -> bool:
                live.step()  # the live run goes on, so its row has figures
                run = app._cursor_run()
                if len(app._runs) < 7 or run is None or run.path != followed.path:
                    return False
                row = table.cursor_row
                return table.scroll_y <= row < table.scroll_y + table.size.height - 1  # under the header

            await wait_for(pilot, followed_in_view, what="the followed run's row in view")
            await pilot.press("down")  # the user moves: the cursor stays where they put it
            moved_to = app._cursor_run()
            for _ in range(5):
                live.step()
                await pilot.pause(0.1)
            assert moved_to is not None and moved_to.path != followed.path and app._cursor_run() == moved_to
    finally:
        live.close()


@pytest.mark.asyncio
async def test_attach_name_never_jumps_back_to_an_older_run_of_the_name_when_the_followed_one_ends():
    older = started("twice")
    newer = started("twice")
    try:
        newest = store.newest("twice")
        assert newest is not None and newest.path == str(newer.path)
        app = AttachApp(newest, poll_s=0.05, refresh_s=0.1, table_s=0.2, follow_name="twice")
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: app.meta is not None and app.meta.path == str(newer.path), what="newer")
            newer.close()  # the followed run ends while the older one is still live
            for _ in range(10):
                older.step()
                await pilot.pause(0.1)
            assert app.meta.path == str(newer.path)
    finally:
        older.close()
        newer.close()
