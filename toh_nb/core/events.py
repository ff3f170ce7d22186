"""One typed event stream for everything that happens in a hub.

Why one stream: the widget, the tables, the progress line, scripts (``async for ev in hub.astream()``)
and notebooks (``for ev in hub.stream()``) all want the same facts — a turn started, a tool was called,
a child settled, a job ended — and three ad-hoc channels drifted apart. Every event is an immutable
dataclass carrying the agent it concerns (``agent_id``, ``parent_id``, ``depth``), a wall-clock ``time``
(for tables) and a ``monotonic`` timestamp (for ordering and durations), plus its own fields.

Two tiers keep the hot path cheap:

- *lifecycle* events (children started/ended, jobs started/stopping/ended, interrupts, store and
  listener problems) are always published and kept in a bounded history (``hub.events()``);
- *activity* events (turns, model calls, tool calls, queued messages, status changes, text deltas,
  an external child's activity) are built only while someone listens (:attr:`EventBus.listening`).

Listeners run on the hub's loop, must be quick, and never affect a run: a listener that raises is
logged on ``logging.getLogger("toh_nb")`` and reported as a :class:`ListenerFailed` event.
"""

from __future__ import annotations

import logging
from time import monotonic as _monotonic
from time import time as _wall_clock
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterable

logger = logging.getLogger("toh_nb")

DEFAULT_HISTORY = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class HubEvent:
    """Base of every stream event."""

    kind: ClassVar[str] = "event"
    lifecycle: ClassVar[bool] = False  # kept in the history and published even with no listener
    agent_id: str | None = None
    parent_id: str | None = None
    depth: int | None = None
    time: float = field(default_factory=_wall_clock)
    monotonic: float = field(default_factory=_monotonic)

    def fields(self) -> dict[str, Any]:
        """The event's own fields (without the common ones), e.g. for a table row."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _COMMON}


_COMMON = {"agent_id", "parent_id", "depth", "time", "monotonic"}


# -- activity of one agent --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(HubEvent):
    kind: ClassVar[str] = "turn/start"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded(HubEvent):
    kind: ClassVar[str] = "turn/end"
    turn: int
    reason: str
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested(HubEvent):
    kind: ClassVar[str] = "model/request"
    turn: int
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded(HubEvent):
    kind: ClassVar[str] = "model/response"
    turn: int
    step: int
    text: str
    tool_calls: tuple[str, ...] = ()
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(HubEvent):
    kind: ClassVar[str] = "model/delta"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(HubEvent):
    kind: ClassVar[str] = "tool/call"
    turn: int
    call_id: str
    name: str
    arguments: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReturned(HubEvent):
    kind: ClassVar[str] = "tool/result"
    turn: int
    call_id: str
    name: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageQueued(HubEvent):
    kind: ClassVar[str] = "message/queued"
    message_id: str | None
    source: str | None
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChanged(HubEvent):
    kind: ClassVar[str] = "agent/status"
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalActivity(HubEvent):
    """What an agent that lives elsewhere (ACP, Ray) reported doing: a remote tool call, a plan…"""

    kind: ClassVar[str] = "subagent/activity"
    activity: str
    data: Any = None


# -- lifecycle (recorded) ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStarted(HubEvent):
    """A child's activation (continuable) or run (one-shot) began; ``agent_id`` is the child."""

    kind: ClassVar[str] = "subagent/start"
    lifecycle: ClassVar[bool] = True
    run_id: str
    provider: str
    mode: str
    label: str | None = None
    local: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildEnded(HubEvent):
    kind: ClassVar[str] = "subagent/end"
    lifecycle: ClassVar[bool] = True
    run_id: str
    provider: str
    stop_reason: str
    last_assistant_message: str | None = None
    local: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStarted(HubEvent):
    """``agent_id`` is the job's owner."""

    kind: ClassVar[str] = "job/start"
    lifecycle: ClassVar[bool] = True
    job: str
    job_kind: str
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStopping(HubEvent):
    kind: ClassVar[str] = "job/stopping"
    lifecycle: ClassVar[bool] = True
    job: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnded(HubEvent):
    kind: ClassVar[str] = "job/end"
    lifecycle: ClassVar[bool] = True
    job: str
    job_kind: str
    label: str
    status: str
    detail: str | None = None
    child_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupted(HubEvent):
    """``agent_id`` was interrupted by ``by`` (its turn aborted; queued messages parked)."""

    kind: ClassVar[str] = "agent/interrupt"
    lifecycle: ClassVar[bool] = True
    by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderChanged(HubEvent):
    kind: ClassVar[str] = "subagent/provider"
    provider: str
    registered: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem(HubEvent):
    """Something went wrong outside any turn (a store flush, an undelivered notice, a released resource)."""

    kind: ClassVar[str] = "problem"
    lifecycle: ClassVar[bool] = True
    source: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerFailed(Problem):
    kind: ClassVar[str] = "problem/listener"


@dataclass(frozen=True, slots=True, kw_only=True)
class HubClosed(HubEvent):
    """The last event of a hub: streams end here."""

    kind: ClassVar[str] = "hub/closed"


Listener = Callable[[HubEvent], Any]


class SubtreeFilter:
    """Keeps the events of one agent and its descendants (optionally of some kinds only).

    Membership grows as the stream runs: an event whose parent is a member makes its agent a member,
    so children started later are followed without reading the store. ``members`` seeds it with the
    descendants that already exist."""

    __slots__ = ("members", "kinds")

    def __init__(self, root: str | None, members: Iterable[str] = (), kinds: Iterable[str] | None = None) -> None:
        self.members: set[str] | None = None if root is None else {root, *members}
        self.kinds = None if kinds is None else frozenset(kinds)

    def __call__(self, event: HubEvent) -> bool:
        if isinstance(event, HubClosed):
            return True
        if self.members is not None:
            if event.agent_id not in self.members:
                if event.parent_id is None or event.parent_id not in self.members:
                    return False
                self.members.add(event.agent_id)
        return self.kinds is None or event.kind in self.kinds


class EventBus:
    """The hub's one stream: ``publish`` typed events; ``subscribe`` listeners; a bounded history."""

    __slots__ = ("history", "_listeners", "listening")

    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self.history: deque[HubEvent] = deque(maxlen=history)
        self._listeners: list[Listener] = []
        #: someone listens: activity events are worth building (checked before building them)
        self.listening = False

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        self.listening = True

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self.listening = bool(self._listeners)

        return unsubscribe

    def publish(self, event: HubEvent) -> HubEvent:
        if event.lifecycle:
            self.history.append(event)
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception as error:  # listeners never affect the run
                if isinstance(event, ListenerFailed):
                    logger.exception("toh_nb event listener failed on a failure report")
                    continue
                self.problem("listener", f"{event.kind} listener threw: {type(error).__name__}: {error}",
                             failed=True)
        return event

    def problem(self, source: str, message: str, *, agent_id: str | None = None, failed: bool = False) -> None:
        """Report a problem that no caller can receive: logged, kept in the history, streamed."""
        logger.warning("%s: %s", source, message)
        cls = ListenerFailed if failed else Problem
        self.publish(cls(agent_id=agent_id, source=source, message=message))
