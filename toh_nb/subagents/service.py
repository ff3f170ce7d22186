"""The subagent service: providers, one-shot runs, continuable activations, control and listing.

Every child is built here from its provider's plan (``toh_nb.subagents.provider``: seed events, a model
adapter for agents that live elsewhere, release of their resources). One-shot children are handed back
as a :class:`SubagentRun` (``result`` and an idempotent ``dispose``); the caller always disposes. A
continuable child is a durable
session plus at most one process-local :class:`Activation`. Its residency state is derived, never
stored: *running* (driver busy or an accepted message not yet claimed), *waiting* (it owns live
children) or *settled*. When an activation settles it is disposed: the agent leaves the registry (it
now lists as ``ready``), the parent receives exactly one settlement notice, then ownership is released
(which may settle the parent in turn), then ``subagent/end`` is emitted.

Settlement is event driven (status, claim, discard and release callbacks) rather than a watcher task
per child, so idle children cost no tasks.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from ..core.agent import Agent, TurnOutcome
from ..core.checks import is_int_at_least
from ..core.content import (USER_SOURCE, Message, Source, Text, ToolResultBlock, bound, relay_source, text_of,
                            user_message)
from ..core.errors import ProviderError, StoreError, SubagentDepthError, SubagentError, UsageError
from ..core.runtime import Runtime, RuntimeObserver
from ..core.states import BUDGET_STOPS, EPOCH_STOP, ONE_SHOT_STOP
from ..core.session import (ASSISTANT_MESSAGE, DESCRIPTOR, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, Event,
                            SessionHeader,
                            conversation_of, last_turn_number)
from ..core.tools import ABORTED_BEFORE_DISPATCH
from . import descriptor as descriptors
from . import texts
from ..core.events import ChildEnded, ChildStarted, ExternalActivity, Interrupted, ProviderChanged
from .provider import Capabilities, ChildInfo, ChildPlan, check_provider

#: an external harness's child sees no toh_nb tools (it brings its own)
NO_TOOLS = {"allow": []}
#: session event kinds of an external child's recorded activity (``external/tool_call`` …)
EXTERNAL_PREFIX = "external/"
#: stop reason of a one-shot run from its turn's end (``error``, ``interrupted`` or unknown: ``error``)
TURN_TO_STOP = ONE_SHOT_STOP
EPOCH_TURN_TO_STOP = EPOCH_STOP


@dataclass(slots=True)
class StartRequest:
    """What a delegation asks for. ``max_depth=None`` means no cap (provider-managed)."""

    prompt: str
    parent: Agent
    label: str | None = None
    agent_options: dict | None = None  # {"model": Model, "max_tokens": int, "limits": Limits}
    persona: str | None = None
    tool_filter: dict | None = None
    max_depth: int | None = 3
    by_user: bool = False


@dataclass(slots=True)
class SubagentResult:
    stop_reason: str
    output: list = field(default_factory=list)
    diagnostic: str | None = None
    usage: Any = None

    @property
    def text(self) -> str:
        return text_of(self.output)


class SubagentRun:
    """A one-shot child run. Await ``result``; always ``await dispose()`` (idempotent)."""

    __slots__ = ("id", "run_id", "provider", "agent", "_result", "_disposal", "cancelled", "close")

    def __init__(self, id: str, run_id: str, provider: str, agent: Agent | None,
                 close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.id = id
        self.run_id = run_id
        self.provider = provider
        self.agent = agent
        self._result: asyncio.Future | None = None
        self._disposal: asyncio.Task | None = None
        self.cancelled = False
        #: releases what the provider's plan holds (a process, an actor); awaited by dispose
        self.close = close

    @property
    def result(self) -> "asyncio.Future[SubagentResult]":
        # shielded: a caller being cancelled must not cancel the run's own bookkeeping
        return asyncio.shield(self._result)

    async def dispose(self) -> None:
        if self._disposal is None:
            self._disposal = asyncio.get_running_loop().create_task(self._dispose())
        await asyncio.shield(self._disposal)

    async def _dispose(self) -> None:
        self.cancelled = True
        if self.agent is not None:
            await self.agent.dispose()
        await asyncio.gather(self._result, return_exceptions=True)
        if self.agent is not None:
            self.agent.runtime.unregister(self.agent)
        if self.close is not None:
            close, self.close = self.close, None
            await close()  # a failure here is the run's disposal failure (kept beside the result's)


class Activation:
    """One residency epoch of a continuable child."""

    __slots__ = ("child", "parent_session", "provider", "run_id", "owned", "accepted", "disposing",
                 "announced", "epoch_start", "wake_parent", "dropped_unrun", "close")

    def __init__(self, child: Agent, parent_session: str, provider: str, run_id: str, wake_parent: bool,
                 close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.child = child
        self.parent_session = parent_session
        self.provider = provider
        self.run_id = run_id
        self.owned: set[str] = set()
        self.accepted: set[str] = set()
        self.disposing = False
        self.announced = False
        self.epoch_start = len(child.session.events)
        self.wake_parent = wake_parent
        self.dropped_unrun = False
        self.close = close

    @property
    def state(self) -> str:
        if self.child.status == "running" or self.accepted:
            return "running"
        if self.owned:
            return "waiting"
        return "settled"


@dataclass(slots=True)
class ListEntry:
    """One ``list_agents`` row: a child or a diagnostic. ``str()`` is the exact tool line."""

    kind: str  # child | diagnostic
    id: str
    label: str | None = None
    status: str | None = None  # running | idle | ready
    reason: str | None = None  # diagnostic reason
    parent: str | None = None
    depth: int | None = None
    descendants_form: bool = False

    def __str__(self) -> str:
        if self.kind == "diagnostic":
            if self.descendants_form:
                return texts.diagnostic_line(self.id, self.reason, self.parent, self.depth)
            return texts.diagnostic_line(self.id, self.reason)
        if self.descendants_form:
            return texts.list_line_descendant(self.id, self.status, self.parent, self.depth, self.label or "")
        return texts.list_line(self.id, self.status, self.label or "")


class AgentList(list):
    """The entries of a listing; ``str()`` is exactly the ``list_agents`` tool text."""

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self) if self else texts.NO_SUBAGENTS


def model_name(model: Any) -> str | None:
    """The route name a descriptor records for a per-child model (``gpt-4o-mini``, a function's name)."""
    if model is None:
        return None
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def depth_of(agent: Agent) -> int:
    return max(agent.session.header.delegation_depth, agent.depth)


def validate_max_depth(max_depth: Any) -> int | None:
    """``int >= 0`` → the cap; ``"provider-managed"`` → ``None`` (no cap sent)."""
    if max_depth == "provider-managed":
        return None
    if not is_int_at_least(max_depth, 0) or max_depth > 2**53 - 1:
        raise UsageError(texts.MAX_DEPTH_INVALID)
    return max_depth


def child_depth(parent: Agent, max_depth: int | None) -> int:
    depth = depth_of(parent) + 1
    if max_depth is not None and depth > max_depth:
        raise SubagentDepthError(depth, max_depth)
    return depth


def validate_tool_filter(tool_filter: Any) -> dict | None:
    if tool_filter is None:
        return None
    if not isinstance(tool_filter, dict):
        raise UsageError(f"tool_filter must be a dict with 'allow' and/or 'deny' lists, got {type(tool_filter).__name__}")
    unknown = set(tool_filter) - {"allow", "deny"}
    if unknown:
        raise UsageError(f"tool_filter has unknown key(s) {sorted(unknown)}; use 'allow' and/or 'deny'")
    if "allow" not in tool_filter and "deny" not in tool_filter:
        raise UsageError(texts.EMPTY_FILTER)
    out = {}
    for key in ("allow", "deny"):
        if key in tool_filter:
            names = tool_filter[key]
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise UsageError(f"tool_filter['{key}'] must be a list of tool names")
            out[key] = list(names)
    return out


class SubagentService(RuntimeObserver):
    """The subagent service of one runtime. All methods run on the runtime's event loop."""

    def __init__(self, runtime: Runtime, *, report_delivery: str = "next-step") -> None:
        if report_delivery not in ("next-step", "quiet"):
            raise UsageError(f'report_delivery must be "next-step" or "quiet", got {report_delivery!r}')
        self.runtime = runtime
        self.report_delivery = report_delivery
        self.providers: dict[str, Any] = {}
        self.activations: dict[str, Activation] = {}
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
        self.runtime.bus.publish(ProviderChanged(provider=provider.name, registered=True))

        def remove() -> None:
            if self.providers.get(provider.name) is provider:
                del self.providers[provider.name]
                self.runtime.bus.publish(ProviderChanged(provider=provider.name, registered=False))

        return remove

    def get_provider(self, name: str) -> Any:
        provider = self.providers.get(name)
        if provider is None:
            raise ProviderError(texts.no_provider(name), "NO_PROVIDER")
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

    def _child_info(self, child_id: str, mode: str, label: str | None, depth: int, parent_id: str,
                    request: StartRequest | None, model: Any = None) -> ChildInfo:
        return ChildInfo(child_id, mode, label, depth, parent_id, request, functools.partial(self._record, child_id),
                         model)

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

    # -- one-shot ------------------------------------------------------------------------------

    def _one_shot_info(self, provider: Any, request: StartRequest) -> ChildInfo:
        depth = child_depth(request.parent, request.max_depth)
        self._check_filter(request.tool_filter)
        return self._child_info(self.runtime.ids.agent(), "one-shot", request.label, depth, request.parent.id,
                                request, (request.agent_options or {}).get("model") or request.parent.model)

    async def start(self, provider_name: str, request: StartRequest) -> SubagentRun:
        provider = self._checked_provider(provider_name, request)
        info = self._one_shot_info(provider, request)
        plan_now = getattr(provider, "plan_now", None)
        plan = plan_now(info) if plan_now is not None else await provider.plan(info)
        run = self._start_one_shot(provider, request, info, plan)
        self._published(run, request)
        return run

    def start_now(self, provider_name: str, request: StartRequest) -> SubagentRun | None:
        """Start a one-shot child synchronously when the provider can plan synchronously (in-process
        providers), so a background job's child exists the moment its id is returned; ``None`` otherwise."""
        provider = self._checked_provider(provider_name, request)
        plan_now = getattr(provider, "plan_now", None)
        if plan_now is None:
            return None
        info = self._one_shot_info(provider, request)
        run = self._start_one_shot(provider, request, info, plan_now(info))
        self._published(run, request)
        return run

    def _published(self, run: SubagentRun, request: StartRequest) -> None:
        depth = run.agent.depth if run.agent is not None else None
        self.runtime.bus.publish(ChildStarted(agent_id=run.id, parent_id=request.parent.id, depth=depth,
                                              run_id=run.run_id, provider=run.provider, mode="one-shot",
                                              label=request.label, local=run.agent is not None))

    def _start_one_shot(self, provider: Any, request: StartRequest, info: ChildInfo, plan: ChildPlan) -> SubagentRun:
        """Build and start a planned one-shot child (the one driver every provider shares)."""
        runtime = self.runtime
        descriptor = descriptors.one_shot(provider.name, request.label)
        seed = list(plan.seed)
        header = SessionHeader(info.id, time.time(), parent_session=request.parent.id, origin="subagent",
                               delegation_depth=info.depth, seed_length=len(seed))
        # the descriptor is written with the header, atomically: a child killed during its start
        # leaves a log that says what it was, never one that looks corrupt
        session = runtime.store.create(header, seed + [Event(len(seed), DESCRIPTOR, time.time(), None, None, descriptor)])
        options = request.agent_options or {}
        child = runtime.create_agent(
            session, label=request.label, depth=info.depth, parent=request.parent, mode="one-shot",
            persona=request.persona, tool_filter=NO_TOOLS if plan.own_tools else request.tool_filter,
            sections=((texts.DELEGATION_STATEMENT_ORDER, texts.DELEGATION_STATEMENT),),
            model=plan.model or options.get("model") or request.parent.model,
            max_tokens=options.get("max_tokens", request.parent.max_tokens), limits=options.get("limits"),
            conversation=conversation_of(seed), turns=last_turn_number(seed))
        wrap_tools(child, plan)
        run = SubagentRun(info.id, runtime.ids.run(), provider.name, child, plan.close)
        turn = child.submit(user_message(request.prompt, id=runtime.ids.message()))
        run._result = asyncio.get_running_loop().create_task(self._one_shot_result(run, turn))
        return run

    async def _one_shot_result(self, run: SubagentRun, turn: "asyncio.Future[TurnOutcome]") -> SubagentResult:
        try:
            outcome = await turn
            stop = TURN_TO_STOP.get(outcome.reason, "error")
            if run.cancelled and stop != "completed":
                stop = "aborted"
            diagnostic = outcome.error if stop in ("error", *BUDGET_STOPS) else None
            result = SubagentResult(stop, outcome.output, diagnostic, outcome.usage)
        except BaseException:
            self._emit_end(run.run_id, run.provider, run.id, "error", [], run.agent)
            raise
        self._emit_end(run.run_id, run.provider, run.id, result.stop_reason, result.output, run.agent)
        return result

    def _emit_end(self, run_id: str, provider: str, child_id: str, stop: str, output: list, agent: Any) -> None:
        parent = agent.parent.id if agent is not None and agent.parent is not None else None
        self.runtime.bus.publish(ChildEnded(agent_id=child_id, parent_id=parent,
                                            depth=agent.depth if agent is not None else None, run_id=run_id,
                                            provider=provider, stop_reason=stop,
                                            last_assistant_message=text_of(output, "\n") if output else None,
                                            local=agent is not None))

    def _check_filter(self, tool_filter: dict | None) -> None:
        extra = [self.report_tool.name] if self.report_tool is not None else []
        unknown = self.runtime.unknown_tool_names(tool_filter, extra)
        if unknown:
            raise UsageError(texts.unknown_tool_filter_names(unknown))

    # -- continuable: start --------------------------------------------------------------------

    async def start_continuable(self, provider_name: str, request: StartRequest,
                                child_id: str | None = None) -> tuple[str, str]:
        """Create a continuable child; returns ``(child_id, message_id)`` at inbox acceptance."""
        runtime = self.runtime
        self._assert_admitting()
        if not request.label:
            raise UsageError("a continuable subagent needs a label")
        provider = self._checked_provider(provider_name, request, continuable=True)
        depth = child_depth(request.parent, request.max_depth)
        self._check_filter(request.tool_filter)
        if child_id is not None and (child_id in runtime.agents or runtime.store.exists(child_id)):
            raise SubagentError(texts.duplicate_child(child_id), "DUPLICATE_CHILD")
        options = dict(request.agent_options or {})
        options.setdefault("max_tokens", request.parent.max_tokens)  # inherited unless overridden
        record = descriptors.continuable(provider.name, request.label,
                                         agent_model=model_name(options.get("model")),
                                         persona=request.persona, tool_filter=request.tool_filter)
        parent = request.parent
        child_id = child_id or runtime.ids.agent()
        info = self._child_info(child_id, "continuable", request.label, depth, parent.id, request,
                                options.get("model") or parent.model)
        plan_now = getattr(provider, "plan_now", None)
        plan = plan_now(info) if plan_now is not None else await provider.plan(info)
        try:
            self._assert_admitting()
            parent_act = self._activation_of(parent)
            if parent_act is not None and parent_act.disposing:
                raise SubagentError(texts.parent_closing(parent.id), "ACTIVATION_CLOSING")
            if child_id in runtime.agents or runtime.store.exists(child_id):
                raise SubagentError(texts.duplicate_child(child_id), "DUPLICATE_CHILD")
            seed = list(plan.seed)
            header = SessionHeader(child_id, time.time(), parent_session=parent.id, origin="subagent",
                                   delegation_depth=depth, seed_length=len(seed))
            events = seed + [Event(len(seed), DESCRIPTOR, time.time(), None, None, record)]
            session = runtime.store.create(header, events)
        except BaseException:
            await self._close_plan(plan)  # refused after planning: release what the plan holds
            raise
        if any(options.get(key) is not None for key in ("model", "max_tokens", "limits")):
            self._options[child_id] = options  # kept only when it differs from the defaults (memory per child)
        child = self._materialize(session, record, parent, depth, options, plan)
        act = self._activate(child, parent, provider.name, wake_parent=not request.by_user, close=plan.close)
        message_id = self._submit(act, request.prompt, USER_SOURCE)
        return child_id, message_id

    def _materialize(self, session: Any, record: dict, parent: Agent, depth: int, options: dict,
                     plan: ChildPlan) -> Agent:
        tools = (self.report_tool,) if self.report_tool is not None and not plan.own_tools else ()
        child = self.runtime.create_agent(
            session, label=record.get("label"), depth=depth, parent=parent, mode="continuable",
            persona=record.get("persona"), tool_filter=NO_TOOLS if plan.own_tools else record.get("toolFilter"),
            extra_tools=tools, sections=((texts.DELEGATION_STATEMENT_ORDER, texts.DELEGATION_STATEMENT),),
            model=plan.model or options.get("model") or parent.model, max_tokens=options.get("max_tokens"),
            limits=options.get("limits"),
            conversation=conversation_of(session.events), turns=last_turn_number(session.events))
        wrap_tools(child, plan)
        return child

    async def _close_plan(self, plan: ChildPlan) -> None:
        if plan.close is not None:
            try:
                await plan.close()
            except Exception as error:
                self.runtime.bus.problem("subagent", f"closing a refused child's provider resources failed: {error}")

    def _activate(self, child: Agent, parent: Agent, provider: str, wake_parent: bool,
                  close: Callable[[], Awaitable[None]] | None = None) -> Activation:
        act = Activation(child, parent.id, provider, self.runtime.ids.run(), wake_parent, close)
        self.activations[child.id] = act
        self._acquire(parent, child.id)
        self.runtime.bus.publish(ChildStarted(agent_id=child.id, parent_id=parent.id, depth=child.depth,
                                              run_id=act.run_id, provider=provider, mode="continuable",
                                              label=child.label))
        return act

    def _submit(self, act: Activation, content: str | list, source: Source) -> str:
        message = user_message(content, id=self.runtime.ids.message(), source=source)
        act.accepted.add(message.id)
        if not act.announced:  # the activation's first prompt is its current turn, never a parked follow-up
            act.child.opening = message.id
        try:
            act.child.followup(message)
        except BaseException:
            act.accepted.discard(message.id)
            raise
        act.announced = True
        return message.id

    def _activation_of(self, agent: Agent | None) -> Activation | None:
        if agent is None:
            return None
        act = self.activations.get(agent.id)
        return act if act is not None and act.child is agent else None

    def _acquire(self, parent: Agent, child_id: str) -> None:
        parent_act = self._activation_of(parent)
        if parent_act is None:
            return
        if parent_act.disposing:
            raise SubagentError(texts.parent_closing(parent.id), "ACTIVATION_CLOSING")
        parent_act.owned.add(child_id)
        self._owners.setdefault(child_id, set()).add(parent_act)

    def _release(self, child_id: str) -> None:
        for owner in self._owners.pop(child_id, ()):
            owner.owned.discard(child_id)
            self._check(owner)

    def _assert_admitting(self) -> None:
        if self.draining:
            raise SubagentError(texts.DRAINING, "DRAINING")

    # -- continuable: follow-ups and cold resume ----------------------------------------------

    async def followup(self, parent: Agent, child_id: str, content: str | list, source: Source | None = None) -> str:
        self._assert_admitting()
        source = source or relay_source("coordinator", parent.id)
        if not self.runtime.is_live(parent):
            raise SubagentError(texts.needs_exact_parent(child_id), "UNAUTHORIZED")
        act = self.activations.get(child_id)
        if act is not None:
            if act.disposing:
                raise SubagentError(texts.activation_closing_message(child_id), "ACTIVATION_CLOSING")
            if act.parent_session != parent.id:
                raise SubagentError(texts.other_parent(child_id), "UNAUTHORIZED")
            self._acquire(parent, child_id)
            if act.wake_parent is False and not source.kind == "user":
                act.wake_parent = True
            return self._submit(act, content, source)
        return await self._cold_resume(parent, child_id, content, source)

    async def _cold_resume(self, parent: Agent, child_id: str, content: str | list, source: Source) -> str:
        runtime = self.runtime
        try:
            session = runtime.store.open(child_id)
        except (KeyError, StoreError, OSError, ValueError):
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE") from None
        header = session.header
        if header.parent_session != parent.id:
            raise SubagentError(texts.other_parent(child_id), "UNAUTHORIZED")
        try:
            record = descriptors.first_in(session.own_events())
        except descriptors.DescriptorError as error:
            raise SubagentError(str(error), "NOT_RESUMABLE") from None
        if record is None or record.get("mode") != "continuable":
            raise SubagentError(texts.not_resumable(child_id), "NOT_RESUMABLE")
        if child_id in runtime.agents:  # a live agent we do not own is never adopted
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE")
        provider = self.providers.get(record["provider"])
        if provider is None:
            raise SubagentError(texts.provider_not_registered(child_id, record["provider"]), "NOT_RESUMABLE")
        options = self._options.get(child_id) or {"max_tokens": parent.max_tokens}
        info = self._child_info(child_id, "continuable", record.get("label"), header.delegation_depth, parent.id,
                                None, options.get("model") or parent.model)
        resume_now = getattr(provider, "resume_now", None)
        plan = resume_now(info, session) if resume_now is not None else await provider.resume(info, session)
        if resume_now is None and (child_id in runtime.agents or not runtime.is_live(parent) or self.draining):
            await self._close_plan(plan)  # the world moved while the provider reconnected: start over
            return await self.followup(parent, child_id, content, source)
        repair_tail(session)
        try:
            child = self._materialize(session, record, parent, header.delegation_depth, options, plan)
        except Exception:
            await self._close_plan(plan)
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE") from None
        act = self._activate(child, parent, record["provider"], wake_parent=source.kind != "user", close=plan.close)
        return self._submit(act, content, source)

    # -- interrupt ---------------------------------------------------------------------------------

    def _authorized_target(self, target_id: str, caller: Agent) -> Activation | None:
        """The target's live activation if ``caller`` (a live ancestor) may stop it; None: a no-op."""
        if not self.runtime.is_live(caller):
            raise SubagentError(texts.stale_ancestor(target_id), "UNAUTHORIZED")
        if caller.id == target_id:
            raise SubagentError(texts.self_interrupt(caller.id), "UNAUTHORIZED")
        act = self.activations.get(target_id)
        if act is None:
            return None
        node = act.child.parent
        while node is not None and node is not caller:
            node = node.parent
        if node is None:
            raise SubagentError(texts.not_descendant(target_id, caller.id), "UNAUTHORIZED")
        return None if act.disposing else act

    def interrupt(self, target_id: str, caller: Agent) -> bool:
        """Stop only the target's current turn; queued messages stay parked. No-op if not resident."""
        act = self._authorized_target(target_id, caller)
        if act is None:
            return False
        act.child.cancel("parent", keep_inbox=True)
        child = act.child
        self.runtime.bus.publish(Interrupted(agent_id=child.id, parent_id=act.parent_session, depth=child.depth,
                                             by=caller.id))
        return True

    def kill(self, target_id: str, caller: Agent) -> bool:
        """Stop a continuable child for good: abort its turn, drop its queue, let it settle. The same
        authorization as ``interrupt``; an accepted no-op when it is not resident."""
        act = self._authorized_target(target_id, caller)
        if act is None:
            return False
        act.child.cancel("parent", keep_inbox=False)
        self.runtime.bus.publish(Interrupted(agent_id=act.child.id, parent_id=act.parent_session,
                                             depth=act.child.depth, by=caller.id))
        self._check(act)
        return True

    # -- report ----------------------------------------------------------------------------------

    def report_from(self, child: Agent, content: str, delivery: str | None = None) -> str:
        self._assert_admitting()
        act = self._activation_of(child)
        if act is None or not self.runtime.is_live(child):
            raise SubagentError(texts.cannot_report(child.id), "UNAUTHORIZED")
        if act.disposing:
            raise SubagentError(texts.activation_closing_report(child.id), "ACTIVATION_CLOSING")
        parent = self.runtime.agents.get(act.parent_session)
        if parent is None or parent.disposed:
            raise SubagentError(texts.PARENT_UNAVAILABLE, "PARENT_UNAVAILABLE")
        message = Message("user", [Text(texts.reported_line(child.id)), Text(content)], id=self.runtime.ids.message(),
                          source=relay_source("subagent-report", child.id))
        self._deliver(parent, message, wake=(delivery or self.report_delivery) == "next-step" and act.wake_parent,
                      followup=False)
        return message.id

    def _deliver(self, parent: Agent, message: Message, *, wake: bool, followup: bool) -> None:
        """Waking delivery: a new turn (idle parent, ``followup``) or the next step; else inject."""
        if not wake or self.draining:
            parent.inject(message)
            return
        parent_act = self._activation_of(parent)
        if parent_act is not None:
            parent_act.accepted.add(message.id)
        if followup and parent.status == "idle":
            parent.followup(message)
        else:
            parent.steer(message)

    # -- settlement ------------------------------------------------------------------------------

    def on_status(self, agent: Agent) -> None:
        if agent.status == "idle":
            act = self._activation_of(agent)
            if act is not None:
                self._check(act)

    def on_claimed(self, agent: Agent, message: Message) -> None:
        act = self._activation_of(agent)
        if act is not None and message.id is not None:
            act.accepted.discard(message.id)

    def on_discarded(self, agent: Agent, messages: list[Message]) -> None:
        act = self._activation_of(agent)
        if act is None:
            return
        for message in messages:
            act.accepted.discard(message.id)
        act.dropped_unrun = True
        self._check(act)

    def on_turn_end(self, agent: Agent, outcome: TurnOutcome) -> None:
        act = self._activation_of(agent)
        if act is not None:
            act.dropped_unrun = False

    def _check(self, act: Activation) -> None:
        if not act.disposing and act.state == "settled" and not act.child.parked:
            self._settle(act)

    def _settle(self, act: Activation) -> None:
        act.disposing = True
        child = act.child
        stop, output = self._epoch_outcome(act)
        try:
            self.runtime.store.flush(child.session, wait=False)  # never block the loop on a sync
        except Exception as error:
            self.runtime.bus.problem("subagent", f'subagent "{child.id}" best-effort final session flush failed; '
                                     f"the persisted state may be unavailable or stale on resume: {error}",
                                     agent_id=child.id)
        child.disposed = True
        if act.close is not None:  # the provider's resources (a process, an actor) go with the activation
            task = asyncio.get_running_loop().create_task(act.close())
            self._closing.add(task)
            task.add_done_callback(self._closed_plan)
        if self.activations.get(child.id) is act:
            del self.activations[child.id]
        self.runtime.unregister(child)
        if act.announced:
            self._notify_parent(act, stop, output)
        self._release(child.id)
        self.closing[child.id] = text_of(output) or None
        self._emit_end(act.run_id, act.provider, child.id, stop, output, child)
        for waiter in self._settle_waiters.pop(child.id, ()):
            if not waiter.done():
                waiter.set_result(stop)

    async def wait_changed(self, child_id: str, timeout: float | None = None) -> None:
        """Wait until the child's current activation settles (or ``timeout`` seconds pass)."""
        if child_id not in self.activations:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._settle_waiters.setdefault(child_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            waiters = self._settle_waiters.get(child_id)
            if waiters and waiter in waiters:
                waiters.remove(waiter)

    def _epoch_outcome(self, act: Activation) -> tuple[str, list]:
        events = act.child.session.events
        reason = None
        output: list = []
        for event in events[act.epoch_start:]:
            if event.kind == TURN_END:
                reason = event.data.get("reason")
            elif event.kind == "assistant/message" and event.message.content:
                output = event.message.content
        if reason is None or reason == "completed":
            stop = "aborted" if act.dropped_unrun else "completed"
        else:
            stop = EPOCH_TURN_TO_STOP.get(reason, "error")
        return stop, [b for b in output if b.type == "text"]

    def _notify_parent(self, act: Activation, stop: str, output: list) -> None:
        parent = self.runtime.agents.get(act.parent_session)
        if parent is None or parent.disposed:
            return  # a gone parent: dropped silently
        line = texts.settled_line(act.child.id, stop)
        content: list = [Text(line)]
        if output:
            content.append(Text(texts.CLOSING_MESSAGE))
            content.extend(output)
        else:
            content.append(Text(texts.NO_CLOSING_MESSAGE))
        message = Message("user", content, id=self.runtime.ids.message(),
                          source=Source("subagent-settled", form="notice", sender=act.child.id,
                                        summary=bound(line)))
        try:
            self._deliver(parent, message, wake=act.wake_parent, followup=True)
        except Exception as error:
            self.runtime.bus.problem("subagent", f'subagent "{act.child.id}" settlement notice was not delivered '
                                     f"to its parent: {error}", agent_id=act.child.id)

    # -- listing ---------------------------------------------------------------------------------

    def status_of(self, child_id: str) -> str:
        agent = self.runtime.agents.get(child_id)
        if agent is None:
            return "ready"
        return "running" if agent.status == "running" else "idle"

    def _entry(self, header: SessionHeader, descendants: bool, depth: int) -> tuple[ListEntry | None, bool]:
        """(row or None, is_continuable_or_unknown) for one child header."""
        store = self.runtime.store
        problem = store.diagnostic(header.id)
        if problem == "corrupt":
            return ListEntry("diagnostic", header.id, reason="corrupt", parent=header.parent_session, depth=depth,
                             descendants_form=descendants), True
        try:
            # a store that can answer without loading the transcript does (a 10,000-child listing)
            descriptor_of = getattr(store, "descriptor", None)
            descriptor = descriptor_of(header.id) if descriptor_of is not None else store.open(header.id).descriptor
            record = descriptors.identity(descriptor)
        except (KeyError, StoreError, OSError, ValueError):
            return ListEntry("diagnostic", header.id, reason="unavailable", parent=header.parent_session,
                             depth=depth, descendants_form=descendants), True
        if record is None:
            # no descriptor: a clean prefix of a one-shot child's log (an older version wrote it in
            # the first turn), never a continuable one (written with its header): not listed
            return None, False
        if record["mode"] != "continuable":
            return None, False
        return ListEntry("child", header.id, label=record.get("label"), status=self.status_of(header.id),
                         parent=header.parent_session, depth=depth, descendants_form=descendants), True

    def _children_headers(self, parent_id: str) -> list[SessionHeader]:
        headers = [h for h in self.runtime.store.children_of(parent_id) if h.origin == "subagent"]
        headers.sort(key=lambda h: (h.created, h.id))
        return headers

    def list_children(self, parent_id: str) -> AgentList:
        out = AgentList()
        for header in self._children_headers(parent_id):
            entry, _ = self._entry(header, False, 1)
            if entry is not None:
                out.append(entry)
        return out

    def list_descendants(self, root_id: str) -> AgentList:
        out = AgentList()
        stack: list[tuple[SessionHeader, int]] = [(h, 1) for h in reversed(self._children_headers(root_id))]
        while stack:
            header, depth = stack.pop()
            entry, _ = self._entry(header, True, depth)
            if entry is not None:
                out.append(entry)
            for child in reversed(self._children_headers(header.id)):
                stack.append((child, depth + 1))
        return out

    # -- teardown --------------------------------------------------------------------------------

    def _closed_plan(self, task: asyncio.Task) -> None:
        self._closing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.runtime.bus.problem("subagent", f"releasing a settled child's provider resources failed: "
                                     f"{task.exception()}")

    async def close(self) -> None:
        """Drain: stop every activation (child-first, no wake-ups), leaving the logs resumable, and
        release every provider resource (no process or actor is left behind)."""
        self.draining = True
        agents = [act.child for act in self.activations.values()]
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
        after every child (continuable, foreground and background job) is disposed."""
        for provider in list(self.providers.values()):
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception as error:
                    self.warnings.append(f'closing subagent provider "{provider.name}" failed: {error}')


def wrap_tools(child: Agent, plan: ChildPlan) -> None:
    """Apply the plan's ``wrap_tool`` to the child's tools (a copy: tool views are shared per shape)."""
    if plan.wrap_tool is not None:
        child.tools = {name: plan.wrap_tool(tool) for name, tool in child.tools.items()}


UNKNOWN_OUTCOME = "Error: the session ended before this tool call finished; its outcome is unknown"


def repair_tail(session: Any) -> None:
    """Close a turn a crash left open: results for unanswered calls, then ``turn/end interrupted``."""
    events = session.events
    open_turn = None
    for event in reversed(events):
        if event.kind == TURN_END:
            break
        if event.kind == TURN_START:
            open_turn = event.turn
            break
    if open_turn is None:
        return
    turn_events = [e for e in events if e.turn == open_turn]
    answered = {e.message.tool_call_id for e in turn_events if e.kind == TOOL_RESULT}
    dispatched = {e.data["call_id"] for e in turn_events if e.kind == TOOL_CALL}
    # every call the model asked for gets a result, so the conversation stays valid for the next model
    for event in turn_events:
        if event.kind != ASSISTANT_MESSAGE:
            continue
        for block in event.message.content:
            if block.type == "tool-call" and block.id not in answered:
                text = (UNKNOWN_OUTCOME if block.id in dispatched else f"Error: {ABORTED_BEFORE_DISPATCH}")
                session.append(TOOL_RESULT, turn=open_turn,
                               message=Message("tool", [ToolResultBlock(block.id, block.name, text, True)]))
    session.append(TURN_END, turn=open_turn, data={"reason": "interrupted"})
