"""The Agent: an inbox, a turn loop, a parallel tool pool and cancellation.

Inbox verbs (as in the reference harness):

- ``followup(msg)``: queue ``msg`` as its own later turn (``next-turn`` FIFO) and wake the agent;
- ``steer(msg)``: queue ``msg`` for the next step boundary (``next-step``) and wake: a running agent
  reads it before its next model call, an idle one starts a turn for it;
- ``inject(msg)``: queue on ``next-step`` without waking; it is read whenever the agent next steps.

A turn: claim the input, then step — read ``next-step`` messages, call the model, run the tool calls it
asked for (consecutive concurrency-safe calls in a rolling pool, results committed in model order),
repeat — until the model answers without tool calls. ``cancel(cause, keep_inbox)`` aborts the current
turn (it ends ``aborted``); with ``keep_inbox`` the queued messages stay *parked* until the next waking
send, which runs them first, in order.

The driver is one asyncio task per busy period; cancellation is delivered to it only while it is inside
a turn, so a cancel can never land between turns and skip the ``turn/end`` record.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .model import ModelRequest, ModelResponse, ToolSpec, call_off_loop, coerce_response
from . import budget
from .budget import Limits
from .content import Message, MessagesView, Text, ToolCallBlock, ToolResultBlock, Usage
from .errors import StoreError, ToolError
from .events import (MessageQueued, ModelRequested, ModelResponded, TextDelta, ToolCalled, ToolReturned, TurnEnded,
                     TurnStarted)
from .threads import current_user_threads
from .session import (ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE,
                      Session, turn_end_data)
from .tools import (ABORTED_BEFORE_DISPATCH, ABORTED_DURING_CALL, Tool, ToolAborted, ToolContext, ToolResult,
                    error_text, invoke, validate_arguments)

DEFAULT_MAX_PARALLEL_TOOL_CALLS = 10
#: turns of one busy period that may begin back to back without a pass through the loop (each later
#: step of a turn always yields): bounds how long instant turns hold the loop (~1 ms here)
TURNS_PER_YIELD = 32


@dataclass(slots=True)
class TurnOutcome:
    """How one turn ended: its reason (a ``turn/end`` reason), error text, final output and usage."""

    turn: int
    reason: str
    error: str | None = None
    output: list = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


class Agent:
    """One agent. Create agents through a runtime, which composes their tools and system prompt."""

    __slots__ = (
        "id", "runtime", "session", "label", "depth", "parent", "model", "max_tokens", "system", "tools",
        "tool_specs", "mode", "path", "status", "usage", "turns", "started", "disposed",
        "max_parallel_tool_calls", "opening", "_abort_opening", "_next_turn", "_next_step", "_steer_pending",
        "_parked", "_driver", "_idle_waiters", "_cancel_cause", "_in_turn", "_conversation", "_waiters",
        "_turn_waiters", "_unyielded", "limits", "subtree_tokens", "reserved_tokens", "budget_waiters",
        "__weakref__",
    )

    def __init__(self, *, id: str, runtime: Any, session: Session, model: Any, system: str = "",
                 tools: dict[str, Tool] | None = None, tool_specs: list[ToolSpec] | None = None,
                 label: str | None = None, depth: int = 0, parent: "Agent | None" = None,
                 max_tokens: int | None = None, mode: str = "root", path: str = "root",
                 max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
                 conversation: list[Message] | None = None, turns: int = 0, limits: Limits | None = None,
                 spent_tokens: int = 0) -> None:
        self.id = id
        self.runtime = runtime
        self.session = session
        self.model = model
        self.system = system
        self.tools: dict[str, Tool] = tools or {}
        self.tool_specs: list[ToolSpec] = tool_specs if tool_specs is not None else [
            ToolSpec(t.name, t.description, t.parameters) for t in self.tools.values()]
        self.label = label
        self.depth = depth
        self.parent = parent
        self.max_tokens = max_tokens
        self.mode = mode
        self.path = path
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self.status = "idle"
        self.usage = Usage()
        self.turns = turns
        self.started = time.time()
        self.disposed = False
        #: id of a message that opens a busy period as its current turn (a child's first prompt): an
        #: interrupt before that turn starts ends it ``aborted`` instead of parking it as a queued message
        self.opening: str | None = None
        self._abort_opening: str | None = None
        self._next_turn: deque[Message] = deque()
        self._next_step: deque[Message] = deque()
        self._steer_pending = False
        self._parked = False
        self._driver: asyncio.Task | None = None
        self._idle_waiters: list[asyncio.Future] = []
        self._cancel_cause: str | None = None
        self._in_turn = False
        #: turns begun since this driver last yielded to the loop (see _steps)
        self._unyielded = TURNS_PER_YIELD
        self._conversation: list[Message] = conversation if conversation is not None else []
        self._waiters: dict[str, asyncio.Future] = {}
        self._turn_waiters: list[asyncio.Future] = []
        self.limits = limits if limits is not None else Limits()
        #: tokens used by this agent and its descendants (what ``limits.token_budget`` bounds)
        self.subtree_tokens = spent_tokens
        #: tokens reserved on ``limits.token_budget`` by the model calls in flight below this agent, and
        #: the calls waiting for room on it (``toh_nb.core.budget``)
        self.reserved_tokens = 0
        self.budget_waiters: list[asyncio.Future] | None = None

    # -- inbox ---------------------------------------------------------------------------------

    def followup(self, message: Message) -> None:
        self._next_turn.append(message)
        self._queued(message)
        self._wake()

    def steer(self, message: Message) -> None:
        self._next_step.append(message)
        self._steer_pending = True
        self._queued(message)
        self._wake()

    def inject(self, message: Message) -> None:
        self._next_step.append(message)
        self._queued(message)

    def _queued(self, message: Message) -> None:
        if self.runtime.bus.listening:
            source = message.source.kind if message.source is not None else None
            self.runtime.bus.publish(MessageQueued(**self._who(), message_id=message.id, source=source,
                                                   text=message.text))

    def submit(self, message: Message) -> "asyncio.Future[TurnOutcome]":
        """``followup`` and return a future for the outcome of the turn that runs ``message``."""
        future = asyncio.get_running_loop().create_future()
        if message.id is None:
            message.id = self.runtime.ids.message()
        self._waiters[message.id] = future
        self.followup(message)
        return future

    @property
    def pending(self) -> int:
        """Messages waiting in the inbox (both lists)."""
        return len(self._next_turn) + len(self._next_step)

    @property
    def parked(self) -> bool:
        return self._parked and bool(self._next_turn or self._next_step)

    def _wake(self) -> None:
        if self.disposed:
            return
        self._parked = False
        if self._driver is None:
            self._set_status("running")
            self._driver = asyncio.get_running_loop().create_task(self._drive())

    # -- cancellation --------------------------------------------------------------------------

    def cancel(self, cause: str = "user", keep_inbox: bool = False) -> bool:
        """Abort the running turn. Returns False (a no-op) when the agent is idle."""
        if self._driver is None:
            if not keep_inbox:
                self._discard_inbox()
            return False
        if keep_inbox:
            self._parked = True
        else:
            self._discard_inbox()
        if self._in_turn and self._cancel_cause is None:
            self._cancel_cause = cause
            self._driver.cancel()
        elif not self._in_turn and keep_inbox and self._opening_queued():
            self._abort_opening = cause
        return True

    def _opening_queued(self) -> bool:
        return self.opening is not None and bool(self._next_turn) and self._next_turn[0].id == self.opening

    def _discard_inbox(self) -> None:
        if not self._next_turn and not self._next_step:
            return
        dropped = list(self._next_turn) + list(self._next_step)
        self._next_turn.clear()
        self._next_step.clear()
        self._steer_pending = False
        for message in dropped:
            waiter = self._waiters.pop(message.id, None) if message.id else None
            if waiter is not None and not waiter.done():
                waiter.set_result(TurnOutcome(self.turns, "aborted", "the message was discarded before it ran"))
        self.runtime.on_discarded(self, dropped)

    async def when_idle(self) -> None:
        if self._driver is None:
            return
        future = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(future)
        # no shield: a cancelled caller cancels only its own future, which the driver then skips
        await future

    async def dispose(self) -> None:
        """Stop for good: abort the current turn, drop the inbox, wait until the driver is gone."""
        if not self.disposed:
            self.cancel("parent", keep_inbox=False)
            self.disposed = True
        await self.when_idle()

    def dispose_idle(self) -> bool:
        """``dispose`` done at once when no turn is running (nothing to wait for): True. False: the
        agent is busy and untouched; await ``dispose()``. Why: disposing a settled one-shot child is on
        every delegation's path, and a coroutine that never waits still costs its caller a task."""
        if self._driver is not None:
            return False
        if not self.disposed:
            self.cancel("parent", keep_inbox=False)
            self.disposed = True
        return True

    # -- driver --------------------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        if self.status != status:
            self.status = status
            self.runtime.on_status(self)

    async def _drive(self) -> None:
        self._unyielded = TURNS_PER_YIELD  # a busy period's first step always yields
        # sync model functions of this driver's turns run on this hub's threads (toh_nb.core.threads)
        current_user_threads.set(getattr(self.runtime, "user_threads", None))
        try:
            while not self.disposed:
                if self._abort_opening is not None and self._opening_queued():
                    await self._run_turn(self._next_turn.popleft(), aborted_by=self._abort_opening)
                    continue
                if self._parked:
                    break
                if self._next_turn:
                    await self._run_turn(self._next_turn.popleft())
                elif self._steer_pending and self._next_step:
                    await self._run_turn(None)
                else:
                    break
        finally:
            self._driver = None
            self._steer_pending = False
            self._abort_opening = None
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._set_status("idle")

    def _log_user(self, message: Message, turn: int) -> None:
        self.session.append(USER_MESSAGE, turn=turn, message=message)
        self._conversation.append(message)
        self.runtime.on_claimed(self, message)

    async def _run_turn(self, first: Message | None, aborted_by: str | None = None) -> None:
        """Run one turn. ``aborted_by``: the turn was interrupted before it started; it records its
        input and ends ``aborted`` without calling the model."""
        self.turns += 1
        turn = self.turns
        self._cancel_cause = aborted_by
        self._abort_opening = None
        self.session.append(TURN_START, turn=turn)
        bus = self.runtime.bus
        if bus.listening:
            bus.publish(TurnStarted(**self._who(), turn=turn))
        waiter = None
        if first is not None:
            if first.id is not None and first.id == self.opening:
                self.opening = None
            waiter = self._waiters.pop(first.id, None) if first.id else None
            self._log_user(first, turn)
        if aborted_by is not None:
            self._end_turn(turn, "aborted", None, [], Usage(), waiter)
            return
        state = TurnOutcome(turn, "completed")
        limits = self.limits
        self._in_turn = True
        timer = None
        if limits.turn_timeout is not None:
            timer = asyncio.get_running_loop().call_later(limits.turn_timeout, self._time_up, turn)
        try:
            await self._steps(state)
        except asyncio.CancelledError:
            if self._cancel_cause is None:  # not ours (loop shutdown): record it, then let it through
                self._end_turn(turn, "aborted", "cancelled", state.output, state.usage, waiter)
                raise
            asyncio.current_task().uncancel()
            if self._cancel_cause == budget.TIME_CAUSE:
                state.reason, state.error = budget.MAX_TIME, budget.time_limit_text(limits.turn_timeout)
                self._cancel_cause = None
            else:
                state.reason, state.error = "aborted", None
        except Exception as error:  # a model failure ends the turn; its message is the diagnostic
            state.reason, state.error = "error", str(error) or type(error).__name__
        finally:
            self._in_turn = False
            if timer is not None:
                timer.cancel()
        end = self._log_turn_end(turn, state.reason, state.error)
        try:
            state.reason, state.error = await self._acknowledged(end, state.reason, state.error)
        finally:
            self._finish_turn(turn, state.reason, state.error, state.output, state.usage, waiter)

    async def _steps(self, state: TurnOutcome) -> None:
        """The steps of one turn: read ``next-step`` messages, check the budgets, call the model, run
        the tool calls it asked for; again, until it answers without tool calls or a limit stops it.
        Returns with ``state.reason``/``state.error`` set (a stop), or raises (a model failure, a
        cancellation); ``state.output`` and ``state.usage`` stay current, so a cut turn reports what it
        produced.

        Why a method of its own: it is the seam where a turn's steps run elsewhere. ``toh_nb.ray``'s
        driver agent overrides it to run this very code on a host actor and replay its records here,
        while the turn's lifecycle (records, waiters, acknowledgement, cancellation) stays in
        ``_run_turn``."""
        turn = state.turn
        bus = self.runtime.bus
        limits = self.limits
        step = 0
        while True:
            step += 1
            # a step yields to the loop first: a model and tools that answer without awaiting would
            # otherwise hold the shared loop forever (no timeout, interrupt or other agent runs).
            # Only the first step of a turn that follows another turn of the same busy period may
            # skip it, at most TURNS_PER_YIELD turns in a row: queued follow-ups of an instant model
            # run back to back (a pass through the loop per turn cost continuable children ~25 %)
            if step > 1 or self._unyielded >= TURNS_PER_YIELD:
                self._unyielded = 0
                await asyncio.sleep(0)
            if step == 1:
                self._unyielded += 1
            if self._next_step:
                self._steer_pending = False
                while self._next_step:
                    self._log_user(self._next_step.popleft(), turn)
            if limits.max_steps is not None and step > limits.max_steps:
                state.reason, state.error = budget.MAX_STEPS, budget.step_limit_text(limits.max_steps)
                return
            held = self._reserve()
            if held is not None and held.__class__ is not budget.Reservation:
                if held.__class__ is not str:
                    held = await held  # calls in flight hold the room this one needs
                if held.__class__ is str:
                    state.reason, state.error = budget.TOKEN_BUDGET, held
                    return
            if bus.listening:
                bus.publish(ModelRequested(**self._who(), turn=turn, step=step))
            try:
                response = await self._call_model(turn, step)
            except BaseException:  # failed or cancelled: the call charges nothing
                if held is not None:
                    budget.release(held)
                raise
            self._charge(response.usage, held)  # settled first: nothing below may keep the reservation
            state.usage.add(response.usage)
            self.usage.add(response.usage)
            if bus.listening:
                bus.publish(ModelResponded(**self._who(), turn=turn, step=step, text=response.text,
                                           tool_calls=tuple(c.name for c in response.tool_calls),
                                           stop_reason=response.stop_reason,
                                           input_tokens=response.usage.input_tokens,
                                           output_tokens=response.usage.output_tokens))
            message = self._assistant_message(response)
            self.session.append(ASSISTANT_MESSAGE, turn=turn, message=message)
            content = message.content
            if content:
                self._conversation.append(message)
                state.output = content
            if response.stop_reason == "max_tokens" or (
                    self.max_tokens is not None and response.usage.output_tokens > self.max_tokens):
                state.reason = "max-tokens"
                return
            if response.stop_reason == "refusal":
                state.reason = "blocked"
                return
            calls = [b for b in content if b.type == "tool-call"]
            if calls:
                await self._run_tools(turn, calls)
                continue
            if self._steer_pending and self._next_step:
                continue  # a waking message arrived during the final call: read it in another step
            return

    async def _acknowledged(self, end: Any, reason: str, error: str | None) -> tuple[str, str | None]:
        """Wait until the store has recorded the turn before its outcome reaches anyone (a JSONL
        store writes on its own thread; see toh_nb.store.jsonl). A failed write ends the turn
        ``error`` with the store's message (file and OS error) as its diagnostic."""
        try:
            await self.runtime.recorded(self.session)
        except StoreError as failure:
            reason, error = "error", str(failure)
            end.data = {"reason": reason, "error": error}  # still unwritten: written so on recovery
        return reason, error

    # -- budgets -------------------------------------------------------------------------------

    def _time_up(self, turn: int) -> None:
        """The turn's wall-clock budget ran out: cancel it like an interrupt, keeping the inbox."""
        if self._in_turn and self.turns == turn and self._cancel_cause is None and self._driver is not None:
            self._cancel_cause = budget.TIME_CAUSE
            self._driver.cancel()

    def _reserve(self) -> "budget.Reservation | str | Any":
        """Before a model call: None when no token budget is on the path; else what
        :func:`budget.reserve` gives (a reservation, a spent budget's diagnostic, or a coroutine that
        waits for room). Why a method: ``toh_nb.ray``'s host agent overrides it to ask the driver, whose
        tree holds the budgets."""
        nodes = budget.budgeted(self)
        if nodes is None:
            return None
        return self._reserve_on(nodes, budget.output_bound(self.max_tokens, self.model),
                                budget.reports_usage(self.model))

    def _reserve_on(self, nodes: list, bound: int | None, reports_usage: bool) -> "budget.Reservation | str | Any":
        """:meth:`_reserve` with the call's output bound and whether its model reports usage given."""
        if not reports_usage:
            return budget.spent_text(self, nodes)
        conversation = self._conversation
        return budget.reserve(self, nodes, bound,
                              lambda: budget.prompt_estimate(self.system, self.tool_specs, conversation))

    def _charge(self, usage: Usage | None, held: "budget.Reservation | None" = None) -> None:
        """Settle a model call: count the tokens its response reports against this agent and every live
        ancestor (whatever its reservation was), then release the reservation it ``held``."""
        try:
            spent = usage.input_tokens + usage.output_tokens if usage is not None else 0
            if spent:
                node: Agent | None = self
                while node is not None:
                    node.subtree_tokens += spent
                    node = node.parent
        finally:  # a malformed usage fails the turn, never keeps the reservation
            if held is not None:
                budget.release(held)

    def _log_turn_end(self, turn: int, reason: str, error: str | None) -> Any:
        cause = self._cancel_cause if reason == "aborted" and self._cancel_cause else None
        return self.session.append(TURN_END, turn=turn, data=turn_end_data(reason, error, cause))

    def _end_turn(self, turn: int, reason: str, error: str | None, output: list, usage: Usage,
                  waiter: asyncio.Future | None) -> None:
        self._log_turn_end(turn, reason, error)
        self._finish_turn(turn, reason, error, output, usage, waiter)

    def _finish_turn(self, turn: int, reason: str, error: str | None, output: list, usage: Usage,
                     waiter: asyncio.Future | None) -> None:
        if self.runtime.bus.listening:
            self.runtime.bus.publish(TurnEnded(**self._who(), turn=turn, reason=reason, error=error,
                                               input_tokens=usage.input_tokens, output_tokens=usage.output_tokens))
        outcome = TurnOutcome(turn, reason, error, list(output), usage)
        if waiter is not None and not waiter.done():
            waiter.set_result(outcome)
        self.runtime.on_turn_end(self, outcome)

    async def _call_model(self, turn: int, step: int) -> ModelResponse:
        request = ModelRequest(self.id, self.label, self.depth, self.system, MessagesView(self._conversation),
                               self.tool_specs, self.max_tokens, self.path, turn, step,
                               self._publish_delta if self.runtime.bus.listening else None)
        return coerce_response(await call_off_loop(self.model.request, request))

    def _assistant_message(self, response: ModelResponse) -> Message:
        text = response.text
        content: list | str
        if not response.tool_calls:
            content = text if text else []  # a plain answer is kept as its text (Message)
        else:
            content = [Text(text)] if text else []
            for call in response.tool_calls:
                call_id = call.id or self.runtime.ids.call()
                content.append(ToolCallBlock(call_id, call.name, dict(call.arguments or {})))
        usage = response.usage
        # zero usage (scripted models) is not worth an object per message in a large tree
        return Message("assistant", content, usage=usage if usage.input_tokens or usage.output_tokens else None)

    # -- tools ---------------------------------------------------------------------------------

    def _commit(self, turn: int, call: ToolCallBlock, result: ToolResult) -> None:
        message = Message("tool", [ToolResultBlock(call.id, call.name, result.text, result.is_error)])
        self.session.append(TOOL_RESULT, turn=turn, message=message)
        self._conversation.append(message)
        if self.runtime.bus.listening:
            self.runtime.bus.publish(ToolReturned(**self._who(), turn=turn, call_id=call.id, name=call.name,
                                                  text=result.text, is_error=result.is_error))

    def _log_call(self, turn: int, call: ToolCallBlock) -> None:
        self.session.append(TOOL_CALL, turn=turn, data={"call_id": call.id, "name": call.name,
                                                        "arguments": call.arguments})
        if self.runtime.bus.listening:
            self.runtime.bus.publish(ToolCalled(**self._who(), turn=turn, call_id=call.id, name=call.name,
                                                arguments=call.arguments))

    def _publish_delta(self, text: str) -> None:
        """A streamed piece of this agent's answer, onto the hub's event stream."""
        self.runtime.bus.publish(TextDelta(**self._who(), text=text))

    def _who(self) -> dict:
        """The common fields of this agent's stream events."""
        return {"agent_id": self.id, "parent_id": self.parent.id if self.parent is not None else None,
                "depth": self.depth}

    async def _run_tools(self, turn: int, calls: list[ToolCallBlock]) -> None:
        """Run the calls of one assistant message: safe runs in a rolling pool, unsafe ones alone."""
        prepared: list[tuple[ToolCallBlock, Tool | None, Any, ToolResult | None]] = []
        for call in calls:
            tool = self.tools.get(call.name)
            if tool is None:
                prepared.append((call, None, None, ToolResult(error_text(f'unknown tool "{call.name}"'), True)))
                continue
            try:
                prepared.append((call, tool, validate_arguments(tool, call.arguments), None))
            except ToolError as error:
                prepared.append((call, tool, None, ToolResult(error_text(error), True)))
        index = 0
        total = len(prepared)
        first_event = len(self.session.events)
        try:
            while index < total:
                end = index
                while end < total and _pool_safe(prepared[end]):
                    end += 1
                if end - index > 1:
                    await self._run_pool(turn, prepared[index:end])
                    index = end
                    continue
                # a single call (or a barrier, or a refused call): run it inline, no task needed
                call, tool, args, ready = prepared[index]
                self._log_call(turn, call)
                result = ready if ready is not None else await self._invoke(tool, call, args)
                self._commit(turn, call, result)
                index += 1
        except asyncio.CancelledError:
            # calls that never started leave a balanced log: an error result, no audit call event
            committed = {e.message.tool_call_id for e in self.session.events[first_event:]
                         if e.kind == TOOL_RESULT}
            for call, *_ in prepared:
                if call.id not in committed:
                    self._commit(turn, call, ToolResult(error_text(ABORTED_BEFORE_DISPATCH), True))
            raise

    async def _invoke(self, tool: Tool, call: ToolCallBlock, args: Any) -> ToolResult:
        ctx = ToolContext(self, self.runtime, call.id)
        try:
            return await invoke(tool, ctx, args)
        except asyncio.CancelledError as error:
            self._commit(self.turns, call, _aborted_result(error))
            raise

    async def _run_pool(self, turn: int, group: list) -> None:
        """Rolling pool of ``max_parallel_tool_calls``; results committed in model order."""
        size = max(1, self.max_parallel_tool_calls)
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
                self._log_call(turn, call)
                task = loop.create_task(invoke_pooled(tool, ToolContext(self, self.runtime, call.id), args))
                task.add_done_callback(on_done)
                running[task] = started
                started += 1

        def commit_ready() -> None:
            nonlocal cursor
            while cursor < len(group) and results[cursor] is not None:
                self._commit(turn, group[cursor][0], results[cursor])
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

    # -- conversation --------------------------------------------------------------------------

    @property
    def conversation(self) -> list[Message]:
        return list(self._conversation)

    def __repr__(self) -> str:
        return f"Agent({self.id!r}, label={self.label!r}, status={self.status})"


def _aborted_result(error: BaseException) -> ToolResult:
    """What a call cut by a cancellation commits: the tool's own abort rendering, else the generic text."""
    if isinstance(error, ToolAborted):
        return error.result
    return ToolResult(error_text(ABORTED_DURING_CALL), True)


async def invoke_pooled(tool: Tool, ctx: ToolContext, args: Any) -> ToolResult:
    """``invoke`` for a pool task: a tool's own abort rendering becomes the task's result, so the pool
    commits it (a task ending in a CancelledError subclass would lose it). Public because a driver
    that runs a tool for steps running elsewhere (``toh_nb.ray.remote``) needs the same rendering."""
    try:
        return await invoke(tool, ctx, args)
    except ToolAborted as aborted:
        return aborted.result


def _pool_safe(entry: tuple) -> bool:
    """A prepared call may join the parallel pool: it validated and its tool calls it concurrency-safe."""
    call, tool, args, ready = entry
    return ready is None and tool.is_safe(args)
