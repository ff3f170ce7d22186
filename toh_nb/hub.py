"""AsyncHub: the async face that scripts use and the notebook facade (``toh_nb.Hub``) wraps.

A hub composes one runtime: the session store, the job registry, the subagent service with the
``spawn`` and ``fork`` providers, the delegation tool instances, the job and control tools and the
user's own tools, plus a *root* agent. The notebook user acts as that root agent: ``spawn``, ``start``,
``send``, ``interrupt`` and ``call_tool`` go through the same service, tools, authorization and texts as
a model calling the tools would.

Work the user starts never wakes the root agent's model: its notices wait for the root's next turn.
Work the root's model starts (during ``run``) wakes it as the reference harness does.

The face is closed: the runtime, the job registry and the store are internals (``runtime``,
``job_registry`` and ``store`` still answer, with a DeprecationWarning, for one release); the notebook
layer reads the public methods, :class:`HubView` and the event stream only.
"""

from __future__ import annotations

import asyncio
import functools
import html
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterable, Literal, Mapping, Sequence, overload

from .core.budget import DEFAULT_MAX_STEPS, Limits
from .core.checks import agent_id_of, check_count, check_flag, check_text, check_timeout
from .core.events import DEFAULT_HISTORY, HubClosed, HubEvent, SubtreeFilter
from .core.content import USER_SOURCE, text_of, user_message
from .core.errors import ClosedError, ToolError, UsageError
from .core.ids import IdSource
from .core.model import Model
from .core.runtime import Runtime
from .core.session import ASSISTANT_MESSAGE, SessionHeader, conversation_of, last_turn_number
from .core.session_repair import repair_tail
from .core.tools import FunctionTool, Tool, ToolContext, ToolResult, dispatch
from .config import HubConfig, check_root_id, check_tool_lists  # noqa: F401 - check_tool_lists: re-exported
from .costs import CostBook
from .jobs import JobRegistry, make_job_tools
from .jobs import texts as job_texts
from .jobs.registry import Job
from .mcp.config import MCPServer
from .mcp import texts as mcp_texts
from .mcp.mounts import MCPMounts, connection_of
from .results import AgentListing, RunResult, item_html, job_output, job_result, run_result
from .activations import activation_rows
from .conversation import CONVERSATION_COLUMNS, conversation_rows
from .snapshots import (AGENT_COLUMNS, TRANSCRIPT_COLUMNS, agent_rows, agent_rows_of, chosen_columns, event_rows,
                        job_rows, select_columns, transcript_rows)
from .store import reserved_ids
from .store.base import SessionStore
from .subagents import ForkProvider, SpawnProvider, SubagentService
from .subagents.control import make_control_tools
from .providers.base import is_provider_shaped
from .subagents.report import make_report_tool
from .subagents.texts import not_a_provider
from .subagents.arguments import StartRequest, ToolFilter, validate_max_depth, validate_tool_filter
from .subagents.tool import SubagentTool, background_starter, make_subagent_tool
from .tracing import attach as attach_tracing
from .tracing import check_tracing

ROOT_ORIGIN = "root"


def check_start_options(prompt: Any, label: Any, persona: Any, tool_filter: Any, model: Any, max_tokens: Any,
                        provider: Any) -> None:
    """The one check of a ``spawn``/``start`` call's arguments (both hubs use it; nothing is started
    when it raises a UsageError naming the argument)."""
    check_text(prompt, "prompt")
    if label is not None:
        check_text(label, "label")
    if persona is not None and not isinstance(persona, str):
        raise UsageError(f"persona must be a string or None, got {type(persona).__name__}")
    validate_tool_filter(tool_filter)
    if model is not None and not hasattr(model, "request"):
        raise UsageError(f"model must have an async request(ModelRequest) method, got {type(model).__name__}")
    check_count(max_tokens, "max_tokens", none="")
    check_text(provider, "provider")


def stored_root_id(store: Any, root_id: str | None) -> str | None:
    """The root session a hub on ``store`` continues (``root_id``, else the newest stored root), or None
    for a new one. The sync Hub calls it in the caller's thread to read that log off the shared loop."""
    check_root_id(root_id)
    if root_id is not None:
        return root_id if store.exists(root_id) else None
    roots = [h for h in store.headers() if h.origin == ROOT_ORIGIN]
    return max(roots, key=lambda h: h.created).id if roots else None


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"AsyncHub.{name} is internal and will be removed in the next release; use {instead}",
                  DeprecationWarning, stacklevel=3)


def _default_label(prompt: str) -> str:
    words = prompt.split()
    label = " ".join(words[:5])
    return label if len(words) <= 5 else label + " \u2026"


class JobFacts:
    """The read-only face AsyncJob and the sync Job share: id, label, live status, displays.

    ``_facts`` is whatever holds those attributes: the engine's job record for an AsyncJob, the AsyncJob
    for the sync Job (plain attribute reads, safe from the caller's thread)."""

    _facts: Any

    @property
    def id(self) -> str:
        return self._facts.id

    @property
    def label(self) -> str:
        return self._facts.label

    @property
    def status(self) -> str:
        """``running | stopping | completed | killed | failed``."""
        return self._facts.status

    @property
    def detail(self) -> str | None:
        return self._facts.detail

    @property
    def child_id(self) -> str | None:
        """The id of the child agent doing the work."""
        return self._facts.child_id

    def __repr__(self) -> str:
        detail = f", {self.detail}" if self.detail else ""
        return f"Job({self.id} [{self.status}{detail}] \u2014 {self.label})"

    def _repr_html_(self) -> str:
        extra = f" <small>{html.escape(self.detail)}</small>" if self.detail else ""
        return item_html("toh-job", self.id, self.status, self.label, extra)


class ChildFacts:
    """The read-only face AsyncChild and the sync Child share: id, label, live status, displays.

    ``reused``: ``start(label=...)`` found a child of the root with that label and returned it instead
    of starting a second one (the prompt was not sent)."""

    id: str
    label: str
    reused: bool = False

    @property
    def status(self) -> str:
        """``running | idle | ready`` (``ready``: settled, resumes on the next ``send``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Child({self.id} [{self.status}] \u2014 {self.label})"

    def _repr_html_(self) -> str:
        return item_html("toh-child", self.id, self.status, self.label)


class AsyncJob(JobFacts):
    """A background one-shot child, as a job (``subagent-N``): what ``await hub.spawn(..., background=True)`` returns.

    ``await job.output(wait=True)`` reads its result, ``job.kill()`` stops it; ``job.id``, ``job.status`` and
    ``job.child_id`` say where it stands. Made by the hub (``hub.job(id)`` finds one again), not by you.

    Args:
        hub: the hub that owns it.
        job: the job registry's record.

    Raises:
        UsageError: ``output``/``result`` given a ``timeout`` without ``wait=True``, or ``kill`` a reason that
            is not a string.
        JobError: the job is not one of this hub's root's jobs.
    """

    def __init__(self, hub: "AsyncHub", job: Job) -> None:
        self._hub = hub
        self._facts = job
        # the job's own registry, acting as the hub's root (the owner fence): no registry on the hub's face
        self._jobs, self._root = job.registry, hub.root_agent

    async def output(self, wait: bool = False, timeout: float | None = None) -> str:
        """The job's result text (``""`` while it has none); ``wait=True`` waits up to ``timeout`` s
        (a ``timeout`` without ``wait=True`` is a UsageError: it would silently read ``""``).

        A job that did not complete (``failed``: e.g. its child hit ``max_tokens``; ``killed``) returns
        what a foreground delegation returns for the same run — ``Error: <headline>``, ``Diagnostic: …``
        and ``Partial output before the run ended:`` with the child's text — and a last line naming
        ``hub.transcript(child_id)``, where its whole run is. (The model's ``job_output`` tool keeps the
        reference's rule: a failed job has no output there.) :meth:`result` gives the same as a
        :class:`~toh_nb.results.RunResult`."""
        await self._settled("output", wait, timeout)
        return job_output(self._facts, self._jobs.read(self._facts.id, self._root))

    async def result(self, wait: bool = False, timeout: float | None = None) -> RunResult | None:
        """The settled job's :class:`~toh_nb.results.RunResult` (``.stop_reason``, ``.diagnostic``,
        ``.text``, ``.usage``, ``.agent_id``: the child's id), None while it runs; ``wait`` and
        ``timeout`` as for :meth:`output`."""
        await self._settled("result", wait, timeout)
        self._jobs.get(self._facts.id, self._root)  # the owner fence, as for output()
        return job_result(self._facts)

    async def _settled(self, method: str, wait: bool, timeout: float | None) -> None:
        timeout = check_timeout(timeout)
        if timeout is not None and not wait:
            raise UsageError(f"timeout only applies when waiting: job.{method}(wait=True, timeout={timeout!r}) "
                             f"waits up to {timeout!r} s; job.{method}() reads the result now")
        if wait and not self._facts.done:
            try:
                await asyncio.wait_for(asyncio.shield(self._facts.task), timeout)
            except asyncio.TimeoutError:
                pass

    async def kill(self, reason: str | None = None) -> str:
        """Ask the job to stop: ``"requested"``, or ``"already-finished"`` for a settled job."""
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        return self._jobs.kill(self._facts.id, self._root, reason)


class AsyncChild(ChildFacts):
    """A continuable child: send it turns, interrupt it, wait for it to settle (``await hub.start(...)``).

    Each ``await kid.send(message)`` queues a turn (FIFO; a ``ready`` child is resumed from its log);
    ``kid.interrupt()`` aborts the turn in progress; ``kid.kill()`` stops it for good; ``await kid.wait()``
    returns the closing text of its last activation. Made by the hub (``hub.child(id)`` finds one again).

    Args:
        hub: the hub that owns it.
        child_id: the child's agent id.
        label: the child's label.
        reused: ``start(label=...)`` found a child of the root with that label and returned it
            instead of starting a second one (the prompt was not sent).

    Raises:
        UsageError: an empty message or a bad timeout.
        ClosedError: the hub is closed.
        SubagentError: the child cannot take the message (``NOT_RESUMABLE``, with the reason).
    """

    def __init__(self, hub: "AsyncHub", child_id: str, label: str, reused: bool = False) -> None:
        self._hub = hub
        self.id = child_id
        self.label = label
        self.reused = reused

    @property
    def status(self) -> str:
        """``running | idle | ready`` (``ready``: settled, resumes on the next ``send``)."""
        return self._hub.view.status_of(self.id)

    async def send(self, message: str) -> str:
        """Queue ``message`` as the child's next turn (see :meth:`AsyncHub.send`); the message id."""
        return await self._hub.send(self.id, message)

    async def interrupt(self) -> None:
        """Stop only the current turn (see :meth:`AsyncHub.interrupt`)."""
        await self._hub.interrupt(self.id)

    async def kill(self) -> bool:
        """Stop this child for good (see :meth:`AsyncHub.kill`)."""
        return await self._hub.kill(self.id)

    async def wait(self, timeout: float | None = None) -> str | None:
        """Wait until the child is settled; the closing text of its last activation (None if none)."""
        return await self._hub.view.settled(self.id, timeout)

    async def transcript(self, raw: bool = False, columns: "str | list[str] | None" = None) -> list[dict]:
        """This child's conversation, or its raw event log with ``raw=True`` (see :meth:`AsyncHub.transcript`)."""
        return await self._hub.transcript(self.id, raw=raw, columns=columns)


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

    async def settled(self, child_id: "str | AsyncChild", timeout: float | None = None) -> str | None:
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


class AsyncHub:
    """The async API. ``async with AsyncHub() as hub: res = await hub.spawn("...")``.

    One rule for which members are coroutines (as httpx's ``AsyncClient`` to its ``Client``): every
    method that reads, acts on or waits for the engine is a coroutine — ``await hub.list_agents()``,
    ``await hub.agents()``, ``await hub.kill(kid)``, ``await kid.interrupt()`` — with the same name and
    arguments as on the sync :class:`~toh_nb.Hub`; ``astream`` is an async iterator; properties
    (``root``, ``closed``, ``model``, ``config``, ``activity``, ``view``) are plain. Code that runs on the
    hub's loop thread and cannot await (an event listener, a widget refreshing) reads through
    :attr:`view`. The keyword arguments are the fields of :class:`~toh_nb.config.HubConfig`.

    Args:
        model: the root's model, and its children's unless they are given one; default the offline
            ``tn.DemoModel``.
        store: where agents' logs go: ``None`` keeps everything in memory; a directory path writes one
            JSONL log per agent there, so continuable children survive a restart (``ready``, resumed by
            ``send``); or a ``SessionStore`` object.
        max_depth: the deepest child a delegation may start (0 forbids delegation; ``"provider-managed"``
            sends no cap).
        max_parallel_tool_calls: tool calls of one model response run at once (a rolling pool).
        ids: ``"uuid"`` (default) or ``"sequential"`` (``agent-1``, ``agent-2``, …: reproducible output).
        background_mode: what ``run_in_background`` starts by default: ``"one-shot"`` (a job) or
            ``"continuable"`` (a child).
        tools: your tools for every agent: plain typed functions, ``tn.Tool`` objects, or
            ``tn.SubagentTool`` objects mounted beside the delegation tools, or ``tn.MCPServer`` objects
            whose tools every agent sees (extra ``mcp``).
        delegation_tools: the delegation tools every agent is offered (``tn.SubagentTool`` objects or dicts
            of their settings); default one ``subagent`` tool.
        root_id: the root agent's id (default ``root``), e.g. to reopen a store written under another root.
        fsync: the JSONL store's durability: ``"batch"`` (default), ``"always"`` or ``"never"``; see the
            Guarantees page.
        max_jobs_per_owner: background jobs one agent may have running at once.
        report_delivery: ``"next-step"`` (default: a child's report wakes its parent) or ``"quiet"``
            (reports wait for the parent's next turn).
        max_tokens: the completion limit of the root's model calls (children inherit it).
        max_steps: model calls per turn (default 50; ``None``: no limit) -> stop ``max-steps``.
        token_budget: input plus output tokens of the root and all its descendants -> ``token-budget``.
        turn_timeout: wall-clock seconds per turn -> ``max-time``.
        providers: more ways of making children, by name: ``{"coder": tn.AcpAgent([...])}``.
        history: lifecycle events kept for ``hub.events()`` and ``stream(history=True)``.
        prices: input and output price per million tokens, keyed by model name
            (``{"gpt-4o-mini": (0.15, 0.60)}``): ``hub.agents()`` and the tree then show costs.
        tracing: ``True`` emits the agent tree as OpenTelemetry spans through the global ``TracerProvider``;
            a ``TracerProvider`` or ``tn.Tracing(provider, capture_content=...)`` picks the provider (extra
            ``otel``; see the Traces guide). ``None``/``False`` (default) imports nothing of OpenTelemetry.
        gc: ``True`` applies the garbage-collector policy the benchmarks use while the hub is open (fewer
            full collections with many idle children); ``False`` never; ``None`` (default) leaves the
            process's collector alone unless ``toh_nb.core.gc_policy.set_enabled(True)`` was called.

    Raises:
        UsageError: an argument of the wrong type or range (naming it, ``root_id`` outside the id grammar
            included), or a model without an async ``request`` method.
        ProviderError: a delegation tool names a provider that is not registered.
        StoreError: ``store`` is held by another hub (``… is in use by another hub (pid N)``) or cannot be
            created.
    """

    def __init__(self, model: Model | None = None, *, store: str | os.PathLike[str] | SessionStore | None = None,
                 max_depth: int | str = 3,
                 max_parallel_tool_calls: int = 10, ids: str = "uuid", background_mode: str = "one-shot",
                 tools: Sequence[Any] = (), delegation_tools: Sequence[Any] | None = None,
                 root_id: str | None = None, fsync: str | None = None,
                 max_jobs_per_owner: int = 10, report_delivery: str = "next-step",
                 max_tokens: int | None = None, max_steps: int | None = DEFAULT_MAX_STEPS,
                 token_budget: int | None = None, turn_timeout: float | None = None,
                 providers: Mapping[str, Any] | None = None, history: int = DEFAULT_HISTORY,
                 prices: Mapping[str, tuple[float, float]] | None = None, tracing: Any = None,
                 gc: bool | None = None) -> None:
        self._open(HubConfig.of(locals()))

    @classmethod
    def from_config(cls, config: HubConfig) -> "AsyncHub":
        """A hub built from a :class:`~toh_nb.config.HubConfig` (what ``tn.Hub`` does)."""
        if not isinstance(config, HubConfig):
            raise UsageError(f"from_config needs a toh_nb.HubConfig, got {type(config).__name__}")
        hub = cls.__new__(cls)
        cls._open(hub, config)
        return hub

    def _open(self, config: HubConfig) -> None:
        """Build the runtime, services and root agent from a checked config."""
        self._config = config
        model = config.model
        if model is None:
            from .models.demo import DemoModel

            model = DemoModel()
        max_depth = config.max_depth
        self._max_depth = validate_max_depth(max_depth)  # None: "provider-managed", no cap
        root_limits = config.limits
        self._costs = CostBook(config.prices)
        tracing_options = check_tracing(config.tracing)
        self._store = config.open_store()
        try:
            self._ids = IdSource(config.ids)
            self._ids.skip_past(reserved_ids(self._store))
            runtime = Runtime(model=model, store=self._store, ids=self._ids, history=config.history,
                              max_parallel_tool_calls=config.max_parallel_tool_calls,
                              limits=Limits(root_limits.max_steps, None, root_limits.turn_timeout), gc=config.gc)
            self._runtime = runtime
            self._jobs = JobRegistry(runtime, max_per_owner=config.max_jobs_per_owner)
            self._service = SubagentService(runtime, report_delivery=config.report_delivery)
            self._service.register_provider(SpawnProvider())
            self._service.register_provider(ForkProvider())
            self._register_providers(config.providers)
            self._service.report_tool = make_report_tool(self._service)
            tools = config.tools
            configs = config.delegation_tools if config.delegation_tools is not None else [SubagentTool()]
            mounted = [item for item in tools if isinstance(item, SubagentTool)]
            self._mcp = MCPMounts(on_change=self._mcp_changed,
                                  on_problem=functools.partial(runtime.bus.problem, "mcp"))
            for item in [*configs, *mounted]:
                if isinstance(item, SubagentTool):
                    servers = self._child_servers(item.tools, f'SubagentTool "{item.name}" tools')
                    tool = item.build(self._service, self._jobs, background_mode=config.background_mode,
                                      max_depth=max_depth,
                                      child_tools=functools.partial(self._child_tools, servers) if servers else None)
                elif isinstance(item, dict):
                    tool = make_subagent_tool(self._service, self._jobs, **item)
                else:
                    raise UsageError("delegation_tools takes a list of tn.SubagentTool (or dicts of its settings), "
                                     f"got {type(item).__name__}")
                runtime.tools.add(tool)
            for tool in make_job_tools(self._jobs):
                runtime.tools.add(tool)
            for tool in make_control_tools(self._service):
                runtime.tools.add(tool)
            for item in tools:
                if not isinstance(item, (SubagentTool, MCPServer)):
                    runtime.tools.add(item if isinstance(item, Tool) else FunctionTool(item))
            # MCP servers start when the hub first runs work (``_mounted``): a hub that never runs starts none
            self._mcp_lock: asyncio.Lock | None = None
            runtime.mcp_servers = tuple(item for item in tools if isinstance(item, MCPServer))
            self._mcp_ready = not runtime.mcp_servers
            self._root = self._make_root(config.root_id, root_limits, config.max_tokens)
            self._view = HubView(runtime, self._jobs, self._service, self._store, self._costs, self._root.id)
            if self._costs.prices:  # a finished one-shot agent leaves the runtime: note its model while live
                runtime.bus.subscribe(lambda event: self._costs.note(event.agent_id, runtime))
            if tracing_options is not None:  # OpenTelemetry is imported only here (toh_nb.tracing)
                attach_tracing(runtime, tracing_options, self._costs)
        except BaseException:
            self._store.close()  # a refused configuration must not keep the store's lock,
            runtime = self.__dict__.get("_runtime")
            if runtime is not None:  # nor the GC policy and threads of a runtime nobody will close
                runtime.closed = True
            raise
        self._closed = False
        self._child_models: list[Any] = []
        self._labels: dict[str, str] | None = None  # the root's continuable children by label (_child_labelled)
        self._labels_stamp: tuple[int, int] = (0, 0)
        self._tool_calls = 0

    def _register_providers(self, providers: Mapping[str, Any] | None) -> None:
        """``providers={"name": provider}``: each registered under its key (``spawn``/``fork`` are built in)."""
        if providers is None:
            return
        if not isinstance(providers, Mapping):
            raise UsageError(f"providers must be a dict of name -> provider, got {type(providers).__name__}")
        for name, provider in providers.items():
            if not isinstance(name, str) or not name:
                raise UsageError(f"provider names must be non-empty strings, got {name!r}")
            if not is_provider_shaped(provider):
                raise UsageError(not_a_provider(f'providers["{name}"]', provider))
            own = getattr(provider, "name", None)
            if own is None:
                try:
                    provider.name = name
                except AttributeError:  # a provider class with slots and no name of its own
                    raise UsageError(f'providers["{name}"] has no name attribute and cannot be given '
                                     f'one; give it name="{name}"') from None
            elif own != name:
                raise UsageError(f'provider registered as "{name}" is named "{own}"; use one name')
            self._service.register_provider(provider)

    def _make_root(self, root_id: str | None, limits: Limits, max_tokens: int | None) -> Any:
        store = self._store
        stored = stored_root_id(store, root_id)
        existing = store.open(stored) if stored is not None else None
        if existing is not None:
            repair_tail(existing)
            session = existing
        else:
            new_id = root_id or ("root" if self._ids.mode == "sequential" else self._ids.agent())
            session = store.create(SessionHeader(new_id, time.time(), origin=ROOT_ORIGIN))
        return self._runtime.create_agent(session, label=None, depth=0, parent=None, mode="root",
                                         conversation=conversation_of(session.events),
                                         turns=last_turn_number(session.events), limits=limits,
                                         max_tokens=max_tokens)

    # -- properties ----------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root agent's id (``root`` unless ``root_id=`` says otherwise)."""
        return self._root.id

    @property
    def root_agent(self) -> Any:
        """The root's engine Agent object: what acts as the root (the ACP server face, a job handle's
        owner fence); scripts use :attr:`root` and the hub's methods."""
        return self._root

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: a closed hub refuses new work."""
        return self._closed

    @property
    def model(self) -> Any:
        """The root's model (the one children use unless given their own)."""
        return self._runtime.model

    @property
    def config(self) -> HubConfig:
        """The checked configuration this hub was built from."""
        return self._config

    @property
    def view(self) -> HubView:
        """Plain reads of the hub's state for code on the hub's loop thread (:class:`HubView`)."""
        return self._view

    @property
    def activity(self) -> Activity:
        """What runs right now (:class:`Activity`); readable from any thread without waiting."""
        return self._view.activity()

    # -- internals under their old public names: one release with a DeprecationWarning --------------

    @property
    def runtime(self) -> Runtime:
        """Deprecated: the engine's runtime is internal (use the hub's methods, ``hub.view`` and the events)."""
        _deprecated("runtime", "the hub's methods, hub.view and hub.astream()")
        return self._runtime

    @property
    def job_registry(self) -> JobRegistry:
        """Deprecated: the engine's job registry is internal (use ``hub.jobs()``, ``hub.job(id)``, ``hub.kill_job``)."""
        _deprecated("job_registry", "hub.jobs(), hub.job(job_id) and hub.kill_job(job_id)")
        return self._jobs

    @property
    def store(self) -> SessionStore:
        """Deprecated: the session store is internal (``hub.config.store`` is what was passed)."""
        _deprecated("store", "hub.transcript(), hub.agents() and hub.config.store")
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this hub is closed; create a new Hub to continue (a store= directory keeps its children)")

    async def _mounted(self, timeout: float | None = None) -> None:
        """Start the hub's MCP servers and mount their tools (once, before the first work that needs
        tools). A server that cannot start raises its ToolError; the next call tries again. The wait
        counts toward the work it precedes: at most ``timeout`` (a run's) or the root's ``turn_timeout``."""
        if self._mcp_ready:
            return
        if self._mcp_lock is None:
            self._mcp_lock = asyncio.Lock()
        bounds = [b for b in (timeout, self._root.limits.turn_timeout) if b is not None]
        try:
            async with asyncio.timeout(min(bounds) if bounds else None), self._mcp_lock:
                if self._mcp_ready:
                    return
                tools = await self._mcp.tools(self._runtime.mcp_servers, self._runtime.tools.names(), shared=True)
                for tool in tools:
                    self._runtime.tools.add(tool)
                root = self._root  # made before the tools were known: it sees them from now on
                root.tools, root.tool_specs, root.system = self._runtime.compose(None)
                self._mcp_ready = True
        except TimeoutError:
            raise ToolError(mcp_texts.not_ready(min(bounds))) from None

    def _mcp_changed(self, old: list, new: list, shared: bool) -> None:
        """An MCP server's tool list changed (``notifications/tools/list_changed``): ``new`` replaces
        ``old`` — in the hub's tool layer for the hub's servers (so children started later see it), and
        in every live agent that sees them, from its next step."""
        runtime = self._runtime
        removed = [tool.name for tool in old]
        if shared:
            for name in removed:
                runtime.tools.remove(name)
            for tool in new:
                runtime.tools.add(tool)
        connections = {tool.connection for tool in old} | {tool.connection for tool in new}
        for agent in list(runtime.agents.values()):
            if agent.disposed:
                continue
            if shared or any(connection_of(tool) in connections for tool in agent.tools.values()):
                runtime.retool(agent, removed, new)

    @staticmethod
    def _child_servers(tools: Any, what: str) -> tuple:
        """``tools=`` of a child (spawn/start, a SubagentTool): MCP servers only, as a tuple."""
        if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple)):
            raise UsageError(f"{what} must be a list of tn.MCPServer, got {type(tools).__name__}")
        for item in tools:
            if not isinstance(item, MCPServer):
                raise UsageError(f"{what} takes tn.MCPServer objects (functions go to tn.Hub(tools=...)), "
                                 f"got {type(item).__name__}")
        return tuple(tools)

    def _own_servers(self, servers: tuple) -> list:
        """A child's own servers that are not also the hub's (those live until ``hub.close()``)."""
        return [server for server in servers if server not in self._runtime.mcp_servers]

    def _releasing(self, start: Any, held: list) -> Any:
        """A background job's ``run`` whose child's own MCP servers stop when the job ends."""
        def run(job: Any) -> Any:
            outcome = start(job)  # called at once: the child exists when the job id is returned

            async def then_release() -> Any:
                try:
                    return await outcome
                finally:
                    await asyncio.shield(self._release_servers(held))
            return then_release()
        return run

    async def _release_servers(self, held: list) -> None:
        """A finished one-shot child lets go of its own MCP servers' sessions (``held``): each stops
        unless another child holds it or a live agent still has one of its tools (a continuable child
        given the same server object); a later use starts it again."""
        in_use = {id(connection) for agent in list(self._runtime.agents.values()) if not agent.disposed
                  for connection in map(connection_of, agent.tools.values()) if connection is not None}
        await self._mcp.release(held, in_use)

    async def _child_tools(self, servers: tuple) -> tuple[tuple, tuple]:
        """The tools of a child's own MCP servers (started on first use, one session per server object;
        named beside the hub's tools), and the servers (what an external child is handed)."""
        return tuple(await self._mcp.tools(servers, self._runtime.tools.names())), servers

    # -- running work --------------------------------------------------------------------------

    async def run(self, prompt: str, *, timeout: float | None = None) -> RunResult:
        """Give the root agent's model a turn with ``prompt``; it may delegate itself."""
        self._check_open()
        check_text(prompt, "prompt")
        timeout = check_timeout(timeout)
        began = time.monotonic()
        await self._mounted(timeout)
        if timeout is not None:  # what starting the servers took counts toward it
            timeout = max(0.0, timeout - (time.monotonic() - began))
        future = self._root.submit(user_message(prompt, id=self._ids.message()))
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            self._root.cancel("user")
            outcome = await future
        except asyncio.CancelledError:
            self._root.cancel("user")
            raise
        return run_result(outcome, self._root.id)

    def _request(self, prompt: str, label: str | None, persona: str | None, tool_filter: Any,
                 model: Any, max_tokens: int | None, budgets: dict, provider: str) -> StartRequest:
        check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        # a provider that manages depth itself (an external harness) gets no cap from this hub
        capped = self._service.registered_provider(provider).capabilities.depth_limit
        options = {}
        if model is not None:
            options["model"] = model
            self._child_models.append(model)  # closed with the hub (their HTTP pools)
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        limits = self._runtime.limits.for_child(**budgets)
        if limits is not None:
            options["limits"] = limits
        return StartRequest(prompt=prompt, parent=self._root, label=label or _default_label(prompt),
                            agent_options=options or None, persona=persona,
                            tool_filter=validate_tool_filter(tool_filter),
                            max_depth=self._max_depth if capped else None, by_user=True)

    @overload
    async def spawn(self, prompt: str, *, label: str | None = None, background: Literal[False] = False,
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = ()) -> RunResult: ...

    @overload
    async def spawn(self, prompt: str, *, label: str | None = None, background: Literal[True],
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = ()) -> AsyncJob: ...

    async def spawn(self, prompt: str, *, label: str | None = None, background: bool = False,
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = ()) -> RunResult | AsyncJob:
        """A one-shot child: foreground → RunResult; ``background=True`` → a Job.

        ``max_steps``, ``token_budget`` (tokens of the child and its descendants) and ``turn_timeout``
        bound the child (``None``: the hub's defaults; see ``toh_nb.core.budget``). ``tools``: MCP servers
        (``tn.MCPServer``) whose tools this child sees besides the hub's (``tool_filter`` applies to them).
        """
        self._check_open()
        check_flag(background, "background")
        servers = self._child_servers(tools, "tools")
        await self._mounted()
        request = self._request(prompt, label, persona, tool_filter, model, max_tokens,
                                {"max_steps": max_steps, "token_budget": token_budget, "turn_timeout": turn_timeout},
                                provider)
        # after every check: a refused call starts no server. The child holds its own servers' sessions
        # (another spawn may share the server object) until it can no longer run, then they stop
        held = self._mcp.hold(self._own_servers(servers))
        try:
            if servers:
                request.tools, request.mcp_servers = await self._child_tools(servers)
            if background:
                starter = background_starter(self._service, provider, request)
                job = self._jobs.start("subagent", request.label, self._root,
                                       self._releasing(starter, held) if held else starter, by_user=True)
                held = []  # the job releases them when it ends
                await self._service.child_recorded(job.child_id)  # the job's child is in the log when its id is out
                return AsyncJob(self, job)
            run = await self._service.start(provider, request, waited=True)
            try:
                result = await run.result
            finally:
                await run.dispose()
        finally:
            if held:
                await asyncio.shield(self._release_servers(held))
        return run_result(result, run.id, request.label)

    async def start(self, prompt: str, *, label: str | None = None, persona: str | None = None,
                    tool_filter: ToolFilter | None = None, model: Model | None = None, max_tokens: int | None = None,
                    provider: str = "spawn", max_steps: int | None = None, token_budget: int | None = None,
                    turn_timeout: float | None = None, tools: Sequence[MCPServer] = ()) -> AsyncChild:
        """A continuable child; returns as soon as its first message is accepted (budgets as in
        :meth:`spawn`; they hold for every turn of the child; ``tools`` as in :meth:`spawn`, kept for the
        child's later turns in this process).

        Re-running a cell or a script is safe: an explicit ``label`` names one continuable child of the
        root. When the root already has one with this label (``running``, ``idle`` or ``ready``, also one
        stored by an earlier session in a ``store=`` directory), ``start`` returns that child (its
        ``reused`` is True) instead of starting a second one and does not send ``prompt``. Pass another
        label (or none) for a second child."""
        self._check_open()
        check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        servers = self._child_servers(tools, "tools")
        if label is not None:
            existing = self._child_labelled(label)
            if existing is not None:
                return AsyncChild(self, existing, label, reused=True)
        await self._mounted()
        request = self._request(prompt, label, persona, tool_filter, model, max_tokens,
                                {"max_steps": max_steps, "token_budget": token_budget, "turn_timeout": turn_timeout},
                                provider)
        if servers:
            request.tools, request.mcp_servers = await self._child_tools(servers)
        child_id, _ = await self._service.start_continuable(provider, request)
        if self._labels is not None:
            self._labels.setdefault(request.label, child_id)
        return AsyncChild(self, child_id, request.label)

    def _child_labelled(self, label: str) -> str | None:
        """The id of the root's first continuable child labelled ``label`` (live or stored), or None.

        The root's children by label are listed once and then kept: this hub's own ``start`` calls add
        theirs; the listing is read again only when someone else may have started one (the root's model
        during a turn, or ``call_tool``), so N labelled starts cost N lookups, not N listings."""
        stamp = (self._root.turns, self._tool_calls)
        if self._labels is None or stamp != self._labels_stamp or self._root.status == "running":
            labels: dict[str, str] = {}
            for entry in self._service.list_children(self._root.id):
                if entry.kind == "child" and entry.label:
                    labels.setdefault(entry.label, entry.id)
            self._labels, self._labels_stamp = labels, stamp
        return self._labels.get(label)

    async def child(self, child_id: "str | AsyncChild") -> AsyncChild:
        """A handle on an existing continuable child (for example after a restart)."""
        self._check_open()
        child_id = agent_id_of(child_id, "child_id")
        for entry in self._service.list_descendants(self._root.id):
            if entry.id == child_id and entry.kind == "child":
                return AsyncChild(self, child_id, entry.label or "")
            if entry.id == child_id:  # listed as a diagnostic: say what is wrong, as send does
                raise await self._service.refusal(entry)
        raise UsageError(f'no continuable child "{child_id}" below this hub\'s root')

    async def job(self, job_id: str) -> AsyncJob:
        """A handle on one of the root's background jobs (``subagent-N``), also those its model started."""
        self._check_open()
        check_text(job_id, "job_id")
        return AsyncJob(self, self._jobs.get(job_id, self._root))

    async def send(self, agent_id: "str | AsyncChild", message: str) -> str:
        """Queue ``message`` as the child's next turn (cold-resuming it if it is ``ready``)."""
        self._check_open()
        agent_id = agent_id_of(agent_id)
        check_text(message, "message")
        await self._mounted()
        return await self._service.followup(self._root, agent_id, message, USER_SOURCE)

    async def interrupt(self, agent_id: "str | AsyncChild") -> None:
        """Stop only the agent's current turn; its queued messages wait for the next ``send``."""
        self._check_open()
        agent_id = agent_id_of(agent_id)
        self._service.interrupt(agent_id, self._root)

    async def kill(self, agent_id: "str | AsyncChild") -> bool:
        """Stop a continuable child for good: its turn aborts, its queued messages are dropped and it
        settles (``ready``: a later ``send`` still resumes it). Its parent is told it was stopped. False
        when it was not running (an accepted no-op, like ``interrupt``)."""
        self._check_open()
        return await self._service.kill(agent_id_of(agent_id), self._root)

    async def kill_job(self, job_id: str, reason: str | None = None) -> str:
        """Ask any background job of the tree to stop, also one a descendant's model started (the
        notebook user owns the whole tree: this acts as the job's owner, as the tree's Kill button
        does); the line the ``job_kill`` tool would return. An unknown id is a UsageError."""
        self._check_open()
        check_text(job_id, "job_id")
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        job = self._jobs.jobs.get(job_id)
        if job is None:
            raise UsageError(f"{job_id} is not a job")
        if self._jobs.kill(job_id, job.owner, reason) == "requested":
            return job_texts.kill_requested(job_id)
        return job_texts.kill_already_finished(job_id, job.status, job.detail)

    async def wait_settled(self, child_id: "str | AsyncChild", timeout: float | None = None) -> str | None:
        """Deprecated: ``await hub.child(child_id)`` then ``await kid.wait(timeout)`` (the sync twin's way)."""
        _deprecated("wait_settled", "(await hub.child(child_id)).wait(timeout)")
        return await self._view.settled(child_id, timeout)

    async def list_agents(self, scope: str = "children") -> AgentListing:
        """The root's continuable children; ``str()`` is exactly the ``list_agents`` tool text."""
        self._check_open()
        if scope == "children":
            return AgentListing(self._service.list_children(self._root.id))
        if scope == "descendants":
            return AgentListing(self._service.list_descendants(self._root.id))
        raise UsageError(f'scope must be "children" or "descendants", got {scope!r}')

    async def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run one tool as the root agent; returns exactly what a model would read."""
        self._check_open()
        check_text(name, "name")
        await self._mounted()
        self._tool_calls += 1  # a delegation tool may start a child of the root (see _child_labelled)
        ctx = ToolContext(self._root, self._runtime, self._ids.call(), by_user=True)
        return await dispatch(self._root.tools.get, ctx, name, arguments)

    # -- the event stream ------------------------------------------------------------------------

    def event_filter(self, agent: Any = None, kinds: Any = None) -> SubtreeFilter:
        """Deprecated: the filter is internal (``astream(agent, kinds=...)`` applies it)."""
        _deprecated("event_filter", "hub.astream(agent, kinds=...)")
        return self._event_filter(agent, kinds)

    def _event_filter(self, agent: Any = None, kinds: Any = None) -> SubtreeFilter:
        """The filter ``astream``/``stream`` apply: ``agent`` (an id or a Child/Job handle) and its
        descendants, and only ``kinds`` (``"turn/end"``, ``"tool/call"``… see ``toh_nb.core.events``)."""
        root = agent_id_of(agent) if agent is not None else None
        if isinstance(kinds, str):
            kinds = [kinds]
        if kinds is not None and (not isinstance(kinds, (list, tuple, set, frozenset))
                                  or not all(isinstance(k, str) for k in kinds)):
            raise UsageError("kinds must be a list of event kind strings, e.g. ['turn/end', 'subagent/end']")
        members: list[str] = []
        if root is not None:
            for agent_obj in self._runtime.agents.values():
                node = agent_obj.parent
                while node is not None and node.id != root:
                    node = node.parent
                if node is not None:
                    members.append(agent_obj.id)
        return SubtreeFilter(root, members, kinds)

    async def astream(self, agent: Any = None, *, kinds: Any = None, history: bool = False,
                      timeout: float | None = None) -> AsyncIterator[HubEvent]:
        """``async for ev in hub.astream(...)``: typed events as they happen, until the hub closes.

        ``agent`` keeps one agent's subtree (like LangGraph's ``subgraphs=True``), ``kinds`` some kinds
        only; ``history=True`` first replays the recorded lifecycle events; ``timeout`` ends the stream
        after that many seconds without an event. Nothing is dropped: events wait in the iterator's
        queue until read."""
        async for batch in self._event_batches(agent, kinds, history, timeout):
            for event in batch:
                yield event

    async def _event_batches(self, agent: Any, kinds: Any, history: bool,
                             timeout: float | None) -> AsyncIterator[list[HubEvent]]:
        """``astream``'s events, as lists of every event waiting at each step (the sync ``stream`` reads
        one list per call onto the loop, not one event). Ends after the closing event or ``timeout``."""
        self._check_open()
        check_flag(history, "history")
        timeout = check_timeout(timeout)
        keep = self._event_filter(agent, kinds)
        queue: asyncio.Queue = asyncio.Queue()
        bus = self._runtime.bus
        unsubscribe = bus.subscribe(lambda event: queue.put_nowait(event) if keep(event) else None)
        try:
            if history:
                backlog = [event for event in list(bus.history) if keep(event)]
                if backlog:
                    yield backlog
            while True:
                try:
                    batch = [await asyncio.wait_for(queue.get(), timeout)]
                except asyncio.TimeoutError:
                    return
                while not queue.empty():
                    batch.append(queue.get_nowait())
                closed = next((i for i, event in enumerate(batch) if isinstance(event, HubClosed)), None)
                if closed is not None:
                    yield batch[:closed + 1]
                    return
                yield batch
        finally:
            unsubscribe()

    # -- permission requests of external agents (``AcpAgent(permissions="ask")``) ---------------------

    async def pending_permissions(self, agent: Any = None) -> list[dict]:
        """The permission requests waiting for an answer, oldest first: each ``{"id", "agent", "title",
        "kind", "tool_call_id"}`` (``agent``: only those of that agent). Each was announced on the event
        stream as a :class:`~toh_nb.core.events.PermissionAsked`."""
        self._check_open()
        return self.view.pending_permissions(None if agent is None else [agent_id_of(agent)])

    async def answer_permission(self, ask_id: str, allowed: bool) -> str:
        """Allow (``True``) or deny (``False``) a pending permission request (an ``id`` from
        :meth:`pending_permissions` or a ``PermissionAsked`` event); the line the tree shows
        (``allowed: Write out.txt (agent-1)``). The agent's turn goes on; a
        :class:`~toh_nb.core.events.PermissionAnswered` event follows. An ask already answered, timed
        out or cancelled is a UsageError."""
        self._check_open()
        return self._view.answer_permission(ask_id, allowed)

    # -- tables: plain rows (lists of dicts) of the engine's state; ``tn.Hub`` shows them as DataFrames
    #    (``toh_nb.notebook.tables`` turns rows into frames; this module never imports pandas) --------

    async def jobs(self) -> list[dict]:
        """One row per background job: id, label, status, detail, owner, started, finished, elapsed_s."""
        return job_rows(self._jobs)

    async def agents(self, columns: "str | list[str] | None" = None) -> list[dict]:
        """One row per agent of the tree (root first, pre-order): ids, depth, label, mode, status, turns,
        tokens (own, subtree, budget, left), cost, started, elapsed_s, stop_reason, abandoned_tools (sync
        tool or model calls of the agent whose turn ended while their thread still runs: ``toh_nb.core.threads``).
        ``columns``: None or ``"all"`` (every column), or a list of column names (only those)."""
        return self._view.agents(columns)

    async def transcript(self, agent_id: "str | AsyncChild", raw: bool = False,
                         columns: "str | list[str] | None" = None) -> list[dict]:
        """The agent's conversation, one row per message, tool call or turn end
        (:data:`toh_nb.conversation.CONVERSATION_COLUMNS`: turn, role, source, tool, arguments, text,
        is_error, input_tokens, output_tokens, elapsed_s; see :mod:`toh_nb.conversation`).
        ``raw=True``: the log itself, one row per event (turn, kind, role, source, text, tool, is_error).
        ``columns``: None or ``"all"`` (every column), or a list of column names (only those)."""
        return self._view.transcript(agent_id_of(agent_id), raw=raw, columns=columns)

    async def activations(self, agent_id: "str | AsyncChild") -> list[dict]:
        """When the agent worked: one entry per turn (start, end, how it ended, tokens) with its model and
        tool calls as timed spans (:func:`toh_nb.activations.activation_rows`; what the tree's waterfall draws)."""
        return self._view.activations(agent_id_of(agent_id))

    async def events(self) -> list[dict]:
        """The recorded lifecycle events (children, jobs, interrupts, problems), oldest first."""
        return event_rows(self._runtime.bus)

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every agent and job, flush and close the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._service.close()
        await self._jobs.close()
        for agent in list(self._runtime.agents.values()):
            await agent.dispose()
            self._runtime.unregister(agent)
        await self._service.close_providers()
        await self._mcp.close()  # every agent is gone: no call is in flight; no server process is left
        self._runtime.closed = True
        self._runtime.bus.publish(HubClosed(agent_id=self._root.id, depth=0))
        self._store.close()
        models = [self._runtime.model]
        for model in self._child_models:
            if all(model is not seen for seen in models):
                models.append(model)
        for model in models:  # HTTP connection pools of real models, the hub's and per-child ones
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception as error:
                    self._runtime.bus.problem("hub", f"closing model {type(model).__name__} failed: {error}")

    async def __aenter__(self) -> "AsyncHub":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"AsyncHub(root={self.root}, {state})"
