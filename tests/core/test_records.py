"""The one place stored records are checked: exact texts naming the field, and what is let through."""

from __future__ import annotations

import pytest

from toh_nb.core.records import RecordError, check_descriptor, check_event, check_header
from toh_nb.core.session import Event, SessionHeader

GOOD_EVENTS = [
    {"seq": 0, "kind": "turn/start", "time": 1.0, "turn": 1},
    {"seq": 1, "kind": "user/message", "time": 1, "turn": 1,
     "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "id": "m1", "source": {"kind": "user"}}},
    {"seq": 2, "kind": "assistant/message", "time": 1.5, "turn": 1, "message": {
        "role": "assistant", "content": [{"type": "tool-call", "id": "c1", "name": "t", "arguments": {"a": 1}}],
        "usage": {"input_tokens": 1, "output_tokens": 2}}},
    {"seq": 3, "kind": "tool/call", "time": 1.5, "turn": 1, "data": {"call_id": "c1", "name": "t", "arguments": {}}},
    {"seq": 4, "kind": "tool/result", "time": 1.5, "turn": 1, "message": {
        "role": "tool", "content": [{"type": "tool-result", "call_id": "c1", "name": "t", "text": "ok",
                                     "is_error": False}]}},
    {"seq": 5, "kind": "turn/end", "time": 2.0, "turn": 1, "data": {"reason": "completed"}},
    {"seq": 6, "kind": "subagent/descriptor", "time": 2.0,
     "data": {"version": 2, "mode": "continuable", "provider": "spawn", "label": "x"}},
    {"seq": 7, "kind": "subagent/descriptor", "time": 2.0, "data": {"version": 1, "anything": True}},
    {"seq": 8, "kind": "external/plan", "time": 2.0, "data": {"free": ["form"]}, "future_key": 1},
    {"seq": 9, "kind": "message/queued", "time": 2.0, "data": {"id": "m2", "content": "again"}},
    {"seq": 10, "kind": "message/queued", "time": 2.0, "data": {
        "id": "m3", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "source": {"kind": "coordinator", "form": "relay", "sender": "root"}}},
    {"seq": 11, "kind": "message/discarded", "time": 2.0, "data": {"ids": ["m2", "m3"]}},
]


@pytest.mark.parametrize("record", GOOD_EVENTS)
def test_every_record_the_engine_writes_passes_and_round_trips(record):
    assert check_event(record) is record
    event = Event.from_json(record)
    assert event.seq == record["seq"] and event.kind == record["kind"]


@pytest.mark.parametrize("record, problem", [
    ([], "event: expected an object, got an array"),
    ({"kind": "x", "time": 1.0}, "seq: expected an integer >= 0, but it is missing"),
    ({"seq": -1, "kind": "x", "time": 1.0}, "seq: expected an integer >= 0, got an integer (-1)"),
    ({"seq": 0, "kind": "", "time": 1.0}, "kind: expected a non-empty string, got a string ('')"),
    ({"seq": 0, "kind": "x", "time": float("nan")}, "time: expected a number, got a number (nan)"),
    ({"seq": 0, "kind": "turn/start", "time": 1.0}, "turn: expected the turn number of a turn/start event, "
                                                    "but it is missing"),
    ({"seq": 0, "kind": "user/message", "time": 1.0}, "message: expected the message of a user/message event, "
                                                      "but it is missing"),
    ({"seq": 0, "kind": "x", "time": 1.0, "message": {"role": "system"}},
     "message.role: expected one of user, assistant, tool, got a string ('system')"),
    ({"seq": 0, "kind": "x", "time": 1.0, "message": {"role": "user", "content": [{"type": "image"}]}},
     "message.content[0].type: expected text, tool-call or tool-result, got a string ('image')"),
    ({"seq": 0, "kind": "x", "time": 1.0, "message": {"role": "user", "source": {"kind": "user", "x": 1}}},
     'message.source: unknown field "x"'),
    ({"seq": 0, "kind": "x", "time": 1.0, "message": {"role": "user", "usage": {"input_tokens": 1}}},
     "message.usage.output_tokens: expected an integer >= 0, got null"),
    ({"seq": 0, "kind": "x", "time": 1.0, "message": {"role": "user", "usage": {"input_tokens": 1, "output_tokens": 2,
                                                                             "estimated": "yes"}}},
     "message.usage.estimated: expected true or false, got a string ('yes')"),
    ({"seq": 0, "kind": "turn/end", "time": 1.0, "turn": 1, "data": {"reason": 3}},
     "data.reason: expected a string, got an integer (3)"),
    ({"seq": 0, "kind": "tool/call", "time": 1.0, "data": {"call_id": "c", "name": None}},
     "data.name: expected a string, got null"),
    ({"seq": 0, "kind": "subagent/descriptor", "time": 1.0, "data": {"version": 2, "mode": "continuable",
                                                                     "provider": "spawn"}},
     "data: persisted subagent descriptor label must be a string"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0}, "data: expected the data of a message/queued event, "
                                                        "but it is missing"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"content": "x"}},
     "data.id: expected a message id, but it is missing"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"id": "", "content": "x"}},
     "data.id: expected a message id, got a string ('')"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"id": "m"}},
     "data.content: expected a string or an array of blocks, but it is missing"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"id": "m", "content": {"text": "x"}}},
     "data.content: expected a string or an array of blocks, got an object"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"id": "m", "content": [{"type": "text"}]}},
     "data.content[0].text: expected a string, got null"),
    ({"seq": 0, "kind": "message/queued", "time": 1.0, "data": {"id": "m", "content": "x", "source": {"who": 1}}},
     'data.source: unknown field "who"'),
    ({"seq": 0, "kind": "message/discarded", "time": 1.0, "data": {"ids": "m1"}},
     "data.ids: expected an array of message ids, got a string ('m1')"),
    ({"seq": 0, "kind": "message/discarded", "time": 1.0, "data": {"ids": ["m1", 2]}},
     "data.ids: expected an array of message ids, got an array"),
])
def test_a_wrong_shape_is_named(record, problem):
    with pytest.raises(RecordError) as caught:
        check_event(record)
    assert str(caught.value) == problem
    with pytest.raises(ValueError):  # what every reader already catches
        Event.from_json(record)


def test_headers_and_descriptors():
    good = {"type": "session", "id": "agent-1", "created": 1.0, "parent_session": "root", "delegation_depth": 1}
    assert SessionHeader.from_json(good, "agent-1").delegation_depth == 1
    with pytest.raises(RecordError, match=r"^header names session 'agent-1', not the file's 'agent-2'$"):
        check_header(good, "agent-2")
    with pytest.raises(RecordError, match=r"^header id: expected a session id"):
        check_header({**good, "id": "../x"})
    assert check_descriptor({"version": 3, "mode": "new"}) is None  # another version is not classified
    with pytest.raises(RecordError, match=r"^persisted subagent descriptor must be an object, got an array$"):
        check_descriptor([1])
