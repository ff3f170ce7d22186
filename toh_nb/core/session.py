"""The append-only session log: one per agent, header first, then events.

Event kinds (the ``kind`` strings are the interface stores, tables and the widget read):

- ``turn/start`` (``turn``) and ``turn/end`` (``turn``, ``data["reason"]`` in
  :data:`TURN_END_REASONS`, optional ``data["error"]``)
- ``user/message`` / ``assistant/message`` (``message``; an assistant message carries its usage)
- ``tool/call`` (``data``: ``call_id``, ``name``, ``arguments``) and ``tool/result`` (``message``,
  role ``tool``)
- ``subagent/descriptor`` (``data``: the versioned descriptor of a child, see
  ``toh_nb.subagents.descriptor``)
- ``message/queued`` (``data``: ``id``, ``content``, ``source`` of a follow-up accepted into the inbox,
  logged before ``send`` returns) and ``message/discarded`` (``data["ids"]``: follow-ups dropped
  unread by a kill); a turn consumes a queued follow-up by logging it as its ``user/message`` (same
  id). See :mod:`toh_nb.core.inbox_log`.

The log is the source of truth: an agent's conversation is a projection of it
(:func:`conversation_of`), which is what makes cold resume possible.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Callable, Iterable

from .content import Message, message_from_json, message_to_json
from .records import (ASSISTANT_MESSAGE, DESCRIPTOR, MESSAGE_DISCARDED, MESSAGE_QUEUED, TOOL_CALL, TOOL_RESULT,
                      TURN_END, TURN_START, USER_MESSAGE, check_event, check_header)
from .states import TurnEnd

TURN_END_REASONS = tuple(TurnEnd)
__all__ = ["TURN_START", "TURN_END", "USER_MESSAGE", "ASSISTANT_MESSAGE", "TOOL_CALL", "TOOL_RESULT", "DESCRIPTOR",
           "EXTERNAL_PERMISSION", "MESSAGE_QUEUED", "MESSAGE_DISCARDED", "TURN_END_REASONS", "permission_label",
           "SharedData", "turn_end_data", "Event", "SessionHeader", "Session", "LogSummary", "summarize",
           "conversation_of", "last_turn_number"]

#: the diagnostic of a turn that ended with a cause and no error (``aborted``: who stopped it)
STOPPED_BY = "stopped by {cause}"

#: an external agent's permission request and how it was answered (``data``: title, kind, allowed …)
EXTERNAL_PERMISSION = "external/permission"


def permission_label(data: dict) -> str:
    """How a permission request is named in results and tables: its tool title and kind."""
    title = data.get("title") or "untitled tool call"
    return f"{title} ({data.get('kind') or 'other'})"


class SharedData(dict):
    """The ``data`` of many events at once: a dict that refuses changes.

    Why: a completed turn's ``turn/end`` data is ``{"reason": "completed"}``, and a small dict costs
    184 B; logged once per turn of every agent, that was the largest part of an idle child's log after
    its events. Events are records, so their data is read, never changed; a copy (``dict(data)``,
    ``copy``, pickle) is an ordinary dict."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("this event data is shared by many logged events and cannot be changed; copy it with dict()")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore

    def copy(self) -> dict:  # type: ignore[override]
        return dict(self)

    def __reduce__(self) -> tuple:
        return (dict, (dict(self),))


#: the ``turn/end`` data of a turn that ended with no error and no cause, one per reason
_PLAIN_ENDS = {reason.value: SharedData(reason=reason.value) for reason in TurnEnd}


def turn_end_data(reason: str, error: str | None = None, cause: str | None = None) -> dict:
    """A ``turn/end`` event's data: ``reason``, then ``error`` and ``cause`` when given (shared and
    read-only for a plain reason: :class:`SharedData`)."""
    if error is None and cause is None:
        shared = _PLAIN_ENDS.get(reason)
        if shared is not None:
            return shared
    data = {"reason": reason}
    if error is not None:
        data["error"] = error
    if cause is not None:
        data["cause"] = cause
    return data


class Event:
    """One session event. ``message`` is set for message events, ``data`` for the others.

    The two share one slot (an event has one or the other; a hand-written log with both keeps both in
    a small pair): every logged event of every agent is 8 B smaller (bench/README.md, memory per
    idle child)."""

    __slots__ = ("seq", "kind", "time", "turn", "_body")

    def __init__(self, seq: int, kind: str, time: float, turn: int | None = None,
                 message: Message | None = None, data: dict | None = None) -> None:
        self.seq = seq
        self.kind = kind
        self.time = time
        self.turn = turn
        # _combined, inline: one call less per logged event
        self._body = message if data is None else data if message is None else _Both(message, data)

    @property
    def message(self) -> Message | None:
        body = self._body
        if isinstance(body, Message):
            return body
        return body.message if type(body) is _Both else None

    @message.setter
    def message(self, value: Message | None) -> None:
        self._body = _combined(value, self.data)

    @property
    def data(self) -> dict | None:
        body = self._body
        if body is None or isinstance(body, Message):
            return None
        return body.data if type(body) is _Both else body

    @data.setter
    def data(self, value: dict | None) -> None:
        self._body = _combined(self.message, value)

    def to_json(self) -> dict:
        out: dict = {"seq": self.seq, "kind": self.kind, "time": self.time}
        if self.turn is not None:
            out["turn"] = self.turn
        if self.message is not None:
            out["message"] = message_to_json(self.message)
        if self.data is not None:
            out["data"] = self.data
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Event":
        """An event from its stored line (already decoded); :class:`~toh_nb.core.records.RecordError`
        (a ``ValueError``) naming the field when the line has the wrong shape."""
        check_event(data)
        return cls.from_checked(data)

    @classmethod
    def from_checked(cls, data: dict) -> "Event":
        """An event from a line whose shape is already checked (:func:`toh_nb.core.event_lines.read_event_line`)."""
        message = data.get("message")
        return cls(data["seq"], data["kind"], float(data["time"]), data.get("turn"),
                   message_from_json(message) if message is not None else None, data.get("data"))

    def __repr__(self) -> str:
        detail = self.message.text if self.message is not None else self.data
        return f"Event({self.seq} {self.kind} turn={self.turn} {detail!r})"


class _Both:
    """An event that carries a message *and* data (never logged by the engine; a log may hold one)."""

    __slots__ = ("message", "data")

    def __init__(self, message: Message, data: object) -> None:
        self.message = message
        self.data = data


def _combined(message: Message | None, data: object) -> object:
    return message if data is None else data if message is None else _Both(message, data)


@dataclass(slots=True)
class SessionHeader:
    """Durable, immutable facts about a session (the first line of a JSONL log)."""

    id: str
    created: float
    parent_session: str | None = None
    origin: str | None = None  # "subagent" for children, "root" for a hub's root agent
    delegation_depth: int = 0
    seed_length: int = 0
    version: int = 1

    def to_json(self) -> dict:
        out = {"type": "session", "version": self.version, "id": self.id, "created": self.created,
               "delegation_depth": self.delegation_depth}
        if self.parent_session is not None:
            out["parent_session"] = self.parent_session
        if self.origin is not None:
            out["origin"] = self.origin
        if self.seed_length:
            out["seed_length"] = self.seed_length
        return out

    @classmethod
    def from_json(cls, data: dict, session_id: str | None = None) -> "SessionHeader":
        """A header from its stored line (of the log named ``session_id``, when given);
        :class:`~toh_nb.core.records.RecordError` (a ``ValueError``) naming the field when it has the wrong shape."""
        check_header(data, session_id)
        return cls(id=data["id"], created=float(data["created"]), parent_session=data.get("parent_session"),
                   origin=data.get("origin"), delegation_depth=int(data.get("delegation_depth", 0)),
                   seed_length=int(data.get("seed_length", 0)), version=int(data.get("version", 1)))


class Session:
    """A session log in memory. ``sink`` receives each appended event (the store's writer)."""

    __slots__ = ("header", "events", "sink", "descriptor", "next_seq", "__weakref__")

    def __init__(self, header: SessionHeader, events: Iterable[Event] = (),
                 sink: Callable[["Session", Event], None] | None = None) -> None:
        self.header = header
        self.events: list[Event] = list(events)
        self.sink = sink
        #: the last descriptor seen (listing folds last-wins; resume reads the first of the own suffix)
        self.descriptor: dict | None = None
        for event in self.events:
            if event.kind == DESCRIPTOR:
                self.descriptor = event.data
        #: the next event's seq: one past the last (seqs only increase; a retracted event leaves a gap)
        self.next_seq = self.events[-1].seq + 1 if self.events else 0

    @property
    def id(self) -> str:
        return self.header.id

    def append(self, kind: str, *, turn: int | None = None, message: Message | None = None,
               data: dict | None = None) -> Event:
        event = Event(self.next_seq, kind, time.time(), turn, message, data)
        self.next_seq += 1
        self.events.append(event)
        if self.sink is not None:
            try:
                self.sink(self, event)
            except BaseException:  # refused by the store (never written): no trace of it in memory either
                self.retract((event,))
                raise
        if kind == DESCRIPTOR:
            self.descriptor = data
        return event

    def retract(self, events: Iterable[Event]) -> None:
        """Take events the store could not record out of memory (an acknowledging call that failed:
        :meth:`~toh_nb.store.base.StoreBase.acknowledged` with ``records``), so the session holds
        exactly what the log will. Their seqs stay unused: the next event's seq follows the last one."""
        gone = {id(event) for event in events}
        if gone:
            self.events[:] = [event for event in self.events if id(event) not in gone]

    def own_events(self) -> list[Event]:
        """Events after the inherited seed prefix (a fork child's own suffix)."""
        return self.events[self.header.seed_length:]


@dataclass(slots=True)
class LogSummary:
    """What a table of agents shows of one log without its transcript: the header and descriptor, its
    own turns, tokens, the reason its last turn ended and the time of its last event. Small, so a
    store can keep one per log it has read (see ``JsonlStore.summary``)."""

    header: SessionHeader
    descriptor: dict | None
    turns: int
    input_tokens: int
    output_tokens: int
    last_reason: str | None
    last_time: float | None
    #: the permissions refused to an external agent (:func:`permission_label` of each), oldest first
    denied: tuple[str, ...] = ()
    #: the diagnostic of the last turn's end (its ``error``, else :data:`STOPPED_BY` its ``cause``): None
    #: when it had neither
    last_error: str | None = None


def summarize(session: Session) -> LogSummary:
    """One pass over a session's own events (after its seed), each event folded once: what was folded of
    a session is kept (weakly) and a later call folds only the events appended since. A live tree or
    table summarises the same logs again and again; re-reading a long root log cost up to 187 ms each
    time (issue 27)."""
    events = session.events
    start = session.header.seed_length
    try:
        folded = _FOLDED.get(session)
    except TypeError:  # not weakly referable (a stand-in): fold it all
        folded = None
    if folded is not None and start <= folded[0] <= len(events) and folded[0] > start \
            and events[folded[0] - 1] is folded[1]:
        done, _, turns, inp, out, reason, error, denied = folded
    else:
        done, turns, inp, out, reason, error, denied = start, 0, 0, 0, None, None, ()
    denied_now = list(denied)
    for event in events[done:]:
        kind = event.kind
        if kind == TURN_START:
            turns += 1
        elif kind == TURN_END:
            data = event.data if isinstance(event.data, dict) else {}
            reason = data.get("reason")
            error = _text(data.get("error"))
            if error is None and _text(data.get("cause")):
                error = STOPPED_BY.format(cause=data["cause"])
        elif kind == ASSISTANT_MESSAGE and event.message is not None and event.message.usage is not None:
            inp += event.message.usage.input_tokens
            out += event.message.usage.output_tokens
        elif kind == EXTERNAL_PERMISSION and isinstance(event.data, dict) and event.data.get("allowed") is False:
            denied_now.append(permission_label(event.data))
    count = len(events)
    if count > start:
        try:
            _FOLDED[session] = (count, events[count - 1], turns, inp, out, reason, error, tuple(denied_now))
        except TypeError:
            pass
    last = events[-1].time if events else None
    return LogSummary(session.header, session.descriptor, turns, inp, out, reason, last, tuple(denied_now), error)


#: what :func:`summarize` folded of each session: (events folded, the last of them, turns, input
#: tokens, output tokens, last reason, last error, denied)
_FOLDED: "weakref.WeakKeyDictionary[Session, tuple]" = weakref.WeakKeyDictionary()


def _text(value: object) -> str | None:
    """A diagnostic as logged (text), or None (absent, empty, or not text in a hand-written log)."""
    return value if isinstance(value, str) and value else None


def conversation_of(events: Iterable[Event]) -> list[Message]:
    """The model-visible conversation that a log records (user, assistant and tool messages)."""
    return [e.message for e in events if e.message is not None]


def last_turn_number(events: Iterable[Event]) -> int:
    number = 0
    for event in events:
        if event.kind == TURN_START and event.turn is not None:
            number = max(number, event.turn)
    return number
