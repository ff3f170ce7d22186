"""Activations: the process-local residency of a continuable child, its ownership and its inbox.

A continuable child is a durable session plus at most one :class:`Activation`. Its residency state is
derived, never stored: *running* (driver busy or an accepted message not yet claimed), *waiting* (it
owns live children) or *settled*. An activation owns the children it started or messaged, so a parent
settles only after its children have (``toh_nb.subagents.settlement``). Delivery into a parent (a
report, a settlement notice) wakes it or waits for its next step, and keeps its activation running
until the message is claimed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from ..core.agent import Agent
from ..core.content import Message, Source, Text, relay_source, user_message
from ..core.dict_room import DictRoom
from ..core.errors import SubagentError
from ..core.events import ChildStarted
from . import texts

if TYPE_CHECKING:
    from ..core.runtime import Runtime


class Activation:
    """One residency epoch of a continuable child."""

    __slots__ = ("child", "parent_session", "provider", "run_id", "owned", "accepted", "discarded", "disposing",
                 "announced", "epoch_start", "wake_parent", "dropped_unrun", "close", "failure")

    def __init__(self, child: Agent, parent_session: str, provider: str, run_id: str, wake_parent: bool,
                 close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.child = child
        self.parent_session = parent_session
        self.provider = provider
        self.run_id = run_id
        self.owned: set[str] = set()
        self.accepted: set[str] = set()
        #: accepted follow-ups a kill already recorded as discarded (before it dropped them)
        self.discarded: set[str] = set()
        self.disposing = False
        self.announced = False
        self.epoch_start = len(child.session.events)
        self.wake_parent = wake_parent
        self.dropped_unrun = False
        self.close = close
        #: ``(diagnostic, cause)`` of the epoch's last turn when it ended ``error``, else None
        self.failure: tuple[str | None, str] | None = None

    @property
    def state(self) -> str:
        if self.child.status == "running" or self.accepted:
            return "running"
        if self.owned:
            return "waiting"
        return "settled"


class Activations:
    """The service's activation bookkeeping (the residency half of :class:`~toh_nb.subagents.continuable.ContinuableChildren`)."""

    runtime: "Runtime"
    activations: dict[str, Activation]
    _activations_room: DictRoom
    _owners: dict[str, set[Activation]]
    draining: bool
    report_delivery: str

    def _activate(self, child: Agent, parent: Agent, provider: str, wake_parent: bool,
                  close: Callable[[], Awaitable[None]] | None = None) -> Activation:
        act = Activation(child, parent.id, provider, self.runtime.ids.run(), wake_parent, close)
        self.activations[child.id] = act
        self._activations_room.grew(self.activations)
        self._acquire(parent, child.id)
        self.runtime.bus.publish(ChildStarted(agent_id=child.id, parent_id=parent.id, depth=child.depth,
                                              run_id=act.run_id, provider=provider, mode="continuable",
                                              label=child.label))
        return act

    def _submit(self, act: Activation, content: str | list, source: Source) -> str:
        message = user_message(content, id=self.runtime.ids.message(), source=source)
        self._queue(act, message)
        return message.id

    def _queue(self, act: Activation, message: Message) -> None:
        """Accept ``message`` into the child's inbox as a later FIFO turn (the activation's first
        message: its current turn)."""
        act.accepted.add(message.id)
        if not act.announced:  # the activation's first prompt is its current turn, never a parked follow-up
            act.child.opening = message.id
        try:
            act.child.followup(message)
        except BaseException:
            act.accepted.discard(message.id)
            raise
        act.announced = True

    def _activation_of(self, agent: Agent | None) -> Activation | None:
        if agent is None:
            return None
        act = self.activations.get(agent.id)
        return act if act is not None and act.child is agent else None

    def _acquire(self, parent: Agent, child_id: str) -> None:
        parent_act = self._activation_of(parent)
        if parent_act is None:
            return
        if parent_act.disposing:
            raise SubagentError(texts.parent_closing(parent.id), "ACTIVATION_CLOSING")
        parent_act.owned.add(child_id)
        self._owners.setdefault(child_id, set()).add(parent_act)

    def _release(self, child_id: str) -> None:
        for owner in self._owners.pop(child_id, ()):
            owner.owned.discard(child_id)
            self._check(owner)  # type: ignore[attr-defined]  # Settlement: the owner may settle now

    def _assert_admitting(self) -> None:
        if self.draining:
            raise SubagentError(texts.DRAINING, "DRAINING")

    # -- delivery into a parent --------------------------------------------------------------------

    def report_from(self, child: Agent, content: str, delivery: str | None = None) -> str:
        """The ``report`` tool: ``content`` from a resident continuable child to its direct parent."""
        self._assert_admitting()
        act = self._activation_of(child)
        if act is None or not self.runtime.is_live(child):
            raise SubagentError(texts.cannot_report(child.id), "UNAUTHORIZED")
        if act.disposing:
            raise SubagentError(texts.activation_closing_report(child.id), "ACTIVATION_CLOSING")
        parent = self.runtime.agents.get(act.parent_session)
        if parent is None or parent.disposed:
            raise SubagentError(texts.PARENT_UNAVAILABLE, "PARENT_UNAVAILABLE")
        message = Message("user", [Text(texts.reported_line(child.id)), Text(content)], id=self.runtime.ids.message(),
                          source=relay_source("subagent-report", child.id))
        self._deliver(parent, message, wake=(delivery or self.report_delivery) == "next-step" and act.wake_parent,
                      followup=False)
        return message.id

    def _deliver(self, parent: Agent, message: Message, *, wake: bool, followup: bool) -> None:
        """Waking delivery: a new turn (idle parent, ``followup``) or the next step; else inject."""
        if not wake or self.draining:
            parent.inject(message)
            return
        parent_act = self._activation_of(parent)
        if parent_act is not None:
            parent_act.accepted.add(message.id)
        if followup and parent.status == "idle":
            parent.followup(message)
        else:
            parent.steer(message)
