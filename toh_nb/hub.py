"""AsyncHub: the async face that scripts use and the notebook facade (``toh_nb.Hub``) wraps.

A hub composes one runtime: the session store, the job registry, the subagent service with the
``spawn`` and ``fork`` providers, the delegation tool instances, the job and control tools and the
user's own tools, plus a *root* agent. The notebook user acts as that root agent: ``spawn``, ``start``,
``send``, ``interrupt`` and ``call_tool`` go through the same service, tools, authorization and texts as
a model calling the tools would.

Work the user starts never wakes the root agent's model: its notices wait for the root's next turn.
Work the root's model starts (during ``run``) wakes it as the reference harness does.
"""

from __future__ import annotations

import asyncio
import html
import os
import time
from typing import Any, Literal, Mapping, Sequence, overload

from .core.budget import DEFAULT_MAX_STEPS, Limits
from .core.checks import agent_id_of, check_count, check_flag, check_text, check_timeout, shown
from .core.events import DEFAULT_HISTORY, HubClosed, SubtreeFilter
from .core.content import USER_SOURCE, text_of, user_message
from .core.errors import ClosedError, UsageError
from .core.ids import IdSource, invalid_id, is_valid_id
from .core.model import Model
from .core.runtime import Runtime
from .core.session import ASSISTANT_MESSAGE, SessionHeader, conversation_of, last_turn_number
from .core.session_repair import repair_tail
from .core.tools import FunctionTool, Tool, ToolContext, ToolResult, dispatch
from .costs import CostBook
from .jobs import JobRegistry, make_job_tools
from .jobs.registry import Job
from .results import AgentListing, RunResult, item_html, job_output, job_result, run_result
from .snapshots import agent_rows, event_rows, job_rows, transcript_rows
from .store import open_store, reserved_ids
from .store.base import SessionStore
from .subagents import ForkProvider, SpawnProvider, SubagentService
from .subagents.control import make_control_tools
from .providers.base import is_provider_shaped
from .subagents.report import make_report_tool
from .subagents.texts import not_a_provider
from .subagents.arguments import StartRequest, ToolFilter, validate_max_depth, validate_tool_filter
from .subagents.tool import SubagentTool, background_starter, make_subagent_tool

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


def check_root_id(root_id: Any) -> None:
    """``root_id`` is None or an id of the id grammar: checked before the store is opened, so an id that
    is a path (``toh-x/../../victim``) never has a store directory made or locked for it."""
    if root_id is not None and not is_valid_id(root_id):
        raise UsageError(invalid_id(root_id, "root_id") if isinstance(root_id, str)
                         else f"root_id must be a string or None, got {type(root_id).__name__}")


def check_tool_lists(tools: Any, delegation_tools: Any) -> None:
    """``tools`` and ``delegation_tools`` are lists (a string or a single tool is a common slip)."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple)):
        raise UsageError(f"tools must be a list of functions or tn.Tool objects, got {type(tools).__name__}")
    if delegation_tools is not None and not isinstance(delegation_tools, (list, tuple)):
        raise UsageError("delegation_tools must be a list of tn.SubagentTool (or dicts of its settings), "
                         f"got {type(delegation_tools).__name__}")


def stored_root_id(store: Any, root_id: str | None) -> str | None:
    """The root session a hub on ``store`` continues (``root_id``, else the newest stored root), or None
    for a new one. The sync Hub calls it in the caller's thread to read that log off the shared loop."""
    check_root_id(root_id)
    if root_id is not None:
        return root_id if store.exists(root_id) else None
    roots = [h for h in store.headers() if h.origin == ROOT_ORIGIN]
    return max(roots, key=lambda h: h.created).id if roots else None


def _fsync_policies() -> tuple[str, ...]:
    from .store.jsonl import FSYNC_POLICIES  # imported when asked: a hub without a directory never loads it

    return FSYNC_POLICIES


def _default_label(prompt: str) -> str:
    words = prompt.split()
    label = " ".join(words[:5])
    return label if len(words) <= 5 else label + " \u2026"


class JobFacts:
    """The read-only face AsyncJob and the sync Job share: the engine's job record and displays."""

    _job: Job

    @property
    def id(self) -> str:
        return self._job.id

    @property
    def label(self) -> str:
        return self._job.label

    @property
    def status(self) -> str:
        """``running | stopping | completed | killed | failed``."""
        return self._job.status

    @property
    def detail(self) -> str | None:
        return self._job.detail

    @property
    def child_id(self) -> str | None:
        """The id of the child agent doing the work."""
        return self._job.child_id

    def __repr__(self) -> str:
        detail = f", {self.detail}" if self.detail else ""
        return f"Job({self.id} [{self.status}{detail}] \u2014 {self.label})"

    def _repr_html_(self) -> str:
        extra = f" <small>{html.escape(self.detail)}</small>" if self.detail else ""
        return item_html("toh-job", self.id, self.status, self.label, extra)


class ChildFacts:
    """The read-only face AsyncChild and the sync Child share: id, label, live status, displays."""

    id: str
    label: str
    _service: SubagentService

    @property
    def status(self) -> str:
        """``running | idle | ready`` (``ready``: settled, resumes on the next ``send``)."""
        return self._service.status_of(self.id)

    def __repr__(self) -> str:
        return f"Child({self.id} [{self.status}] \u2014 {self.label})"

    def _repr_html_(self) -> str:
        return item_html("toh-child", self.id, self.status, self.label)


class AsyncJob(JobFacts):
    """A background one-shot child, as a job (``subagent-N``)."""

    def __init__(self, hub: "AsyncHub", job: Job) -> None:
        self._hub = hub
        self._job = job
        # a handle is part of its hub (made by AsyncHub here): it reads the hub's job registry directly, since
        # a public name would put the engine's registry on the user's surface (and on the sync twin's)
        self._jobs, self._root = hub._jobs, hub._root  # noqa: SLF001

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
        return job_output(self._job, self._jobs.read(self._job.id, self._root))

    async def result(self, wait: bool = False, timeout: float | None = None) -> RunResult | None:
        """The settled job's :class:`~toh_nb.results.RunResult` (``.stop_reason``, ``.diagnostic``,
        ``.text``, ``.usage``, ``.agent_id``: the child's id), None while it runs; ``wait`` and
        ``timeout`` as for :meth:`output`."""
        await self._settled("result", wait, timeout)
        self._jobs.get(self._job.id, self._root)  # the owner fence, as for output()
        return job_result(self._job)

    async def _settled(self, method: str, wait: bool, timeout: float | None) -> None:
        timeout = check_timeout(timeout)
        if timeout is not None and not wait:
            raise UsageError(f"timeout only applies when waiting: job.{method}(wait=True, timeout={timeout!r}) "
                             f"waits up to {timeout!r} s; job.{method}() reads the result now")
        if wait and not self._job.done:
            try:
                await asyncio.wait_for(asyncio.shield(self._job.task), timeout)
            except asyncio.TimeoutError:
                pass

    def kill(self, reason: str | None = None) -> str:
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        return self._jobs.kill(self._job.id, self._root, reason)


class AsyncChild(ChildFacts):
    """A continuable child: send it turns, interrupt it, wait for it to settle."""

    def __init__(self, hub: "AsyncHub", child_id: str, label: str) -> None:
        self._hub = hub
        self._service = hub._service  # noqa: SLF001 - the hub's own handle (see AsyncJob.__init__)
        self.id = child_id
        self.label = label

    async def send(self, message: str) -> str:
        return await self._hub.send(self.id, message)

    def interrupt(self) -> None:
        self._hub.interrupt(self.id)

    def kill(self) -> bool:
        """Stop this child for good (see :meth:`AsyncHub.kill`)."""
        return self._hub.kill(self.id)

    async def wait(self, timeout: float | None = None) -> str | None:
        """Wait until the child is settled; the closing text of its last activation (None if none)."""
        return await self._hub.wait_settled(self.id, timeout)

    def transcript(self):
        return self._hub.transcript(self.id)


class AsyncHub:
    """The async API. ``async with AsyncHub() as hub: res = await hub.spawn("...")``."""

    def __init__(self, model: Model | None = None, *, store: str | os.PathLike[str] | SessionStore | None = None,
                 max_depth: int | str = 3,
                 max_parallel_tool_calls: int = 10, ids: str = "uuid", background_mode: str = "one-shot",
                 tools: Sequence[Any] = (), delegation_tools: Sequence[Any] | None = None,
                 root_id: str | None = None, fsync: str | None = None,
                 max_jobs_per_owner: int = 10, report_delivery: str = "next-step",
                 max_tokens: int | None = None, max_steps: int | None = DEFAULT_MAX_STEPS,
                 token_budget: int | None = None, turn_timeout: float | None = None,
                 providers: Mapping[str, Any] | None = None, history: int = DEFAULT_HISTORY,
                 prices: Mapping[str, tuple[float, float]] | None = None) -> None:
        if model is None:
            from .models.demo import DemoModel

            model = DemoModel()
        if not hasattr(model, "request"):
            raise UsageError(f"model must have an async request(ModelRequest) method, got {type(model).__name__}")
        self._max_depth = validate_max_depth(max_depth)  # None: "provider-managed", no cap
        root_limits = Limits.checked(max_steps, token_budget, turn_timeout)
        check_count(max_tokens, "max_tokens", none="")
        check_count(max_jobs_per_owner, "max_jobs_per_owner")
        check_count(max_parallel_tool_calls, "max_parallel_tool_calls")
        check_count(history, "history", minimum=0, note="events kept for hub.events()")
        if background_mode not in ("one-shot", "continuable"):
            raise UsageError(f'background_mode must be "one-shot" or "continuable", got {background_mode!r}')
        check_tool_lists(tools, delegation_tools)
        if fsync is not None and fsync not in _fsync_policies():  # also when no store= directory uses it
            raise UsageError(f'fsync must be "batch", "always" or "never", got {shown(fsync)}')
        self._costs = CostBook(prices)  # checked before the store is opened
        check_root_id(root_id)
        store_options = {"fsync": fsync} if fsync is not None else {}
        self._store = open_store(store, **store_options)
        try:
            self._ids = IdSource(ids)
            self._ids.skip_past(reserved_ids(self._store))
            runtime = Runtime(model=model, store=self._store, ids=self._ids, history=history,
                              max_parallel_tool_calls=max_parallel_tool_calls,
                              limits=Limits(root_limits.max_steps, None, root_limits.turn_timeout))
            self.runtime = runtime
            self._jobs = JobRegistry(runtime, max_per_owner=max_jobs_per_owner)
            self._service = SubagentService(runtime, report_delivery=report_delivery)
            self._service.register_provider(SpawnProvider())
            self._service.register_provider(ForkProvider())
            self._register_providers(providers)
            self._service.report_tool = make_report_tool(self._service)
            configs = delegation_tools if delegation_tools is not None else [SubagentTool()]
            mounted = [item for item in tools if isinstance(item, SubagentTool)]
            for config in [*configs, *mounted]:
                if isinstance(config, SubagentTool):
                    tool = config.build(self._service, self._jobs, background_mode=background_mode,
                                        max_depth=max_depth)
                elif isinstance(config, dict):
                    tool = make_subagent_tool(self._service, self._jobs, **config)
                else:
                    raise UsageError("delegation_tools takes a list of tn.SubagentTool (or dicts of its settings), "
                                     f"got {type(config).__name__}")
                runtime.tools.add(tool)
            for tool in make_job_tools(self._jobs):
                runtime.tools.add(tool)
            for tool in make_control_tools(self._service):
                runtime.tools.add(tool)
            for item in tools:
                if not isinstance(item, SubagentTool):
                    runtime.tools.add(item if isinstance(item, Tool) else FunctionTool(item))
            self._root = self._make_root(root_id, root_limits, max_tokens)
            if self._costs.prices:  # a finished one-shot agent leaves the runtime: note its model while live
                runtime.bus.subscribe(lambda event: self._costs.note(event.agent_id, runtime))
        except BaseException:
            self._store.close()  # a refused configuration must not keep the store's lock,
            runtime = getattr(self, "runtime", None)
            if runtime is not None:  # nor the GC policy and threads of a runtime nobody will close
                runtime.closed = True
            raise
        self._closed = False
        self._child_models: list[Any] = []

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
        return self.runtime.create_agent(session, label=None, depth=0, parent=None, mode="root",
                                         conversation=conversation_of(session.events),
                                         turns=last_turn_number(session.events), limits=limits,
                                         max_tokens=max_tokens)

    # -- properties ----------------------------------------------------------------------------

    @property
    def root(self) -> str:
        return self._root.id

    @property
    def root_agent(self) -> Any:
        return self._root

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def model(self) -> Any:
        return self.runtime.model

    @property
    def job_registry(self) -> JobRegistry:
        """The engine's jobs (the notebook layer reads them for progress lines and the tree's Kill)."""
        return self._jobs

    @property
    def store(self) -> Any:
        """The hub's session store (in-memory or JSONL)."""
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this hub is closed; create a new Hub to continue (a store= directory keeps its children)")

    # -- running work --------------------------------------------------------------------------

    async def run(self, prompt: str, *, timeout: float | None = None) -> RunResult:
        """Give the root agent's model a turn with ``prompt``; it may delegate itself."""
        self._check_open()
        check_text(prompt, "prompt")
        timeout = check_timeout(timeout)
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
        limits = self.runtime.limits.for_child(**budgets)
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
                    token_budget: int | None = None, turn_timeout: float | None = None) -> RunResult: ...

    @overload
    async def spawn(self, prompt: str, *, label: str | None = None, background: Literal[True],
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None) -> AsyncJob: ...

    async def spawn(self, prompt: str, *, label: str | None = None, background: bool = False,
                    persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
                    max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
                    token_budget: int | None = None, turn_timeout: float | None = None) -> RunResult | AsyncJob:
        """A one-shot child: foreground → RunResult; ``background=True`` → a Job.

        ``max_steps``, ``token_budget`` (tokens of the child and its descendants) and ``turn_timeout``
        bound the child (``None``: the hub's defaults; see ``toh_nb.core.budget``)."""
        self._check_open()
        check_flag(background, "background")
        request = self._request(prompt, label, persona, tool_filter, model, max_tokens,
                                {"max_steps": max_steps, "token_budget": token_budget, "turn_timeout": turn_timeout},
                                provider)
        if background:
            job = self._jobs.start("subagent", request.label, self._root,
                                   background_starter(self._service, provider, request), by_user=True)
            await self._service.child_recorded(job.child_id)  # the job's child is in the log when its id is out
            return AsyncJob(self, job)
        run = await self._service.start(provider, request)
        try:
            result = await run.result
        finally:
            await run.dispose()
        return run_result(result, run.id, request.label)

    async def start(self, prompt: str, *, label: str | None = None, persona: str | None = None,
                    tool_filter: ToolFilter | None = None, model: Model | None = None, max_tokens: int | None = None,
                    provider: str = "spawn", max_steps: int | None = None, token_budget: int | None = None,
                    turn_timeout: float | None = None) -> AsyncChild:
        """A continuable child; returns as soon as its first message is accepted (budgets as in
        :meth:`spawn`; they hold for every turn of the child)."""
        self._check_open()
        request = self._request(prompt, label, persona, tool_filter, model, max_tokens,
                                {"max_steps": max_steps, "token_budget": token_budget, "turn_timeout": turn_timeout},
                                provider)
        child_id, _ = await self._service.start_continuable(provider, request)
        return AsyncChild(self, child_id, request.label)

    def child(self, child_id: str) -> AsyncChild:
        """A handle on an existing continuable child (for example after a restart)."""
        self._check_open()
        child_id = agent_id_of(child_id, "child_id")
        for entry in self._service.list_descendants(self._root.id):
            if entry.id == child_id and entry.kind == "child":
                return AsyncChild(self, child_id, entry.label or "")
        raise UsageError(f'no continuable child "{child_id}" below this hub\'s root')

    def job(self, job_id: str) -> AsyncJob:
        """A handle on one of the root's background jobs (``subagent-N``), also those its model started."""
        self._check_open()
        check_text(job_id, "job_id")
        return AsyncJob(self, self._jobs.get(job_id, self._root))

    async def send(self, agent_id: "str | AsyncChild", message: str) -> str:
        """Queue ``message`` as the child's next turn (cold-resuming it if it is ``ready``)."""
        self._check_open()
        agent_id = agent_id_of(agent_id)
        check_text(message, "message")
        return await self._service.followup(self._root, agent_id, message, USER_SOURCE)

    def interrupt(self, agent_id: "str | AsyncChild") -> None:
        self._check_open()
        agent_id = agent_id_of(agent_id)
        self._service.interrupt(agent_id, self._root)

    def kill(self, agent_id: "str | AsyncChild") -> bool:
        """Stop a continuable child for good: its turn aborts, its queued messages are dropped and it
        settles (``ready``: a later ``send`` still resumes it). Its parent is told it was stopped. False
        when it was not running (an accepted no-op, like ``interrupt``)."""
        self._check_open()
        return self._service.kill(agent_id_of(agent_id), self._root)

    async def wait_settled(self, child_id: "str | AsyncChild", timeout: float | None = None) -> str | None:
        child_id = agent_id_of(child_id)
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while child_id in self._service.activations:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            await self._service.wait_changed(child_id, remaining)
        return self._closing_text(child_id)

    def _closing_text(self, child_id: str) -> str | None:
        if child_id in self._service.closing:  # the last activation settled in this process
            return self._service.closing[child_id]
        agent = self.runtime.agents.get(child_id)
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

    def list_agents(self, scope: str = "children") -> AgentListing:
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
        ctx = ToolContext(self._root, self.runtime, self._ids.call(), by_user=True)
        return await dispatch(self._root.tools.get, ctx, name, arguments)

    # -- the event stream ------------------------------------------------------------------------

    def event_filter(self, agent: Any = None, kinds: Any = None) -> SubtreeFilter:
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
            for agent_obj in self.runtime.agents.values():
                node = agent_obj.parent
                while node is not None and node.id != root:
                    node = node.parent
                if node is not None:
                    members.append(agent_obj.id)
        return SubtreeFilter(root, members, kinds)

    async def astream(self, agent: Any = None, *, kinds: Any = None, history: bool = False):
        """``async for ev in hub.astream(...)``: typed events as they happen, until the hub closes.

        ``agent`` keeps one agent's subtree (like LangGraph's ``subgraphs=True``), ``kinds`` some kinds
        only; ``history=True`` first replays the recorded lifecycle events. Nothing is dropped: events
        wait in the iterator's queue until read."""
        self._check_open()
        check_flag(history, "history")
        keep = self.event_filter(agent, kinds)
        queue: asyncio.Queue = asyncio.Queue()
        unsubscribe = self.runtime.bus.subscribe(lambda event: queue.put_nowait(event) if keep(event) else None)
        try:
            if history:
                for event in list(self.runtime.bus.history):
                    if keep(event):
                        yield event
            while True:
                event = await queue.get()
                yield event
                if isinstance(event, HubClosed):
                    return
        finally:
            unsubscribe()

    # -- tables: plain rows (lists of dicts) of the engine's state; ``tn.Hub`` shows them as DataFrames
    #    (``toh_nb.notebook.tables`` turns rows into frames; this module never imports pandas) --------

    def jobs(self) -> list[dict]:
        """One row per background job: id, label, status, detail, owner, started, finished, elapsed_s."""
        return job_rows(self._jobs)

    def agents(self) -> list[dict]:
        """One row per agent of the tree (root first, pre-order): ids, depth, label, mode, status, turns,
        tokens (own, subtree, budget, left), cost, started, elapsed_s, stop_reason, abandoned_tools (sync
        tool or model calls of the agent whose turn ended while their thread still runs: ``toh_nb.core.threads``)."""
        return self._costs.fill(agent_rows(self.runtime, self._root.id), self.runtime)

    def transcript(self, agent_id: "str | AsyncChild") -> list[dict]:
        """One row per event of the agent's log: turn, kind, role, source, text, tool, is_error."""
        agent_id = agent_id_of(agent_id)
        agent = self.runtime.agents.get(agent_id)
        try:  # a log that exists but cannot be read raises the store's StoreError, naming what is wrong
            session = agent.session if agent is not None else self._store.open(agent_id)
        except KeyError:
            raise UsageError(f'unknown agent "{agent_id}"') from None
        return transcript_rows(session)

    def events(self) -> list[dict]:
        """The recorded lifecycle events (children, jobs, interrupts, problems), oldest first."""
        return event_rows(self.runtime.bus)

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every agent and job, flush and close the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._service.close()
        await self._jobs.close()
        for agent in list(self.runtime.agents.values()):
            await agent.dispose()
            self.runtime.unregister(agent)
        await self._service.close_providers()
        self.runtime.closed = True
        self.runtime.bus.publish(HubClosed(agent_id=self._root.id, depth=0))
        self._store.close()
        models = [self.runtime.model]
        for model in self._child_models:
            if all(model is not seen for seen in models):
                models.append(model)
        for model in models:  # HTTP connection pools of real models, the hub's and per-child ones
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception as error:
                    self.runtime.bus.problem("hub", f"closing model {type(model).__name__} failed: {error}")

    async def __aenter__(self) -> "AsyncHub":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"AsyncHub(root={self.root}, {state})"
