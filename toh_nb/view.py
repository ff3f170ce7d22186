"""What a hub shows without acting: :class:`HubView` (plain reads of the engine's state on its loop
thread) and :class:`Activity` (what runs now, readable from any thread).

Both faces (``tn.AsyncHub``, ``tn.Hub``) and the notebook's live tree read the engine through these, so
a row of ``hub.agents()`` is built in one place whichever face asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .timeline import activation_rows
from .conversation import CONVERSATION_COLUMNS, conversation_rows
from .core.checks import agent_id_of, check_flag, check_text, check_timeout
from .core.content import text_of
from .core.errors import UsageError
from .core.events import HubEvent
from .core.runtime import Runtime
from .core.session import ASSISTANT_MESSAGE
from .costs import CostBook
from .jobs import JobRegistry
from .snapshots import (AGENT_COLUMNS, TRANSCRIPT_COLUMNS, agent_rows, agent_rows_of, chosen_columns, job_rows,
                        select_columns, transcript_rows)
from .store.base import SessionStore
from .subagents import SubagentService

__all__ = ["Activity", "HubView"]


@dataclass(frozen=True, slots=True)
class Activity:
    """What runs in a hub right now (:attr:`AsyncHub.activity`): informational counts, read without
    waiting for the hub's loop (copies of the engine's tables), e.g. by a progress line's thread.

    ``activity.line()`` says it in one line (``2 agents running · 1 job active · 340 tokens``). Raises
    nothing: a frozen record the hub builds.

    Args:
        running_agents: the ids of the agents whose turn runs, the root included.
        active_jobs: the ids of the background jobs running or stopping.
        job_children: the ids of the child agents of the hub's background jobs.
        tokens: input plus output tokens of the agents that are live now.
    """

    running_agents: tuple[str, ...]  # agents whose turn runs, the root included
    active_jobs: tuple[str, ...]  # background jobs running or stopping
    job_children: frozenset[str]  # the child agent of every background job
    tokens: int  # input + output tokens of the live agents

    def line(self) -> str:
        """``2 agents running · 1 job active · 340 tokens``."""
        running = len(self.running_agents)
        parts = [f"{running} agent{'s' if running != 1 else ''} running"]
        jobs = len(self.active_jobs)
        if jobs:
            parts.append(f"{jobs} job{'s' if jobs != 1 else ''} active")
        parts.append(f"{self.tokens} tokens")
        return " \u00b7 ".join(parts)


class HubView:
    """Plain, synchronous reads of a hub's state (``hub.view``), for code that runs on the hub's own
    loop thread without awaiting: event listeners, loop callbacks, the notebook's live tree. Scripts use
    the hub's coroutines (``await hub.agents()``), which return the same rows.

    Every method reads; none acts on an agent (only :meth:`answer_permission` acts, on a person's
    behalf), and only :meth:`settled`, the one coroutine, waits (what ``await kid.wait()`` awaits).
    Made by the hub (``hub.view``), not by you.

    Args:
        runtime: the hub's engine (its agents and event bus).
        jobs: the hub's job registry.
        service: the hub's subagent service (children's statuses).
        store: the hub's session store (logs of agents no longer live).
        costs: the hub's price book (the cost columns of :meth:`agents`).
        root_id: the root agent's id.

    Raises:
        UsageError: an unknown agent, a ``columns`` choice that names no column, a ``raw``/``allowed`` that is
            not a bool, or an answer to a permission request that is not pending.
        StoreError: a stored log that exists but cannot be read.
    """

    __slots__ = ("_runtime", "_jobs", "_service", "_store", "_costs", "_root_id")

    def __init__(self, runtime: Runtime, jobs: JobRegistry, service: SubagentService, store: SessionStore,
                 costs: CostBook, root_id: str) -> None:
        self._runtime, self._jobs, self._service = runtime, jobs, service
        self._store, self._costs, self._root_id = store, costs, root_id

    def agents(self, columns: "str | list[str] | None" = None) -> list[dict]:
        """The rows of :meth:`AsyncHub.agents`."""
        chosen_columns("hub.agents()", AGENT_COLUMNS, columns)  # a wrong choice fails before any work
        rows = self._costs.fill(agent_rows(self._runtime, self._root_id), self._runtime)
        return select_columns("hub.agents()", rows, AGENT_COLUMNS, columns)

    def agent_rows(self, agent_ids: Iterable[str]) -> list[dict]:
        """The rows of these agents alone, as :meth:`agents` has them (with ``cost``) but without the
        columns that depend on their subtree (``subtree_tokens`` is the agent's own, ``subtree_cost``
        its cost, ``tokens_left`` None): for a live view that keeps the tree up to date from the event
        stream and re-reads only the agents an event touched."""
        rows = agent_rows_of(self._runtime, list(agent_ids))
        for row in rows:
            self._costs.note(row["id"], self._runtime)
            row["cost"] = row["subtree_cost"] = self._costs.cost(row["id"], row["input_tokens"] or 0,
                                                                 row["output_tokens"] or 0)
        return rows

    def jobs(self, child_ids: bool = False) -> list[dict]:
        """The rows of :meth:`AsyncHub.jobs`; ``child_ids=True`` adds each job's ``child_id``."""
        return job_rows(self._jobs, child_ids=child_ids)

    def transcript(self, agent_id: str, raw: bool = False, columns: "str | list[str] | None" = None) -> list[dict]:
        """The rows of :meth:`AsyncHub.transcript` (an unknown agent is a UsageError)."""
        check_flag(raw, "raw")
        table, names = ("hub.transcript(raw=True)", TRANSCRIPT_COLUMNS) if raw else ("hub.transcript()",
                                                                                   CONVERSATION_COLUMNS)
        chosen_columns(table, names, columns)
        session = self._session_of(agent_id)
        rows = transcript_rows(session) if raw else conversation_rows(session)
        return select_columns(table, rows, names, columns)

    def activations(self, agent_id: str) -> list[dict]:
        """The entries of :meth:`AsyncHub.activations`."""
        return activation_rows(self._session_of(agent_id), live=agent_id in self._runtime.agents)

    def _session_of(self, agent_id: str) -> Any:
        """The agent's log: in memory while it lives, else read from the store."""
        agent = self._runtime.agents.get(agent_id)
        try:  # a log that exists but cannot be read raises the store's StoreError, naming what is wrong
            return agent.session if agent is not None else self._store.open(agent_id)
        except KeyError:
            raise UsageError(f'unknown agent "{agent_id}"') from None

    def status_of(self, child_id: str) -> str:
        """A continuable child's listing status (``running | idle | ready``)."""
        return self._service.status_of(child_id)

    async def settled(self, child_id: Any, timeout: float | None = None) -> str | None:
        """Wait until a continuable child is settled (at most ``timeout`` s; ``None``: no bound), then
        :meth:`closing_text` (see :meth:`AsyncChild.wait`). A timeout is no error: the text so far."""
        child_id = agent_id_of(child_id)
        await self._service.wait_settled(child_id, check_timeout(timeout))
        return self.closing_text(child_id)

    def closing_text(self, child_id: str) -> str | None:
        """The closing text of a child's last activation (None if it has none): kept by the service
        when it settled in this process, else read from the child's log."""
        closing = self._service.closing
        if child_id in closing:  # the last activation settled in this process
            return closing[child_id]
        agent = self._runtime.agents.get(child_id)
        try:
            session = agent.session if agent is not None else self._store.open(child_id)
        except Exception:
            return None
        for event in reversed(session.events):
            if event.kind == ASSISTANT_MESSAGE:
                content = event.message.content
                if content:
                    return text_of(content) or None
        return None

    def has_agent(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is an agent of this hub, live or stored."""
        return agent_id in self._runtime.agents or self._store.exists(agent_id)

    def pending_permissions(self, agent_ids: Iterable[str] | None = None) -> list[dict]:
        """The permission requests waiting for an answer (see :meth:`AsyncHub.pending_permissions`)."""
        return self._runtime.asks.pending(agent_ids)

    def answer_permission(self, ask_id: str, allowed: bool) -> str:
        """Answer a pending permission request (see :meth:`AsyncHub.answer_permission`). The one act
        of the view, and safe from any thread: a person's answer arrives on the kernel's thread (the
        tree's buttons) and must not wait for a loop that may be busy."""
        check_text(ask_id, "ask_id")
        return self._runtime.asks.answer(ask_id, check_flag(allowed, "allowed"))

    def subscribe(self, listener: Callable[[HubEvent], Any], kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``listener(event)`` for every event of the hub's stream, on the hub's loop thread (it must
        be quick and never raise into the engine: a failure is reported as a ``ListenerFailed`` event);
        returns the function that unsubscribes it. Call both on the loop thread. ``kinds``: only events of
        those kinds (``["turn/start", "turn/end"]``); activity events nobody wants are not even built."""
        return self._runtime.bus.subscribe(listener, kinds)

    def activity(self) -> Activity:
        """What runs right now (see :class:`Activity`); safe from any thread (informational)."""
        agents = list(self._runtime.agents.values())
        jobs = list(self._jobs.jobs.values())
        return Activity(running_agents=tuple(a.id for a in agents if a.status == "running"),
                        active_jobs=tuple(j.id for j in jobs if j.status in ("running", "stopping")),
                        job_children=frozenset(j.child_id for j in jobs if j.child_id),
                        tokens=sum(a.usage.input_tokens + a.usage.output_tokens for a in agents))
