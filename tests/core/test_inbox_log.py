"""Follow-ups in the log (``toh_nb.core.inbox_log``): the queued record round-trips through a store line,
and what is pending is matched in log order (ids may repeat across processes)."""

from __future__ import annotations

import json

from toh_nb.core.content import Message, Source, Text, relay_source, user_message
from toh_nb.core.inbox_log import discarded_data, pending_messages, queued_data
from toh_nb.core.session import (MESSAGE_DISCARDED, MESSAGE_QUEUED, USER_MESSAGE, Event, Session, SessionHeader,
                                 conversation_of)


def log(*steps) -> list[Event]:
    """Events from ("q", message) / ("u", message) / ("d", ids), each through its stored JSON line."""
    session = Session(SessionHeader("agent-1", 1.0))
    for step, value in steps:
        if step == "q":
            session.append(MESSAGE_QUEUED, data=queued_data(value))
        elif step == "u":
            session.append(USER_MESSAGE, turn=1, message=value)
        else:
            session.append(MESSAGE_DISCARDED, data=discarded_data(value))
    return [Event.from_json(json.loads(json.dumps(e.to_json()))) for e in session.events]


def described(messages: list[Message]) -> list[tuple]:
    return [(m.id, m.text, m.source) for m in messages]


def test_a_queued_follow_up_round_trips_with_its_content_and_source_and_is_not_conversation():
    plain = user_message("hello", id="m1")
    relayed = user_message("from the parent", id="m2", source=relay_source("coordinator", "root"))
    blocks = Message("user", [Text("one"), Text("two")], id="m3", source=Source("user"))
    events = log(("q", plain), ("q", relayed), ("q", blocks))
    assert events[0].to_json()["data"] == {"id": "m1", "content": "hello"}  # no source: the user's
    assert events[1].to_json()["data"]["source"] == {"kind": "coordinator", "form": "relay", "sender": "root"}
    assert described(pending_messages(events)) == [
        ("m1", "hello", Source("user")), ("m2", "from the parent", Source("coordinator", "relay", "root")),
        ("m3", "one\ntwo", Source("user"))]
    assert [b.text for b in pending_messages(events)[2].content] == ["one", "two"]
    assert events[2].to_json()["data"]["source"] == {"kind": "user"}  # an equal source of its own: written
    assert conversation_of(events) == []  # a queued record joins the conversation only when its turn logs it


def test_consumed_and_discarded_follow_ups_are_not_pending():
    a, b, c, d = (user_message(x, id=x) for x in "abcd")
    events = log(("q", a), ("q", b), ("q", c), ("u", a), ("q", d), ("d", ["c", "unknown"]))
    assert [m.id for m in pending_messages(events)] == ["b", "d"]
    assert pending_messages(log(("u", a), ("d", ["a"]))) == []  # markers of messages never queued: ignored


def test_ids_repeated_by_a_restarted_process_are_matched_in_log_order():
    # ids="sequential" counts from msg-1 again after a restart: the old pending msg-1 runs first (FIFO),
    # so the first user/message msg-1 consumes the oldest queued msg-1
    old, new = user_message("old", id="msg-1"), user_message("new", id="msg-1")
    assert described(pending_messages(log(("q", old), ("q", new), ("u", old)))) == [("msg-1", "new", Source("user"))]
    assert pending_messages(log(("q", old), ("q", new), ("u", old), ("u", new))) == []
    # a discard drops every pending entry with its id; one queued after it is pending again
    assert described(pending_messages(log(("q", old), ("d", ["msg-1"]), ("q", new)))) == \
        [("msg-1", "new", Source("user"))]
