"""AsyncHub: the async face that scripts use; ``tn.Hub`` (``toh_nb.notebook.hub``) is its sync twin.

A hub is a face over one :class:`~toh_nb.engine.Engine`: the session store, the job registry, the
subagent service with the ``spawn`` and ``fork`` providers, the delegation tool instances, the job and
control tools and the user's own tools, plus a *root* agent. The notebook user acts as that root agent:
``spawn``, ``start``, ``send``, ``interrupt`` and ``call_tool`` go through the same service, tools,
authorization and texts as a model calling the tools would. Every decision the two faces share is the
engine's; this module turns the engine's answers into handles (:class:`AsyncJob`, :class:`AsyncChild`).

The face is closed: the runtime, the job registry and the store are internals (``runtime``,
``job_registry``, ``store`` and ``root_agent`` still answer, with a DeprecationWarning, for one release);
the notebook layer reads the public methods, :class:`HubView` and the event stream only, and tests reach
the engine through :mod:`toh_nb.testing`.
"""

from __future__ import annotations

import asyncio
import html
import os
import warnings
from typing import Any, AsyncIterator, Literal, Mapping, Sequence, overload

from .core.budget import DEFAULT_MAX_STEPS
from .core.checks import agent_id_of, check_flag, check_timeout
from .core.errors import UsageError
from .core.events import DEFAULT_HISTORY, HubEvent, SubtreeFilter
from .core.model import Model
from .core.runtime import Runtime
from .core.tools import ToolResult
from .config import HubConfig, check_tool_lists  # noqa: F401 - check_tool_lists: re-exported
from .engine import (ROOT_ORIGIN, Engine, check_start_options,  # noqa: F401 - re-exported (their old home)
                     checked, stored_root_id)
from .jobs import JobRegistry
from .jobs.registry import Job
from .mcp.config import MCPServer
from .results import AgentListing, RunResult, item_html, job_output, job_result
from .snapshots import event_rows
from .store.base import SessionStore
from .subagents.arguments import ToolFilter
from .view import Activity, HubView

__all__ = ["Activity", "AsyncChild", "AsyncHub", "AsyncJob", "HubView"]


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"AsyncHub.{name} is internal and will be removed in the next release; use {instead}",
                  DeprecationWarning, stacklevel=3)


def _budgets(max_steps: Any, token_budget: Any, turn_timeout: Any) -> dict:
    return {"max_steps": max_steps, "token_budget": token_budget, "turn_timeout": turn_timeout}


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
        self._jobs, self._root = job.registry, hub.engine.root

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

    async def result(self, wait: bool = False, timeout: float | None = None, check: bool = True) -> RunResult | None:
        """The settled job's :class:`~toh_nb.results.RunResult` (``.stop_reason``, ``.diagnostic``,
        ``.text``, ``.usage``, ``.agent_id``: the child's id), None while it runs; ``wait`` and
        ``timeout`` as for :meth:`output`. A run that ended ``error`` raises
        :class:`~toh_nb.core.errors.RunError`; ``check=False`` returns it (``output()`` always returns text)."""
        check_flag(check, "check")
        await self._settled("result", wait, timeout)
        self._jobs.get(self._facts.id, self._root)  # the owner fence, as for output()
        return checked(job_result(self._facts), check)

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

    async def wait(self, timeout: float | None = None, check: bool = True) -> str | None:
        """Wait until the child is settled; the closing text of its last activation (None if none).
        When the activation it waited for ended ``error``, :class:`~toh_nb.core.errors.RunError`
        (``check=False``: the text); a timeout never raises."""
        return await self._hub.engine.wait(self.id, timeout, check)

    async def transcript(self, raw: bool = False, columns: "str | list[str] | None" = None) -> list[dict]:
        """This child's conversation, or its raw event log with ``raw=True`` (see :meth:`AsyncHub.transcript`)."""
        return await self._hub.transcript(self.id, raw=raw, columns=columns)


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
        self._bind(Engine.open(HubConfig.of(locals())))


    @classmethod
    def from_config(cls, config: HubConfig) -> "AsyncHub":
        """A hub built from a :class:`~toh_nb.config.HubConfig` (``tn.Hub.from_config`` is its twin)."""
        hub = cls.__new__(cls)
        cls._bind(hub, Engine.open(config))
        return hub

    def _bind(self, engine: Engine) -> None:
        self._engine = engine

    # -- properties ----------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root agent's id (``root`` unless ``root_id=`` says otherwise)."""
        return self._engine.root.id

    @property
    def engine(self) -> Engine:
        """The :class:`~toh_nb.engine.Engine` this face drives: what the server faces (``root_port``) and
        :mod:`toh_nb.testing` act on. Its parts carry no stability promise; scripts use the hub's methods."""
        return self._engine

    @property
    def root_agent(self) -> Any:
        """Deprecated: the root's engine Agent is internal (servers drive ``engine.root_port``)."""
        _deprecated("root_agent", "hub.root, the hub's methods and toh_nb.engine.Engine.root_port")
        return self._engine.root

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: a closed hub refuses new work."""
        return self._engine.closed

    @property
    def model(self) -> Any:
        """The root's model (the one children use unless given their own)."""
        return self._engine.runtime.model

    @property
    def config(self) -> HubConfig:
        """The checked configuration this hub was built from."""
        return self._engine.config

    @property
    def view(self) -> HubView:
        """Plain reads of the hub's state for code on the hub's loop thread (:class:`HubView`)."""
        return self._engine.view

    @property
    def activity(self) -> Activity:
        """What runs right now (:class:`Activity`); readable from any thread without waiting."""
        return self._engine.view.activity()

    # -- internals under their old public names: one release with a DeprecationWarning --------------

    @property
    def runtime(self) -> Runtime:
        """Deprecated: the engine's runtime is internal (use the hub's methods, ``hub.view`` and the events)."""
        _deprecated("runtime", "the hub's methods, hub.view and hub.astream()")
        return self._engine.runtime

    @property
    def job_registry(self) -> JobRegistry:
        """Deprecated: the engine's job registry is internal (use ``hub.jobs()``, ``hub.job(id)``, ``hub.kill_job``)."""
        _deprecated("job_registry", "hub.jobs(), hub.job(job_id) and hub.kill_job(job_id)")
        return self._engine.jobs

    @property
    def store(self) -> SessionStore:
        """Deprecated: the session store is internal (``hub.config.store`` is what was passed)."""
        _deprecated("store", "hub.transcript(), hub.agents() and hub.config.store")
        return self._engine.store

    # -- running work --------------------------------------------------------------------------

    async def run(self, prompt: str, *, timeout: float | None = None, check: bool = True) -> RunResult:
        """Give the root agent's model a turn with ``prompt``; it may delegate itself.

        A turn that ended ``error`` raises :class:`~toh_nb.core.errors.RunError` (``.result``, ``.cause``);
        ``check=False`` returns its RunResult instead. Other stop reasons return the result."""
        return await self._engine.run(prompt, timeout, check)

    @overload
    async def spawn(self, prompt: str, *, label: str | None = None, background: Literal[False] = False,
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = (), check: bool = True) -> RunResult: ...

    @overload
    async def spawn(self, prompt: str, *, label: str | None = None, background: Literal[True],
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = (), check: bool = True) -> AsyncJob: ...

    async def spawn(self, prompt: str, *, label: str | None = None, background: bool = False,
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None,
                    tools: Sequence[MCPServer] = (), check: bool = True) -> RunResult | AsyncJob:
        """A one-shot child: foreground → RunResult; ``background=True`` → a Job.

        A foreground child whose run ended ``error`` raises :class:`~toh_nb.core.errors.RunError`;
        ``check=False`` returns its RunResult instead (a Job's ``result()`` takes ``check`` too).

        ``max_steps``, ``token_budget`` (tokens of the child and its descendants) and ``turn_timeout``
        bound the child (``None``: the hub's defaults; see ``toh_nb.core.budget``). ``tools``: MCP servers
        (``tn.MCPServer``) whose tools this child sees besides the hub's (``tool_filter`` applies to them).
        """
        outcome = await self._engine.spawn(prompt, label=label, background=background, persona=persona,
                                           tool_filter=tool_filter, model=model, max_tokens=max_tokens,
                                           provider=provider, budgets=_budgets(max_steps, token_budget, turn_timeout),
                                           tools=tools, check=check)
        return AsyncJob(self, outcome) if isinstance(outcome, Job) else outcome

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
        child_id, label, reused = await self._engine.start(
            prompt, label=label, persona=persona, tool_filter=tool_filter, model=model, max_tokens=max_tokens,
            provider=provider, budgets=_budgets(max_steps, token_budget, turn_timeout), tools=tools)
        return AsyncChild(self, child_id, label, reused=reused)

    async def child(self, child_id: "str | AsyncChild") -> AsyncChild:
        """A handle on an existing continuable child (for example after a restart); a label is refused
        with the ids it names."""
        return AsyncChild(self, *await self._engine.child_label(child_id))

    async def job(self, job_id: str) -> AsyncJob:
        """A handle on one of the root's background jobs (``subagent-N``), also those its model started."""
        return AsyncJob(self, self._engine.job(job_id))

    async def send(self, agent_id: "str | AsyncChild", message: str) -> str:
        """Queue ``message`` as the child's next turn (cold-resuming it if it is ``ready``)."""
        return await self._engine.send(agent_id, message)

    async def interrupt(self, agent_id: "str | AsyncChild") -> None:
        """Stop only the agent's current turn; its queued messages wait for the next ``send``."""
        self._engine.interrupt(agent_id)

    async def kill(self, agent_id: "str | AsyncChild") -> bool:
        """Stop a continuable child for good: its turn aborts, its queued messages are dropped and it
        settles (``ready``: a later ``send`` still resumes it). Its parent is told it was stopped. False
        when it was not running (an accepted no-op, like ``interrupt``)."""
        return await self._engine.kill(agent_id)

    async def kill_job(self, job_id: str, reason: str | None = None) -> str:
        """Ask any background job of the tree to stop, also one a descendant's model started (the
        notebook user owns the whole tree: this acts as the job's owner, as the tree's Kill button
        does); the line the ``job_kill`` tool would return. An unknown id is a UsageError."""
        return self._engine.kill_job(job_id, reason)

    async def wait_settled(self, child_id: "str | AsyncChild", timeout: float | None = None) -> str | None:
        """Deprecated: ``await hub.child(child_id)`` then ``await kid.wait(timeout)`` (the sync twin's way)."""
        _deprecated("wait_settled", "(await hub.child(child_id)).wait(timeout)")
        return await self._engine.view.settled(child_id, timeout)

    async def list_agents(self, scope: str = "children") -> AgentListing:
        """The root's continuable children; ``str()`` is exactly the ``list_agents`` tool text."""
        return self._engine.list_agents(scope)

    async def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run one tool as the root agent; returns exactly what a model would read."""
        return await self._engine.call_tool(name, arguments)

    # -- the event stream ------------------------------------------------------------------------

    def event_filter(self, agent: Any = None, kinds: Any = None) -> SubtreeFilter:
        """Deprecated: the filter is internal (``astream(agent, kinds=...)`` applies it)."""
        _deprecated("event_filter", "hub.astream(agent, kinds=...)")
        return self._engine.event_filter(agent, kinds)

    async def astream(self, agent: Any = None, *, kinds: Any = None, history: bool = False,
                      timeout: float | None = None) -> AsyncIterator[HubEvent]:
        """``async for ev in hub.astream(...)``: typed events as they happen, until the hub closes.

        ``agent`` keeps one agent's subtree (like LangGraph's ``subgraphs=True``), ``kinds`` some kinds
        only; ``history=True`` first replays the recorded lifecycle events; ``timeout`` ends the stream
        after that many seconds without an event. Nothing is dropped: events wait in the iterator's
        queue until read."""
        async for batch in self._engine.event_batches(agent, kinds, history, timeout):
            for event in batch:
                yield event

    # -- permission requests of external agents (``AcpAgent(permissions="ask")``) ---------------------

    async def pending_permissions(self, agent: Any = None) -> list[dict]:
        """The permission requests waiting for an answer, oldest first: each ``{"id", "agent", "title",
        "kind", "tool_call_id"}`` (``agent``: only those of that agent). Each was announced on the event
        stream as a :class:`~toh_nb.core.events.PermissionAsked`."""
        self._engine.check_open()
        return self._engine.view.pending_permissions(None if agent is None else [agent_id_of(agent)])

    async def answer_permission(self, ask_id: str, allowed: bool) -> str:
        """Allow (``True``) or deny (``False``) a pending permission request (an ``id`` from
        :meth:`pending_permissions` or a ``PermissionAsked`` event); the line the tree shows
        (``allowed: Write out.txt (agent-1)``). The agent's turn goes on; a
        :class:`~toh_nb.core.events.PermissionAnswered` event follows. An ask already answered, timed
        out or cancelled is a UsageError."""
        self._engine.check_open()
        return self._engine.view.answer_permission(ask_id, allowed)

    # -- tables: plain rows (lists of dicts) of the engine's state; ``tn.Hub`` shows them as DataFrames
    #    (``toh_nb.notebook.tables`` turns rows into frames; this module never imports pandas) --------

    async def jobs(self) -> list[dict]:
        """One row per background job: id, label, status, detail, owner, started, finished, elapsed_s."""
        return self._engine.view.jobs()

    async def agents(self, columns: "str | list[str] | None" = None) -> list[dict]:
        """One row per agent of the tree (root first, pre-order): ids, depth, label, mode, status, turns,
        tokens (own, subtree, budget, left), cost, started, elapsed_s, stop_reason, abandoned_tools (sync
        tool or model calls of the agent whose turn ended while their thread still runs: ``toh_nb.core.threads``).
        ``columns``: None or ``"all"`` (every column), or a list of column names (only those)."""
        return self._engine.agents(columns)

    async def transcript(self, agent_id: "str | AsyncChild", raw: bool = False,
                         columns: "str | list[str] | None" = None) -> list[dict]:
        """The agent's conversation, one row per message, tool call or turn end
        (:data:`toh_nb.conversation.CONVERSATION_COLUMNS`: turn, role, source, tool, arguments, text,
        is_error, input_tokens, output_tokens, elapsed_s; see :mod:`toh_nb.conversation`).
        ``raw=True``: the log itself, one row per event (turn, kind, role, source, text, tool, is_error).
        ``columns``: None or ``"all"`` (every column), or a list of column names (only those)."""
        return self._engine.view.transcript(self._engine.agent_id(agent_id), raw=raw, columns=columns)

    async def activations(self, agent_id: "str | AsyncChild") -> list[dict]:
        """When the agent worked: one entry per turn (start, end, how it ended, tokens) with its model and
        tool calls as timed spans (:func:`toh_nb.timeline.activation_rows`; what the tree's waterfall draws)."""
        return self._engine.view.activations(self._engine.agent_id(agent_id))

    async def events(self) -> list[dict]:
        """The recorded lifecycle events (children, jobs, interrupts, problems), oldest first."""
        return event_rows(self._engine.runtime.bus)

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every agent and job, flush and close the store. Idempotent."""
        await self._engine.close()

    async def __aenter__(self) -> "AsyncHub":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"AsyncHub(root={self.root}, {state})"
