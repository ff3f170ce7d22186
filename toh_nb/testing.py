"""The seam tests use: the engine under a hub, waiting until a hub is quiet, capturing its events.

A test that needs more than the public faces (what a store holds, an agent's live log, the event bus)
reaches it here instead of through a hub's private members, so the faces stay closed and a refactor of
the engine moves one module, not hundreds of tests (as openai-agents' ``agents/testing``)::

    from toh_nb.testing import capture, engine_of, settle

    async with tn.AsyncHub(model=tn.ScriptedModel(...)) as hub:
        with capture(hub, kinds=["turn/end"]) as events:
            await hub.spawn("work", background=True)
            await settle(hub)
        assert [e.stop_reason for e in events] == [...]
        assert engine_of(hub).store.exists("agent-1")

The helpers of this module carry no stability promise beyond the release; the models it re-exports
(:class:`~toh_nb.models.ScriptedModel`, :class:`~toh_nb.models.FunctionModel`) are stable product API in
:mod:`toh_nb.models`. It imports base dependencies only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Iterable, Iterator

from .core.errors import UsageError
from .core.events import HubEvent
from .engine import Engine
from .hub import AsyncHub
from .models import FunctionModel, ScriptedModel

__all__ = ["Engine", "FunctionModel", "ScriptedModel", "capture", "engine_of", "is_quiet", "page_sends", "settle"]


def engine_of(hub: Any) -> Engine:
    """The :class:`~toh_nb.engine.Engine` under a hub of either face (``tn.AsyncHub`` or ``tn.Hub``)."""
    inner = getattr(hub, "async_hub", hub)  # the sync face wraps an AsyncHub over the same engine
    if not isinstance(inner, AsyncHub):
        raise UsageError(f"engine_of needs a tn.Hub or tn.AsyncHub, got {type(hub).__name__}")
    return inner.engine


def is_quiet(hub: Any) -> bool:
    """Whether nothing runs in the hub: no agent's turn, no background job running or stopping, no
    message waiting in a live agent's inbox (messages parked by an interrupt wait for a ``send``)."""
    engine = engine_of(hub)
    activity = engine.view.activity()
    if activity.running_agents or activity.active_jobs:
        return False
    return not any(agent.pending and not agent.parked for agent in list(engine.runtime.agents.values()))


async def settle(hub: Any, timeout: float = 30.0, interval: float = 0.005) -> None:
    """Wait (on the hub's loop) until :func:`is_quiet` holds twice in a row, at most ``timeout`` seconds;
    past it, a ``TimeoutError`` naming what still runs."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 2:
        quiet = quiet + 1 if is_quiet(hub) else 0
        if time.monotonic() > deadline:
            raise TimeoutError(f"the hub did not settle within {timeout} s: {engine_of(hub).view.activity().line()}")
        await asyncio.sleep(interval)


@contextlib.contextmanager
def capture(hub: Any, kinds: Iterable[str] | None = None) -> Iterator[list[HubEvent]]:
    """Collect the hub's events (``kinds``: only those) into a list while the block runs. Enter it on the
    hub's loop thread (an ``AsyncHub``'s, or a callable run through ``tn.Hub.portal``)."""
    if isinstance(kinds, str):
        raise UsageError("kinds must be a list of event kinds, e.g. ['turn/end']")
    events: list[HubEvent] = []
    unsubscribe = engine_of(hub).view.subscribe(events.append, kinds)
    try:
        yield events
    finally:
        unsubscribe()


class _Raised(logging.Handler):
    """Keeps the exception a widget logged instead of raising (ipywidgets' ``_show_traceback``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.error: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and self.error is None:
            self.error = record.exc_info[1]


def page_sends(widget: Any, content: Any, buffers: Iterable[bytes] = ()) -> None:
    """Deliver ``content`` to a widget as its page's ``model.send(content)`` does: a ``custom`` comm
    message handed to the widget's comm (``comm.handle_msg``, the entry the kernel calls), so no
    browser is needed. An exception the widget's handler raised (which ipywidgets only logs) is
    raised here, so a test sees it."""
    caught = _Raised()
    widget.log.addHandler(caught)
    try:
        widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}},
                                "buffers": list(buffers)})
    finally:
        widget.log.removeHandler(caught)
    if caught.error is not None:
        raise caught.error
