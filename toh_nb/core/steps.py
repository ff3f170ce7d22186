"""The steps of one turn, as an explicit seam: a :class:`StepLoop` runs them over a :class:`TurnContext`.

A turn has a lifecycle (claim the input, log ``turn/start``, time it, cancel it, log ``turn/end``, wait
for the store, answer the waiters), which belongs to the agent (``toh_nb.core.agent``), and steps: read
the ``next-step`` messages, check the budgets, call the model, run the tool calls it asked for; again,
until it answers without tool calls or a limit stops it. The steps are what may run elsewhere, so they
are a plug-in: an agent holds a ``StepLoop`` (``Agent.steps``), and the lifecycle awaits
``steps.run(context, state)``. :class:`LocalSteps` is the in-process loop (every agent's default); a
provider whose children step elsewhere gives its own loop in its ``ChildPlan`` (``toh_nb.providers.ray``
runs this very :class:`LocalSteps` on a host actor, over a host-side context, and replays the records
in the driver through the same context methods).

The loop sees the agent only through :class:`TurnContext`: what it is (model, system prompt, tools,
limits), its conversation (``messages``), the next-step inbox, its log (``session.append``), the event
stream (``bus``), the budget allowance and charge, the commit of a tool result, and how a tool is called. This module never imports ``toh_nb.core.agent``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from collections import deque
from typing import Any, Awaitable, Protocol

from . import budget
from .budget import Limits
from .content import Message, MessagesView, Text, ToolCallBlock, ToolResultBlock, Usage
from .errors import ToolError
from .events import ModelRequested, ModelResponded, TextDelta, ToolCalled, ToolReturned
from .model import ModelRequest, ModelResponse, ToolSpec, call_off_loop, coerce_response, is_async_callable
from .session import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT
from .tools import (ABORTED_BEFORE_DISPATCH, ABORTED_DURING_CALL, Tool, ToolAborted, ToolResult, error_text,
                    validate_arguments)


@dataclass(slots=True)
class TurnOutcome:
    """How one turn ended: its reason (a ``turn/end`` reason), error text, final output and usage."""

    turn: int
    reason: str
    error: str | None = None
    output: list = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: for a turn that ended ``error``: what failed, in one word (:func:`toh_nb.core.errors.cause_of`)
    cause: str | None = None


class EventSink(Protocol):
    """Where a turn's events go: ``publish`` them, each built only when its kind is in ``wanted`` (the
    kinds some listener of the hub's EventBus wants)."""

    wanted: frozenset[str]

    def publish(self, event: Any) -> None: ...


class TurnContext(Protocol):
    """What a step loop reads and does on one turn of one agent (the driver's ``Agent`` is one).

    A protocol: it raises nothing itself; ``call_tool`` and ``commit`` raise what the tool or the log
    raises, which the loop turns into the turn's outcome."""

    # -- what the agent is (read) --
    id: str
    label: str | None
    depth: int
    path: str
    model: Any
    system: str
    tools: dict[str, Tool]
    tool_specs: list[ToolSpec]
    max_tokens: int | None
    max_parallel_tool_calls: int
    limits: Limits
    usage: Usage
    #: the conversation: append-only (a model request carries a snapshot view of it)
    messages: list[Message]
    #: the agent's log: ``session.append(kind, turn=, message=, data=)`` records (the store writes them)
    session: Any
    #: the event stream the turn publishes to
    bus: EventSink

    def who(self) -> dict:
        """The common fields of this agent's events (``agent_id``, ``parent_id``, ``depth``)."""

    def on_delta(self, text: str) -> None:
        """A streamed piece of the agent's answer (a model's ``on_delta``)."""

    # -- the next-step inbox --
    #: messages queued for the next step boundary (a step claims them all with ``next_step``)
    next_step_inbox: "deque[Message]"
    #: one of them wakes the agent (a steer): a final answer takes another step to read it
    steer_pending: bool
    #: turns begun since the agent's driver last yielded to the event loop (see ``LocalSteps.run``)
    unyielded: int

    def next_step(self, turn: int) -> None:
        """Claim the messages queued for the next step boundary: each is logged and joins the conversation."""

    def claim(self, message: Message, turn: int) -> None:
        """Claim one queued message that a loop running elsewhere read (the agent's own copy, if still queued)."""

    def log_user(self, message: Message, turn: int) -> None:
        """The hook :meth:`next_step` and :meth:`claim` end in: a user message the agent read at a step
        boundary of ``turn`` is logged (``user/message``) and joins the conversation; the driver's Agent
        also publishes ``MessageRead`` and tells the runtime it was claimed. A stand-in of a loop running
        elsewhere logs and appends only (the driver replays the rest)."""

    def queued(self) -> tuple[list[Message], bool]:
        """The next-step inbox, and whether one of its messages wakes the agent (a steer)."""

    # -- records --
    def commit(self, turn: int, call: ToolCallBlock, result: ToolResult) -> None:
        """A tool call's result: logged, into the conversation, and published (``ToolReturned``)."""

    def new_call_id(self) -> str:
        """An id for a tool call the model gave none."""

    # -- budgets --
    def allowance(self, bound: Any = None, reports_usage: bool | None = None) -> "budget.Reservation | str | Any":
        """Before a model call: None (no token budget on the path), a reservation, a spent budget's
        diagnostic, or an awaitable giving one of those two. ``bound``/``reports_usage``: the call's
        output bound and whether its model reports usage, when the model runs elsewhere."""

    def budgeted(self) -> bool:
        """A token budget is on the agent's path (each model call needs an allowance)."""

    def charge(self, usage: Usage | None, held: "budget.Reservation | None" = None) -> None:
        """Settle a model call: its tokens counted (agent, ancestors' budgets), its reservation released."""

    # -- tools --
    def call_tool(self, tool: Tool, call_id: str, args: Any) -> Awaitable[ToolResult]:
        """Run one validated tool call with this agent's tool context."""


class StepLoop:
    """How the steps of an agent's turns run (:class:`LocalSteps` in-process; a provider may give its own).

    Raises nothing itself: a loop reports a stopped turn through the :class:`TurnOutcome` it fills in
    (``reason``/``error``); cancellation (an interrupt) propagates as ``asyncio.CancelledError``."""

    __slots__ = ()

    #: the loop runs elsewhere and needs the messages queued while a turn runs (``deliver``); the
    #: in-process loop reads the agent's inbox itself, so the agent does not call it
    forwards_messages = False

    async def run(self, context: TurnContext, state: TurnOutcome) -> None:
        """Run the steps of one turn. Returns with ``state.reason``/``state.error`` set when a limit stops it,
        or raises (a model failure, a cancellation); ``state.output`` and ``state.usage`` stay current, so
        a cut turn reports what it produced."""
        raise NotImplementedError

    def deliver(self, context: TurnContext, message: Message, steer: bool) -> None:
        """A message was queued for the next step boundary while a turn runs (``steer``: it wakes). The
        in-process loop reads the agent's inbox itself; a loop running elsewhere forwards it there."""


#: turns of one busy period that may begin back to back without a pass through the loop (each later
#: step of a turn always yields): bounds how long instant turns hold the loop (~1 ms here)
TURNS_PER_YIELD = 32


class Records:
    """The inbox and records half of a :class:`TurnContext`, over ``session``, ``messages``, ``bus``,
    ``who()``, the :meth:`TurnContext.log_user` hook and the ``next_step_inbox``: shared by the driver's
    Agent and the stand-in a step loop running elsewhere uses (one copy of each)."""

    __slots__ = ()

    def next_step(self, turn: int) -> None:
        inbox = self.next_step_inbox
        self.steer_pending = False
        while inbox:
            self.log_user(inbox.popleft(), turn)

    def commit(self, turn: int, call: ToolCallBlock, result: ToolResult) -> None:
        message = Message("tool", [ToolResultBlock(call.id, call.name, result.text, result.is_error)])
        self.session.append(TOOL_RESULT, turn=turn, message=message)
        self.messages.append(message)
        if ToolReturned.kind in self.bus.wanted:
            self.bus.publish(ToolReturned(**self.who(), turn=turn, call_id=call.id, name=call.name,
                                          text=result.text, is_error=result.is_error))

    def on_delta(self, text: str) -> None:
        """A streamed piece of this agent's answer, onto the event stream."""
        self.bus.publish(TextDelta(**self.who(), text=text))


class LocalSteps(StepLoop):
    """The in-process step loop: model calls on this event loop, tool calls in a rolling pool of
    ``max_parallel_tool_calls`` (consecutive concurrency-safe calls), results committed in model order.

    Raises nothing of its own: a model error, a limit or a budget ends the turn through its
    :class:`TurnOutcome`; cancellation propagates as ``asyncio.CancelledError``."""

    __slots__ = ()

    async def run(self, context: TurnContext, state: TurnOutcome) -> None:
        turn = state.turn
        bus = context.bus
        limits = context.limits
        step = 0
        while True:
            step += 1
            # a step yields to the loop first: a model and tools that answer without awaiting would
            # otherwise hold the shared loop forever (no timeout, interrupt or other agent runs).
            # Only the first step of a turn that follows another turn of the same busy period may
            # skip it, at most TURNS_PER_YIELD turns in a row: queued follow-ups of an instant model
            # run back to back (a pass through the loop per turn cost continuable children ~25 %)
            if step > 1 or context.unyielded >= TURNS_PER_YIELD:
                context.unyielded = 0
                await asyncio.sleep(0)
            if step == 1:
                context.unyielded += 1
            if context.next_step_inbox:
                context.next_step(turn)
            if limits.max_steps is not None and step > limits.max_steps:
                state.reason, state.error = budget.MAX_STEPS, budget.step_limit_text(limits.max_steps)
                return
            held = context.allowance()
            if held is not None and held.__class__ is not budget.Reservation:
                if held.__class__ is not str:
                    held = await held  # calls in flight hold the room this one needs
                if held.__class__ is str:
                    state.reason, state.error = budget.TOKEN_BUDGET, held
                    return
            if ModelRequested.kind in bus.wanted:
                bus.publish(ModelRequested(**context.who(), turn=turn, step=step))
            try:
                request = ModelRequest(context.id, context.label, context.depth, context.system,
                                       MessagesView(context.messages), context.tool_specs, context.max_tokens, context.path,
                                       turn, step, context.on_delta if TextDelta.kind in bus.wanted else None)
                ask = context.model.request
                # an async model is awaited here (the common case: no frame of call_off_loop around it)
                response = await ask(request) if is_async_callable(ask) else await call_off_loop(ask, request)
                if response.__class__ is not ModelResponse:
                    response = coerce_response(response)
            except BaseException:  # failed or cancelled: the call charges nothing
                if held is not None:
                    budget.release(held)
                raise
            usage = response.usage
            context.charge(usage, held)  # settled first: nothing below may keep the reservation
            state.usage.add(usage)
            if ModelResponded.kind in bus.wanted:
                calls = response.tool_calls
                bus.publish(ModelResponded(**context.who(), turn=turn, step=step, text=response.text,
                                           tool_calls=tuple(c.name for c in calls),
                                           tool_arguments=tuple(c.arguments for c in calls),
                                           stop_reason=response.stop_reason,
                                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens))
            message = assistant_message(response, context)
            context.session.append(ASSISTANT_MESSAGE, turn=turn, message=message)
            content = message.content
            if content:
                context.messages.append(message)
                state.output = content
            if response.stop_reason == "max_tokens" or (
                    context.max_tokens is not None and usage.output_tokens > context.max_tokens):
                state.reason = "max-tokens"
                return
            if response.stop_reason == "refusal":
                state.reason = "blocked"
                return
            if response.tool_calls:
                await self.run_tools(context, turn, [b for b in content if b.type == "tool-call"])
                continue
            if context.steer_pending and context.next_step_inbox:
                continue  # a waking message arrived during the final call: read it in another step
            return

    async def run_tools(self, context: TurnContext, turn: int, calls: list[ToolCallBlock]) -> None:
        """Run the calls of one assistant message: safe runs in a rolling pool, unsafe ones alone."""
        prepared: list[tuple[ToolCallBlock, Tool | None, Any, ToolResult | None]] = []
        tools = context.tools
        for call in calls:
            tool = tools.get(call.name)
            if tool is None:
                prepared.append((call, None, None, ToolResult(error_text(f'unknown tool "{call.name}"'), True)))
                continue
            try:
                prepared.append((call, tool, validate_arguments(tool, call.arguments), None))
            except ToolError as error:
                prepared.append((call, tool, None, ToolResult(error_text(error), True)))
        committed: set[str] = set()
        index = 0
        total = len(prepared)
        try:
            while index < total:
                end = index
                while end < total and _pool_safe(prepared[end]):
                    end += 1
                if end - index > 1:
                    await self.run_pool(context, turn, prepared[index:end], committed)
                    index = end
                    continue
                # a single call (or a barrier, or a refused call): run it inline, no task needed
                call, tool, args, ready = prepared[index]
                log_call(context, turn, call)
                if ready is None:
                    try:
                        ready = await context.call_tool(tool, call.id, args)
                    except asyncio.CancelledError as error:
                        context.commit(turn, call, aborted_result(error))
                        committed.add(call.id)
                        raise
                context.commit(turn, call, ready)
                committed.add(call.id)
                index += 1
        except asyncio.CancelledError:
            # calls that never started leave a balanced log: an error result, no audit call event
            for call, *_ in prepared:
                if call.id not in committed:
                    context.commit(turn, call, ToolResult(error_text(ABORTED_BEFORE_DISPATCH), True))
            raise

    async def run_pool(self, context: TurnContext, turn: int, group: list, committed: set[str]) -> None:
        """Rolling pool of ``max_parallel_tool_calls``; results committed in model order."""
        size = max(1, context.max_parallel_tool_calls)
        results: list[ToolResult | None] = [None] * len(group)
        running: dict[asyncio.Task, int] = {}
        loop = asyncio.get_running_loop()
        started = 0
        cursor = 0
        # finished tasks, in completion order, and the future the pool sleeps on while there are none.
        # Why not asyncio.wait(FIRST_COMPLETED): it adds and removes a callback on every running task
        # at each wake-up (O(pool) per finished call); one callback per task is enough
        finished: list[asyncio.Task] = []
        wake: list[asyncio.Future | None] = [None]

        def on_done(task: asyncio.Task) -> None:
            finished.append(task)
            waiter = wake[0]
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        def launch() -> None:
            nonlocal started
            while started < len(group) and len(running) < size:
                call, tool, args, _ = group[started]
                log_call(context, turn, call)
                task = loop.create_task(pooled(context.call_tool(tool, call.id, args)))
                task.add_done_callback(on_done)
                running[task] = started
                started += 1

        def commit_ready() -> None:
            nonlocal cursor
            while cursor < len(group) and results[cursor] is not None:
                call = group[cursor][0]
                context.commit(turn, call, results[cursor])
                committed.add(call.id)
                cursor += 1

        launch()
        try:
            while running:
                if not finished:
                    wake[0] = loop.create_future()
                    await wake[0]
                    wake[0] = None
                done, finished[:] = finished[:], []
                for task in done:
                    results[running.pop(task)] = task.result()
                commit_ready()
                launch()
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            for task, position in running.items():
                results[position] = (task.result() if not task.cancelled() and task.exception() is None
                                     else ToolResult(error_text(ABORTED_DURING_CALL), True))
            commit_ready()
            raise


#: every agent's step loop unless its provider gives another (stateless: one for all)
LOCAL_STEPS = LocalSteps()


def log_call(context: TurnContext, turn: int, call: ToolCallBlock) -> None:
    """The audit record of a tool call about to run (and its ``ToolCalled`` event)."""
    context.session.append(TOOL_CALL, turn=turn, data={"call_id": call.id, "name": call.name, "arguments": call.arguments})
    bus = context.bus
    if ToolCalled.kind in bus.wanted:
        bus.publish(ToolCalled(**context.who(), turn=turn, call_id=call.id, name=call.name, arguments=call.arguments))


def assistant_message(response: ModelResponse, context: TurnContext) -> Message:
    """The logged message of a model response (calls without an id get one from the context)."""
    text = response.text
    content: list | str
    if not response.tool_calls:
        content = text if text else []  # a plain answer is kept as its text (Message)
    else:
        content = [Text(text)] if text else []
        for call in response.tool_calls:
            call_id = call.id or context.new_call_id()
            content.append(ToolCallBlock(call_id, call.name, dict(call.arguments or {})))
    usage = response.usage
    # zero usage (scripted models) is not worth an object per message in a large tree
    return Message("assistant", content, usage=usage if usage.input_tokens or usage.output_tokens else None)


def aborted_result(error: BaseException) -> ToolResult:
    """What a call cut by a cancellation commits: the tool's own abort rendering, else the generic text."""
    if isinstance(error, ToolAborted):
        return error.result
    return ToolResult(error_text(ABORTED_DURING_CALL), True)


async def pooled(call: Awaitable[ToolResult]) -> ToolResult:
    """A tool call run as a pool task: a tool's own abort rendering becomes the task's result, so the
    pool commits it (a task ending in a CancelledError subclass would lose it). Also what a step loop
    running elsewhere uses when the driver runs one of toh_nb's tools for it."""
    try:
        return await call
    except ToolAborted as aborted:
        return aborted.result


def _pool_safe(entry: tuple) -> bool:
    """A prepared call may join the parallel pool: it validated and its tool calls it concurrency-safe."""
    call, tool, args, ready = entry
    return ready is None and tool.is_safe(args)
