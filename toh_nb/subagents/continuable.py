"""Continuable children: start, follow-up messages, cold resume from the log, interrupt and kill.

A continuable child outlives its turns: its session log is durable and a message to a settled child
(in this process or after a restart) rebuilds it from that log (*cold resume*) under a new
:class:`~toh_nb.subagents.activations.Activation`. Only its exact parent may message it; only a live
ancestor may stop it (``toh_nb.subagents.authorization``).
"""

from __future__ import annotations


import asyncio
from typing import TYPE_CHECKING, Any

from ..core.agent import Agent
from ..core.dict_room import DictRoom
from ..core.runtime import RuntimeObserver
from ..core.content import USER_SOURCE, Message, Source, relay_source, user_message
from ..core.threads import run_engine
from ..core.errors import StoreError, SubagentError, UsageError
from ..core.events import Interrupted
from ..core.ids import is_valid_id
from ..core.inbox_log import discarded_data, pending_messages, queued_data
from ..core.session import (MESSAGE_DISCARDED, MESSAGE_QUEUED)
from ..core.session_repair import repair_tail
from . import descriptor as descriptors
from . import texts
from .activations import Activation
from .arguments import StartRequest, child_depth, filtered, route_name
from .authorization import authorized_target
from ..providers.base import ChildPlan
from .settlement import Settlement

if TYPE_CHECKING:
    from .factory import ChildFactory
    from ..core.runtime import Runtime


class ContinuableChildren(Settlement, RuntimeObserver):
    """Continuable children, a part of :class:`~toh_nb.subagents.service.SubagentService`: started,
    resumed and followed up through the service's one :class:`~toh_nb.subagents.factory.ChildFactory`;
    residency and delivery (``activations``) and when an activation ends (``settlement``) are the two
    halves of this part. It watches the runtime's agents (the runtime's callbacks)."""

    def __init__(self, factory: "ChildFactory", report_delivery: str) -> None:
        runtime = factory.runtime
        self.factory = factory
        self.runtime: "Runtime" = runtime
        self.report_delivery = report_delivery
        self.activations: dict[str, Activation] = {}
        self._activations_room = DictRoom()  # gives the table back after a burst of children
        self._owners: dict[str, set[Activation]] = {}
        self.draining = False
        self._settle_waiters: dict[str, list[asyncio.Future]] = {}
        #: provider resources being released after their activation settled (awaited by close())
        self._closing: set[asyncio.Task] = set()
        #: closing text of each child's last settled activation in this process (None: it left none)
        self.closing: dict[str, str | None] = {}
        #: ``(diagnostic, cause)`` of children whose last activation settled in this process ended ``error``
        self.failures: dict[str, tuple[str | None, str]] = {}
        #: per-child agent options given at start (model, max_tokens, budgets); a resume in this process
        #: reuses them (the descriptor can only name a model; a restart falls back to the hub's defaults)
        self._options: dict[str, dict] = {}
        runtime.observers.append(self)

    async def close(self) -> None:
        """Drain: stop every activation (child-first, no wake-ups), leaving the logs resumable."""
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

    async def start_continuable(self, provider_name: str, request: StartRequest,
                                child_id: str | None = None) -> tuple[str, str]:
        """Create a continuable child; returns ``(child_id, message_id)`` at inbox acceptance."""
        runtime = self.runtime
        self._assert_admitting()
        if not request.label:
            raise UsageError("a continuable subagent needs a label")
        provider = self.factory.checked_provider(provider_name, request, continuable=True)
        depth = child_depth(request.parent, request.max_depth)
        self.factory.check_filter(request.tool_filter, request.tools)
        if child_id is not None and (child_id in runtime.agents or runtime.store.exists(child_id)):
            raise SubagentError(texts.duplicate_child(child_id), "DUPLICATE_CHILD")
        options = request.options.as_dict() if request.options else {}
        options.setdefault("max_tokens", request.parent.max_tokens)  # inherited unless overridden
        if request.tools:  # kept with the options: a resume in this process sees them again
            options["tools"] = filtered(request.tools, request.tool_filter)
        record = descriptors.continuable(provider.name, request.label,
                                         agent_model=route_name(options.get("model")),
                                         persona=request.persona, tool_filter=request.tool_filter)
        parent = request.parent
        child_id = child_id or runtime.ids.agent()
        info = self.factory.child_info(child_id, "continuable", request.label, depth, parent.id, request,
                                options.get("model") or parent.model)
        plan_now = self.factory.abilities[provider.name].plan_now
        plan = plan_now(info) if plan_now is not None else await provider.plan(info)
        try:
            self._assert_admitting()
            parent_act = self._activation_of(parent)
            if parent_act is not None and parent_act.disposing:
                raise SubagentError(texts.parent_closing(parent.id), "ACTIVATION_CLOSING")
            if child_id in runtime.agents or runtime.store.exists(child_id):
                raise SubagentError(texts.duplicate_child(child_id), "DUPLICATE_CHILD")
            session = self.factory.log(child_id, parent.id, depth, list(plan.seed), record)
        except BaseException:
            await self.factory.close_plan(plan)  # refused after planning: release what the plan holds
            raise
        message = user_message(request.prompt, id=runtime.ids.message(), source=USER_SOURCE)
        queued = session.append(MESSAGE_QUEUED, data=queued_data(message))
        # the id handed out names a child that survives a crash from now on: its header, descriptor and
        # first prompt are in the log (written; fsynced under "always") before the child exists anywhere
        # else; a crash before its turn logged the prompt leaves it pending, run at the next send. A log
        # that cannot be written leaves no child: the store forgets it and its id, the start raises.
        try:
            await runtime.recorded(session, (queued,))
        except asyncio.CancelledError:  # the log may still be written: the child then runs, as it would have
            self._run_started(session, record, parent, depth, options, plan, provider.name, request, message)
            raise
        except BaseException:
            await self.factory.close_plan(plan)
            raise
        self._run_started(session, record, parent, depth, options, plan, provider.name, request, message)
        return child_id, message.id

    def _run_started(self, session: Any, record: dict, parent: Agent, depth: int, options: dict, plan: ChildPlan,
                     provider: str, request: StartRequest, message: Message) -> None:
        """The recorded child comes to life: built, in the tree, its first prompt queued."""
        if any(options.get(key) is not None for key in ("model", "max_tokens", "limits", "tools")):
            self._options[session.id] = options  # kept only when it differs from the defaults (memory per child)
        child = self._materialize(session, record, parent, depth, options, plan)
        act = self._activate(child, parent, provider, wake_parent=not request.by_user, close=plan.close)
        self._queue(act, message)

    def _materialize(self, session: Any, record: dict, parent: Agent, depth: int, options: dict,
                     plan: ChildPlan) -> Agent:
        report_tool = self.factory.report_tool
        return self.factory.build(session, plan, label=record.get("label"), depth=depth, parent=parent,
                             mode="continuable", persona=record.get("persona"), tool_filter=record.get("toolFilter"),
                             extra_tools=((report_tool,) if report_tool is not None else ()) + tuple(options.get("tools", ())),
                             model=options.get("model") or parent.model, max_tokens=options.get("max_tokens"),
                             limits=options.get("limits"))

    # -- follow-ups and cold resume -----------------------------------------------------------------

    async def followup(self, parent: Agent, child_id: str, content: str | list, source: Source | None = None) -> str:
        self._assert_admitting()
        if not is_valid_id(child_id):  # names no child (a path such as ../x): refused before any lookup, in the
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE")  # reference's words for an unknown id
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
            return await self._send(act, content, source)
        return await self._cold_resume(parent, child_id, content, source)

    async def _send(self, act: Activation, content: str | list, source: Source,
                    pending: list[Message] | None = None) -> str:
        """Queue a follow-up (after ``pending``, the follow-ups a cold resume found unconsumed in the
        log) and return its id once the store has recorded it (``toh_nb.core.inbox_log``): logged
        as ``message/queued`` first and queued only once that record is written (so before its turn
        can log it). A record that cannot be written (disk full) fails the send with the store's
        ``StoreError`` and leaves no trace: the record is never written, the message never queued."""
        for queued in pending or ():
            self._queue(act, queued)
        message = user_message(content, id=self.runtime.ids.message(), source=source)
        try:
            await self._append_recorded(act.child.session, MESSAGE_QUEUED, queued_data(message))
        except StoreError:
            self._check(act)  # an activation a cold resume made for this message alone settles again
            raise
        except asyncio.CancelledError:  # the record may still be written: queue it, as if sent a moment earlier
            self._accept_recorded(act, message)
            raise
        self._accept_recorded(act, message)
        return message.id

    async def _append_recorded(self, session: Any, kind: str, data: dict) -> None:
        """Append an acknowledging call's record and wait until the store has it; one it cannot write
        raises the store's ``StoreError``, is never written, and is taken back out of the session."""
        record = session.append(kind, data=data)
        try:
            await self.runtime.recorded(session, (record,))
        except StoreError:
            session.retract((record,))
            raise

    def _accept_recorded(self, act: Activation, message: Message) -> None:
        """Queue a recorded follow-up; one its activation can no longer take (killed or settled while
        the record was written) is recorded as discarded, so a resume after a crash never runs it."""
        if self.activations.get(act.child.id) is not act or act.disposing:
            act.child.session.append(MESSAGE_DISCARDED, data=discarded_data((message.id,)))
            raise SubagentError(texts.activation_closing_message(act.child.id), "ACTIVATION_CLOSING")
        try:
            self._queue(act, message)
        except BaseException:
            act.child.session.append(MESSAGE_DISCARDED, data=discarded_data((message.id,)))
            raise

    async def read_log(self, child_id: str) -> Any:
        """A stored child's log, read off the loop when the store reads a disk; ``SubagentError``
        naming what is wrong with a log that exists and cannot be read (corrupt, unreadable)."""
        store = self.runtime.store
        try:
            if store.reads_block:  # a disk read off the loop: a slow disk stalls no agent
                return await run_engine(store.open, child_id)
            return store.open(child_id)
        except StoreError as error:  # the log exists and cannot be read: say what is wrong with it
            raise SubagentError(texts.unavailable_because(child_id, str(error)), "NOT_RESUMABLE") from None
        except (KeyError, OSError, ValueError):
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE") from None

    async def _cold_resume(self, parent: Agent, child_id: str, content: str | list, source: Source) -> str:
        runtime = self.runtime
        session = await self.read_log(child_id)
        if child_id in self.activations or self.draining or not runtime.is_live(parent):
            return await self.followup(parent, child_id, content, source)  # the world moved during the read
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
        provider = self.factory.providers.get(record["provider"])
        if provider is None:
            raise SubagentError(texts.provider_not_registered(child_id, record["provider"]), "NOT_RESUMABLE")
        options = self._options.get(child_id) or {"max_tokens": parent.max_tokens}
        info = self.factory.child_info(child_id, "continuable", record.get("label"), header.delegation_depth, parent.id,
                                None, options.get("model") or parent.model)
        resume_now = self.factory.abilities[provider.name].resume_now
        plan = resume_now(info, session) if resume_now is not None else await provider.resume(info, session)
        if resume_now is None and (child_id in runtime.agents or not runtime.is_live(parent) or self.draining):
            await self.factory.close_plan(plan)  # the world moved while the provider reconnected: start over
            return await self.followup(parent, child_id, content, source)
        repair_tail(session)
        try:
            child = self._materialize(session, record, parent, header.delegation_depth, options, plan)
        except UsageError:  # the provider names what it cannot run (a tool that cannot be sent to a host)
            await self.factory.close_plan(plan)
            raise
        except Exception:
            await self.factory.close_plan(plan)
            raise SubagentError(texts.unavailable(child_id), "NOT_RESUMABLE") from None
        act = self._activate(child, parent, record["provider"], wake_parent=source.kind != "user", close=plan.close)
        # the follow-ups a previous residency acknowledged and never ran (a crash; a hub closed while
        # they waited) run first, in their order: they were sent before this message
        return await self._send(act, content, source, pending_messages(session.own_events()))

    # -- interrupt and kill ----------------------------------------------------------------------------

    def interrupt(self, target_id: str, caller: Agent) -> bool:
        """Stop only the target's current turn; queued messages stay parked. No-op if not resident."""
        act = authorized_target(self.runtime, self.activations, target_id, caller)
        if act is None:
            return False
        act.child.cancel("parent", keep_inbox=True)
        child = act.child
        self.runtime.bus.publish(Interrupted(agent_id=child.id, parent_id=act.parent_session, depth=child.depth,
                                             by=caller.id))
        return True

    async def kill(self, target_id: str, caller: Agent) -> bool:
        """Stop a continuable child for good: abort its turn, drop its queue, let it settle. The same
        authorization as ``interrupt``; an accepted no-op when it is not resident.

        Acknowledged like a send: the follow-ups it drops are recorded as discarded (written, synced
        per policy) before anything stops, so none of them runs after a crash that follows the return;
        a record that cannot be written raises the store's ``StoreError`` and the child runs on."""
        act = authorized_target(self.runtime, self.activations, target_id, caller)
        if act is None:
            return False
        while not self.draining:  # what the kill drops is recorded first; record anything queued meanwhile
            dropped = [m.id for m in act.child.queued_messages() if m.id in act.accepted and m.id not in act.discarded]
            if not dropped:
                break
            await self._append_recorded(act.child.session, MESSAGE_DISCARDED, discarded_data(dropped))
            act.discarded.update(dropped)
            act = authorized_target(self.runtime, self.activations, target_id, caller)
            if act is None:
                return False
        act.child.cancel("parent", keep_inbox=False)
        self.runtime.bus.publish(Interrupted(agent_id=act.child.id, parent_id=act.parent_session,
                                             depth=act.child.depth, by=caller.id))
        self._check(act)
        return True
