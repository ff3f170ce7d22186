"""The subagent service of one runtime: the provider registry and the composition of its parts.

Every child is built from its provider's plan (``toh_nb.providers.base``: seed events, a model
adapter for agents that live elsewhere, release of their resources). The concepts live beside this
module, each in its own file:

- ``arguments``: what a delegation asks for and the checks on it;
- ``one_shot``: one-turn children handed back as a :class:`~toh_nb.subagents.one_shot.SubagentRun`;
- ``continuable``: children that take follow-ups, resume from their log, and can be interrupted or killed;
- ``activations`` and ``settlement``: residency of continuable children, ownership, delivery into a
  parent, and when an activation ends;
- ``authorization``: who may stop a child;
- ``listing``: ``list_agents`` rows, pure functions over the store.

This class holds their shared state and what every kind of child needs (a registered provider that
declares the capabilities a call needs, the external-activity recorder, teardown).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable

from ..core.agent import Agent
from ..core.checks import check_text
from ..core.dict_room import DictRoom
from ..core.errors import ProviderError, SubagentError, UsageError
from ..core.events import ExternalActivity, ProviderChanged
from ..core.runtime import Runtime, RuntimeObserver
from . import listing, texts
from .activations import Activation
from .arguments import StartRequest
from .continuable import ContinuableChildren
from .listing import AgentList
from .one_shot import OneShotRuns
from ..providers.base import Abilities, Capabilities, ChildInfo, ChildPlan, abilities_of, check_provider

#: session event kinds of an external child's recorded activity (``external/tool_call`` …)
EXTERNAL_PREFIX = "external/"


class SubagentService(OneShotRuns, ContinuableChildren, RuntimeObserver):
    """The subagent service of one runtime. All methods run on the runtime's event loop."""

    def __init__(self, runtime: Runtime, *, report_delivery: str = "next-step") -> None:
        if report_delivery not in ("next-step", "quiet"):
            raise UsageError(f'report_delivery must be "next-step" or "quiet", got {report_delivery!r}')
        self.runtime = runtime
        self.report_delivery = report_delivery
        self.providers: dict[str, Any] = {}
        #: each registered provider's optional abilities, resolved once (``toh_nb.providers.base``)
        self.abilities: dict[str, Abilities] = {}
        self.activations: dict[str, Activation] = {}
        self._activations_room = DictRoom()  # gives the table back after a burst of children
        self._owners: dict[str, set[Activation]] = {}
        self.draining = False
        self.report_tool = None  # set by the hub composition (tool installed into continuable children)
        self._settle_waiters: dict[str, list[asyncio.Future]] = {}
        #: provider resources being released after their activation settled (awaited by close())
        self._closing: set[asyncio.Task] = set()
        #: closing text of each child's last settled activation in this process (None: it left none)
        self.closing: dict[str, str | None] = {}
        #: per-child agent options given at start (model, max_tokens, budgets); a resume in this process
        #: reuses them (the descriptor can only name a model; a restart falls back to the hub's defaults)
        self._options: dict[str, dict] = {}
        runtime.observers.append(self)

    # -- providers -----------------------------------------------------------------------------

    def register_provider(self, provider: Any) -> Callable[[], None]:
        check_provider(provider)
        if provider.name in self.providers:
            raise SubagentError(texts.duplicate_provider(provider.name), "DUPLICATE_PROVIDER")
        self.providers[provider.name] = provider
        abilities = self.abilities[provider.name] = abilities_of(provider)
        if abilities.attach is not None:  # paired with the aclose() of close_providers (shared providers count hubs)
            abilities.attach()
        self.runtime.bus.publish(ProviderChanged(provider=provider.name, registered=True))

        def remove() -> None:
            if self.providers.get(provider.name) is provider:
                del self.providers[provider.name]
                del self.abilities[provider.name]
                self.runtime.bus.publish(ProviderChanged(provider=provider.name, registered=False))

        return remove

    def get_provider(self, name: str) -> Any:
        provider = self.providers.get(name)
        if provider is None:
            raise ProviderError(texts.no_provider(name), "NO_PROVIDER")
        return provider

    def registered_provider(self, name: str) -> Any:
        """``get_provider`` for a Python caller (``provider=`` of spawn/start/SubagentTool): the error
        lists the registered names (a model never picks a provider, so it keeps the reference's text)."""
        check_text(name, "provider")
        provider = self.providers.get(name)
        if provider is None:
            raise ProviderError(texts.no_provider_named(name, list(self.providers)), "NO_PROVIDER")
        return provider

    def _checked_provider(self, provider_name: str, request: StartRequest, continuable: bool = False) -> Any:
        """The provider, refusing a call that needs a capability it does not declare."""
        provider = self.get_provider(provider_name)
        capabilities: Capabilities = provider.capabilities
        wanted = []
        if request.max_depth is not None:
            wanted.append("depthLimit")
        if request.tool_filter is not None:
            wanted.append("toolFilter")
        if request.persona is not None:
            wanted.append("persona")
        for capability in wanted:
            if not capabilities.supports(capability):
                raise ProviderError(texts.unsupported_capability(provider.name, capability), "UNSUPPORTED_CAPABILITY")
        if continuable and not capabilities.continuable:
            raise ProviderError(texts.unsupported_continuable(provider.name), "UNSUPPORTED_CAPABILITY")
        return provider

    def _check_filter(self, tool_filter: dict | None) -> None:
        extra = [self.report_tool.name] if self.report_tool is not None else []
        unknown = self.runtime.unknown_tool_names(tool_filter, extra)
        if unknown:
            raise UsageError(texts.unknown_tool_filter_names(unknown))

    def _child_info(self, child_id: str, mode: str, label: str | None, depth: int, parent_id: str,
                    request: StartRequest | None, model: Any = None) -> ChildInfo:
        return ChildInfo(child_id, mode, label, depth, parent_id, request, functools.partial(self._record, child_id),
                         model, self.runtime)

    def _record(self, child_id: str, kind: str, data: dict) -> None:
        """An external child's activity (a remote tool call, a plan): into its log and the event stream."""
        agent = self.runtime.agents.get(child_id)
        if agent is not None and not agent.disposed:
            agent.session.append(EXTERNAL_PREFIX + kind, turn=agent.turns or None, data=data)
        if self.runtime.bus.listening:
            parent = agent.parent.id if agent is not None and agent.parent is not None else None
            self.runtime.bus.publish(ExternalActivity(agent_id=child_id, parent_id=parent,
                                                      depth=agent.depth if agent is not None else None,
                                                      activity=kind, data=data))

    async def _close_plan(self, plan: ChildPlan) -> None:
        if plan.close is not None:
            try:
                await plan.close()
            except Exception as error:
                self.runtime.bus.problem("subagent", f"closing a refused child's provider resources failed: {error}")

    # -- listing ---------------------------------------------------------------------------------

    async def child_recorded(self, child_id: str | None) -> None:
        """Return once a live child's log holds what is queued for it so far (its header and descriptor
        right after a start): a background job's start awaits it before the job id is handed out. A
        child not created yet (a provider that plans asynchronously) has nothing recorded to wait for."""
        agent = self.runtime.agents.get(child_id) if child_id is not None else None
        if agent is not None:
            await self.runtime.recorded(agent.session)

    def status_of(self, child_id: str) -> str:
        return listing.status_of(self.runtime.agents, child_id)

    def list_children(self, parent_id: str) -> AgentList:
        return listing.list_children(self.runtime.store, self.status_of, parent_id, self.resume_problem)

    def list_descendants(self, root_id: str) -> AgentList:
        return listing.list_descendants(self.runtime.store, self.status_of, root_id, self.resume_problem)

    def resume_problem(self, provider_name: str, child_id: str) -> str | None:
        """Why a settled child of ``provider_name`` could not resume here, for its listing row (None: it can).
        Providers that may refuse a resume (an external agent without ``session/load``) answer through an
        optional ``resume_problem(child_id, store)``; spawn and fork always resume."""
        provider = self.providers.get(provider_name)
        if provider is None:
            return texts.provider_missing_reason(provider_name)
        ask = self.abilities[provider_name].resume_problem
        if ask is None:
            return None
        try:
            return ask(child_id, self.runtime.store)
        except Exception as error:  # a listing never fails because one provider could not answer
            return f"cannot resume: {error}"

    # -- teardown --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Drain: stop every activation (child-first, no wake-ups), leaving the logs resumable, and
        release every provider resource (no process or actor is left behind)."""
        self.draining = True
        agents: list[Agent] = [act.child for act in self.activations.values()]
        for agent in agents:
            agent.cancel("parent", keep_inbox=False)
        for agent in agents:
            await agent.when_idle()
        for act in list(self.activations.values()):
            if not act.disposing:
                act.owned.clear()
                act.accepted.clear()
                self._settle(act)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def close_providers(self) -> None:
        """Release pool-level provider resources (a Ray actor pool): the hub's last step of closing,
        after every child (continuable, foreground and background job) is disposed. A failure is
        reported as a problem (log and stream) and the other providers are still closed."""
        for provider in list(self.providers.values()):
            aclose = self.abilities[provider.name].aclose
            if aclose is not None:
                try:
                    await aclose()
                except Exception as error:
                    self.runtime.bus.problem("subagent", f'closing subagent provider "{provider.name}" failed: {error}')
