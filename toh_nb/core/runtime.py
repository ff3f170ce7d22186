"""The runtime: the shared context every agent and service of one hub lives in.

It holds the id source, the session store, the default model, the global tool registry, the live agent
registry (``agents``: id → the exact live Agent object, which is what authorization checks compare
against) and the hub's event stream (``bus``, ``toh_nb.core.events``). Services (jobs, subagents) attach
themselves as observers and receive the agents' inbox and status callbacks synchronously (they keep the
engine's own state); everything else (widget, tables, progress line, user streams) subscribes to the bus.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Iterable

from . import gc_policy
from .model import ToolSpec
from .agent import DEFAULT_MAX_PARALLEL_TOOL_CALLS, Agent, TurnOutcome
from .asks import PermissionDesk
from .budget import Limits
from .checks import check_count
from .dict_room import DictRoom
from .content import Message
from .errors import ClosedError
from .events import DEFAULT_HISTORY, EventBus, StatusChanged, ToolAbandoned
from .ids import IdSource
from .session import ASSISTANT_MESSAGE, Event, Session
from .threads import UserThreads, abandoned_text
from .tools import Tool, ToolRegistry

BASE_SYSTEM_PROMPT = "You are an AI agent running in toh_nb, a delegation runtime for notebooks."


#: tool views kept (one per shape: filter, extra tools, sections); children bringing tools of their own
#: make a shape each, so the cache is dropped when it grows past this
MAX_VIEWS = 256


class Runtime:
    """Shared state of one hub. Create with a model, a store and an id source."""

    def __init__(self, *, model: Any, store: Any, ids: IdSource,
                 max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
                 base_prompt: str = BASE_SYSTEM_PROMPT, limits: Limits | None = None,
                 history: int = DEFAULT_HISTORY, gc: bool | None = None) -> None:
        check_count(max_parallel_tool_calls, "max_parallel_tool_calls")
        self.model = model
        #: the session store, with every optional ability of ``toh_nb.store.base.StoreBase`` (``open_store``
        #: fits a store of your own with the defaults of those it lacks)
        self.store = store
        self.ids = ids
        self.max_parallel_tool_calls = max_parallel_tool_calls
        #: every agent's budgets unless its creator gives its own (``toh_nb.core.budget``)
        self.limits = limits if limits is not None else Limits()
        self.base_prompt = base_prompt
        self.tools = ToolRegistry()
        #: the hub's MCP servers (``toh_nb.mcp``): their tools are in ``tools`` once mounted; external
        #: children (ACP) are handed the servers themselves
        self.mcp_servers: tuple = ()
        self.agents: dict[str, Agent] = {}
        self._agents_room = DictRoom()  # gives the table back after a burst of children
        #: token budget of every agent created with one (ids outlive the live agent, for the tables)
        self.budgets: dict[str, int] = {}
        self.bus = EventBus(history)
        #: permission requests waiting for a person (toh_nb.core.asks), published on ``bus``
        self.asks = PermissionDesk(self.bus, self.agents)
        self.observers: list[Any] = []
        #: threads for this hub's sync tools and sync model functions (toh_nb.core.threads)
        self.user_threads = UserThreads(on_abandoned=functools.partial(announce_abandoned, self.bus, self.agents))
        self._closed = False
        # the GC policy, when asked for (``gc=True``, or the process opted in), holds while the hub is
        # open (released on close, or when a never-closed hub is garbage collected): toh_nb.core.gc_policy
        self._gc_hold = weakref.finalize(self, gc_policy.release, gc_policy.acquire(gc))
        self._views: dict[tuple, tuple[dict, list, str]] = {}
        self._views_version = -1

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._closed = bool(value)
        if self._closed:
            self._gc_hold()  # once: a finalizer runs at most one time
            self.user_threads.close()  # never waits for a stuck call's thread

    # -- durability ----------------------------------------------------------------------------

    async def recorded(self, session: Session, records: Iterable[Event] | None = None) -> None:
        """Return once the store has recorded every event queued so far for ``session`` (the JSONL
        store: written, and fsynced under ``fsync="always"``); ``StoreError`` when it could not.

        What every call that hands out an id or a result awaits before it returns (a turn's end, a
        continuable child's start, a job's start, a ``send``'s follow-up, a cold resume): after a
        crash that follows the return, what it acknowledged is in the log. One acknowledgement of the
        store's writer: the writer's round trip, nothing when the store records at once (memory).

        ``records``: what an acknowledging call (start, send, kill) wrote; when this raises the store
        never writes them, and the caller takes them back out of the session (``Session.retract``)."""
        pending = self.store.acknowledged(session) if records is None else self.store.acknowledged(session, records)
        if pending is not None:
            await pending

    # -- composition ---------------------------------------------------------------------------

    def compose(self, tool_filter: dict | None = None, extra_tools: Iterable[Tool] = (),
                sections: Iterable[tuple[float, str]] = ()) -> tuple[dict[str, Tool], list[ToolSpec], str]:
        """The tools an agent sees and its system prompt (without persona); cached per shape."""
        extra = tuple(extra_tools)
        extra_sections = tuple(sections)
        # extra tools by identity: two children's own tools may share names yet differ (two MCP sessions)
        key = (_filter_key(tool_filter), tuple((t.name, id(t)) for t in extra), extra_sections)
        if self._views_version != self.tools.version or len(self._views) >= MAX_VIEWS:
            self._views.clear()
            self._views_version = self.tools.version
        view = self._views.get(key)
        if view is None:
            passes = _passes(tool_filter)
            visible: dict[str, Tool] = {tool.name: tool for tool in self.tools if passes(tool.name)}
            for tool in extra:
                visible[tool.name] = tool
            specs = [ToolSpec(t.name, t.description, t.parameters) for t in visible.values()]
            parts = [(t.guidance_order, t.guidance) for t in visible.values() if t.guidance]
            parts.extend(extra_sections)
            parts.sort(key=lambda p: p[0])
            system = "\n\n".join([self.base_prompt] + [text for _, text in parts])
            view = (visible, specs, system)
            self._views[key] = view
        return view

    def retool(self, agent: Agent, removed: Iterable[str], added: Iterable[Tool]) -> None:
        """Change the tools ``agent`` sees from its next step on: the tools named ``removed`` go, those of
        ``added`` its ``tool_filter`` lets through come (through its provider's ``wrap_tool``). What an
        MCP server's new tool list does to the agents that use it."""
        gone = set(removed)
        tools = {name: tool for name, tool in agent.tools.items() if name not in gone}
        passes = _passes(agent.tool_filter)
        for tool in added:
            if passes(tool.name):
                tools[tool.name] = agent.wrap_tool(tool) if agent.wrap_tool is not None else tool
        agent.tools = tools  # a new dict: tool views are shared between agents of one shape
        agent.tool_specs = [ToolSpec(t.name, t.description, t.parameters) for t in tools.values()]

    def unknown_tool_names(self, tool_filter: dict | None, extra: Iterable[str] = ()) -> list[str]:
        if not tool_filter:
            return []
        known = set(self.tools.names()) | set(extra)
        names = list(tool_filter.get("allow") or ()) + list(tool_filter.get("deny") or ())
        return [n for n in names if n not in known]

    def create_agent(self, session: Session, *, label: str | None, depth: int, parent: Agent | None,
                     mode: str, persona: str | None = None, tool_filter: dict | None = None,
                     extra_tools: Iterable[Tool] = (), sections: Iterable[tuple[float, str]] = (),
                     model: Any = None, max_tokens: int | None = None,
                     conversation: list[Message] | None = None, turns: int = 0,
                     limits: Limits | None = None, steps: Any = None) -> Agent:
        """A registered agent. ``steps``: its step loop (``toh_nb.core.steps``), when its provider runs
        its turns' steps elsewhere; None: in-process."""
        if self.closed:
            raise ClosedError("this hub is closed")
        tools, specs, system = self.compose(tool_filter, extra_tools, sections)
        if persona:
            system = f"{system}\n\n{persona}"
        path = "root" if parent is None else f"{parent.path}/{label or session.id}"
        agent = Agent(id=session.id, runtime=self, session=session, model=model or self.model, system=system,
                      tools=tools, tool_specs=specs, label=label, depth=depth, parent=parent,
                      max_tokens=max_tokens, mode=mode, path=path,
                      max_parallel_tool_calls=self.max_parallel_tool_calls, conversation=conversation,
                      turns=turns, limits=limits or self.limits, spent_tokens=logged_tokens(session), steps=steps)
        agent.tool_filter = tool_filter
        self.agents[agent.id] = agent
        self._agents_room.grew(self.agents)
        if agent.limits.token_budget is not None:
            self.budgets[agent.id] = agent.limits.token_budget
        return agent

    def is_live(self, agent: Agent | None) -> bool:
        return agent is not None and self.agents.get(agent.id) is agent

    def unregister(self, agent: Agent) -> None:
        if self.agents.get(agent.id) is agent:
            del self.agents[agent.id]
            self._agents_room.shrank(self.agents)
            for observer in self.observers:
                observer.on_unregistered(agent)

    # -- agent callbacks (fanned out to services) ---------------------------------------------

    def on_status(self, agent: Agent) -> None:
        for observer in self.observers:
            observer.on_status(agent)
        if StatusChanged.kind in self.bus.wanted:
            self.bus.publish(StatusChanged(agent_id=agent.id, parent_id=agent.parent.id if agent.parent else None,
                                           depth=agent.depth, status=agent.status))

    def on_claimed(self, agent: Agent, message: Message) -> None:
        for observer in self.observers:
            observer.on_claimed(agent, message)

    def on_discarded(self, agent: Agent, messages: list[Message]) -> None:
        for observer in self.observers:
            observer.on_discarded(agent, messages)

    def on_turn_end(self, agent: Agent, outcome: TurnOutcome) -> None:
        for observer in self.observers:
            observer.on_turn_end(agent, outcome)


def announce_abandoned(bus: EventBus, agents: dict, owner: str | None, name: str, stuck: int) -> None:
    """A sync call's turn ended while its thread still runs (see toh_nb.core.threads). A function of
    the bus and the agents, not a method: the runtime's threads must not hold the runtime (a cycle would
    keep a dropped, never-closed hub alive until a full collection)."""
    agent = agents.get(owner) if owner is not None else None
    bus.publish(ToolAbandoned(agent_id=owner, parent_id=agent.parent.id if agent is not None and agent.parent else None,
                              depth=agent.depth if agent is not None else None, name=name,
                              detail=abandoned_text(name, stuck)))


def logged_tokens(session: Session) -> int:
    """Tokens an agent's own log records (a resumed agent's budget starts from what it already used)."""
    total = 0
    for event in session.own_events():
        if event.kind == ASSISTANT_MESSAGE and event.message.usage is not None:
            total += event.message.usage.input_tokens + event.message.usage.output_tokens
    return total


class RuntimeObserver:
    """No-op base for services that watch agents."""

    def on_status(self, agent: Agent) -> None: ...

    def on_claimed(self, agent: Agent, message: Message) -> None: ...

    def on_discarded(self, agent: Agent, messages: list[Message]) -> None: ...

    def on_turn_end(self, agent: Agent, outcome: TurnOutcome) -> None: ...

    def on_unregistered(self, agent: Agent) -> None: ...


def _passes(tool_filter: dict | None) -> Callable[[str], bool]:
    """Whether a tool name gets through ``tool_filter`` (``allow`` list, if any, then ``deny``): one rule for
    the tool views and for tools that change later (an MCP server's new list)."""
    allow = tool_filter.get("allow") if tool_filter else None
    deny = set(tool_filter.get("deny") or ()) if tool_filter else set()
    return lambda name: (allow is None or name in allow) and name not in deny


def _filter_key(tool_filter: dict | None) -> tuple | None:
    if not tool_filter:
        return None
    allow = tool_filter.get("allow")
    deny = tool_filter.get("deny")
    return (tuple(allow) if allow is not None else None, tuple(deny) if deny is not None else None)
