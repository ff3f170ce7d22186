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

import functools
import html
import importlib.util
import queue
import weakref
from typing import Any, Iterator, Sequence

from ..core.budget import DEFAULT_MAX_STEPS
from ..core.checks import is_int_at_least
from ..core.errors import ClosedError, UsageError
from ..core.events import DEFAULT_HISTORY, HubClosed, HubEvent
from ..hub import AsyncChild, AsyncHub, AsyncJob, ChildFacts, JobFacts, _check_text, _check_timeout
from ..results import AgentListing, RunResult
from ..subagents.service import validate_tool_filter
from . import portal as portals
from .progress import waiting
from .tables import agents_frame, events_frame, jobs_frame, transcript_frame

LOOP_MODES = ("portal", "kernel")
CLOSED_MESSAGE = "this hub is closed; create a new Hub to continue (a store= directory keeps its children)"


def _check_optional_text(value: Any, name: str) -> None:
    if value is not None:
        _check_text(value, name)


def _check_start_options(prompt: Any, label: Any, persona: Any, tool_filter: Any, model: Any,
                         max_tokens: Any, provider: Any) -> None:
    _check_text(prompt, "prompt")
    _check_optional_text(label, "label")
    if persona is not None and not isinstance(persona, str):
        raise UsageError(f"persona must be a string or None, got {type(persona).__name__}")
    validate_tool_filter(tool_filter)
    if model is not None and not hasattr(model, "request"):
        raise UsageError(f"model must have an async request(ModelRequest) method, got {type(model).__name__}")
    if max_tokens is not None and not is_int_at_least(max_tokens, 1):
        raise UsageError(f"max_tokens must be an integer >= 1 or None, got {max_tokens!r}")
    _check_text(provider, "provider")


class _State:
    """What the garbage-collection finalizer needs (never the facade itself)."""

    __slots__ = ("runner", "async_hub", "closed", "key")

    def __init__(self, runner: Any, async_hub: AsyncHub, key: int) -> None:
        self.runner = runner
        self.async_hub = async_hub
        self.closed = False
        self.key = key


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
    future.add_done_callback(lambda _: runner.release())


class Hub:
    """The sync API for notebooks and scripts; see the module docstring.

    Arguments are those of :class:`~toh_nb.hub.AsyncHub` (``model`` defaults to the offline
    :class:`~toh_nb.models.demo.DemoModel`, ``store=None`` keeps everything in memory) plus ``loop``:

    - ``"portal"`` (default): the engine runs on the shared portal loop thread;
    - ``"kernel"``: the engine runs on the caller's own event loop (the kernel's) through
      ``nest_asyncio``. Explicit opt-in only, never applied implicitly. Its limits: ``nest_asyncio`` is
      unmaintained, breaks ``asyncio.current_task()`` on Python 3.14, cannot patch uvloop, has been
      reported to corrupt ipykernel >= 7 kernels, patches asyncio for the whole process, and background
      children only progress while the kernel loop runs (between cells, during hub calls), not while a
      cell runs long synchronous code.
    """

    def __init__(self, model: Any = None, *, store: Any = None, max_depth: int | str = 3,
                 max_parallel_tool_calls: int = 10, ids: str = "uuid", background_mode: str = "one-shot",
                 tools: Sequence[Any] = (), delegation_tools: Sequence[Any] | None = None,
                 root_id: str | None = None, fsync: str | None = None, max_jobs_per_owner: int = 10,
                 report_delivery: str = "next-step", loop: str = "portal", max_tokens: int | None = None,
                 max_steps: int | None = DEFAULT_MAX_STEPS, token_budget: int | None = None,
                 turn_timeout: float | None = None, providers: Any = None,
                 history: int = DEFAULT_HISTORY) -> None:
        if loop not in LOOP_MODES:
            raise UsageError(f'loop must be "portal" or "kernel", got {loop!r}')
        if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple)):
            raise UsageError(f"tools must be a list of functions or tn.Tool objects, got {type(tools).__name__}")
        self._loop_mode = loop
        runner = portals.acquire() if loop == "portal" else portals.KernelRunner()
        build = functools.partial(AsyncHub, model, store=store, max_depth=max_depth,
                                  max_parallel_tool_calls=max_parallel_tool_calls, ids=ids,
                                  background_mode=background_mode, tools=tools,
                                  delegation_tools=delegation_tools, root_id=root_id, fsync=fsync,
                                  max_jobs_per_owner=max_jobs_per_owner, report_delivery=report_delivery,
                                  max_tokens=max_tokens, max_steps=max_steps, token_budget=token_budget,
                                  turn_timeout=turn_timeout, providers=providers, history=history)
        try:
            async_hub = runner.call(build)
        except BaseException:
            runner.release()
            raise
        self._async = async_hub
        self._runner = runner
        self._state = _State(runner, async_hub, id(self))
        runner.register_closer(self._state.key, async_hub.close)
        self._finalizer = weakref.finalize(self, _finalize, self._state)
        self._finalizer.atexit = False  # at exit the portal's own shutdown closes open hubs

    # -- plumbing ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state.closed or self._async.closed:
            raise ClosedError(CLOSED_MESSAGE)

    def _call(self, fn: Any, *args: Any) -> Any:
        self._check_open()
        return self._runner.call(fn, *args)

    # -- properties --------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root agent's id (the notebook user acts as this agent)."""
        return self._async.root

    @property
    def closed(self) -> bool:
        return self._state.closed or self._async.closed

    @property
    def model(self) -> Any:
        return self._async.model

    @property
    def loop(self) -> str:
        """``"portal"`` or ``"kernel"``."""
        return self._loop_mode

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

    def run(self, prompt: str, *, timeout: float | None = None) -> RunResult:
        """Give the root agent's model a turn with ``prompt`` (it may delegate); its RunResult.

        ``timeout`` (seconds) aborts the turn when it runs longer (stop reason ``aborted``).
        """
        _check_text(prompt, "prompt")
        _check_timeout(timeout)
        return self._call(functools.partial(self._async.run, prompt, timeout=timeout))

    def spawn(self, prompt: str, *, label: str | None = None, background: bool = False,
              persona: str | None = None, tool_filter: Any = None, model: Any = None,
              max_tokens: int | None = None, provider: str = "spawn", max_steps: int | None = None,
              token_budget: int | None = None, turn_timeout: float | None = None) -> RunResult | "Job":
        """A one-shot child: waits for it and returns a RunResult; ``background=True`` returns a Job.
        Budgets (``max_steps``, ``token_budget``, ``turn_timeout``) as in :meth:`AsyncHub.spawn`."""
        if not isinstance(background, bool):
            raise UsageError(f"background must be True or False, got {background!r}")
        _check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        value = self._call(functools.partial(self._async.spawn, prompt, label=label, background=background,
                                             persona=persona, tool_filter=tool_filter, model=model,
                                             max_tokens=max_tokens, provider=provider, max_steps=max_steps,
                                             token_budget=token_budget, turn_timeout=turn_timeout))
        return Job(self, value) if isinstance(value, AsyncJob) else value

    def start(self, prompt: str, *, label: str | None = None, persona: str | None = None,
              tool_filter: Any = None, model: Any = None, max_tokens: int | None = None,
              provider: str = "spawn", max_steps: int | None = None, token_budget: int | None = None,
              turn_timeout: float | None = None) -> "Child":
        """A continuable child; returns as soon as its first message is accepted."""
        _check_start_options(prompt, label, persona, tool_filter, model, max_tokens, provider)
        value = self._call(functools.partial(self._async.start, prompt, label=label, persona=persona,
                                             tool_filter=tool_filter, model=model, max_tokens=max_tokens,
                                             provider=provider, max_steps=max_steps, token_budget=token_budget,
                                             turn_timeout=turn_timeout))
        return Child(self, value)

    def child(self, child_id: "str | Child") -> "Child":
        """A handle on an existing continuable child of the root (for example after a restart)."""
        return Child(self, self._call(self._async.child, child_id))

    def job(self, job_id: str) -> "Job":
        """A handle on one of the root's background jobs (``subagent-N``), also those its model started."""
        return Job(self, self._call(self._async.job, job_id))

    def send(self, agent_id: "str | Child", message: str) -> str:
        """Queue ``message`` as the child's next turn (cold-resuming a ``ready`` child); the message id."""
        return self._call(self._async.send, agent_id, message)

    def interrupt(self, agent_id: "str | Child") -> None:
        """Stop only the agent's current turn; its queued messages wait for the next ``send``."""
        self._call(self._async.interrupt, agent_id)

    def kill(self, agent_id: "str | Child") -> bool:
        """Stop a continuable child for good (its queue dropped; it settles and lists ``ready``)."""
        return self._call(self._async.kill, agent_id)

    def list_agents(self, scope: str = "children") -> AgentListing:
        """The root's continuable children (``scope="descendants"``: the whole tree); ``str()`` is
        exactly the ``list_agents`` tool text."""
        if scope not in ("children", "descendants"):
            raise UsageError(f'scope must be "children" or "descendants", got {scope!r}')
        return AgentListing(self._call(self._async.list_agents, scope))

    def call_tool(self, name: str, /, **arguments: Any) -> Any:
        """Run one tool as the root agent; the ToolResult is exactly what a model would receive."""
        _check_text(name, "name")
        return self._call(functools.partial(self._async.call_tool, name, **arguments))

    # -- the event stream ---------------------------------------------------------------------------

    def stream(self, agent: Any = None, *, kinds: Any = None, history: bool = False,
               timeout: float | None = None) -> Iterator[HubEvent]:
        """``for ev in hub.stream(...)``: typed events as they happen (see :meth:`AsyncHub.astream` for
        ``agent``, ``kinds`` and ``history``). Ends when the hub closes or, with ``timeout``, after that many
        seconds without an event; the work keeps running on the portal while the loop body runs."""
        if self._loop_mode == "kernel":
            raise UsageError('hub.stream() needs the portal loop; with Hub(loop="kernel") use '
                             "`async for ev in hub.async_hub.astream()`")
        _check_timeout(timeout)
        keep = self._call(self._async.event_filter, agent, kinds)
        events: queue.SimpleQueue = queue.SimpleQueue()
        bus = self._async.runtime.bus

        def subscribe() -> tuple[list, Any]:
            backlog = [event for event in bus.history if keep(event)] if history else []
            return backlog, bus.subscribe(lambda event: events.put(event) if keep(event) else None)

        backlog, unsubscribe = self._call(subscribe)
        try:
            yield from backlog
            while True:
                try:
                    event = events.get(timeout=timeout)
                except queue.Empty:
                    return
                yield event
                if isinstance(event, HubClosed):
                    return
        finally:
            if not self.closed:
                self._runner.call(unsubscribe)

    # -- tables -------------------------------------------------------------------------------------

    def jobs(self):
        """DataFrame: id, label, status, detail, owner, started, finished, elapsed_s."""
        return jobs_frame(self._call(self._async.job_rows))

    def agents(self):
        """DataFrame: id, parent, depth, label, mode, status, turns, input_tokens, output_tokens, started,
        elapsed_s, stop_reason — every agent of the tree, one-shot children included."""
        return agents_frame(self._call(self._async.agent_rows))

    def transcript(self, agent_id: "str | Child"):
        """DataFrame, one row per event of the agent's log: turn, kind, role, source, text, tool, is_error."""
        return transcript_frame(self._call(self._async.transcript_rows, agent_id))

    def events(self):
        """DataFrame of the lifecycle events (subagent/start|end, job/*), in order."""
        return events_frame(self._call(self._async.event_rows))

    def tree(self):
        """The live agent-tree widget (``toh_nb.notebook.widget.AgentTree``)."""
        self._check_open()
        if importlib.util.find_spec("toh_nb.notebook.widget") is None:
            raise UsageError("the agent-tree widget is not available in this installation "
                             "(toh_nb.notebook.widget is missing); use hub.list_agents('descendants') or hub.agents()")
        try:
            from .widget import AgentTree
        except ImportError as error:
            raise UsageError(f"the agent-tree widget cannot be loaded: {error}") from error
        return AgentTree(self)

    # -- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every agent and job, flush and close the store; the last hub also stops the portal
        thread. Idempotent."""
        state = self._state
        if state.closed:
            return
        try:
            self._runner.call(self._async.close)
        except ClosedError:
            pass  # the portal already stopped, and its shutdown closed this hub
        state.closed = True
        self._finalizer.detach()
        self._runner.unregister_closer(state.key)
        self._runner.release()

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
    """A background one-shot child, as a job (``subagent-N``)."""

    def __init__(self, hub: Hub, inner: AsyncJob) -> None:
        self._hub = hub
        self._inner = inner
        self._job = inner._job

    def output(self, wait: bool = False, timeout: float | None = None) -> str:
        """The job's result text (``""`` while it has none); ``wait=True`` first waits for the job to
        settle, for at most ``timeout`` seconds (``None``: no limit). The job keeps running after a
        timeout or a KeyboardInterrupt."""
        if not isinstance(wait, bool):
            raise UsageError(f"wait must be True or False, got {wait!r}")
        _check_timeout(timeout)
        call = functools.partial(self._inner.output, wait=wait, timeout=timeout)
        if not wait:
            return self._hub._call(call)
        with waiting(f"waiting for job {self.id}", status=lambda: self.status):
            return self._hub._call(call)

    def kill(self, reason: str | None = None) -> str:
        """Ask the job to stop: ``"requested"``, or ``"already-finished"`` for a settled job."""
        if reason is not None and not isinstance(reason, str):
            raise UsageError(f"reason must be a string or None, got {type(reason).__name__}")
        return self._hub._call(self._inner.kill, reason)


class Child(ChildFacts):
    """A continuable child: send it turns, interrupt it, wait for it to settle."""

    def __init__(self, hub: Hub, inner: AsyncChild) -> None:
        self._hub = hub
        self._inner = inner
        self._service = inner._service
        self.id = inner.id
        self.label = inner.label

    def send(self, message: str) -> str:
        """Queue ``message`` as the child's next turn; the message id."""
        _check_text(message, "message")
        return self._hub._call(self._inner.send, message)

    def interrupt(self) -> None:
        """Stop only the current turn; queued messages stay parked until the next ``send``."""
        self._hub._call(self._inner.interrupt)

    def kill(self) -> bool:
        """Stop this child for good: its turn aborts, its queue is dropped, it settles."""
        return self._hub._call(self._inner.kill)

    def wait(self, timeout: float | None = None) -> str | None:
        """Block until the child is settled (or ``timeout`` seconds pass); the closing text of its last
        activation, or None when it has none."""
        _check_timeout(timeout)
        with waiting(f"waiting for {self.id}", status=lambda: self.status):
            return self._hub._call(self._inner.wait, timeout)

    def transcript(self):
        """DataFrame of the child's log (see ``Hub.transcript``)."""
        return self._hub.transcript(self.id)
