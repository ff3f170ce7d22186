"""MemoryStore basics: the in-process store behind ``store=None``."""

from __future__ import annotations

import pytest

from toh_nb.core.content import Text, message_from_json, user_message
from toh_nb.core.errors import StoreError
from toh_nb.core.session import DESCRIPTOR, TURN_START, USER_MESSAGE, Event, SessionHeader
from toh_nb.store import MemoryStore, SessionStore, open_store


def test_memory_store_satisfies_the_protocol_and_is_the_default():
    store = open_store(None)
    assert isinstance(store, MemoryStore)
    assert isinstance(store, SessionStore)
    assert open_store(store) is store


def test_create_open_returns_the_same_live_session():
    store = MemoryStore()
    seed = [Event(0, USER_MESSAGE, 1.0, 1, user_message("inherited"))]
    session = store.create(SessionHeader("agent-1", 10.0, seed_length=1), seed)
    session.append(TURN_START, turn=1)
    session.append(DESCRIPTOR, data={"mode": "continuable"})
    assert store.open("agent-1") is session
    assert [e.kind for e in session.events] == [USER_MESSAGE, TURN_START, DESCRIPTOR]
    assert [e.seq for e in session.events] == [0, 1, 2]
    assert session.descriptor == {"mode": "continuable"}
    assert [e.kind for e in session.own_events()] == [TURN_START, DESCRIPTOR]
    assert store.exists("agent-1") and not store.exists("agent-2")
    assert len(store) == 1
    with pytest.raises(KeyError):
        store.open("agent-2")


def test_children_in_creation_order_and_headers():
    store = MemoryStore()
    store.create(SessionHeader("root", 1.0, origin="root"))
    for i in (3, 1, 2):
        store.create(SessionHeader(f"agent-{i}", 2.0 + i, parent_session="root", origin="subagent"))
    store.create(SessionHeader("agent-9", 9.0, parent_session="agent-1", origin="subagent"))
    assert [h.id for h in store.children_of("root")] == ["agent-3", "agent-1", "agent-2"]
    assert [h.id for h in store.children_of("agent-1")] == ["agent-9"]
    assert store.children_of("nobody") == []
    assert {h.id for h in store.headers()} == {"root", "agent-1", "agent-2", "agent-3", "agent-9"}
    assert store.diagnostic("agent-1") is None
    store.flush()
    store.close()


@pytest.mark.parametrize("bad", ["../x", "a/b", "/abs", "a\x00b", "..", "", "x" * 300, None])
def test_invalid_and_duplicate_ids_are_refused(bad):
    store = MemoryStore()
    with pytest.raises(StoreError, match="invalid session id"):
        store.create(SessionHeader(bad, 1.0))
    assert len(store) == 0
    store.create(SessionHeader("agent-1", 1.0))
    with pytest.raises(StoreError, match='session "agent-1" already exists'):
        store.create(SessionHeader("agent-1", 2.0))


def test_message_json_round_trip_used_by_stores():
    message = user_message([Text("a"), Text("b")])
    event = Event(4, USER_MESSAGE, 3.5, 2, message)
    again = Event.from_json(event.to_json())
    assert (again.seq, again.kind, again.time, again.turn) == (4, USER_MESSAGE, 3.5, 2)
    assert again.message == message_from_json(event.to_json()["message"]) == message
