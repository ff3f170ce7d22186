"""The driver's side of a Ray child's turn: the step loop runs on a host, its records are replayed here.

A Ray child is an ordinary driver Agent (inbox, statuses, turn records, waiters, acknowledgement,
budget diagnostics, notices, listing) whose step loop (``toh_nb.core.steps``) is a :class:`RemoteSteps`:
instead of stepping here, it asks the child's host to run the same ``LocalSteps``
(``toh_nb.providers.ray.host``) and *replays* what comes back, batch by batch, through the agent's
``TurnContext`` onto the child's session, conversation and the hub's event stream, so the log, the tables
and the stream read exactly as with ``spawn``. Four things cross back the other way while the loop runs:

- the answers to toh_nb's own tools, which the host yields as requests and the driver runs with the
  driver agent's ToolContext (they act on the tree, which lives here);
- the answers to reservation requests: a child with a token budget on its path asks before each model
  call, and the driver reserves on the tree with the in-process code (``toh_nb.core.budget``: it may
  wait for room, or refuse with the spent budget's diagnostic); the reservation is settled when the
  call's response is replayed here, and released if the run ends without one;
- messages steered or injected into the child (notices, follow-ups read at a step boundary), forwarded
  to the host, which reads them at its next step boundary; they stay in the driver's inbox until the
  host's claim comes back, so a turn cut short never loses one;
- cancellation (interrupt, kill, ``turn_timeout``, ``hub.close()``): the driver stops the run on its
  host (``Host.stop``), replays what the host produced before the stop (a tool result committed just
  before an interrupt stays, as in-process), falls back to ``ray.cancel`` if the host does not end the
  stream within ``DRAIN_TIMEOUT``, and commits the abort records itself, with the in-process texts, for the
  calls it saw start and not finish (``ABORTED_DURING_CALL``, or a control tool's own ``ToolAborted``
  rendering) and for those that never started (``ABORTED_BEFORE_DISPATCH``).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import time
from typing import Any

from ...core import budget
from ...core.content import Message, ToolCallBlock, ToolResultBlock
from ...core.errors import ModelError, ToolError
from ...core.session import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from ...core.steps import StepLoop, TurnContext, TurnOutcome, pooled
from ...core.tools import (ABORTED_BEFORE_DISPATCH, ABORTED_DURING_CALL, ToolResult, error_text,
                          validate_arguments)
from .host import HOST_CALL_PREFIX, pack, unpack
from .pool import call_failed_text


class StepError(Exception):
    """A step loop that failed on its host (a model failure): its text is the turn's diagnostic."""


class Replay:
    """One remote run's records, applied to the driver agent in the order the host produced them."""

    __slots__ = ("agent", "state", "link", "host", "run_id", "ids", "calls", "started", "committed", "asked",
                 "outcome", "held", "granting", "contexts")

    def __init__(self, agent: TurnContext, state: TurnOutcome, link: Any, host: Any, run_id: int) -> None:
        self.agent = agent
        self.state = state
        self.link = link
        self.host = host
        self.run_id = run_id
        self.ids: dict[str, str] = {}  # host-minted call id -> the driver's
        self.calls: list[ToolCallBlock] = []  # the tool calls of the latest assistant message
        self.started: dict[str, tuple] = {}  # call id -> (name, arguments): logged, not yet answered
        self.committed: set[str] = set()
        self.asked: dict[str, asyncio.Task] = {}  # call id -> the driver running one of toh_nb's tools
        self.outcome: tuple | None = None  # ("stop", reason, error) | ("error", text) | ("unknown",)
        self.held: budget.Reservation | None = None  # the reservation of the host's model call in flight
        self.granting: asyncio.Task | None = None  # the driver reserving it (it may wait for room)
        #: call id -> the context its replayed ``tool/call`` event left (see _event)
        self.contexts: dict[str, contextvars.Context] = {}

    def call_id(self, host_id: str) -> str:
        if not host_id.startswith(HOST_CALL_PREFIX):
            return host_id
        mapped = self.ids.get(host_id)
        if mapped is None:
            mapped = self.ids[host_id] = self.agent.new_call_id()
        return mapped

    def apply(self, items: list) -> None:
        for item in items:
            kind = item[0]
            if kind == "log":
                self._log(*item[1:])
            elif kind == "event":
                self._event(item[1])
            elif kind == "tool":
                self._ask(item[1], self.call_id(item[2]))
            elif kind == "reserve":
                self.granting = asyncio.get_running_loop().create_task(self._grant(*item[1:]))
            else:
                self.outcome = item

    def _log(self, kind: str, turn: int, message: Message | None, data: dict | None) -> None:
        agent = self.agent
        if kind == USER_MESSAGE:
            agent.claim(message, turn)
        elif kind == ASSISTANT_MESSAGE:
            content = [ToolCallBlock(self.call_id(b.id), b.name, b.arguments) if b.type == "tool-call" else b
                       for b in message.content]
            held, self.held = self.held, None
            self._answered(Message("assistant", content, usage=message.usage), turn, held)
            self.calls = [b for b in content if b.type == "tool-call"]
            self.started.clear()
            self.committed.clear()
        elif kind == TOOL_CALL:
            data = {**data, "call_id": self.call_id(data["call_id"])}
            agent.session.append(TOOL_CALL, turn=turn, data=data)
            self.started[data["call_id"]] = (data["name"], data["arguments"])
        elif kind == TOOL_RESULT:
            block = message.content[0]
            call_id = self.call_id(block.call_id)
            returned = Message("tool", [ToolResultBlock(call_id, block.name, block.text, block.is_error)])
            agent.session.append(TOOL_RESULT, turn=turn, message=returned)
            agent.messages.append(returned)
            self.started.pop(call_id, None)
            self.committed.add(call_id)
            self.asked.pop(call_id, None)
            self.contexts.pop(call_id, None)
        else:  # nothing else is logged by a step loop; kept rather than lost
            agent.session.append(kind, turn=turn, message=message, data=data)

    def _answered(self, message: Message, turn: int, held: budget.Reservation | None) -> None:
        """A model response: its usage counted (the turn's, the agent's and the tree's budgets, whose
        reservation ``held`` for the call it settles), logged, as the in-process loop does."""
        agent = self.agent
        agent.charge(message.usage, held)  # settled first, as in-process
        if message.usage is not None:
            self.state.usage.add(message.usage)
        agent.session.append(ASSISTANT_MESSAGE, turn=turn, message=message)
        content = message.content
        if content:
            agent.messages.append(message)
            self.state.output = content

    def _event(self, event: Any) -> None:
        bus = self.agent.bus
        if event.kind not in bus.wanted:
            return
        # ``time`` stays the host's wall clock (when it happened); ``monotonic`` is this process's clock
        changes: dict = {"monotonic": time.monotonic()}
        call_id = getattr(event, "call_id", None)
        if call_id is not None and call_id.startswith(HOST_CALL_PREFIX):
            changes["call_id"] = self.call_id(call_id)
        event = bus.publish(dataclasses.replace(event, **changes))
        if event.kind == "tool/call":
            # A listener may have set context for the call (a tracer: its span current). In-process, the
            # call's task starts right after its event and copies it; here the host's events come in a
            # batch (two parallel calls: both events, then both requests), so the call runs in a copy
            # taken now, not in whatever the batch's last event left.
            self.contexts[event.call_id] = contextvars.copy_context()

    def _ask(self, request: int, call_id: str) -> None:
        self.asked[call_id] = asyncio.get_running_loop().create_task(self._serve(request, call_id),
                                                                     context=self.contexts.pop(call_id, None))

    async def _serve(self, request: int, call_id: str) -> ToolResult:
        """Run one of toh_nb's own tools for the host, with the driver agent's context, and answer it."""
        agent = self.agent
        name, arguments = self.started.get(call_id, (None, None))
        tool = agent.tools.get(name) if name is not None else None
        if tool is None:
            result = ToolResult(error_text(f'unknown tool "{name}"'), True)
        else:
            try:
                args = validate_arguments(tool, arguments)
            except ToolError as error:
                result = ToolResult(error_text(error), True)
            else:
                result = await pooled(agent.call_tool(tool, call_id, args))
        self.link.answer(self.host, self.run_id, request, result)
        return result

    async def _grant(self, request: int, bound: int | None, reports_usage: bool) -> None:
        """Reserve the host's next model call on the tree and answer it (None: granted; else the spent
        budget's diagnostic, which ends the host's turn ``token-budget`` with the in-process text)."""
        held = self.agent.allowance(bound, reports_usage)
        if held is not None and held.__class__ is not budget.Reservation and held.__class__ is not str:
            held = await held  # calls in flight hold the room this one needs
        if held.__class__ is str:
            self.link.grant(self.host, self.run_id, request, held)
            return
        self.held = held  # no await from the reservation to here: a cancelled grant holds nothing
        self.link.grant(self.host, self.run_id, request, None)

    def release(self) -> None:
        """The run is over: a reservation whose response never came back (the model failed, the run was
        cut) is given back, and a grant still waiting for room is dropped."""
        if self.granting is not None:
            self.granting.cancel()
            self.granting = None
        held, self.held = self.held, None
        if held is not None:
            budget.release(held)

    async def abort(self, cause: str | None = None) -> None:
        """The run was cut (cancelled, or its host died): close the latest calls as in-process would.
        ``cause``: the diagnostic for calls that were running (a dead host), else the abort texts."""
        asked = list(self.asked.values())
        for task in asked:
            task.cancel()
        if asked:
            await asyncio.gather(*asked, return_exceptions=True)
        for call in self.calls:
            if call.id in self.committed:
                continue
            if call.id in self.started:
                task = self.asked.get(call.id)
                if cause is not None:
                    result = ToolResult(error_text(cause), True)
                elif task is not None and not task.cancelled() and task.exception() is None:
                    result = task.result()  # finished (or rendered its own abort) before the cut
                else:
                    result = ToolResult(error_text(ABORTED_DURING_CALL), True)
            else:
                result = ToolResult(error_text(ABORTED_BEFORE_DISPATCH), True)
            self.agent.commit(self.state.turn, call, result)
            self.committed.add(call.id)

    def finish(self) -> None:
        """Turn the host's last word into the driver's: a stop with the driver's exact diagnostic, or
        the failure that ends the turn ``error``."""
        outcome = self.outcome
        if outcome is None or outcome[0] == "unknown":
            raise ModelError("the Ray host ended this turn's stream without an outcome", cause="placement")
        if outcome[0] == "error":
            raise StepError(outcome[1])
        _, reason, error = outcome
        state = self.state
        state.reason, state.error = reason, error  # a token-budget stop carries the driver's own diagnostic
        if reason == budget.MAX_STEPS and self.agent.limits.max_steps is not None:
            state.error = budget.step_limit_text(self.agent.limits.max_steps)


#: seconds a stopped run's host may take to end its stream before the driver cancels it in Ray
DRAIN_TIMEOUT = 10.0


async def drain(ray: Any, stream: Any, replay: Replay, fetching: Any = None) -> bool:
    """Replay what a stopped run's host produced before the stop (``Host.stop``), starting with the
    batch whose fetch the cancellation interrupted (``fetching``); True when the stream ended, False
    when the host did not end it in time or the call failed.

    Why: the host runs ahead of the driver by a batch in flight. A tool whose result the host had
    committed when an interrupt came has finished, as it would have in-process, where the interrupt
    finds its result logged; cutting the stream (``ray.cancel`` drops what is in flight) would log it
    "aborted before it finished" and lose its result. Only records and events are applied: a request
    to run one of toh_nb's own tools is not started any more (the abort closes its call).
    """
    async def apply(ref: Any) -> None:
        replay.apply([item for item in unpack(await ref) if item[0] in ("log", "event")])

    try:
        async with asyncio.timeout(DRAIN_TIMEOUT):
            if fetching is not None:
                await apply(fetching)
            async for ref in stream:
                await apply(ref)
        return True
    except (TimeoutError, ray.exceptions.RayError):
        return False


class RemoteSteps(StepLoop):
    """A Ray child's step loop (``ChildPlan.steps``): runs each turn's steps on the child's host and
    replays them here; forwards messages and tool answers while one runs. Also the child's model (a
    ``spawn`` child of a Ray child inherits it: its calls are answered on the host)."""

    __slots__ = ("provider", "child_id", "key", "model_blob", "resources", "one_shot", "mode", "running", "_serial")

    forwards_messages = True

    def __init__(self, provider: Any, child_id: str, key: str, model_blob: Any, resources: dict | None,
                 mode: str) -> None:
        self.provider = provider
        self.child_id = child_id
        #: the child's name on hosts and in the pool: its id and its hub (hubs sharing a provider may
        #: each have an ``agent-1``)
        self.key = key
        self.model_blob = model_blob
        self.resources = resources
        self.mode = mode
        self.one_shot = mode == "one-shot"
        self.running: tuple | None = None  # (host, run id) while a turn's steps run remotely
        self._serial = 0

    def __repr__(self) -> str:
        return f"RemoteSteps({self.child_id!r})"

    @property
    def inner(self) -> Any:
        """The model the child's host runs (as a wrapper names what it wraps: ``toh_nb.costs`` prices a
        Ray child by its name, and its trace spans name it), or None when only its pickle is here."""
        blob = self.model_blob
        return getattr(blob, "keep", None) if blob is not None else None

    async def request(self, request: Any) -> Any:
        """One model call answered on the child's host: the model of an in-process agent that inherits
        this child's (a ``spawn`` child of a Ray child). The child's own calls run in its host's loop."""
        payload = dataclasses.replace(request, messages=list(request.messages), on_delta=None)
        return await self.provider.ask_model(self, payload)

    async def run(self, agent: TurnContext, state: TurnOutcome) -> None:
        """Run this turn's step loop on the child's host and replay it here."""
        ray = self.provider.ray()
        for whole in (False, True):
            host = await self.provider.host_for(self.key)
            self._serial += 1
            replay = Replay(agent, state, self, host, self._serial)
            payload = self.provider.payload(self, agent, state, host, whole)
            stream = host.actor.run.options(num_returns="streaming").remote(self.key, self._serial, pack(payload))
            self.provider.count_round_trip()
            self.running = (host, self._serial)
            fetching = None  # the batch being fetched: a cancellation there must not lose it
            try:
                async for ref in stream:
                    fetching = ref
                    items = unpack(await ref)
                    fetching = None
                    replay.apply(items)
            except asyncio.CancelledError:
                self.provider.forget_sync(self.key)  # the host's copy may hold what the driver never saw
                try:
                    self.provider.call(host, "stop", self.key, self._serial)
                    if not await drain(ray, stream, replay, fetching):
                        self.provider.cancelled(stream)  # the host did not end it: cancel it in Ray
                finally:
                    await replay.abort()
                raise
            except ray.exceptions.RayActorError as error:
                text = self.provider.host_died(host, error)
                await replay.abort(text)
                raise ModelError(text, cause="placement") from None
            except ray.exceptions.RayError as error:  # the call itself failed in Ray (a lost object, a system error)
                self.provider.forget_sync(self.key)
                text = call_failed_text(host, error)
                await replay.abort(text)
                raise ModelError(text, cause="placement") from None
            finally:
                self.running = None
                replay.release()
            outcome = replay.outcome[0] if replay.outcome is not None else None
            if outcome == "unknown" and not whole:
                self.provider.forget_host_blobs(host)  # it may lack the model or shape too
                continue  # the host had no copy of this child: send it whole
            if outcome in ("stop", "error"):  # both sides appended the same messages
                self.provider.synced(self.key, host, len(agent.messages))
            replay.finish()
            return

    def deliver(self, agent: TurnContext, message: Message, steer: bool) -> None:
        """A message for the running loop's next step boundary (no-op between turns: the inbox has it)."""
        if self.running is not None:
            host, run_id = self.running
            self.provider.call(host, "deliver", self.key, run_id, [message], steer)

    def grant(self, host: Any, run_id: int, request: int, refusal: str | None) -> None:
        """Answer a reservation request of the run ``run_id`` (see ``Replay._grant``)."""
        self.provider.call(host, "granted", self.key, run_id, request, refusal)

    def answer(self, host: Any, run_id: int, request: int, result: ToolResult) -> None:
        self.provider.call(host, "answer", self.key, run_id, request, result.text, result.is_error)
