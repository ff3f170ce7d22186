"""The sync facade: ``tn.Hub``, ``tn.Job`` and ``tn.Child`` — blocking twins of the async face.

::

    import toh_nb as tn

    with tn.Hub(ids="sequential") as hub:          # offline DemoModel, in-memory store
        res = hub.spawn("Summarise …", label="summary")       # foreground one-shot -> RunResult
        job = hub.spawn("Crawl …", background=True)           # background one-shot -> Job
        kid = hub.start("You research Y", label="researcher") # continuable -> Child
        kid.wait(); kid.send("And Z?"); kid.wait()
        hub.jobs(); hub.agents(); hub.list_agents("descendants")

Every method submits its work to the portal loop (:mod:`toh_nb.notebook.portal`), where the wrapped
:class:`~toh_nb.hub.AsyncHub` was built, so everything loop-bound belongs to that one loop and
background children keep running between calls and while a cell runs long synchronous code. Tables and
listings are computed on the loop thread too (the state is loop-owned) and converted to DataFrames in
the caller's thread.

Errors: obvious bad input is refused in the caller's thread before anything is submitted, with a
:class:`~toh_nb.core.errors.UsageError` naming the problem; refusals of the engine arrive as the
documented :mod:`toh_nb.core.errors` types (``SubagentError`` with its reference code, ``JobError`` …).
The hub stays usable after any of them. A closed hub raises :class:`~toh_nb.core.errors.ClosedError`.
A call made from the portal thread itself raises ``UsageError`` instead of deadlocking; a
``KeyboardInterrupt`` (kernel interrupt) while a call waits cancels that call's work and re-raises (a
foreground child is aborted; a waited-for background job or child keeps running).
"""

from __future__ import annotations

import asyncio
import functools
import html
import importlib.util
import os
import queue
import threading
import weakref
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence, overload

from ..core.budget import DEFAULT_MAX_STEPS
from ..core.errors import ClosedError, UsageError
from ..core.model import Model
from ..core.tools import ToolResult
from ..config import HubConfig
from ..core.events import DEFAULT_HISTORY, HubClosed, HubEvent
from ..core.checks import agent_id_of, check_flag, check_text, check_timeout, job_id_of
from ..engine import CLOSED_MESSAGE, check_start_options, stored_root_id
from ..hub import Activity, AsyncChild, AsyncHub, AsyncJob, ChildFacts, JobFacts, SessionStore, ToolFilter
from ..results import AgentListing, RunResult
from . import portal as portals
from .display import SendReceipt
from .interrupts import explained, still_running
from .progress import waiting
from .tables import agents_frame, conversation_frame, events_frame, jobs_frame, transcript_frame

LOOP_MODES = ("portal", "kernel")
_STREAM_END = object()  # astream ended (the hub closed)


def _check_loop(loop: Any) -> None:
    if loop not in LOOP_MODES:
        raise UsageError(f'loop must be "portal" or "kernel", got {loop!r}')


class _StreamFailed:
    """What ``astream`` raised on the portal (a refused argument), raised again in the reader's thread."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def activity(async_hub: AsyncHub) -> str:
    """``2 agents running · 1 job active · 340 tokens``: the hub's :attr:`~toh_nb.hub.AsyncHub.activity`,
    read from the progress line's ticker thread (informational)."""
    return async_hub.activity.line()


class _State:
    """What the garbage-collection finalizer needs (never the facade itself)."""

    __slots__ = ("runner", "async_hub", "closed", "key", "closing", "store_key", "trees")

    def __init__(self, runner: Any, async_hub: AsyncHub, key: int) -> None:
        self.runner = runner
        self.async_hub = async_hub
        self.closed = False
        self.key = key
        self.closing: Any = None  # the finalizer's close future, when it closed the hub
        self.store_key: str | None = None
        self.trees: "weakref.WeakSet" = weakref.WeakSet()  # open hub.tree() widgets, closed first


#: the open sync hubs of this process by store directory (a re-run ``hub = tn.Hub(store=d)`` cell
#: takes over from the previous hub on ``d``); values are the hubs' ``_State``. ``close()`` removes its
#: entry; a hub dropped without ``close()`` stays listed with its finalizer's close future, which the
#: next hub on that store waits for before it takes the store's lock.
_BY_STORE: dict[str, _State] = {}
_BY_STORE_LOCK = threading.Lock()
TAKEOVER_TIMEOUT = 30.0  # seconds to wait for the previous hub on a store to close


def _store_key(store: Any) -> str | None:
    """The real path of a directory store argument (None for memory stores and store objects)."""
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        return os.path.realpath(os.fsdecode(os.fspath(store)))
    return None


def _take_over(key: str | None, store: Any) -> None:
    """Close the previous open hub of this process on the same store directory, saying so in one line.

    Across processes the store's lock still refuses (a ``StoreError`` naming the holder's pid).
    """
    if key is None:
        return
    with _BY_STORE_LOCK:
        previous = _BY_STORE.pop(key, None)
    if previous is None:
        return
    if previous.closing is not None:  # dropped without close(): its finalizer is closing it already
        try:
            previous.closing.result(TAKEOVER_TIMEOUT)
        except Exception:
            pass
        return
    if previous.closed:
        return
    _close_state(previous)
    print(f"toh_nb: closed the previous Hub on store {os.fspath(store)!s} (root {previous.async_hub.root}) "
          f"and took it over; its continuable children stay resumable here")


def _close_state(state: _State) -> None:
    """Close a hub given its state (what ``Hub.close`` and a takeover share)."""
    if state.store_key is not None:
        with _BY_STORE_LOCK:
            if _BY_STORE.get(state.store_key) is state:
                del _BY_STORE[state.store_key]
    if state.closed:
        return
    for tree in list(state.trees):  # while the hub still answers: each keeps its final snapshot
        try:
            tree.close()
        except Exception:
            pass
    try:
        state.runner.call(state.async_hub.close)
    except ClosedError:
        pass  # the portal already stopped, and its shutdown closed this hub
    state.closed = True
    state.runner.unregister_closer(state.key)
    state.runner.release()


def _finalize(state: _State) -> None:
    """A hub dropped without ``close()`` (a re-run ``hub = tn.Hub()`` cell): close it on its loop."""
    if state.closed:
        return
    state.closed = True
    runner = state.runner
    runner.unregister_closer(state.key)
    if isinstance(runner, portals.KernelRunner):
        runner.release()
        return
    try:
        future = runner.submit(state.async_hub.close)
    except ClosedError:
        return
    state.closing = future
    future.add_done_callback(lambda _: runner.release())


class Hub:
    """The hub: a root agent you talk to from a notebook cell, its delegation tree, and everything to watch it.

    ``hub.run(prompt)`` gives the root's model a turn (it may delegate); ``hub.spawn`` starts a one-shot
    child (foreground: a ``RunResult``; ``background=True``: a ``Job``); ``hub.start`` a continuable
    ``Child``. ``hub.tree()`` is the live widget, ``hub.agents()``/``jobs()``/``transcript()``/``events()``
    are DataFrames, ``hub.stream()`` the typed event stream. Every method is one call onto the engine's
    loop; ``hub.close()`` (or ``with tn.Hub() as hub:``, or interpreter exit) stops everything. Re-running
    ``tn.Hub(store=d)`` in a kernel closes the previous hub of that store and takes over.

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
        loop: ``"portal"`` (default): the engine runs on a shared loop thread, so the kernel stays free;
            ``"kernel"``: on the kernel's own event loop through ``nest_asyncio2`` (the maintained fork of
            ``nest_asyncio``), an explicit opt-in with known limits: it patches asyncio for the whole process
            for good (pure-Python tasks below Python 3.14), cannot patch uvloop (a UsageError), has been
            reported to corrupt ipykernel >= 7 kernels, and background children only progress while the
            kernel loop runs (``toh_nb.notebook.portal.KernelRunner`` says what was re-checked).
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
            included), a tool that cannot be described to a model, or an unknown ``loop``.
        ProviderError: a delegation tool names a provider that is not registered.
        StoreError: ``store`` is held by a hub of another process (``… is in use by another hub (pid N)``)
            or cannot be created.
    """

    def __init__(self, model: Model | None = None, *, store: str | os.PathLike[str] | SessionStore | None = None,
                 max_depth: int | str = 3,
                 max_parallel_tool_calls: int = 10, ids: str = "uuid", background_mode: str = "one-shot",
                 tools: Sequence[Any] = (), delegation_tools: Sequence[Any] | None = None,
                 root_id: str | None = None, fsync: str | None = None, max_jobs_per_owner: int = 10,
                 report_delivery: str = "next-step", loop: str = "portal", max_tokens: int | None = None,
                 max_steps: int | None = DEFAULT_MAX_STEPS, token_budget: int | None = None,
                 turn_timeout: float | None = None, providers: Mapping[str, Any] | None = None,
                 history: int = DEFAULT_HISTORY, prices: Mapping[str, tuple[float, float]] | None = None,
                 tracing: Any = None, gc: bool | None = None) -> None:
        _check_loop(loop)
        # checked once, in the caller's thread, before any store is touched (or a previous hub closed for it)
        self._open(HubConfig.of(locals()), loop)

    @classmethod
    def from_config(cls, config: HubConfig, *, loop: str = "portal") -> "Hub":
        """A hub built from a :class:`~toh_nb.config.HubConfig` (the twin of ``tn.AsyncHub.from_config``;
        ``loop`` as for ``tn.Hub``, the one keyword of the sync face that is no field of the config)."""
        if not isinstance(config, HubConfig):
            raise UsageError(f"from_config needs a toh_nb.HubConfig, got {type(config).__name__}")
        _check_loop(loop)
        hub = cls.__new__(cls)
        cls._open(hub, config, loop)
        return hub

    def _open(self, config: HubConfig, loop: str) -> None:
        store, root_id = config.store, config.root_id
        self._loop_mode = loop
        store_key = _store_key(store)
        _take_over(store_key, store)
        # the store opens here, in the caller's thread: its directory scan (a slow or network disk) must
        # not run on the portal loop that every hub of the process shares
        opened = config.open_store()
        try:
            root = stored_root_id(opened, root_id)
            if root is not None:
                opened.open(root)  # the root's own log is read here too (the store keeps the session)
            runner = portals.acquire() if loop == "portal" else portals.KernelRunner()
        except BaseException:
            opened.close()
            raise
        # the root found above, named: the hub then only checks it exists
        built = config.replace(store=opened, root_id=root if root is not None else root_id)
        try:
            async_hub = runner.call(AsyncHub.from_config, built)
        except BaseException:
            opened.close()  # idempotent: a refused configuration never keeps the store's lock
            runner.release()
            raise
        self._async = async_hub
        self._runner = runner
        self._state = _State(runner, async_hub, id(self))
        runner.register_closer(self._state.key, async_hub.close)
        self._finalizer = weakref.finalize(self, _finalize, self._state)
        self._finalizer.atexit = False  # at exit the portal's own shutdown closes open hubs
        if store_key is not None:
            self._state.store_key = store_key
            with _BY_STORE_LOCK:
                _BY_STORE[store_key] = self._state

    # -- plumbing ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state.closed or self._async.closed:
            raise ClosedError(CLOSED_MESSAGE)

    def _call(self, fn: Any, *args: Any) -> Any:
        self._check_open()
        return self._runner.call(fn, *args)

    def _job_handle(self, inner: AsyncJob) -> "Job":
        return Job(self._call, inner)

    # -- properties --------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root agent's id (the notebook user acts as this agent)."""
        return self._async.root

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: a closed hub refuses new work."""
        return self._state.closed or self._async.closed

    @property
    def model(self) -> Any:
        """The root's model (the one children use unless given their own)."""
        return self._async.model

    @property
    def loop(self) -> str:
        """``"portal"`` or ``"kernel"``."""
        return self._loop_mode

    @property
    def config(self) -> HubConfig:
        """The checked configuration this hub was built from (``loop`` aside)."""
        return self._async.config

    @property
    def activity(self) -> Activity:
        """What runs right now (:class:`~toh_nb.hub.Activity`); read without waiting for the loop."""
        return self._async.activity

    @property
    def engine(self) -> Any:
        """The :class:`~toh_nb.engine.Engine` under this hub (:attr:`AsyncHub.engine`; act on it only on
        :attr:`portal`'s loop)."""
        return self._async.engine

    @property
    def async_hub(self) -> AsyncHub:
        """The wrapped AsyncHub; await its methods only on :attr:`portal`'s loop."""
        return self._async

    @property
    def portal(self) -> Any:
        """The runner every call goes through: ``call(fn, *args)`` blocks, ``submit(fn, *args)`` does
        not (a ``concurrent.futures.Future``; for widget callbacks)."""
        return self._runner

    # -- running work ------------------------------------------------------------------------------

    def run(self, prompt: str, *, timeout: float | None = None, check: bool = True) -> RunResult:
        """Give the root agent's model a turn with ``prompt`` (it may delegate); its RunResult.

        ``timeout`` (seconds) aborts the turn when it runs longer (stop reason ``aborted``). A turn that
        ended ``error`` raises :class:`~toh_nb.core.errors.RunError` (``.result``, ``.cause``);
        ``check=False`` returns its RunResult instead.
        """
        check_text(prompt, "prompt")
        check_timeout(timeout)
        check_flag(check, "check")
        call = functools.partial(self._async.run, prompt, timeout=timeout, check=check)
        with explained(lambda: f"root turn aborted; {still_running(self._async)}"):
            with waiting("root turn", status=self._activity):
                return self._call(call)

    def _activity(self) -> str:
        """The progress line's status: agents running, jobs active, tokens so far (plain reads)."""
        return activity(self._async)

    @overload
    def spawn(self, prompt: str, *, label: str | None = None, background: Literal[False] = False,
              persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
              max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
              token_budget: int | None = None, turn_timeout: float | None = None, tools: Sequence[Any] = (),
              check: bool = True) -> RunResult: ...

    @overload
    def spawn(self, prompt: str, *, label: str | None = None, background: Literal[True],
              persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
              max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
              token_budget: int | None = None, turn_timeout: float | None = None, tools: Sequence[Any] = (),
              check: bool = True) -> Job: ...

    def spawn(self, prompt: str, *, label: str | None = None, background: bool = False,
              persona: str | None = None, tool_filter: ToolFilter | None = None, model: Model | None = None,
              max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
              token_budget: int | None = None, turn_timeout: float | None = None,
              tools: Sequence[Any] = (), check: bool = True) -> RunResult | Job:
        """A one-shot child: waits for it and returns a RunResult; ``background=True`` returns a Job.
        Budgets (``max_steps``, ``token_budget``, ``turn_timeout``) as in :meth:`AsyncHub.spawn`. A
        foreground child whose run ended ``error`` raises :class:`~toh_nb.core.errors.RunError`;
        ``check=False`` returns its RunResult instead."""
        if not isinstance(background, bool):
            raise UsageError(f"background must be True or False, got {background!r}")
        check_flag(check, "check")
        model = check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        call = functools.partial(self._async.spawn, prompt, label=label, background=background, persona=persona,
                                 tool_filter=tool_filter, model=model, max_tokens=max_tokens, provider=provider,
                                 max_steps=max_steps, token_budget=token_budget, turn_timeout=turn_timeout,
                                 tools=tools, check=check)
        if background:
            return self._job_handle(self._call(call))
        name = f"foreground child {label!r}" if label else "foreground child"
        with explained(lambda: f"{name} aborted; {still_running(self._async)}"):
            with waiting(f"running {name}", status=self._activity):
                return self._call(call)

    def start(self, prompt: str, *, label: str | None = None, persona: str | None = None,
              tool_filter: ToolFilter | None = None, model: Model | None = None, max_tokens: int | None = None,
              provider: str = "spawn", max_steps: int | None = None, token_budget: int | None = None,
              turn_timeout: float | None = None, tools: Sequence[Any] = ()) -> "Child":
        """A continuable child; returns as soon as its first message is accepted (budgets as in
        :meth:`spawn`; they hold for every turn of the child).

        Re-running a cell is safe: an explicit ``label`` names one continuable child of the root. When
        the root already has one with this label (``running``, ``idle`` or ``ready``, also one stored by
        an earlier session in a ``store=`` directory), ``start`` returns that child instead of starting a
        second one, does not send ``prompt``, and prints one line saying so. Pass another label (or
        none) for a second child.
        """
        model = check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        value = self._call(functools.partial(self._async.start, prompt, label=label, persona=persona,
                                             tool_filter=tool_filter, model=model, max_tokens=max_tokens,
                                             provider=provider, max_steps=max_steps, token_budget=token_budget,
                                             turn_timeout=turn_timeout, tools=tools))
        if value.reused:
            print(f'toh_nb: the root already has a child labelled "{label}": {value.id} [{value.status}]; '
                  f"returned it and did not send the prompt (kid.send(...) sends more; "
                  f"another label starts a second child)")
        return Child(self._call, value, self.transcript)

    def child(self, child_id: "str | Child") -> "Child":
        """A handle on an existing continuable child of the root (for example after a restart)."""
        return Child(self._call, self._call(self._async.child, agent_id_of(child_id, "child_id")), self.transcript)

    def job(self, job_id: str) -> "Job":
        """A handle on one of the root's background jobs (``subagent-N``), also those its model started."""
        return self._job_handle(self._call(self._async.job, job_id))

    def send(self, agent_id: "str | Child", message: str) -> SendReceipt:
        """Queue ``message`` as the child's next turn (cold-resuming a ``ready`` child); the message id
        (a ``str`` that displays as ``sent message <id> to <agent>``)."""
        agent_id = agent_id_of(agent_id)
        check_text(message, "message")
        return SendReceipt(self._call(self._async.send, agent_id, message), agent_id)

    def interrupt(self, agent_id: "str | Child") -> None:
        """Stop only the agent's current turn; its queued messages wait for the next ``send``."""
        # an unknown id is an accepted no-op (as for the tool); a label is refused with the ids it names
        self._call(self._async.interrupt, agent_id_of(agent_id))

    def kill(self, agent_id: "str | Child") -> bool:
        """Stop a continuable child for good (its queue dropped; it settles and lists ``ready``)."""
        return self._call(self._async.kill, agent_id_of(agent_id))

    def kill_job(self, job_id: str, reason: str | None = None) -> str:
        """Ask any background job of the tree to stop, also one a descendant's model started (see
        :meth:`AsyncHub.kill_job`); the line the ``job_kill`` tool would return."""
        return self._call(self._async.kill_job, job_id_of(job_id), reason)

    def list_agents(self, scope: str = "children") -> AgentListing:
        """The root's continuable children (``scope="descendants"``: the whole tree); ``str()`` is
        exactly the ``list_agents`` tool text."""
        if scope not in ("children", "descendants"):
            raise UsageError(f'scope must be "children" or "descendants", got {scope!r}')
        return AgentListing(self._call(self._async.list_agents, scope))

    def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run one tool as the root agent; the ToolResult is exactly what a model would receive."""
        check_text(name, "name")
        return self._call(functools.partial(self._async.call_tool, name, **arguments))

    # -- the event stream ---------------------------------------------------------------------------

    def stream(self, agent: Any = None, *, kinds: Any = None, history: bool = False,
               timeout: float | None = None) -> Iterator[HubEvent]:
        """``for ev in hub.stream(...)``: typed events as they happen — :meth:`AsyncHub.astream` (same
        ``agent``, ``kinds`` and ``history``), run on the portal and read here. Ends after the hub's closing
        event or, with ``timeout``, after that many seconds without an event (counted here, between two
        reads); the work keeps running on the portal while the loop body runs, and events wait until read."""
        if self._loop_mode == "kernel":
            raise UsageError('hub.stream() needs the portal loop; with Hub(loop="kernel") use '
                             "`async for ev in hub.async_hub.astream()`")
        check_timeout(timeout)
        check_flag(history, "history")
        events: queue.SimpleQueue = queue.SimpleQueue()
        astream = self._async.astream

        async def pump() -> None:
            try:
                async for event in astream(agent, kinds=kinds, history=history):
                    events.put(event)
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # a refused argument: raised in the reader's thread
                events.put(_StreamFailed(error))
            else:
                events.put(_STREAM_END)

        async def start() -> asyncio.Task:
            task = asyncio.get_running_loop().create_task(pump())
            await asyncio.sleep(0)  # the pump runs up to its first wait: astream has subscribed
            return task

        task = self._call(start)
        try:
            while True:
                try:
                    event = events.get(timeout=timeout)
                except queue.Empty:
                    return
                if event is _STREAM_END:
                    return
                if isinstance(event, _StreamFailed):
                    raise event.error
                yield event
                if isinstance(event, HubClosed):
                    return
        finally:
            if not task.done() and not self.closed:
                self._runner.call(task.cancel)

    # -- permission requests ------------------------------------------------------------------------

    def pending_permissions(self, agent: Any = None) -> list[dict]:
        """The permission requests of external agents waiting for an answer (see
        :meth:`AsyncHub.pending_permissions`); the tree shows them with Allow/Deny buttons."""
        return self._call(self._async.pending_permissions, agent_id_of(agent) if agent is not None else None)

    def answer_permission(self, ask_id: str, allowed: bool) -> str:
        """Allow (``True``) or deny (``False``) a pending permission request (see
        :meth:`AsyncHub.answer_permission`); the line the tree shows."""
        check_text(ask_id, "ask_id")
        check_flag(allowed, "allowed")
        return self._call(self._async.answer_permission, ask_id, allowed)

    # -- tables -------------------------------------------------------------------------------------

    def jobs(self):
        """DataFrame: id, label, status, detail, owner, started, finished, elapsed_s."""
        return jobs_frame(self._call(self._async.jobs))

    def agents(self, columns: "str | list[str] | None" = None):
        """DataFrame, one row per agent of the tree (one-shot children included), with every column of
        ``toh_nb.snapshots.AGENT_COLUMNS`` (id, parent, depth, label, mode, status, turns, tokens, budget,
        cost, started, elapsed_s, stop_reason, abandoned_tools, denied). It *displays* the readable ones (id,
        parent, label, mode, status, turns, input/output tokens, elapsed_s, stop_reason, and budget, cost,
        abandoned or denied when any agent has one) and names the rest under the table; ``columns="all"``
        displays every column, a list of names gives exactly those."""
        return agents_frame(self._call(self._async.agents), columns)

    def transcript(self, agent_id: "str | Child", raw: bool = False, columns: "str | list[str] | None" = None):
        """DataFrame of the agent's conversation: one row per message (``role`` user / assistant, with the
        model call's tokens), per tool call (its ``arguments`` and its result in ``text``) and per turn end
        (how it ended, the turn's tokens and ``elapsed_s``). ``raw=True``: the log itself, one row per event
        (turn, kind, role, source, text, tool, is_error). The conversation *displays* turn, role, text and the
        columns that say something (tools, tokens …) and names the rest under it; ``columns="all"``
        displays every column, a list of names gives exactly those (as in :meth:`agents`)."""
        check_flag(raw, "raw")
        rows = self._call(self._async.transcript, agent_id_of(agent_id), raw)
        return transcript_frame(rows, columns) if raw else conversation_frame(rows, columns)

    def activations(self, agent_id: "str | Child") -> list[dict]:
        """When the agent worked: one entry per turn (start, end, how it ended, tokens) with its model and
        tool calls as timed spans, as plain dicts (:meth:`toh_nb.AsyncHub.activations`; what the tree's
        Timeline draws)."""
        return self._call(self._async.activations, agent_id_of(agent_id))

    def events(self):
        """DataFrame of the lifecycle events (subagent/start|end, job/*), in order."""
        return events_frame(self._call(self._async.events))

    def graph(self):
        """A Mermaid diagram of the whole tree (agents and jobs): renders inline in JupyterLab; ``str()`` is
        the Mermaid text for docs (:class:`toh_nb.notebook.graph.MermaidGraph`)."""
        from .graph import MermaidGraph
        from .treeview import tree_rows

        return MermaidGraph(self._call(tree_rows, self._async))

    def tree(self, **options: Any):
        """The live agent-tree widget (``toh_nb.notebook.widget.AgentTree``); ``options`` are its
        keyword arguments (``interval``, ``max_nodes``)."""
        self._check_open()
        if importlib.util.find_spec("toh_nb.notebook.widget") is None:
            raise UsageError("the agent-tree widget is not available in this installation "
                             "(toh_nb.notebook.widget is missing); use hub.list_agents('descendants') or hub.agents()")
        try:
            from .widget import AgentTree
        except ImportError as error:
            raise UsageError(f"the agent-tree widget cannot be loaded: {error}") from error
        tree = AgentTree(self, **options)
        self._state.trees.add(tree)
        return tree

    # -- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every agent and job, flush and close the store; the last hub also stops the portal
        thread. Idempotent."""
        state = self._state
        if state.closed:
            return
        _close_state(state)
        self._finalizer.detach()

    def __enter__(self) -> "Hub":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"Hub(root={self.root}, model={type(self.model).__name__}, loop={self._loop_mode}, {state})"

    def _repr_html_(self) -> str:
        state = "closed" if self.closed else "open"
        return (f"<div class='toh-hub'><b>toh_nb Hub</b> root <code>{html.escape(self.root)}</code> "
                f"\u2014 model {html.escape(type(self.model).__name__)}, loop {self._loop_mode}, {state}</div>")


class Job(JobFacts):
    """A background one-shot child, as a job (``subagent-N``): what ``hub.spawn(..., background=True)`` returns.

    ``job.output(wait=True)`` reads its result (a job that did not complete returns the same error text a
    foreground delegation would, naming the transcript that holds the run); ``job.result()`` is its
    ``RunResult``; ``job.kill()`` stops it. ■ (interrupting the kernel) while waiting stops the wait, not
    the job. Made by the hub (``hub.job(id)`` finds one again), not by you.

    Args:
        call: the hub's call onto its loop.
        inner: the ``AsyncJob`` it wraps (its id, label and status are read from it).

    Raises:
        UsageError: ``wait`` is not a bool, a ``timeout`` is given without ``wait=True``, or ``kill`` a
            reason that is not a string.
        ClosedError: the hub is closed.
        JobError: the job is not one of this hub's root's jobs.
    """

    def __init__(self, call: Callable[..., Any], inner: AsyncJob) -> None:
        self._call = call  # the hub's call onto its loop (refuses once the hub is closed)
        self._inner = inner
        self._facts = inner  # read by JobFacts (plain attribute reads of the job's record)

    def output(self, wait: bool = False, timeout: float | None = None) -> str:
        """The job's result text (``""`` while it has none); ``wait=True`` first waits for the job to
        settle, for at most ``timeout`` seconds (``None``: no limit). The job keeps running after a
        timeout or a KeyboardInterrupt. A job that did not complete returns what a foreground delegation
        returns for the same run (``Error: <headline>``, ``Diagnostic: …``, ``Partial output before the
        run ended:`` …) and the ``hub.transcript(...)`` that holds the child's whole run."""
        return self._read(self._inner.output, wait, timeout)

    def result(self, wait: bool = False, timeout: float | None = None, check: bool = True) -> "RunResult | None":
        """The settled job's RunResult (``.stop_reason``, ``.diagnostic``, ``.text``, ``.usage``,
        ``.agent_id``: the child's id), None while it runs; ``wait``/``timeout`` as for :meth:`output`.
        A run that ended ``error`` raises :class:`~toh_nb.core.errors.RunError`; ``check=False`` returns
        it (``output()`` always returns the error text)."""
        check_flag(check, "check")
        return self._read(functools.partial(self._inner.result, check=check), wait, timeout)

    def _read(self, method: Callable[..., Any], wait: bool, timeout: float | None) -> Any:
        if not isinstance(wait, bool):
            raise UsageError(f"wait must be True or False, got {wait!r}")
        check_timeout(timeout)
        call = functools.partial(method, wait=wait, timeout=timeout)
        if not wait:
            return self._call(call)
        with explained(self._stopped_waiting):
            with waiting(f"waiting for job {self.id}", status=lambda: self.status):
                return self._call(call)

    def _stopped_waiting(self) -> str:
        if self.status in ("running", "stopping"):
            return f"stopped waiting — job {self.id} is still running: job.kill() stops it"
        return f"stopped waiting — job {self.id} is {self.status}: job.output() reads its result"

    def kill(self, reason: str | None = None) -> str:
        """Ask the job to stop: ``"requested"``, or ``"already-finished"`` for a settled job."""
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        return self._call(self._inner.kill, reason)


class Child(ChildFacts):
    """A continuable child: send it turns, interrupt it, wait for it to settle (what ``hub.start(...)`` returns).

    ``kid.send(message)`` queues a turn (FIFO; a ``ready`` child is resumed from its log) and returns the
    message id, shown as ``sent message msg-3 to agent-1``; ``kid.interrupt()`` aborts the turn in progress;
    ``kid.kill()`` stops it for good; ``kid.wait()`` returns the closing text of its last activation;
    ``kid.transcript()`` is its conversation as a DataFrame. Made by the hub (``hub.child(id)``).

    Args:
        call: the hub's call onto its loop.
        inner: the ``AsyncChild`` it wraps.
        transcript: builds the child's transcript table.

    Raises:
        UsageError: an empty message or a bad timeout.
        ClosedError: the hub is closed.
        SubagentError: the child cannot take the message (``NOT_RESUMABLE``, with the reason).
    """

    def __init__(self, call: Callable[..., Any], inner: AsyncChild, transcript: Callable[[str], Any]) -> None:
        self._call = call  # the hub's call onto its loop (refuses once the hub is closed)
        self._inner = inner
        self._transcript = transcript
        self.id = inner.id
        self.label = inner.label
        self.reused = inner.reused

    @property
    def status(self) -> str:
        """``running | idle | ready`` (``ready``: settled, resumes on the next ``send``)."""
        return self._inner.status

    def send(self, message: str) -> SendReceipt:
        """Queue ``message`` as the child's next turn; the message id (a ``str`` that displays as
        ``sent message <id> to <child>``)."""
        check_text(message, "message")
        return SendReceipt(self._call(self._inner.send, message), self.id)

    def interrupt(self) -> None:
        """Stop only the current turn; queued messages stay parked until the next ``send``."""
        self._call(self._inner.interrupt)

    def kill(self) -> bool:
        """Stop this child for good: its turn aborts, its queue is dropped, it settles."""
        return self._call(self._inner.kill)

    def wait(self, timeout: float | None = None, check: bool = True) -> str | None:
        """Block until the child is settled (or ``timeout`` seconds pass); the closing text of its last
        activation, or None when it has none. When the activation it waited for ended ``error``,
        :class:`~toh_nb.core.errors.RunError` (``check=False``: the text); a timeout never raises."""
        check_timeout(timeout)
        check_flag(check, "check")
        with explained(self._stopped_waiting):
            with waiting(f"waiting for {self.id}", status=lambda: self.status):
                return self._call(self._inner.wait, timeout, check)

    def _stopped_waiting(self) -> str:
        status = self.status
        if status == "running":
            return f"stopped waiting — {self.id} is still running: kid.interrupt() stops its turn"
        return f"stopped waiting — {self.id} is {status}"

    def transcript(self, raw: bool = False, columns: "str | list[str] | None" = None):
        """DataFrame of the child's conversation, or of its raw log with ``raw=True`` (see ``Hub.transcript``)."""
        return self._transcript(self.id, raw=raw, columns=columns)
