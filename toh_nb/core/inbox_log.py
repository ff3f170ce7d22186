"""Follow-ups in the log: what ``send`` acknowledged, what a turn consumed, what is still pending.

Why: ``send`` hands out a message id before the message's turn starts (it may wait behind a running
turn, or stay parked by an interrupt until the next send). The id promises that the message runs as a
later turn of the child, so the message is logged when it is accepted (``message/queued``: its id,
content and source) and acknowledged by the store before ``send`` returns: a process killed right
after cannot lose it. A turn consumes it by logging it as its ``user/message`` (the same id); a kill
that drops the inbox logs ``message/discarded`` (the ids). A message queued and neither consumed nor
discarded is *pending*: the cold resume that the next ``send`` performs queues the pending messages
again, in their order, before its own message, and they are never logged as queued twice.

Message ids are unique within one process, not across processes (``ids="sequential"`` counts from
``msg-1`` again after a restart), so consumption is matched in log order: a ``user/message`` consumes
the oldest pending entry with its id (turns take queued follow-ups first-in, first-out) and a discard
every pending entry with one of its ids.

A queued follow-up is recorded as ``data``, not as the event's ``message``: the conversation is the
projection of every event that carries a message (:func:`~toh_nb.core.session.conversation_of`, also
in older versions, which skip an unknown kind with data), and a queued follow-up joins the
conversation only when its turn logs it.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Iterable

from .content import USER_SOURCE, Message, Source, content_from_json, content_to_json, source_to_json
from .records import MESSAGE_DISCARDED, MESSAGE_QUEUED, USER_MESSAGE
from .session import SharedData

__all__ = ["queued_data", "queued_message", "discarded_data", "pending_messages"]


@functools.lru_cache(maxsize=1024)
def _source_json(source: Source) -> dict:
    """Sources are immutable and shared (one relay source per sender): so is their stored form."""
    return SharedData(source_to_json(source))


def queued_data(message: Message) -> dict:
    """The ``message/queued`` data of ``message``: its id, its content in compact form (a text as a
    string) and its source, left out when it is the user's own (``hub.send``, the common case).

    Why left out: a dict that holds only strings is one the garbage collector stops tracking, and a
    child keeps one such record per follow-up it was sent."""
    data = {"id": message.id, "content": content_to_json(message)}
    source = message.source
    if source is not USER_SOURCE and source is not None:
        data["source"] = _source_json(source)
    return data


def queued_message(data: dict) -> Message:
    """The follow-up a ``message/queued`` event records (its shape checked by ``toh_nb.core.records``;
    no source: the user's)."""
    source = data.get("source")
    return Message("user", content_from_json(data["content"]), id=data["id"],
                   source=Source(**source) if source else USER_SOURCE)


def discarded_data(ids: Iterable[str]) -> dict:
    return {"ids": list(ids)}


def queued_outcomes(events: Iterable) -> list[list]:
    """Each ``message/queued`` event of ``events`` (an agent's own events) with what became of it, in log
    order: ``[event, "pending" | "consumed" | "discarded"]`` — consumed by the turn that logged it as its
    ``user/message``, discarded by a kill. Ids are matched in log order (sequential ids repeat after a
    restart)."""
    entries: list[list] = []
    waiting: dict[str, deque[int]] = {}  # message id -> its pending entries, oldest first
    for event in events:
        kind = event.kind
        if kind == MESSAGE_QUEUED:
            message_id = event.data["id"]
            waiting.setdefault(message_id, deque()).append(len(entries))
            entries.append([event, "pending"])
        elif not waiting:
            continue
        elif kind == USER_MESSAGE:
            message_id = event.message.id
            queue = waiting.get(message_id) if message_id is not None else None
            if queue:
                entries[queue.popleft()][1] = "consumed"
                if not queue:
                    del waiting[message_id]
        elif kind == MESSAGE_DISCARDED:
            for message_id in event.data["ids"]:
                for index in waiting.pop(message_id, ()):
                    entries[index][1] = "discarded"
    return entries


def pending_messages(events: Iterable) -> list[Message]:
    """The follow-ups ``events`` (an agent's own events) queued and no turn consumed nor kill
    discarded, oldest first."""
    return [queued_message(event.data) for event, fate in queued_outcomes(events) if fate == "pending"]
