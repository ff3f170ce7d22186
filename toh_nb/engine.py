"""The engine both faces drive: one :class:`Engine` per hub, built by :meth:`Engine.open` from a checked
:class:`~toh_nb.config.HubConfig`.

``tn.AsyncHub`` (the async face) and ``tn.Hub`` (the sync face, through the portal) are thin: every
decision the two must share lives here once — the composition (runtime, job registry, subagent service,
providers, tools, MCP mounts, root, costs, tracing), the checks of a start, default labels, which child a
label names, the refusal of a label passed where an agent id belongs, the event filter — so the twins
cannot drift apart (``tests/test_parity.py`` calls both with the same inputs). The servers
(``toh_nb acp``, ``toh_nb mcp``) drive the root through :attr:`Engine.root_port`, never the engine's
``Agent`` itself.

Work the user starts never wakes the root agent's model: its notices wait for the root's next turn.
Work the root's model starts (during ``run``) wakes it as the reference harness does.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from .core.budget import Limits
from .core.checks import agent_id_of, check_count, check_flag, check_text, check_timeout, job_id_of
from .core.content import USER_SOURCE, user_message
from .core.errors import ClosedError, RunError, ToolError, UsageError
from .core.events import HubClosed, HubEvent, SubtreeFilter
from .core.ids import IdSource
from .core.runtime import Runtime
from .core.session import SessionHeader, conversation_of, last_turn_number
from .core.session_repair import repair_tail
from .core.tools import FunctionTool, Tool, ToolContext, ToolResult, dispatch
from .config import HubConfig, check_root_id
from .costs import CostBook
from .jobs import JobRegistry, make_job_tools
from .jobs import texts as job_texts
from .jobs.registry import Job
from .mcp import texts as mcp_texts
from .mcp.config import MCPServer
from .mcp.mounts import MCPMounts, connection_of
from .models.names import check_model, model_of
from .providers.base import is_provider_shaped
from .results import AgentListing, RunResult, run_failed, run_result
from .snapshots import AGENT_COLUMNS
from .store import reserved_ids
from .subagents import ForkProvider, SpawnProvider, SubagentService
from .subagents.arguments import ChildOptions, StartRequest, validate_max_depth, validate_tool_filter
from .subagents.control import make_control_tools
from .subagents.report import make_report_tool
from .subagents.texts import not_a_provider
from .subagents.tool import SubagentTool, background_starter, make_subagent_tool
from .tracing import attach as attach_tracing
from .tracing import check_tracing
from .view import HubView

__all__ = ["CLOSED_MESSAGE", "Engine", "ROOT_ORIGIN", "RootPort", "check_start_options", "default_label",
           "label_not_id", "stored_root_id"]

ROOT_ORIGIN = "root"
CLOSED_MESSAGE = "this hub is closed; create a new Hub to continue (a store= directory keeps its children)"


def check_start_options(prompt: Any, label: Any, persona: Any, tool_filter: Any, model: Any, max_tokens: Any,
                        provider: Any) -> Any:
    """The one check of a ``spawn``/``start`` call's arguments (both faces use it; nothing is started
    when it raises a UsageError naming the argument). Returns the child's model object: ``model`` as
    given, or built from a name or a plain function (``toh_nb.models.names``)."""
    check_text(prompt, "prompt")
    if label is not None:
        check_text(label, "label")
    if persona is not None and not isinstance(persona, str):
        raise UsageError(f"persona must be a string or None, got {type(persona).__name__}")
    validate_tool_filter(tool_filter)
    check_model(model)
    check_count(max_tokens, "max_tokens", none="")
    check_text(provider, "provider")
    return model_of(model)


def stored_root_id(store: Any, root_id: str | None) -> str | None:
    """The root session a hub on ``store`` continues (``root_id``, else the newest stored root), or None
    for a new one. The sync Hub calls it in the caller's thread to read that log off the shared loop."""
    check_root_id(root_id)
    if root_id is not None:
        return root_id if store.exists(root_id) else None
    roots = [h for h in store.headers() if h.origin == ROOT_ORIGIN]
    return max(roots, key=lambda h: h.created).id if roots else None


def default_label(prompt: str) -> str:
    """A child started without a label is named by its prompt's first five words."""
    words = prompt.split()
    label = " ".join(words[:5])
    return label if len(words) <= 5 else label + " \u2026"


def label_not_id(label: str, ids: Sequence[str]) -> str:
    """The refusal of a label passed where an agent id belongs (both faces, every call naming an agent)."""
    return (f'"{label}" is a label, not an agent id; agents labelled "{label}": {", ".join(ids)} '
            f'(use the Child handle, or hub.send("{ids[-1]}", ...))')


def checked(result: RunResult | None, check: bool) -> RunResult | None:
    """What a person's call returns for ``result``: the result, unless it ended ``error`` and ``check``
    is on, then a :class:`~toh_nb.core.errors.RunError` (both faces; other stop reasons return)."""
    if check and result is not None and result.stop_reason == "error":
        raise RunError(run_failed(result), result, result.cause or "model")
    return result


class RootPort:
    """What a server face drives of the root (``toh_nb acp``, ``toh_nb mcp``): its id, its tools, its
    conversation, its log as it is written, and cancelling its turn. The engine's ``Agent`` stays inside.

    Made by the engine (:attr:`Engine.root_port`), not by you.
    """

    __slots__ = ("_engine",)

    def __init__(self, engine: "Engine") -> None:
        self._engine = engine

    @property
    def id(self) -> str:
        return self._engine.root.id

    def tools(self, names: Sequence[str] | None = None) -> dict[str, Tool]:
        """The root's tools by name (``names``: only those of them it has, in that order)."""
        tools = self._engine.root.tools
        if names is None:
            return dict(tools)
        return {name: tools[name] for name in names if name in tools}

    def conversation(self) -> list:
        """The root's conversation as messages, read from its log (what a session replays)."""
        return conversation_of(self._engine.root.session.events)

    def tap(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for every event appended to the root's log, after the store's own sink
        has taken it (on the loop thread; it must be quick); returns the function that removes it."""
        session = self._engine.root.session
        sink = session.sink

        def tee(log_session: Any, event: Any) -> None:
            if sink is not None:
                sink(log_session, event)
            listener(event)

        session.sink = tee

        def untap() -> None:
            if session.sink is tee:
                session.sink = sink
        return untap

    @property
    def status(self) -> str:
        """The root's status (``running`` while a turn runs)."""
        return self._engine.root.status

    def cancel(self, reason: str = "user") -> None:
        """Abort the root's current turn (its queued messages wait, as for ``interrupt``)."""
        self._engine.root.cancel(reason)


class Engine:
    """One hub's engine: everything :class:`~toh_nb.hub.AsyncHub` and :class:`~toh_nb.Hub` act on.

    Build one with :meth:`open` (on the loop that will run it); close it with :meth:`close`. The
    attributes (``runtime``, ``jobs``, ``service``, ``store``, ``root`` …) are the engine's parts, read
    by the faces and by tests through :mod:`toh_nb.testing`; they carry no stability promise.

    Raises:
        UsageError: an argument of the wrong type or range (naming it), a label where an agent id belongs.
        ProviderError: a delegation tool names a provider that is not registered.
        StoreError: the store is held by another hub or cannot be created.
        ClosedError: a call after :meth:`close`.
    """

    config: HubConfig
    runtime: Runtime
    jobs: JobRegistry
    service: SubagentService
    root: Any

    def __init__(self) -> None:
        raise TypeError("build an Engine with Engine.open(config)")

    @classmethod
    def open(cls, config: HubConfig) -> "Engine":
        """The engine of ``config``. ``config.store`` may be a store already opened (``tn.Hub`` opens a
        directory store in the caller's thread, so a slow scan never blocks the shared loop)."""
        if not isinstance(config, HubConfig):
            raise UsageError(f"from_config needs a toh_nb.HubConfig, got {type(config).__name__}")
        engine = object.__new__(cls)
        engine._build(config)
        return engine

    def _build(self, config: HubConfig) -> None:
        """Build the runtime, services and root agent from a checked config."""
        self.config = config
        model = config.model
        if model is None:
            from .models.demo import DemoModel

            model = DemoModel()
        max_depth = config.max_depth
        self.max_depth = validate_max_depth(max_depth)  # None: "provider-managed", no cap
        root_limits = config.limits
        self.costs = CostBook(config.prices)
        tracing_options = check_tracing(config.tracing)
        self.store = config.open_store()
        runtime = None
        try:
            self.ids = IdSource(config.ids)
            self.ids.skip_past(reserved_ids(self.store))
            runtime = Runtime(model=model, store=self.store, ids=self.ids, history=config.history,
                              max_parallel_tool_calls=config.max_parallel_tool_calls,
                              limits=Limits(root_limits.max_steps, None, root_limits.turn_timeout), gc=config.gc)
            self.runtime = runtime
            self.jobs = JobRegistry(runtime, max_per_owner=config.max_jobs_per_owner)
            self.service = SubagentService(runtime, report_delivery=config.report_delivery)
            self.service.register_provider(SpawnProvider())
            self.service.register_provider(ForkProvider())
            self._register_providers(config.providers)
            self.service.report_tool = make_report_tool(self.service)
            tools = config.tools
            configs = config.delegation_tools if config.delegation_tools is not None else [SubagentTool()]
            mounted = [item for item in tools if isinstance(item, SubagentTool)]
            self.mcp = MCPMounts(on_change=self._mcp_changed, on_problem=functools.partial(runtime.bus.problem, "mcp"))
            for item in [*configs, *mounted]:
                if isinstance(item, SubagentTool):
                    servers = self.child_servers(item.tools, f'SubagentTool "{item.name}" tools')
                    tool = item.build(self.service, self.jobs, background_mode=config.background_mode,
                                      max_depth=max_depth,
                                      child_tools=functools.partial(self._child_tools, servers) if servers else None)
                elif isinstance(item, dict):
                    tool = make_subagent_tool(self.service, self.jobs, **item)
                else:
                    raise UsageError("delegation_tools takes a list of tn.SubagentTool (or dicts of its settings), "
                                     f"got {type(item).__name__}")
                runtime.tools.add(tool)
            for tool in make_job_tools(self.jobs):
                runtime.tools.add(tool)
            for tool in make_control_tools(self.service):
                runtime.tools.add(tool)
            for item in tools:
                if not isinstance(item, (SubagentTool, MCPServer)):
                    runtime.tools.add(item if isinstance(item, Tool) else FunctionTool(item))
            # MCP servers start when the hub first runs work (``mounted``): a hub that never runs starts none
            self._mcp_lock: asyncio.Lock | None = None
            runtime.mcp_servers = tuple(item for item in tools if isinstance(item, MCPServer))
            self._mcp_ready = not runtime.mcp_servers
            self.root = self._make_root(config.root_id, root_limits, config.max_tokens)
            self.view = HubView(runtime, self.jobs, self.service, self.store, self.costs, self.root.id)
            self.root_port = RootPort(self)
            if self.costs.prices:  # a finished one-shot agent leaves the runtime: note its model while live
                runtime.bus.subscribe(lambda event: self.costs.note(event.agent_id, runtime))
            if tracing_options is not None:  # OpenTelemetry is imported only here (toh_nb.tracing)
                attach_tracing(runtime, tracing_options, self.costs)
        except BaseException:
            self.store.close()  # a refused configuration must not keep the store's lock,
            if runtime is not None:  # nor the GC policy and threads of a runtime nobody will close
                runtime.closed = True
            raise
        self.closed = False
        self._child_models: list[Any] = []
        self._labels: dict[str, str] | None = None  # the root's continuable children by label (child_labelled)
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
            self.service.register_provider(provider)

    def _make_root(self, root_id: str | None, limits: Limits, max_tokens: int | None) -> Any:
        store = self.store
        stored = stored_root_id(store, root_id)
        existing = store.open(stored) if stored is not None else None
        if existing is not None:
            repair_tail(existing)
            session = existing
        else:
            new_id = root_id or ("root" if self.ids.mode == "sequential" else self.ids.agent())
            session = store.create(SessionHeader(new_id, time.time(), origin=ROOT_ORIGIN))
        return self.runtime.create_agent(session, label=None, depth=0, parent=None, mode="root",
                                         conversation=conversation_of(session.events),
                                         turns=last_turn_number(session.events), limits=limits,
                                         max_tokens=max_tokens)

    # -- shared decisions ----------------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise ClosedError(CLOSED_MESSAGE)

    def ids_labelled(self, label: str) -> list[str]:
        """The ids of the agents labelled ``label`` when ``label`` is not an agent id itself."""
        view = self.view
        if view.has_agent(label):
            return []
        return [row["id"] for row in view.agents() if row.get("label") == label]

    def agent_id(self, agent: Any, name: str = "agent_id") -> str:
        """The agent id a call names (an id, or a Child/Job handle), refusing a label with the ids it
        names: ``send``, ``interrupt``, ``kill``, ``child``, ``transcript`` and ``activations`` of both
        faces go through here, before they act."""
        agent_id = agent_id_of(agent, name)
        if agent_id in self.runtime.agents:  # the hot path: a live agent
            return agent_id
        ids = self.ids_labelled(agent_id)
        if ids:
            raise UsageError(label_not_id(agent_id, ids))
        return agent_id

    def child_labelled(self, label: str) -> str | None:
        """The id of the root's first continuable child labelled ``label`` (live or stored), or None.

        The root's children by label are listed once and then kept: this engine's own starts add
        theirs; the listing is read again only when someone else may have started one (the root's model
        during a turn, or ``call_tool``), so N labelled starts cost N lookups, not N listings."""
        stamp = (self.root.turns, self._tool_calls)
        if self._labels is None or stamp != self._labels_stamp or self.root.status == "running":
            labels: dict[str, str] = {}
            for entry in self.service.list_children(self.root.id):
                if entry.kind == "child" and entry.label:
                    labels.setdefault(entry.label, entry.id)
            self._labels, self._labels_stamp = labels, stamp
        return self._labels.get(label)

    def request(self, prompt: str, label: str | None, persona: str | None, tool_filter: Any,
                model: Any, max_tokens: int | None, budgets: dict, provider: str) -> StartRequest:
        """The start request of a person's ``spawn``/``start`` (the root is its parent), from arguments
        :func:`check_start_options` passed (``model`` is the object it returned)."""
        # a provider that manages depth itself (an external harness) gets no cap from this hub
        capped = self.service.registered_provider(provider).capabilities.depth_limit
        if model is not None:
            self._child_models.append(model)  # closed with the hub (their HTTP pools)
        limits = self.runtime.limits.for_child(**budgets)
        options = ChildOptions.given(model, max_tokens, limits)
        return StartRequest(prompt=prompt, parent=self.root, label=label or default_label(prompt),
                            options=options, persona=persona,
                            tool_filter=validate_tool_filter(tool_filter),
                            max_depth=self.max_depth if capped else None, by_user=True)

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

    # -- MCP mounts ------------------------------------------------------------------------------

    async def mounted(self, timeout: float | None = None) -> None:
        """Start the hub's MCP servers and mount their tools (once, before the first work that needs
        tools). A server that cannot start raises its ToolError; the next call tries again. The wait
        counts toward the work it precedes: at most ``timeout`` (a run's) or the root's ``turn_timeout``."""
        if self._mcp_ready:
            return
        if self._mcp_lock is None:
            self._mcp_lock = asyncio.Lock()
        bounds = [b for b in (timeout, self.root.limits.turn_timeout) if b is not None]
        try:
            async with asyncio.timeout(min(bounds) if bounds else None), self._mcp_lock:
                if self._mcp_ready:
                    return
                tools = await self.mcp.tools(self.runtime.mcp_servers, self.runtime.tools.names(), shared=True)
                for tool in tools:
                    self.runtime.tools.add(tool)
                root = self.root  # made before the tools were known: it sees them from now on
                root.tools, root.tool_specs, root.system = self.runtime.compose(None)
                self._mcp_ready = True
        except TimeoutError:
            raise ToolError(mcp_texts.not_ready(min(bounds))) from None

    def _mcp_changed(self, old: list, new: list, shared: bool) -> None:
        """An MCP server's tool list changed (``notifications/tools/list_changed``): ``new`` replaces
        ``old`` — in the hub's tool layer for the hub's servers (so children started later see it), and
        in every live agent that sees them, from its next step."""
        runtime = self.runtime
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
    def child_servers(tools: Any, what: str) -> tuple:
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
        return [server for server in servers if server not in self.runtime.mcp_servers]

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
        in_use = {id(connection) for agent in list(self.runtime.agents.values()) if not agent.disposed
                  for connection in map(connection_of, agent.tools.values()) if connection is not None}
        await self.mcp.release(held, in_use)

    async def _child_tools(self, servers: tuple) -> tuple[tuple, tuple]:
        """The tools of a child's own MCP servers (started on first use, one session per server object;
        named beside the hub's tools), and the servers (what an external child is handed)."""
        return tuple(await self.mcp.tools(servers, self.runtime.tools.names())), servers

    # -- work a person starts --------------------------------------------------------------------

    async def run(self, prompt: str, timeout: float | None = None, check: bool = True) -> RunResult:
        """A turn of the root's model with ``prompt``; ``timeout`` aborts it (``aborted``); a turn that
        ended ``error`` raises RunError unless ``check=False``."""
        self.check_open()
        check_text(prompt, "prompt")
        timeout = check_timeout(timeout)
        check_flag(check, "check")
        began = time.monotonic()
        await self.mounted(timeout)
        if timeout is not None:  # what starting the servers took counts toward it
            timeout = max(0.0, timeout - (time.monotonic() - began))
        root = self.root
        future = root.submit(user_message(prompt, id=self.ids.message()))
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            root.cancel("user")
            outcome = await future
        except asyncio.CancelledError:
            root.cancel("user")
            raise
        return checked(run_result(outcome, root.id), check)

    async def spawn(self, prompt: str, *, label: str | None, background: bool, persona: str | None,
                    tool_filter: Any, model: Any, max_tokens: int | None, provider: str, budgets: dict,
                    tools: Sequence[MCPServer], check: bool = True) -> RunResult | Job:
        """A one-shot child: foreground → its RunResult (RunError when it ended ``error``, unless
        ``check=False``); background → the job registry's record."""
        self.check_open()
        check_flag(background, "background")
        check_flag(check, "check")
        servers = self.child_servers(tools, "tools")
        await self.mounted()
        model = check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        request = self.request(prompt, label, persona, tool_filter, model, max_tokens, budgets, provider)
        # after every check: a refused call starts no server. The child holds its own servers' sessions
        # (another spawn may share the server object) until it can no longer run, then they stop
        held = self.mcp.hold(self._own_servers(servers))
        try:
            if servers:
                request.tools, request.mcp_servers = await self._child_tools(servers)
            if background:
                starter = background_starter(self.service, provider, request)
                job = self.jobs.start("subagent", request.label, self.root,
                                      self._releasing(starter, held) if held else starter, by_user=True)
                held = []  # the job releases them when it ends
                await self.service.child_recorded(job.child_id)  # the job's child is in the log when its id is out
                return job
            run = await self.service.start(provider, request, waited=True)
            try:
                result = await run.result
            finally:
                await run.dispose()
        finally:
            if held:
                await asyncio.shield(self._release_servers(held))
        return checked(run_result(result, run.id, request.label), check)

    async def start(self, prompt: str, *, label: str | None, persona: str | None, tool_filter: Any, model: Any,
                    max_tokens: int | None, provider: str, budgets: dict,
                    tools: Sequence[MCPServer]) -> tuple[str, str, bool]:
        """A continuable child of the root: ``(id, label, reused)`` (``reused``: the root already had
        one with this explicit label, returned instead, and ``prompt`` was not sent)."""
        self.check_open()
        model = check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        servers = self.child_servers(tools, "tools")
        if label is not None:
            existing = self.child_labelled(label)
            if existing is not None:
                return existing, label, True
        await self.mounted()
        request = self.request(prompt, label, persona, tool_filter, model, max_tokens, budgets, provider)
        if servers:
            request.tools, request.mcp_servers = await self._child_tools(servers)
        child_id, _ = await self.service.start_continuable(provider, request)
        if self._labels is not None:
            self._labels.setdefault(request.label, child_id)
        return child_id, request.label, False

    async def child_label(self, child: Any) -> tuple[str, str]:
        """``(id, label)`` of a continuable child below the root, for a handle on it."""
        self.check_open()
        child_id = self.agent_id(child, "child_id")
        for entry in self.service.list_descendants(self.root.id):
            if entry.id == child_id and entry.kind == "child":
                return child_id, entry.label or ""
            if entry.id == child_id:  # listed as a diagnostic: say what is wrong, as send does
                raise await self.service.refusal(entry)
        raise UsageError(f'no continuable child "{child_id}" below this hub\'s root')

    async def wait(self, child: Any, timeout: float | None = None, check: bool = True) -> str | None:
        """Wait until a continuable child settles (at most ``timeout`` s); the closing text of its last
        activation. When that activation settled in this process and ended ``error``, a RunError unless
        ``check=False`` (a timeout, or a child settled by an earlier session, never raises)."""
        child_id = agent_id_of(child)
        timeout = check_timeout(timeout)
        check_flag(check, "check")
        text = await self.view.settled(child_id, timeout)
        failure = self.service.failure_of(child_id) if check else None
        if failure is not None and self.service.status_of(child_id) != "running":
            diagnostic, cause = failure
            label = next((entry.label for entry in self.service.list_descendants(self.root.id)
                          if entry.id == child_id), None) or child_id
            checked(RunResult(text or "", [], "error", child_id, diagnostic=diagnostic, label=label, cause=cause), True)
        return text

    def job(self, job_id: str) -> Job:
        """The record of one of the root's background jobs (``subagent-N``), also those its model started."""
        self.check_open()
        return self.jobs.get(job_id_of(job_id), self.root)

    async def send(self, agent: Any, message: str) -> str:
        """Queue ``message`` as the child's next turn (cold-resuming it if it is ``ready``); its id."""
        self.check_open()
        agent_id = self.agent_id(agent)
        check_text(message, "message")
        await self.mounted()
        return await self.service.followup(self.root, agent_id, message, USER_SOURCE)

    def interrupt(self, agent: Any) -> None:
        """Stop only the agent's current turn (an accepted no-op on a settled or unknown id)."""
        self.check_open()
        self.service.interrupt(self.agent_id(agent), self.root)

    async def kill(self, agent: Any) -> bool:
        """Stop a continuable child for good, once its record of the dropped follow-ups is written;
        False when it was not running."""
        self.check_open()
        return await self.service.kill(self.agent_id(agent), self.root)

    def kill_job(self, job_id: str, reason: str | None = None) -> str:
        """Stop any background job of the tree, acting as its owner; the ``job_kill`` tool's line."""
        self.check_open()
        job_id = job_id_of(job_id)
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        job = self.jobs.jobs.get(job_id)
        if job is None:
            raise UsageError(f"{job_id} is not a job")
        if self.jobs.kill(job_id, job.owner, reason) == "requested":
            return job_texts.kill_requested(job_id)
        return job_texts.kill_already_finished(job_id, job.status, job.detail)

    def agents(self, columns: Any = None) -> list[dict]:
        """The rows of ``hub.agents()`` on both faces: the documented columns (``AGENT_COLUMNS``) or the
        ones chosen (the view's rows also carry what the tree alone shows, such as ``diagnostic``)."""
        rows = self.view.agents(columns)
        if columns is None or columns == "all":
            rows = [{name: row.get(name) for name in AGENT_COLUMNS} for row in rows]
        return rows

    def list_agents(self, scope: str = "children") -> AgentListing:
        """The root's continuable children (or the whole tree); ``str()`` is the tool's text."""
        self.check_open()
        if scope == "children":
            return AgentListing(self.service.list_children(self.root.id))
        if scope == "descendants":
            return AgentListing(self.service.list_descendants(self.root.id))
        raise UsageError(f'scope must be "children" or "descendants", got {scope!r}')

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one tool as the root agent; exactly what a model would read."""
        self.check_open()
        check_text(name, "name")
        await self.mounted()
        self._tool_calls += 1  # a delegation tool may start a child of the root (see child_labelled)
        ctx = ToolContext(self.root, self.runtime, self.ids.call(), by_user=True)
        return await dispatch(self.root.tools.get, ctx, name, dict(arguments))

    # -- the event stream ------------------------------------------------------------------------

    async def event_batches(self, agent: Any, kinds: Any, history: bool,
                            timeout: float | None) -> AsyncIterator[list[HubEvent]]:
        """The stream's events, as lists of every event waiting at each step (the sync ``stream`` reads
        one list per call onto the loop, not one event). Ends after the closing event or ``timeout``."""
        self.check_open()
        check_flag(history, "history")
        timeout = check_timeout(timeout)
        keep = self.event_filter(agent, kinds)
        queue: asyncio.Queue = asyncio.Queue()
        bus = self.runtime.bus
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

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every agent and job, flush and close the store, close the models' pools. Idempotent."""
        if self.closed:
            return
        self.closed = True
        runtime = self.runtime
        await self.service.close()
        await self.jobs.close()
        for agent in list(runtime.agents.values()):
            await agent.dispose()
            runtime.unregister(agent)
        await self.service.close_providers()
        await self.mcp.close()  # every agent is gone: no call is in flight; no server process is left
        runtime.closed = True
        runtime.bus.publish(HubClosed(agent_id=self.root.id, depth=0))
        self.store.close()
        models = [runtime.model]
        for model in self._child_models:
            if all(model is not seen for seen in models):
                models.append(model)
        for model in models:  # HTTP connection pools of real models, the hub's and per-child ones
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception as error:
                    runtime.bus.problem("hub", f"closing model {type(model).__name__} failed: {error}")
