"""Questions that wait for a person: the permission requests of external agents set to ask.

An ACP agent asks before it edits a file or runs a command; with ``AcpAgent(permissions="ask")`` a
person answers. The question belongs to the hub whose child asked, not to the process: each hub's
runtime holds one :class:`PermissionDesk`; an ask is published on the hub's event stream
(:class:`~toh_nb.core.events.PermissionAsked`) and answered through the hub
(``hub.answer_permission(ask_id, allowed)``, which the tree's Allow/Deny buttons call), and its answer is
published too (:class:`~toh_nb.core.events.PermissionAnswered`). So the widget and a script see and
answer asks the same way. Nobody answering within the ask's timeout denies it.

The desk is thread-safe: the notebook answers from the kernel's thread; the futures belong to the
hub's loop. A desk without an event bus (``PermissionDesk()``) keeps and answers asks the same way and
publishes nothing: the process-wide desk of a policy used outside a hub
(``toh_nb.providers.acp.permissions.PENDING``) is one.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .checks import check_flag
from .errors import UsageError
from .events import EventBus, PermissionAnswered, PermissionAsked


@dataclass(slots=True)
class PendingAsk:
    """A permission request waiting for a person: ``id`` (``perm-N``) and what the prompt shows."""

    id: str
    agent_id: str | None
    title: str
    kind: str
    tool_call_id: str
    future: asyncio.Future
    answered_by: str | None = None  # "user" | "timeout" | "cancelled" once settled

    def to_dict(self) -> dict:
        return {"id": self.id, "agent": self.agent_id, "title": self.title, "kind": self.kind,
                "tool_call_id": self.tool_call_id}


class PermissionDesk:
    """The pending asks of one hub (see the module docstring); with no ``bus``, asks that are not
    published (a policy used outside a hub)."""

    def __init__(self, bus: EventBus | None = None, agents: dict | None = None) -> None:
        self._bus = bus
        self._agents = agents if agents is not None else {}  # the runtime's live agents: an event names the
        # asking agent's parent
        self._lock = threading.Lock()
        self._asks: dict[str, PendingAsk] = {}
        self._ids = itertools.count(1)

    async def ask(self, agent_id: str | None, title: str, kind: str, tool_call_id: str,
                  timeout: float | None, notify: Callable[[dict], Any] | None = None) -> bool:
        """Publish the ask and wait for the answer: True to allow; False when denied or when nobody
        answered within ``timeout`` seconds (a cancelled wait re-raises). ``notify(ask_dict)`` is called
        once the ask is pending (the ACP link records it in the child's log)."""
        with self._lock:
            ask = PendingAsk(f"perm-{next(self._ids)}", agent_id, title, kind, tool_call_id,
                             asyncio.get_running_loop().create_future())
            self._asks[ask.id] = ask
        self._publish(PermissionAsked, ask, ask_id=ask.id, title=title, tool_kind=kind, tool_call_id=tool_call_id,
                      timeout=timeout)
        try:
            if notify is not None:
                notify(ask.to_dict())
            try:
                allowed = bool(await asyncio.wait_for(asyncio.shield(ask.future), timeout))
            except TimeoutError:
                ask.answered_by = ask.answered_by or "timeout"
                allowed = False
            except asyncio.CancelledError:
                ask.answered_by = ask.answered_by or "cancelled"
                raise
            return allowed
        finally:
            with self._lock:
                self._asks.pop(ask.id, None)
            if ask.answered_by != "user":  # a person's answer was published when it was given
                self._publish(PermissionAnswered, ask, ask_id=ask.id, allowed=False, by=ask.answered_by or "cancelled")

    def pending(self, agent_ids: Iterable[str] | None = None) -> list[dict]:
        """The pending asks (of those agents), oldest first: ``{"id", "agent", "title", "kind", "tool_call_id"}``."""
        keep = None if agent_ids is None else set(agent_ids)
        with self._lock:
            asks = list(self._asks.values())
        return [a.to_dict() for a in asks if keep is None or a.agent_id in keep]

    def answer(self, ask_id: str, allowed: bool) -> str:
        """Allow or deny a pending ask; the line the tree shows. Callable from any thread."""
        check_flag(allowed, "allowed")
        with self._lock:
            ask = self._asks.pop(ask_id, None)
        if ask is None:
            raise UsageError(f"no pending permission request {ask_id!r} (answered, timed out or cancelled)")
        ask.answered_by = "user"
        future = ask.future
        loop = future.get_loop()

        def settle() -> None:
            if not future.done():
                future.set_result(allowed)
            self._publish(PermissionAnswered, ask, ask_id=ask.id, allowed=allowed, by="user")

        if _on_loop(loop):
            settle()
        else:
            loop.call_soon_threadsafe(settle)
        return f"{'allowed' if allowed else 'denied'}: {ask.title or ask.kind} ({ask.agent_id})"

    def _publish(self, cls: type, ask: PendingAsk, **fields: Any) -> None:
        if self._bus is None:
            return
        agent = self._agents.get(ask.agent_id) if ask.agent_id is not None else None
        parent = agent.parent if agent is not None else None
        self._bus.publish(cls(agent_id=ask.agent_id, parent_id=parent.id if parent is not None else None,
                              depth=agent.depth if agent is not None else None, **fields))


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
