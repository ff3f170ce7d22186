"""In-process providers: ``spawn`` (a fresh child that sees only its prompt) and ``fork`` (a child
seeded with the parent's completed turns). Both support every capability and continuable children, and
plan synchronously (``plan_now``), so their children exist the moment a delegation returns."""

from __future__ import annotations

from ..core.session import TURN_END, Event
from .base import Capabilities, ChildInfo, ChildPlan


class SpawnProvider:
    """A fresh child: its conversation starts with the prompt alone."""

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
    """A child seeded with the parent's events up to its last completed turn (captured once)."""

    capabilities = Capabilities(inherits_parent_context=True)

    def __init__(self, name: str = "fork") -> None:
        super().__init__(name)

    def seed(self, child: ChildInfo) -> list[Event]:
        events = child.request.parent.session.events
        for position in range(len(events) - 1, -1, -1):
            if events[position].kind == TURN_END:
                return list(events[: position + 1])
        return []
