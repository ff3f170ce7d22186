"""Settlement: when a continuable child's activation ends, and what its parent is told.

Settlement is event driven (the runtime's status, claim, discard and turn-end callbacks) rather than a
watcher task per child, so idle children cost no tasks. When an activation settles it is disposed: the
agent leaves the registry (it now lists as ``ready``), the parent receives exactly one settlement
notice, then ownership is released (which may settle the parent in turn), then ``subagent/end`` is
emitted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..core.agent import Agent, TurnOutcome
from ..core.content import Message, Source, Text, bound, text_of
from ..core.events import ChildEnded
from ..core.inbox_log import discarded_data
from ..core.session import ASSISTANT_MESSAGE, MESSAGE_DISCARDED, TURN_END
from ..core.states import EPOCH_STOP
from . import texts
from .activations import Activation, Activations

if TYPE_CHECKING:
    from ..core.runtime import Runtime

#: the fixed blocks of every settlement notice, shared (``Text`` is frozen): one object per process, not per notice
_CLOSING = Text(texts.CLOSING_MESSAGE)
_NO_CLOSING = Text(texts.NO_CLOSING_MESSAGE)

#: stop reason of a settled epoch from its last turn's end (unknown: ``error``)
EPOCH_TURN_TO_STOP = EPOCH_STOP


def publish_end(runtime: "Runtime", run_id: str, provider: str, child_id: str, stop: str, output: list,
                agent: Agent | None) -> None:
    """``subagent/end`` of a one-shot run or a settled epoch (``agent`` None: the child never existed here)."""
    parent = agent.parent.id if agent is not None and agent.parent is not None else None
    runtime.bus.publish(ChildEnded(agent_id=child_id, parent_id=parent,
                                   depth=agent.depth if agent is not None else None, run_id=run_id,
                                   provider=provider, stop_reason=stop,
                                   last_assistant_message=text_of(output, "\n") if output else None,
                                   local=agent is not None))


class Settlement(Activations):
    """Settling activations (the settlement half of :class:`~toh_nb.subagents.continuable.ContinuableChildren`)."""

    _settle_waiters: dict[str, list[asyncio.Future]]
    _closing: set[asyncio.Task]
    closing: dict[str, str | None]

    # -- the runtime's callbacks (RuntimeObserver) -----------------------------------------------

    def on_status(self, agent: Agent) -> None:
        if agent.status == "idle":
            act = self._activation_of(agent)
            if act is not None:
                self._check(act)

    def on_claimed(self, agent: Agent, message: Message) -> None:
        act = self._activation_of(agent)
        if act is not None and message.id is not None:
            act.accepted.discard(message.id)

    def on_discarded(self, agent: Agent, messages: list[Message]) -> None:
        act = self._activation_of(agent)
        if act is None:
            return
        dropped = [message.id for message in messages if message.id in act.accepted]
        for message_id in dropped:
            act.accepted.discard(message_id)
        dropped = [message_id for message_id in dropped if message_id not in act.discarded]  # a kill recorded those
        if dropped and not self.draining:
            # a kill drops the queue for good: a resume after a crash must not run what it dropped. A
            # hub that closes (drains) leaves its children's follow-ups pending in their logs instead:
            # the next send after a reopen runs them first (toh_nb.core.inbox_log)
            agent.session.append(MESSAGE_DISCARDED, data=discarded_data(dropped))
        act.dropped_unrun = True
        self._check(act)

    def on_turn_end(self, agent: Agent, outcome: TurnOutcome) -> None:
        act = self._activation_of(agent)
        if act is not None:
            act.dropped_unrun = False
            act.failure = (outcome.error, outcome.cause or "model") if outcome.reason == "error" else None

    # -- settling ----------------------------------------------------------------------------------

    def _check(self, act: Activation) -> None:
        if not act.disposing and act.state == "settled" and not act.child.parked:
            self._settle(act)

    def _settle(self, act: Activation) -> None:
        act.disposing = True
        child = act.child
        stop, output = self._epoch_outcome(act)
        try:
            self.runtime.store.flush(child.session, wait=False)  # never block the loop on a sync
        except Exception as error:
            self.runtime.bus.problem("subagent", f'subagent "{child.id}" best-effort final session flush failed; '
                                     f"the persisted state may be unavailable or stale on resume: {error}",
                                     agent_id=child.id)
        child.disposed = True
        if act.close is not None:  # the provider's resources (a process, an actor) go with the activation
            task = asyncio.get_running_loop().create_task(act.close())
            self._closing.add(task)
            task.add_done_callback(self._closed_plan)
        if self.activations.get(child.id) is act:
            del self.activations[child.id]
            self._activations_room.shrank(self.activations)
        self.runtime.unregister(child)
        if act.announced:
            self._notify_parent(act, stop, output)
        self._release(child.id)
        self.closing[child.id] = text_of(output) or None
        if stop == "error" and act.failure is not None:  # what kid.wait() raises (toh_nb.engine)
            self.failures[child.id] = act.failure
        else:
            self.failures.pop(child.id, None)
        publish_end(self.runtime, act.run_id, act.provider, child.id, stop, output, child)
        for waiter in self._settle_waiters.pop(child.id, ()):
            if not waiter.done():
                waiter.set_result(stop)

    def _closed_plan(self, task: asyncio.Task) -> None:
        self._closing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.runtime.bus.problem("subagent", f"releasing a settled child's provider resources failed: "
                                     f"{task.exception()}")

    async def wait_changed(self, child_id: str, timeout: float | None = None) -> None:
        """Wait until the child's current activation settles (or ``timeout`` seconds pass)."""
        if child_id not in self.activations:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._settle_waiters.setdefault(child_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            waiters = self._settle_waiters.get(child_id)
            if waiters and waiter in waiters:
                waiters.remove(waiter)

    def _epoch_outcome(self, act: Activation) -> tuple[str, list]:
        events = act.child.session.events
        reason = None
        output: list = []
        for event in events[act.epoch_start:]:
            if event.kind == TURN_END:
                reason = event.data.get("reason")
            elif event.kind == ASSISTANT_MESSAGE:
                output = event.message.content or output
        if reason is None or reason == "completed":
            stop = "aborted" if act.dropped_unrun else "completed"
        else:
            stop = EPOCH_TURN_TO_STOP.get(reason, "error")
        if any(b.type != "text" for b in output):
            output = [b for b in output if b.type == "text"]
        return stop, output  # the text blocks of the epoch's last answer

    def _notify_parent(self, act: Activation, stop: str, output: list) -> None:
        parent = self.runtime.agents.get(act.parent_session)
        if parent is None or parent.disposed:
            return  # a gone parent: dropped silently
        message = SettlementNotice(act.child.id, stop, output, self.runtime.ids.message())
        try:
            self._deliver(parent, message, wake=act.wake_parent, followup=True)
        except Exception as error:
            self.runtime.bus.problem("subagent", f'subagent "{act.child.id}" settlement notice was not delivered '
                                     f"to its parent: {error}", agent_id=act.child.id)


_SOURCE = Message.__dict__["source"]  # the slot of a Message, under the notice's property


class SettlementNotice(Message):
    """A settlement notice, rendered when it is first read.

    Why: a notice waits in its parent's inbox until the parent's next turn, and a parent that stays
    idle collects one per settled child (bench/memory.py: ~600 B each, a fifth of an idle child).
    Until its content is read it keeps only what the content is made of: the child id, the stop reason
    and the closing texts (strings shared with the child's log). ``content`` renders the blocks once
    (:func:`notice_content`; any thread, any number of times: the same blocks) and keeps them, so the
    parent's conversation holds an ordinary message; ``text`` and ``source`` read before that (the
    event stream's ``message/queued``) are computed and not kept. Every text is byte for byte the
    eagerly built notice's."""

    __slots__ = ("_child", "_stop", "_closing")

    def __init__(self, child_id: str, stop: str, closing: "list | tuple", id: str) -> None:
        self._content = None
        _SOURCE.__set__(self, None)
        self.role = "user"
        self.id = id
        self.usage = None
        self._child = child_id
        self._stop = stop
        # the texts alone: a tuple of strings is not tracked by the garbage collector, and the child's
        # log keeps its answer as text (core/content.py, Message)
        self._closing = tuple([block.text for block in closing])

    @property  # type: ignore[override]
    def content(self) -> list:
        if self._content is None:
            content = notice_content(self._child, self._stop, self._closing)
            self._content = content
            if _SOURCE.__get__(self) is None:
                _SOURCE.__set__(self, notice_source(self._child, content[0].text))
            # ``_closing`` stays: a JSONL store serialises the claimed notice on its writer thread, which
            # may render it at the same moment as the loop; both renders must give the same blocks
            return content
        return Message.content.fget(self)

    @content.setter
    def content(self, value: list) -> None:
        Message.content.fset(self, value)

    @property  # type: ignore[override]
    def source(self) -> Source:
        source = _SOURCE.__get__(self)
        return source if source is not None else notice_source(self._child, texts.settled_line(self._child, self._stop))

    @source.setter
    def source(self, value: Source) -> None:
        _SOURCE.__set__(self, value)

    @property
    def text(self) -> str:
        if self._content is not None:
            return Message.text.fget(self)
        closing = [texts.CLOSING_MESSAGE, *self._closing] if self._closing else \
            [texts.NO_CLOSING_MESSAGE]
        return "\n".join([texts.settled_line(self._child, self._stop), *closing])


def notice_content(child_id: str, stop: str, closing: "tuple[str, ...]") -> list:
    """The blocks of a settlement notice: its line, then the closing texts' blocks or the no-closing line."""
    content: list = [Text(texts.settled_line(child_id, stop))]
    if closing:
        content.append(_CLOSING)
        content.extend([Text(text) for text in closing])
    else:
        content.append(_NO_CLOSING)
    return content


def notice_source(child_id: str, line: str) -> Source:
    return Source("subagent-settled", form="notice", sender=child_id, summary=bound(line))
