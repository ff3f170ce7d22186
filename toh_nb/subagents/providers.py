"""In-process providers: ``spawn`` (a fresh child that sees only its prompt) and ``fork`` (a child
seeded with the parent's completed turns). Both support every capability and continuable children."""

from __future__ import annotations

from typing import Any

from ..core.session import TURN_END, Event
from .service import CAPABILITIES, StartRequest, SubagentRun


class SpawnProvider:
    """A fresh child: its conversation starts with the prompt alone."""

    inherits_parent_context = False
    capabilities = frozenset(CAPABILITIES)

    def __init__(self, name: str = "spawn") -> None:
        self.name = name

    def seed(self, request: StartRequest) -> list[Event]:
        return []

    def start_now(self, service: Any, request: StartRequest, descriptor: dict) -> SubagentRun:
        return service.start_in_process(request, descriptor, self.name, self.seed(request))

    async def start(self, service: Any, request: StartRequest, descriptor: dict) -> SubagentRun:
        return self.start_now(service, request, descriptor)

    async def prepare_continuable(self, service: Any, request: StartRequest) -> list[Event]:
        return self.seed(request)


class ForkProvider(SpawnProvider):
    """A child seeded with the parent's events up to its last completed turn (captured once)."""

    inherits_parent_context = True

    def __init__(self, name: str = "fork") -> None:
        super().__init__(name)

    def seed(self, request: StartRequest) -> list[Event]:
        events = request.parent.session.events
        for position in range(len(events) - 1, -1, -1):
            if events[position].kind == TURN_END:
                return list(events[: position + 1])
        return []
