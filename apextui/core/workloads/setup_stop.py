"""A stop asked while a workload is being set up, honoured after the set-up's current step.

Setting up the user's model trains steps of its own (the loss-parity check: fp32's steps and the configuration's, a
compiled point's warm-up, where its check is), and a stop must not wait for all of them: the measured steps' loop
looks at it only once they are done. The runner says how to ask (`asking`) around the build and the warm-up, and the
set-up's loops call `check` after each step."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

_asked: ContextVar[Callable[[], bool] | None] = ContextVar("apextui_setup_stop", default=None)


class StoppedInSetUp(Exception):
    """The run was asked to stop while its workload was set up: it ends `stopped`, before its measured steps."""


@contextlib.contextmanager
def asking(asked: Callable[[], bool]) -> Iterator[None]:
    """Within: `check` raises StoppedInSetUp once `asked()` is true (this thread's context only)."""
    token = _asked.set(asked)
    try:
        yield
    finally:
        _asked.reset(token)


def check() -> None:
    """After one set-up step: StoppedInSetUp where the run was asked to stop; nothing outside a run's set-up."""
    asked = _asked.get()
    if asked is not None and asked():
        raise StoppedInSetUp
