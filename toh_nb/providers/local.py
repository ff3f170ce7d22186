"""In-process providers: ``spawn`` (a fresh child that sees only its prompt) and ``fork`` (a child
seeded with the parent's completed turns). Both support every capability and continuable children, and
plan synchronously (``plan_now``), so their children exist the moment a delegation returns."""

from __future__ import annotations

from ..core.session import TURN_END, Event
from .base import Capabilities, ChildInfo, ChildPlan


class SpawnProvider:
    """The built-in ``spawn`` provider: a fresh child whose conversation starts with its prompt alone.

    Registered by every hub under ``"spawn"``, the default of ``spawn``, ``start`` and the ``subagent`` tool;
    supports every capability and plans synchronously, so a child exists the moment its delegation
    returns. Register another instance under another name to give a second delegation tool its own
    provider name.

    Args:
        name: the name it is registered and selected under.

    Raises:
        UsageError: (at registration) the name is empty.
        SubagentError: (at registration) the name is already taken (``.code`` ``DUPLICATE_PROVIDER``).
    """

    capabilities = Capabilities()

    def __init__(self, name: str = "spawn") -> None:
        self.name = name

    def seed(self, child: ChildInfo) -> list[Event]:
        return []

    def plan_now(self, child: ChildInfo) -> ChildPlan:
        return ChildPlan(seed=self.seed(child))

    async def plan(self, child: ChildInfo) -> ChildPlan:
        return self.plan_now(child)

    def resume_now(self, child: ChildInfo, session: object) -> ChildPlan:
        return ChildPlan()  # the log is the whole state: nothing to reconnect

    async def resume(self, child: ChildInfo, session: object) -> ChildPlan:
        return self.resume_now(child, session)


class ForkProvider(SpawnProvider):
    """The built-in ``fork`` provider: a child seeded with its parent's conversation up to its last completed turn.

    The parent's events are captured once, when the child starts; the child then runs on its own. Use it
    for a child that needs what its parent already knows (``provider="fork"``).

    Args:
        name: the name it is registered and selected under.

    Raises:
        UsageError: (at registration) the name is empty.
        SubagentError: (at registration) the name is already taken (``.code`` ``DUPLICATE_PROVIDER``).
    """

    capabilities = Capabilities(inherits_parent_context=True)

    def __init__(self, name: str = "fork") -> None:
        super().__init__(name)

    def seed(self, child: ChildInfo) -> list[Event]:
        events = child.request.parent.session.events
        for position in range(len(events) - 1, -1, -1):
            if events[position].kind == TURN_END:
                return list(events[: position + 1])
        return []
