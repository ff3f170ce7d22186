"""The child factory: the one way a planned child is built, shared by every part of the subagent service
(one-shot runs and continuable children, a first start and a cold resume) — the registered providers
and their abilities, the checks a delegation passes before its provider plans it, the
:class:`~toh_nb.providers.base.ChildInfo` a provider plans from, the child's log (header and
descriptor in one write) and its agent composed from the plan (seed, model, own tools, where its
tools run, its step loop)."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Iterable

from ..core.agent import Agent
from ..core.checks import check_text
from ..core.errors import ProviderError, SubagentError, UsageError
from ..core.events import ExternalActivity, ProviderChanged
from ..core.session import DESCRIPTOR, Event, Session, SessionHeader, conversation_of, last_turn_number
from ..providers.base import Abilities, Capabilities, ChildInfo, ChildPlan, abilities_of, check_provider
from . import texts

#: session event kinds of an external child's recorded activity (``external/tool_call`` …)
EXTERNAL_PREFIX = "external/"

#: the system prompt section every child gets (it was delegated a task)
DELEGATION_SECTIONS = ((texts.DELEGATION_STATEMENT_ORDER, texts.DELEGATION_STATEMENT),)


class ChildFactory:
    """The part every kind of child shares: the provider registry, the pre-plan checks, the ChildInfo,
    the external-activity recorder, and :func:`create_log` / :func:`build` for this runtime."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.providers: dict[str, Any] = {}
        #: each registered provider's optional abilities, resolved once (``toh_nb.providers.base``)
        self.abilities: dict[str, Abilities] = {}
        self.report_tool: Any = None  # set by the hub composition (tool installed into continuable children)

    # -- providers ---------------------------------------------------------------------------------

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

    def checked_provider(self, provider_name: str, request: Any, continuable: bool = False) -> Any:
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

    def check_filter(self, tool_filter: dict | None, own: tuple = ()) -> None:
        extra = [self.report_tool.name] if self.report_tool is not None else []
        extra += [tool.name for tool in own]  # the child's own tools (``StartRequest.tools``) may be named too
        unknown = self.runtime.unknown_tool_names(tool_filter, extra)
        if unknown:
            raise UsageError(texts.unknown_tool_filter_names(unknown))

    def resume_problem(self, provider_name: str, child_id: str) -> str | None:
        """Why a settled child of ``provider_name`` could not resume here, for its listing row (None: it can).
        Providers that may refuse a resume (an external agent without ``session/load``) answer through
        ``ExplainsResume``; spawn and fork always resume."""
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

    # -- one child ---------------------------------------------------------------------------------

    def child_info(self, child_id: str, mode: str, label: str | None, depth: int, parent_id: str,
                   request: Any, model: Any = None) -> ChildInfo:
        own = request.mcp_servers if request is not None else ()
        return ChildInfo(child_id, mode, label, depth, parent_id, request, functools.partial(self.record, child_id),
                         model, hub=self.runtime, mcp_servers=(*self.runtime.mcp_servers, *own), desk=self.runtime.asks)

    def record(self, child_id: str, kind: str, data: dict) -> None:
        """An external child's activity (a remote tool call, a plan): into its log and the event stream."""
        agent = self.runtime.agents.get(child_id)
        if agent is not None and not agent.disposed:
            agent.session.append(EXTERNAL_PREFIX + kind, turn=agent.turns or None, data=data)
        if ExternalActivity.kind in self.runtime.bus.wanted:
            parent = agent.parent.id if agent is not None and agent.parent is not None else None
            self.runtime.bus.publish(ExternalActivity(agent_id=child_id, parent_id=parent,
                                                      depth=agent.depth if agent is not None else None,
                                                      activity=kind, data=data))

    async def close_plan(self, plan: ChildPlan) -> None:
        if plan.close is not None:
            try:
                await plan.close()
            except Exception as error:
                self.runtime.bus.problem("subagent", f"closing a refused child's provider resources failed: {error}")

    def log(self, child_id: str, parent_id: str, depth: int, seed: list[Event], descriptor: dict) -> Session:
        """A new child's log: the plan's seed events, then its descriptor, written with the header at once
        (a child killed during its start leaves a log that says what it was, never one that looks corrupt)."""
        now = time.time()  # one moment (and one float) for the header and the descriptor record
        header = SessionHeader(child_id, now, parent_session=parent_id, origin="subagent", delegation_depth=depth,
                               seed_length=len(seed))
        seq = seed[-1].seq + 1 if seed else 0  # a fork's seed keeps its parent's seqs (gaps included)
        return self.runtime.store.create(header, seed + [Event(seq, DESCRIPTOR, now, None, None, descriptor)])

    def build(self, session: Session, plan: ChildPlan, *, label: str | None, depth: int, parent: Agent, mode: str,
              persona: str | None, tool_filter: dict | None, extra_tools: Iterable[Any], model: Any,
              max_tokens: int | None, limits: Any, events: list[Event] | None = None) -> Agent:
        """The child's registered agent, from its log (``events``: the part of it that holds messages and
        turns, when the caller knows it: a new child's seed) and its provider's plan. A provider that
        refuses it (``wrap_tool`` raising) leaves no half-made agent registered."""
        runtime = self.runtime
        if events is None:
            events = session.events
        child = runtime.create_agent(
            session, label=label, depth=depth, parent=parent, mode=mode, persona=persona,
            tool_filter=plan.tool_filter(tool_filter), extra_tools=() if plan.own_tools else extra_tools,
            sections=DELEGATION_SECTIONS, model=plan.model or model, max_tokens=max_tokens, limits=limits,
            conversation=conversation_of(events), turns=last_turn_number(events), steps=plan.steps)
        if plan.wrap_tool is not None:
            try:  # a copy: tool views are shared per shape
                child.tools = {name: plan.wrap_tool(tool) for name, tool in child.tools.items()}
                child.wrap_tool = plan.wrap_tool
            except BaseException:
                runtime.unregister(child)
                raise
        return child
