"""The subagent service of one runtime: composed parts sharing one child factory.

Every child is built from its provider's plan (``toh_nb.providers.base``: seed events, a model adapter
for agents that live elsewhere, a step loop for steps that run elsewhere, release of their resources)
by the service's one :class:`~toh_nb.subagents.factory.ChildFactory`, which also holds the provider
registry. The parts, each in its own file:

- ``factory``: the registered providers and their abilities, the checks before a plan, the child's log
  and agent (shared by the two parts below);
- ``one_shot``: one-turn children handed back as a :class:`~toh_nb.subagents.one_shot.SubagentRun`;
- ``continuable``: children that take follow-ups, resume from their log, and can be interrupted or
  killed, with ``activations`` (residency, ownership, delivery into a parent) and ``settlement`` (when
  an activation ends) as its two halves;
- ``arguments`` (what a delegation asks for), ``authorization`` (who may stop a child) and ``listing``
  (``list_agents`` rows, pure functions over the store).

This class composes them and is the one face the hub, the tools and the jobs call.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..core.errors import SubagentError, UsageError
from ..core.runtime import Runtime
from . import listing, texts
from .activations import Activation
from .continuable import ContinuableChildren
from .factory import ChildFactory
from .listing import AgentList
from .one_shot import OneShotRuns

__all__ = ["SubagentService"]


class SubagentService:
    """The subagent service of one runtime. All methods run on the runtime's event loop."""

    def __init__(self, runtime: Runtime, *, report_delivery: str = "next-step") -> None:
        if report_delivery not in ("next-step", "quiet"):
            raise UsageError(f'report_delivery must be "next-step" or "quiet", got {report_delivery!r}')
        self.runtime = runtime
        self.report_delivery = report_delivery
        self.factory = ChildFactory(runtime)
        self.one_shot = OneShotRuns(self.factory)
        self.continuable = ContinuableChildren(self.factory, report_delivery)
        factory, one_shot, continuable = self.factory, self.one_shot, self.continuable
        # the parts' entry points, bound once: a delegation pays no forwarding frame
        self.register_provider: Callable[[Any], Callable[[], None]] = factory.register_provider
        self.get_provider = factory.get_provider
        self.registered_provider = factory.registered_provider
        self.resume_problem = factory.resume_problem
        self.close_providers = factory.close_providers
        self.start = one_shot.start
        self.start_now = one_shot.start_now
        self.start_continuable = continuable.start_continuable
        self.followup = continuable.followup
        self.interrupt = continuable.interrupt
        self.kill = continuable.kill
        self.report_from = continuable.report_from
        self.wait_changed = continuable.wait_changed
        self.close = continuable.close

    # -- the parts' state, read where the hub and the tools need it -------------------------------

    @property
    def providers(self) -> dict[str, Any]:
        return self.factory.providers

    @property
    def report_tool(self) -> Any:
        return self.factory.report_tool

    @report_tool.setter
    def report_tool(self, tool: Any) -> None:
        self.factory.report_tool = tool

    @property
    def activations(self) -> dict[str, Activation]:
        return self.continuable.activations

    @property
    def closing(self) -> dict[str, str | None]:
        return self.continuable.closing

    def failure_of(self, child_id: str) -> tuple[str | None, str] | None:
        """``(diagnostic, cause)`` when the child's last activation settled in this process and ended
        ``error`` (what a person's ``kid.wait()`` raises for), else None."""
        return self.continuable.failures.get(child_id)

    @property
    def draining(self) -> bool:
        return self.continuable.draining

    async def wait_settled(self, child_id: str, timeout: float | None = None) -> None:
        """Wait until the continuable child has no activation (it is settled), at most ``timeout``
        seconds (``None``: no bound; a timeout is no error). Its next activation, queued while this
        one ran, is waited for too: settled means no turn left to run."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while child_id in self.continuable.activations:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            await self.wait_changed(child_id, remaining)

    # -- listing ---------------------------------------------------------------------------------

    async def child_recorded(self, child_id: str | None) -> None:
        """Return once a live child's log holds what is queued for it so far (its header and descriptor
        right after a start): a background job's start awaits it before the job id is handed out. A
        child not created yet (a provider that plans asynchronously) has nothing recorded to wait for."""
        agent = self.runtime.agents.get(child_id) if child_id is not None else None
        if agent is not None:
            await self.runtime.recorded(agent.session)

    async def refusal(self, entry: Any) -> SubagentError:
        """Why a child listed as a diagnostic cannot be had (``hub.child``): the words a ``send`` to it
        gets, naming what is wrong with its log (which line, which field)."""
        try:
            await self.continuable.read_log(entry.id)
        except SubagentError as error:
            return error
        why = entry.reason or "unavailable"  # readable after all, yet not listable as a child (its descriptor)
        return SubagentError(texts.unavailable_because(entry.id, why), "NOT_RESUMABLE")

    def status_of(self, child_id: str) -> str:
        return listing.status_of(self.runtime.agents, child_id)

    def list_children(self, parent_id: str) -> AgentList:
        return listing.list_children(self.runtime.store, self.status_of, parent_id, self.resume_problem)

    def list_descendants(self, root_id: str) -> AgentList:
        return listing.list_descendants(self.runtime.store, self.status_of, root_id, self.resume_problem)
