"""The Agent: an inbox, the lifecycle of its turns, and cancellation (the steps: ``toh_nb.core.steps``).

Inbox verbs (as in the reference harness):

- ``followup(msg)``: queue ``msg`` as its own later turn (``next-turn`` FIFO) and wake the agent;
- ``steer(msg)``: queue ``msg`` for the next step boundary (``next-step``) and wake: a running agent
  reads it before its next model call, an idle one starts a turn for it;
- ``inject(msg)``: queue on ``next-step`` without waking; it is read whenever the agent next steps.

A turn: claim the input, log ``turn/start``, run the steps in the agent's step loop (``self.steps``:
read ``next-step`` messages, call the model, run the tool calls it asked for, repeat — until the model
answers without tool calls; see ``toh_nb.core.steps``), log ``turn/end``, wait for the store, answer. ``cancel(cause, keep_inbox)`` aborts the current
turn (it ends ``aborted``); with ``keep_inbox`` the queued messages stay *parked* until the next waking
send, which runs them first, in order.

The driver is one asyncio task per busy period; cancellation is delivered to it only while it is inside
a turn, so a cancel can never land between turns and skip the ``turn/end`` record.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Awaitable, Callable

from . import budget
from .budget import Limits
from .content import Message, Usage
from .errors import StoreError, cause_of
from .events import MessageQueued, MessageRead, TurnEnded, TurnStarted
from .model import ToolSpec
from .session import TURN_END, TURN_START, USER_MESSAGE, Session, turn_end_data
from .steps import LOCAL_STEPS, TURNS_PER_YIELD, Records, StepLoop, TurnOutcome
from .threads import current_user_threads
from .tools import Tool, ToolContext, ToolResult, invoke

DEFAULT_MAX_PARALLEL_TOOL_CALLS = 10
#: ``Agent.allowance``: the output bound and usage reporting of the agent's own model
_FROM_MODEL = object()

__all__ = ["Agent", "TurnOutcome", "DEFAULT_MAX_PARALLEL_TOOL_CALLS", "TURNS_PER_YIELD"]


class TurnFuture(asyncio.Future):
    """The outcome of a submitted turn that calls ``then(future)`` the moment it is done (set or
    cancelled), in the code that settles it: an asyncio done-callback would run one loop pass later,
    and a delegation's outcome is on every delegation's path (``Agent.submit(then=...)``)."""

    __slots__ = ("_then",)

    def __init__(self, then: "Callable[[TurnFuture], None]", loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._then = then

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._then(self)

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self._then(self)
        return True


class Agent(Records):
    """One agent: its inbox, the lifecycle of its turns and cancellation. Its turns' steps run in its
    step loop (``steps``, :mod:`toh_nb.core.steps`), which sees it as a TurnContext. Create agents
    through a runtime, which composes their tools and system prompt."""

    __slots__ = (
        "id", "runtime", "session", "label", "depth", "parent", "model", "max_tokens", "system", "tools",
        "tool_specs", "mode", "path", "status", "usage", "turns", "started", "disposed",
        "max_parallel_tool_calls", "opening", "_abort_opening", "next_turn_inbox", "next_step_inbox", "steer_pending",
        "_parked", "_driver", "_idle_waiters", "_cancel_cause", "_in_turn", "messages", "_waiters",
        "unyielded", "limits", "subtree_tokens", "reserved_tokens", "budget_waiters",
        "steps", "bus", "tool_filter", "wrap_tool", "__weakref__",
    )

    def __init__(self, *, id: str, runtime: Any, session: Session, model: Any, system: str = "",
                 tools: dict[str, Tool] | None = None, tool_specs: list[ToolSpec] | None = None,
                 label: str | None = None, depth: int = 0, parent: "Agent | None" = None,
                 max_tokens: int | None = None, mode: str = "root", path: str = "root",
                 max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
                 conversation: list[Message] | None = None, turns: int = 0, limits: Limits | None = None,
                 spent_tokens: int = 0, steps: StepLoop | None = None) -> None:
        self.id = id
        self.runtime = runtime
        #: how this agent's turns step (toh_nb.core.steps): in-process unless its provider runs them elsewhere
        self.steps = steps if steps is not None else LOCAL_STEPS
        self.bus = runtime.bus
        self.session = session
        self.model = model
        self.system = system
        self.tools: dict[str, Tool] = tools or {}
        #: the ``tool_filter`` its tools were chosen with, and the provider's ``wrap_tool`` they went
        #: through (if any): how tools that appear later (an MCP server's new list) are offered to it
        self.tool_filter: dict | None = None
        self.wrap_tool: Any = None
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
        self.next_turn_inbox: deque[Message] = deque()
        self.next_step_inbox: deque[Message] = deque()
        self.steer_pending = False
        self._parked = False
        self._driver: asyncio.Task | None = None
        self._idle_waiters: list[asyncio.Future] = []
        self._cancel_cause: str | None = None
        self._in_turn = False
        #: turns begun since this driver last yielded to the loop (see LocalSteps.run)
        self.unyielded = TURNS_PER_YIELD
        #: the conversation (append-only: a model request carries a view of it, not a copy)
        self.messages: list[Message] = conversation if conversation is not None else []
        self._waiters: dict[str, asyncio.Future] = {}
        self.limits = limits if limits is not None else Limits()
        #: tokens used by this agent and its descendants (what ``limits.token_budget`` bounds)
        self.subtree_tokens = spent_tokens
        #: tokens reserved on ``limits.token_budget`` by the model calls in flight below this agent, and
        #: the calls waiting for room on it (``toh_nb.core.budget``)
        self.reserved_tokens = 0
        self.budget_waiters: list[asyncio.Future] | None = None

    # -- inbox ---------------------------------------------------------------------------------

    def followup(self, message: Message) -> None:
        self.next_turn_inbox.append(message)
        self._queued(message)
        self._wake()

    def steer(self, message: Message) -> None:
        self.next_step_inbox.append(message)
        self.steer_pending = True
        self._queued(message)
        if self._in_turn and self.steps.forwards_messages:
            self.steps.deliver(self, message, True)
        self._wake()

    def inject(self, message: Message) -> None:
        self.next_step_inbox.append(message)
        self._queued(message)
        if self._in_turn and self.steps.forwards_messages:
            self.steps.deliver(self, message, False)

    def _queued(self, message: Message) -> None:
        if MessageQueued.kind in self.runtime.bus.wanted:
            source = message.source
            self.runtime.bus.publish(MessageQueued(**self.who(), message_id=message.id,
                                                   source=source.kind if source is not None else None,
                                                   text=message.text,
                                                   sender=source.sender if source is not None else None))

    def submit(self, message: Message, *, first_step_yields: bool = True,
               then: "Callable[[asyncio.Future[TurnOutcome]], None] | None" = None) -> "asyncio.Future[TurnOutcome]":
        """``followup`` and return a future for the outcome of the turn that runs ``message``.

        ``then(future)``: called the moment that future is done (a :class:`TurnFuture`), after the
        turn's records, not one loop pass later as a done-callback is; it must not raise.

        ``first_step_yields=False``: when ``message`` starts the agent's driver, the driver's first
        turn calls the model in the task's first pass through the loop instead of yielding once more
        first (a new task's start is a pass of its own): for a child whose parent only waits for it
        (a foreground delegation), where the extra pass decides nothing and costs every delegation."""
        loop = asyncio.get_running_loop()
        future = loop.create_future() if then is None else TurnFuture(then, loop)
        if message.id is None:
            message.id = self.runtime.ids.message()
        self._waiters[message.id] = future
        self.next_turn_inbox.append(message)
        self._queued(message)
        self._wake(first_step_yields)
        return future

    @property
    def pending(self) -> int:
        """Messages waiting in the inbox (both lists)."""
        return len(self.next_turn_inbox) + len(self.next_step_inbox)

    def queued_messages(self) -> list[Message]:
        """Every message waiting in the inbox (next turns first), oldest first: what a kill drops."""
        return list(self.next_turn_inbox) + list(self.next_step_inbox)

    @property
    def parked(self) -> bool:
        return self._parked and bool(self.next_turn_inbox or self.next_step_inbox)

    def _wake(self, first_step_yields: bool = True) -> None:
        if self.disposed:
            return
        self._parked = False
        if self._driver is None:
            self._set_status("running")
            self._driver = asyncio.get_running_loop().create_task(self._drive(first_step_yields))

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
        return self.opening is not None and bool(self.next_turn_inbox) and self.next_turn_inbox[0].id == self.opening

    def _discard_inbox(self) -> None:
        if not self.next_turn_inbox and not self.next_step_inbox:
            return
        dropped = list(self.next_turn_inbox) + list(self.next_step_inbox)
        self.next_turn_inbox.clear()
        self.next_step_inbox.clear()
        self.steer_pending = False
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

    async def _drive(self, first_step_yields: bool = True) -> None:
        # a busy period's first step yields (see LocalSteps.run), unless its starter says the task's own
        # first pass is enough (``submit(first_step_yields=False)``): then it counts as a queued turn
        self.unyielded = TURNS_PER_YIELD if first_step_yields else 0
        # sync model functions of this driver's turns run on this hub's threads (toh_nb.core.threads)
        current_user_threads.set(getattr(self.runtime, "user_threads", None))
        try:
            while not self.disposed:
                if self._abort_opening is not None and self._opening_queued():
                    await self._run_turn(self.next_turn_inbox.popleft(), aborted_by=self._abort_opening)
                    continue
                if self._parked:
                    break
                if self.next_turn_inbox:
                    await self._run_turn(self.next_turn_inbox.popleft())
                elif self.steer_pending and self.next_step_inbox:
                    await self._run_turn(None)
                else:
                    break
        finally:
            self._driver = None
            self.steer_pending = False
            self._abort_opening = None
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._set_status("idle")

    def log_user(self, message: Message, turn: int) -> None:
        """The step loop's hook (:meth:`TurnContext.log_user`): ``message`` read in ``turn`` is logged, joins
        the conversation, is no longer pending for the runtime, and ``MessageRead`` says so."""
        self.session.append(USER_MESSAGE, turn=turn, message=message)
        self.messages.append(message)
        self.runtime.on_claimed(self, message)
        bus = self.runtime.bus
        if MessageRead.kind in bus.wanted:
            source = message.source
            bus.publish(MessageRead(**self.who(), turn=turn, message_id=message.id,
                                    source=source.kind if source is not None else None))

    async def _run_turn(self, first: Message | None, aborted_by: str | None = None) -> None:
        """Run one turn. ``aborted_by``: the turn was interrupted before it started; it records its
        input and ends ``aborted`` without calling the model."""
        self.turns += 1
        turn = self.turns
        self._cancel_cause = aborted_by
        self._abort_opening = None
        self.session.append(TURN_START, turn=turn)
        bus = self.runtime.bus
        if TurnStarted.kind in bus.wanted:
            bus.publish(TurnStarted(**self.who(), turn=turn))
        waiter = None
        if first is not None:
            if first.id is not None and first.id == self.opening:
                self.opening = None
            waiter = self._waiters.pop(first.id, None) if first.id else None
            self.log_user(first, turn)
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
            await self.steps.run(self, state)
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
            state.reason, state.error, state.cause = "error", str(error) or type(error).__name__, cause_of(error)
        finally:
            self._in_turn = False
            if timer is not None:
                timer.cancel()
        end = self._log_turn_end(turn, state.reason, state.error)
        try:
            recorded = await self._acknowledged(end, state.reason, state.error)
            if recorded is not None:  # the store could not record the turn: that is how it ended
                state.reason, state.error, state.cause = "error", recorded, StoreError.cause
        finally:
            self._finish_turn(turn, state.reason, state.error, state.output, state.usage, waiter, state.cause)

    async def _acknowledged(self, end: Any, reason: str, error: str | None) -> str | None:
        """Wait until the store has recorded the turn before its outcome reaches anyone (a JSONL
        store writes on its own thread; see toh_nb.store.jsonl). A failed write ends the turn
        ``error`` with the store's message (file and OS error) as its diagnostic: returned (None when
        the turn is recorded)."""
        try:
            await self.runtime.recorded(self.session)
        except StoreError as failure:
            end.data = {"reason": "error", "error": str(failure)}  # still unwritten: written so on recovery
            return str(failure)
        return None

    # -- budgets -------------------------------------------------------------------------------

    def _time_up(self, turn: int) -> None:
        """The turn's wall-clock budget ran out: cancel it like an interrupt, keeping the inbox."""
        if self._in_turn and self.turns == turn and self._cancel_cause is None and self._driver is not None:
            self._cancel_cause = budget.TIME_CAUSE
            self._driver.cancel()

    # -- the TurnContext of the step loop (toh_nb.core.steps) -------------------------------------

    def claim(self, message: Message, turn: int) -> None:
        """A loop running elsewhere read a queued message at a step boundary: take the agent's own copy
        out of the inbox (it stayed there until now, so a cut turn never loses one) and log it."""
        inbox = self.next_step_inbox
        for index, queued in enumerate(inbox):
            if queued.id == message.id:
                del inbox[index]
                if not inbox:
                    self.steer_pending = False
                message = queued
                break
        self.log_user(message, turn)

    def queued(self) -> tuple[list[Message], bool]:
        return list(self.next_step_inbox), self.steer_pending

    def new_call_id(self) -> str:
        return self.runtime.ids.call()

    def allowance(self, bound: Any = _FROM_MODEL, reports_usage: bool | None = None) -> "budget.Reservation | str | Any":
        """Before a model call: None when no token budget is on the path; else what
        :func:`budget.reserve` gives (a reservation, a spent budget's diagnostic, or a coroutine that
        waits for room). ``bound``/``reports_usage``: given by a loop whose model runs elsewhere."""
        nodes = budget.budgeted(self)
        if nodes is None:
            return None
        if bound is _FROM_MODEL:
            bound = budget.output_bound(self.max_tokens, self.model)
        if reports_usage is None:
            reports_usage = budget.reports_usage(self.model)
        if not reports_usage:
            return budget.spent_text(self, nodes)
        messages = self.messages
        return budget.reserve(self, nodes, bound, lambda: budget.prompt_estimate(self.system, self.tool_specs, messages))

    def budgeted(self) -> bool:
        return budget.budgeted(self) is not None

    def charge(self, usage: Usage | None, held: "budget.Reservation | None" = None) -> None:
        """Settle a model call: count the tokens its response reports against this agent (its usage) and
        every live ancestor (whatever its reservation was), then release the reservation it ``held``."""
        try:
            if usage is not None:
                self.usage.add(usage)
                spent = usage.input_tokens + usage.output_tokens
                if spent:
                    node: Agent | None = self
                    while node is not None:
                        node.subtree_tokens += spent
                        node = node.parent
        finally:  # a malformed usage fails the turn, never keeps the reservation
            if held is not None:
                budget.release(held)

    def call_tool(self, tool: Tool, call_id: str, args: Any) -> Awaitable[ToolResult]:
        return invoke(tool, ToolContext(self, self.runtime, call_id), args)

    def who(self) -> dict:
        """The common fields of this agent's stream events."""
        return {"agent_id": self.id, "parent_id": self.parent.id if self.parent is not None else None,
                "depth": self.depth}

    def _log_turn_end(self, turn: int, reason: str, error: str | None) -> Any:
        cause = self._cancel_cause if reason == "aborted" and self._cancel_cause else None
        return self.session.append(TURN_END, turn=turn, data=turn_end_data(reason, error, cause))

    def _end_turn(self, turn: int, reason: str, error: str | None, output: list, usage: Usage,
                  waiter: asyncio.Future | None) -> None:
        self._log_turn_end(turn, reason, error)
        self._finish_turn(turn, reason, error, output, usage, waiter)

    def _finish_turn(self, turn: int, reason: str, error: str | None, output: list, usage: Usage,
                     waiter: asyncio.Future | None, cause: str | None = None) -> None:
        if TurnEnded.kind in self.runtime.bus.wanted:
            self.runtime.bus.publish(TurnEnded(**self.who(), turn=turn, reason=reason, error=error,
                                               input_tokens=usage.input_tokens, output_tokens=usage.output_tokens))
        outcome = TurnOutcome(turn, reason, error, list(output), usage, cause if reason == "error" else None)
        self.runtime.on_turn_end(self, outcome)
        if waiter is not None and not waiter.done():  # last: a TurnFuture's ``then`` runs in set_result
            waiter.set_result(outcome)

    # -- conversation --------------------------------------------------------------------------

    @property
    def conversation(self) -> list[Message]:
        return list(self.messages)

    def __repr__(self) -> str:
        return f"Agent({self.id!r}, label={self.label!r}, status={self.status})"
