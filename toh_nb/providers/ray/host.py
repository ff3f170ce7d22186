"""The host actor: the code that runs inside Ray, one process serving many children's step loops.

One actor per child costs a process each (~47 MiB and ~0.44 s to start on this kind of machine), so a
small pool of *async* actors hosts every child as coroutines. For each turn of a child the driver calls
``run``, a streaming generator: the host runs the turn's step loop with the very code of an in-process
agent (``toh_nb.core.steps.LocalSteps``: model calls, the rolling tool pool, results committed in model
order, max-tokens and refusal stops, unknown-tool and validation errors, the step limit) over a
host-side :class:`HostTurn` (a ``TurnContext``) whose session and event bus *collect* instead of storing. Each yield carries every
record and event produced since the previous one (a batch), and the driver appends them to the child's
real log, conversation and event stream in order. The driver stays the one writer of the store.

What runs where:

- the child's **model**: built on the host from a pickled factory (once per host, shared by its
  children as one model object is shared in-process);
- the child's **user tools** (plain Python functions, ``tools=[fn]``): rebuilt here from the pickled
  function (same schema, same validation texts); sync ones run in a worker thread, async ones on the
  host's loop, or, for a child given ``child_resources``, each call runs as a Ray task reserving them;
- toh_nb's **own tools** (``subagent``, ``job_*``, ``send_message``, ``interrupt_agent``,
  ``list_agents``, ``report``) act on the driver's tree: here they are *proxies* whose call is yielded to
  the driver, run there, and answered back through ``answer``, so the pool and ordering logic still
  apply to them;
- **token budgets** live in the driver's tree: before each model call of a child with a budget on its
  path, the loop yields a reservation request and waits for the driver's answer (``granted``), which
  reserves on the tree exactly as an in-process call does (``toh_nb.core.budget``) and settles when it
  replays the call's response. One round trip per model call, only for budgeted children.

Between turns a host caches each child's conversation: the driver sends only what the host lacks (the
new messages; everything after a host change, a resume, or a turn it cut short). Messages that reach
the child while its loop runs here (notices, steering) arrive through ``deliver`` and are read at the
next step boundary, exactly as in-process. Stopping a run (``stop``: interrupt, kill, timeout, close)
cancels the loop, which cancels the model's or tool's awaitable (the model's HTTP request) as an
in-process interrupt does; the stream then ends with what the loop produced before the stop, once the
loop has unwound, so the model's cleanup has run when the stream ends. (``ray.cancel`` of the stream is
the driver's fallback for a host that does not answer: it discards what is still in flight.)

A model (and a child shape) is built once per host and shared by its children, even by children whose
first turns start together: one model object, one HTTP connection pool per host.

Nothing here imports the driver's tree: a host knows no stores, services or notebook code.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
from typing import Any

import pydantic

from collections import deque

from ...core import budget
from ...core.budget import Limits
from ...core.content import Message, Usage
from ...core.errors import ModelError
from ...core.model import call_off_loop, coerce_response
from ...core.session import USER_MESSAGE, Session, SessionHeader
from ...core.steps import LOCAL_STEPS, TURNS_PER_YIELD, Records, TurnOutcome
from ...core.tools import FunctionTool, Tool, ToolContext, ToolResult, invoke

#: call ids a host mints (for calls the model gave no id); the driver renames them from its own ids
HOST_CALL_PREFIX = "\x00host-call-"
#: the options a child's user tool calls may reserve as Ray tasks (``RayProvider(child_resources=...)``)
TASK_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources")


#: loop passes a host lets a turn's step loop run on before it ships what the loop produced (a batch), and
#: the most time they may take: a turn of instant steps then crosses in one batch instead of one per
#: step, while a loop that waits on a model or a tool ships at once (its passes produce nothing)
GATHER_PASSES = 16
GATHER_SECONDS = 0.002


def load(blob: bytes) -> Any:
    from ray import cloudpickle

    return cloudpickle.loads(blob)


def pack(value: Any) -> bytes:
    """What crosses between driver and host, pickled here rather than by Ray: Ray serializes a plain
    ``bytes`` argument or return without its own (cloudpickle) pickler, which costs more than the
    pickling itself for the small dicts and batches of a turn. Plain pickle first (every toh_nb record
    is importable on both sides), cloudpickle for what it cannot pickle (a tool's notebook-defined result)."""
    try:
        return pickle.dumps(value, protocol=5)
    except Exception:
        from ray import cloudpickle

        return cloudpickle.dumps(value, protocol=5)


unpack = pickle.loads  # cloudpickle's output loads with pickle (cloudpickle is importable where Ray is)


class MissingBlob(LookupError):
    """A run sent a model or shape by key only (the driver believed this host had it) and it does not."""


def build_model(obj: Any) -> Any:
    """A model object as sent, or what a zero-argument factory returns."""
    model = obj if callable(getattr(obj, "request", None)) else obj()
    if not callable(getattr(model, "request", None)):
        raise ModelError(f"the RayProvider model factory returned {type(model).__name__}, which has no request() method")
    return model


def portable(error: BaseException) -> BaseException:
    """The exception itself when it survives pickling (same text on the driver), else its text."""
    from ray import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:
        return ModelError(str(error) or type(error).__name__)


async def once(cache: dict, key: Any, make: Any) -> Any:
    """What ``make()`` builds for ``key``, built once per host even when children start together.

    Why a cache of tasks, not of values: fetching the pickled object is an await, so children whose
    first turns start at once would each miss a value cache and each build — a model factory run per
    child, each model with its own HTTP connection pool. The first caller's build is shared (shielded:
    a cancelled caller does not cancel it for the others); a failed build is forgotten, so the next
    caller tries again and every waiter sees the same error.
    """
    task = cache.get(key)
    if task is None:
        task = cache[key] = asyncio.ensure_future(make())

        def settled(done: asyncio.Future) -> None:
            if (done.cancelled() or done.exception() is not None) and cache.get(key) is done:
                del cache[key]

        task.add_done_callback(settled)
    return await asyncio.shield(task)


class HostIds:
    """Call ids for calls the model gave none (the driver renames them); no other kind is minted here."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls = itertools.count(1)

    def call(self) -> str:
        return f"{HOST_CALL_PREFIX}{next(self._calls)}"


class Collector:
    """The runtime a host-side Agent sees: its bus and its session's sink collect into ``items`` (the
    next batch), its driver-side tools are asked through ``ask``; one per hosted child."""

    __slots__ = ("ids", "items", "signal", "wanted", "run_id", "answers", "_requests", "task", "stopped",
                 "budgeted")

    def __init__(self) -> None:
        self.ids = HostIds()
        self.items: list = []
        self.signal = asyncio.Event()
        #: the kinds of events the driver's listeners want (the host builds only those)
        self.wanted: frozenset[str] = frozenset()
        self.run_id: int | None = None
        #: the running turn's step loop, and (after ``Host.stop``) the items it produced before the stop
        self.task: asyncio.Future | None = None
        self.stopped: list | None = None
        self.answers: dict[int, asyncio.Future] = {}
        self._requests = itertools.count(1)
        #: a token budget is on the child's path in the driver (each model call asks it for room)
        self.budgeted = False

    @property
    def bus(self) -> "Collector":
        return self

    def publish(self, event: Any) -> None:
        self.items.append(("event", event))
        self.signal.set()

    def logged(self, session: Session, event: Any) -> None:
        self.items.append(("log", event.kind, event.turn, event.message, event.data))
        self.signal.set()

    async def ask(self, call_id: str) -> ToolResult:
        """Run one of toh_nb's own tools in the driver: yield the call, wait for its answer."""
        return await self._asked(("tool", call_id))

    async def reserve(self, bound: int | None, reports_usage: bool) -> "budget.Reservation | str":
        """Reserve the next model call on the driver's tree: yield the request, wait for the answer.
        Granted: a reservation of nothing here (the driver holds the tokens and settles them when it
        replays the response); refused: the spent budget's diagnostic, the driver's own text."""
        refusal = await self._asked(("reserve", bound, reports_usage))
        return HELD_IN_DRIVER if refusal is None else refusal

    async def _asked(self, item: tuple) -> Any:
        request = next(self._requests)
        answer = asyncio.get_running_loop().create_future()
        self.answers[request] = answer
        self.items.append((item[0], request, *item[1:]))
        self.signal.set()
        try:
            return await answer
        finally:
            self.answers.pop(request, None)


#: what a host-side call holds once the driver granted its reservation (the tokens are held there)
HELD_IN_DRIVER = budget.Reservation(0, ())


class HostTurn(Records):
    """A child's step loop's context on a host (a ``TurnContext``, see ``toh_nb.core.steps``): what the
    child is, its cached conversation, and an inbox the driver fills for each run and while it runs. Its
    runtime (``Collector``) collects records and events for the driver; the budgets are the driver's."""

    __slots__ = ("id", "runtime", "session", "bus", "model", "system", "tools", "tool_specs", "label", "depth",
                 "parent_id", "max_tokens", "mode", "path", "max_parallel_tool_calls", "limits", "usage", "messages",
                 "next_step_inbox", "steer_pending", "unyielded")

    def __init__(self, *, id: str, runtime: "Collector", session: Session, model: Any, system: str,
                 tools: dict[str, Tool], tool_specs: list, label: str | None, depth: int, parent_id: str | None,
                 max_tokens: int | None, mode: str, path: str, max_parallel_tool_calls: int) -> None:
        self.id = id
        self.runtime = runtime
        self.session = session
        self.bus = runtime
        self.model = model
        self.system = system
        self.tools = tools
        self.tool_specs = tool_specs
        self.label = label
        self.depth = depth
        self.parent_id = parent_id
        self.max_tokens = max_tokens
        self.mode = mode
        self.path = path
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self.limits = Limits(max_steps=None)
        self.usage = Usage()
        self.messages: list[Message] = []
        self.next_step_inbox: deque[Message] = deque()
        self.steer_pending = False
        self.unyielded = TURNS_PER_YIELD

    def prepare(self, payload: dict) -> None:
        """Start a run: the new messages, step limit, whether a budget is on the child's path, and the
        next-step inbox the driver sent."""
        self.messages.extend(payload["messages"])
        self.limits = Limits(max_steps=payload["max_steps"])
        self.runtime.budgeted = payload["budgeted"]
        self.session.events.clear()
        self.next_step_inbox.clear()
        self.next_step_inbox.extend(payload["next_step"])
        self.steer_pending = payload["steer"]

    def deliver(self, messages: list, steer: bool) -> None:
        self.next_step_inbox.extend(messages)
        if steer:
            self.steer_pending = True

    async def steps(self, state: TurnOutcome) -> None:
        await LOCAL_STEPS.run(self, state)

    # -- the TurnContext ------------------------------------------------------------------------

    def who(self) -> dict:
        return {"agent_id": self.id, "parent_id": self.parent_id, "depth": self.depth}

    def log_user(self, message: Message, turn: int) -> None:
        """The step loop's hook (:meth:`TurnContext.log_user`): logged and into the conversation here; the
        driver replays the record (its ``MessageRead``, the runtime's claim)."""
        self.session.append(USER_MESSAGE, turn=turn, message=message)
        self.messages.append(message)

    def claim(self, message: Message, turn: int) -> None:
        self.log_user(message, turn)

    def queued(self) -> tuple[list[Message], bool]:
        return list(self.next_step_inbox), self.steer_pending

    def new_call_id(self) -> str:
        return self.runtime.ids.call()

    def budgeted(self) -> bool:
        return self.runtime.budgeted

    def allowance(self, bound: Any = None, reports_usage: bool | None = None) -> Any:
        """The budgets are the driver's: a budgeted child's call asks it (``Collector.reserve``), with
        the output bound of the model built here (its own ``max_tokens`` default is known only here)."""
        if not self.runtime.budgeted:
            return None
        return self.runtime.reserve(budget.output_bound(self.max_tokens, self.model), budget.reports_usage(self.model))

    def charge(self, usage: Any, held: "budget.Reservation | None" = None) -> None:
        """The driver counts the tokens when it replays the response; a grant holds nothing here."""
        if held is not None:
            budget.release(held)

    def call_tool(self, tool: Tool, call_id: str, args: Any) -> Any:
        return invoke(tool, ToolContext(self, self.runtime, call_id), args)


async def gather(collector: "Collector", task: asyncio.Future) -> None:
    """Let a turn's step loop run on a few loop passes before its records are shipped, so instant steps
    share a batch (see ``GATHER_PASSES``); not when the turn is over or stopped, or when it waits for the
    driver (one of toh_nb's own tools, a budget grant), whose answer needs the batch shipped now."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GATHER_SECONDS
    for _ in range(GATHER_PASSES):
        if task.done() or collector.stopped is not None or collector.answers or loop.time() >= deadline:
            return
        await asyncio.sleep(0)


class _AnyArguments(pydantic.BaseModel):
    """Arguments of a driver tool whose own model could not be sent: the driver validates them."""

    model_config = pydantic.ConfigDict(extra="allow")


async def _ask_driver(ctx: Any, args: Any) -> ToolResult:
    return await ctx.runtime.ask(ctx.call_id)


def _run_in_task(function: Any, arguments: dict) -> Any:
    """A user tool call as a Ray task (``child_resources``): sync functions directly, async ones on a loop."""
    value = function(**arguments)
    if asyncio.iscoroutine(value):
        value = asyncio.run(value)
    return value


class Host:
    """An async Ray actor hosting many children's step loops (see the module docstring)."""

    def __init__(self) -> None:
        self._models: dict[str, asyncio.Future] = {}  # model key -> its build (see ``once``)
        self._shapes: dict[tuple, asyncio.Future] = {}  # (shape key, resources) -> (system, specs, tools)
        self._children: dict[str, HostTurn] = {}
        self._task_functions: dict[tuple, Any] = {}
        self.runs = 0
        self.grants = 0
        self.preparing: dict[str, int] = {}  # child key -> the run whose setup is being fetched
        self.early_stops: set[tuple] = set()  # (key, run id) stopped before its loop started

    def where(self) -> dict:
        """Which node and process this host runs on (named in diagnostics if it dies)."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "pid": os.getpid()}

    # -- one turn's step loop, streamed ----------------------------------------------------------

    async def run(self, key: str, run_id: int, payload: dict):
        """Run one turn's step loop of the child named ``key`` (its id and hub); yield its records and
        events in batches, and last a ``("stop", reason, error)`` or ``("error", text)``. ``("unknown",)``:
        this host has no state for the child (the driver sends it again, whole). ``payload`` and each
        batch cross as :func:`pack`'s bytes."""
        self.runs += 1
        self.preparing[key] = run_id
        try:
            if isinstance(payload, bytes):  # as the driver sends it (a dict: a test driving the class in-process)
                payload = unpack(payload)
            agent = await self._prepared(key, run_id, payload)
        except Exception as error:
            yield pack([("error", str(error) or type(error).__name__)])
            return
        finally:
            del self.preparing[key]
        if (key, run_id) in self.early_stops:  # stopped while its setup was being fetched
            self.early_stops.discard((key, run_id))
            if agent is not None:
                agent.runtime.run_id = None
            yield pack([("stopped",)])
            return
        if agent is None:
            yield pack([("unknown",)])
            return
        collector: Collector = agent.runtime
        state = TurnOutcome(payload["turn"], "completed")
        task = collector.task = asyncio.ensure_future(agent.steps(state))
        task.add_done_callback(lambda _: collector.signal.set())
        try:
            while True:
                await collector.signal.wait()
                await gather(collector, task)
                collector.signal.clear()
                items, collector.items = collector.items, []
                if collector.stopped is not None:  # what the loop logged while unwinding is the driver's to write
                    yield pack(collector.stopped + [("stopped",)])
                    return
                if task.done():
                    error = ModelError("the step loop was cancelled on its host") if task.cancelled() else task.exception()
                    if error is None:
                        items.append(("stop", state.reason, state.error))
                    else:
                        items.append(("error", str(error) or type(error).__name__))
                    yield pack(items)
                    return
                if items:
                    yield pack(items)
        finally:
            collector.run_id = None
            if not task.done():  # cancelled by the driver: unwind the loop (the model's cleanup) first
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            collector.items = []
            collector.task = collector.stopped = None

    async def _prepared(self, key: str, run_id: int, payload: dict) -> HostTurn | None:
        self.forget(payload["forget"])
        setup = payload.get("setup")
        if setup is not None:
            try:
                agent = await self._build(key, setup)
            except MissingBlob:
                return None
        else:
            agent = self._children.get(key)
            if agent is None:
                return None
        collector: Collector = agent.runtime
        collector.run_id = run_id
        collector.wanted = payload["wanted"]
        collector.items = []
        collector.signal.clear()
        agent.prepare(payload)
        return agent

    async def _build(self, key: str, setup: dict) -> HostTurn:
        child_id = setup["id"]
        model = await self._resolved(self._models, setup["model"], build_model)
        system, specs, tools = await self._shape(setup["shape"], setup["resources"])
        session = Session(SessionHeader(child_id, 0.0))
        collector = Collector()
        session.sink = collector.logged
        agent = HostTurn(id=child_id, runtime=collector, session=session, model=model, system=system, tools=tools,
                         tool_specs=specs, label=setup["label"], depth=setup["depth"], parent_id=setup["parent_id"],
                         max_tokens=setup["max_tokens"], mode=setup["mode"], path=setup["path"],
                         max_parallel_tool_calls=setup["max_parallel"])
        self._children[key] = agent
        return agent

    async def _resolved(self, cache: dict, sent: tuple, build, cache_key: Any = None) -> Any:
        """What a blob the driver sent builds, built once per host. ``sent``: ``(key, data)``, where data is
        the pickled bytes (the first time this host is sent it), ``None`` (the driver sent it before), or
        ``[ObjectRef]`` (a model call's blob, fetched from Ray's object store once)."""
        key, data = sent
        cache_key = key if cache_key is None else cache_key
        if data is None:
            if cache_key not in cache:
                raise MissingBlob(key)

            async def make() -> Any:
                raise MissingBlob(key)
        elif isinstance(data, list):
            async def make() -> Any:
                return build(load(await data[0]))
        else:
            async def make() -> Any:
                return build(load(data))

        return await once(cache, cache_key, make)

    async def _shape(self, sent: tuple, resources: dict | None) -> tuple:
        """A child's system prompt, tool specs and tools (shared by the children of one shape)."""
        def build(shape: tuple) -> tuple:
            system, specs, entries = shape
            return system, specs, {entry[1]: self._tool(entry, resources) for entry in entries}

        return await self._resolved(self._shapes, sent, build, (sent[0], tuple(sorted((resources or {}).items(), key=repr))))

    def _tool(self, entry: tuple, resources: dict | None) -> Tool:
        if entry[0] == "proxy":
            _, name, description, args_model, parameters, safe = entry
            return Tool(name, description, args_model or _AnyArguments, _ask_driver, concurrency_safe=safe,
                        parameters=parameters)
        _, name, function, description, safe = entry
        tool = FunctionTool(function, name, description, concurrency_safe=safe)
        if not resources:
            return tool
        return self._task_tool(tool, resources)

    def _task_tool(self, tool: FunctionTool, resources: dict) -> Tool:
        """A user tool whose every call is a Ray task reserving ``resources`` (Ray's own accounting)."""
        import ray

        key = tuple(sorted(resources.items(), key=repr))
        remote = self._task_functions.get(key)
        if remote is None:
            remote = ray.remote(_run_in_task).options(**resources)
            self._task_functions[key] = remote
        function = tool.function
        names = tuple(tool.args_model.model_fields)

        async def run_as_task(ctx: Any, args: Any) -> Any:
            ref = remote.remote(function, {k: getattr(args, k) for k in names})
            try:
                return await ref
            except ray.exceptions.RayTaskError as error:  # the user's own exception, same text as in-process
                cause = getattr(error, "cause", None)
                raise (cause if isinstance(cause, Exception) else error) from None
            except asyncio.CancelledError:
                ray.cancel(ref)
                raise

        return Tool(tool.name, tool.description, tool.args_model, run_as_task, concurrency_safe=tool.concurrency_safe,
                    parameters=tool.parameters)

    # -- one model call for an in-process agent (a spawn child of a Ray child inherits its model) --------

    async def request(self, model: tuple, request: Any) -> tuple[bool, Any]:
        """Answer one request with the model built here; failures travel back as values, so the driver
        raises the user's own exception (same diagnostic text as in-process)."""
        try:
            built = await self._resolved(self._models, model, build_model)
            return True, coerce_response(await call_off_loop(built.request, request))
        except Exception as error:
            return False, portable(error)

    # -- what the driver sends while a loop runs --------------------------------------------------

    def deliver(self, key: str, run_id: int, messages: list, steer: bool) -> bool:
        """Messages that reached the child during this run: read at its next step boundary."""
        agent = self._children.get(key)
        if agent is None or agent.runtime.run_id != run_id:
            return False  # the run is over: the driver's inbox still holds them for the next turn
        agent.deliver(messages, steer)
        return True

    def granted(self, key: str, run_id: int, request: int, refusal: str | None) -> None:
        """The driver's answer to a reservation request (``Collector.reserve``): None, granted; else the
        spent budget's diagnostic."""
        self._answered(key, run_id, request, refusal)
        self.grants += 1

    def stop(self, key: str, run_id: int) -> None:
        """The driver interrupted this run (interrupt, kill, timeout, close): cancel its step loop now,
        and end the stream with everything produced before the stop (``run`` yields it, then waits for
        the loop — the model's HTTP request — to unwind). Unlike ``ray.cancel``, which discards what
        is still in flight, this keeps a tool result committed just before the stop."""
        if self.preparing.get(key) == run_id:
            self.early_stops.add((key, run_id))
            return
        agent = self._children.get(key)
        if agent is None or agent.runtime.run_id != run_id or agent.runtime.task is None:
            return
        collector: Collector = agent.runtime
        if collector.stopped is None:
            collector.stopped, collector.items = collector.items, []
            collector.task.cancel()
            collector.signal.set()

    def answer(self, key: str, run_id: int, request: int, text: str, is_error: bool) -> None:
        """The driver's result of one of toh_nb's own tools, called through ``Collector.ask``."""
        self._answered(key, run_id, request, ToolResult(text, is_error))

    def _answered(self, key: str, run_id: int, request: int, value: Any) -> None:
        agent = self._children.get(key)
        if agent is None or agent.runtime.run_id != run_id:
            return
        waiter = agent.runtime.answers.get(request)
        if waiter is not None and not waiter.done():
            waiter.set_result(value)

    def forget(self, keys: list[str]) -> None:
        """Drop cached children (disposed in the driver)."""
        for key in keys:
            self._children.pop(key, None)

    def stats(self) -> dict:
        return {"runs": self.runs, "grants": self.grants, "children": len(self._children), "models": len(self._models),
                "shapes": len(self._shapes), "pid": os.getpid()}
