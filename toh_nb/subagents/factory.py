"""The one way a planned child is built, for every kind of child (one-shot and continuable, a first
start and a cold resume): its log created with its header and descriptor in one write, and its agent
composed from the provider's plan (:class:`~toh_nb.providers.base.ChildPlan`: seed, model, own tools,
where its tools run, its step loop)."""

from __future__ import annotations

import time
from typing import Any, Iterable

from ..core.agent import Agent
from ..core.session import DESCRIPTOR, Event, Session, SessionHeader, conversation_of, last_turn_number
from ..providers.base import ChildPlan
from . import texts

#: the system prompt section every child gets (it was delegated a task)
DELEGATION_SECTIONS = ((texts.DELEGATION_STATEMENT_ORDER, texts.DELEGATION_STATEMENT),)


def create_log(runtime: Any, child_id: str, parent_id: str, depth: int, seed: list[Event], descriptor: dict) -> Session:
    """A new child's log: the plan's seed events, then its descriptor, written with the header at once
    (a child killed during its start leaves a log that says what it was, never one that looks corrupt)."""
    now = time.time()  # one moment (and one float) for the header and the descriptor record
    header = SessionHeader(child_id, now, parent_session=parent_id, origin="subagent", delegation_depth=depth,
                           seed_length=len(seed))
    return runtime.store.create(header, seed + [Event(len(seed), DESCRIPTOR, now, None, None, descriptor)])


def build(runtime: Any, session: Session, plan: ChildPlan, *, label: str | None, depth: int, parent: Agent,
          mode: str, persona: str | None, tool_filter: dict | None, extra_tools: Iterable[Any], model: Any,
          max_tokens: int | None, limits: Any) -> Agent:
    """The child's registered agent, from its log and its provider's plan. A provider that refuses it
    (``wrap_tool`` raising) leaves no half-made agent registered."""
    events = session.events
    child = runtime.create_agent(
        session, label=label, depth=depth, parent=parent, mode=mode, persona=persona,
        tool_filter=plan.tool_filter(tool_filter), extra_tools=() if plan.own_tools else extra_tools,
        sections=DELEGATION_SECTIONS, model=plan.model or model, max_tokens=max_tokens, limits=limits,
        conversation=conversation_of(events), turns=last_turn_number(events), steps=plan.steps)
    if plan.wrap_tool is not None:
        try:  # a copy: tool views are shared per shape
            child.tools = {name: plan.wrap_tool(tool) for name, tool in child.tools.items()}
        except BaseException:
            runtime.unregister(child)
            raise
    return child
