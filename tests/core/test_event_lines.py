"""read_event_line: pydantic's fast check takes only lines check_event accepts, and yields what json.loads does.

Lines are generated as the engine writes them (every kind of FAST_KINDS and two others) and most are
then mutated once, at a field picked at even odds: dropped, joined by an unknown key, or replaced by a
value of another JSON type (NaN, negative numbers, booleans, ...), so both sides of every rule are
reached; whatever the fast path accepts, the hand-written check must accept with an equal dict, and
whatever it refuses, read_event_line must answer as the hand-written way does (its exact error).
"""

from __future__ import annotations

import json
import random

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toh_nb.core.event_lines import EVENT_LINE, FAST_KINDS, read_event_line
from toh_nb.core.records import RecordError, check_event

_ANY = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats(allow_nan=True)
                    | st.text(max_size=4), lambda inner: st.lists(inner, max_size=2)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)


#: what a mutation puts in a field's place: a value of every JSON type (and NaN, which json.loads reads)
REPLACEMENTS = [None, "", "x", "user", "text", "turn/end", -1, 0, 7, 1.5, float("nan"), True, False, [], {},
                [{"type": "text", "text": "t"}], {"reason": "end_turn"}]
_DROP = object()


def _odds(draw) -> float:
    """A number in [0, 1) at even odds (hypothesis's own draws lean to their bounds)."""
    return random.Random(draw(st.integers(0, 2**32))).random()


def _places(value, out: list) -> list:
    """Every (container, key) of ``value``, nested ones included."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        out.append((value, key))
        _places(inner, out)
    return out


def _mutate(draw, event: dict) -> dict:
    """``event`` with one field, picked at even odds, dropped, replaced, or joined by an unknown key."""
    places = _places(event, [])
    container, key = places[int(_odds(draw) * len(places))]
    choice = int(_odds(draw) * (len(REPLACEMENTS) + 2))
    if choice == len(REPLACEMENTS):
        if isinstance(container, dict):
            del container[key]
        else:
            container.pop(key)
    elif choice == len(REPLACEMENTS) + 1:
        if isinstance(container, dict):
            container["unknown"] = draw(_ANY)
    else:
        container[key] = REPLACEMENTS[choice]
    return event


@st.composite
def blocks(draw):
    kind = draw(st.sampled_from(["text", "tool-call", "tool-result"]))
    if kind == "text":
        return {"type": kind, "text": draw(st.text(max_size=8))}
    if kind == "tool-call":
        return {"type": kind, "id": "c1", "name": "lookup",
                "arguments": draw(st.dictionaries(st.text(max_size=3), _ANY, max_size=2))}
    return {"type": kind, "call_id": "c1", "name": "lookup", "text": draw(st.text(max_size=8)),
            "is_error": draw(st.booleans())}


def _some(draw, fields: dict) -> dict:
    """``fields`` without those the drawn subset leaves out (optional fields come and go)."""
    return {key: value for key, value in fields.items() if _odds(draw) < 0.8}


@st.composite
def messages(draw):
    message = {"role": draw(st.sampled_from(["user", "assistant", "tool"])),
               "content": draw(st.lists(blocks(), max_size=3))}
    message.update(_some(draw, {"id": "m-1", "source": _some(draw, {"kind": "agent", "sender": "agent-2",
                                                                       "summary": "done"}),
                                "usage": {"input_tokens": draw(st.integers(0, 10**6)),
                                          "output_tokens": draw(st.integers(0, 10**6)), "estimated": True}}))
    return message


@st.composite
def events(draw):
    """A line the engine could write (every kind of FAST_KINDS, two others), mutated once in most examples."""
    kind = draw(st.sampled_from(sorted(FAST_KINDS) + ["message/queued", "custom/kind"]))
    event = {"seq": draw(st.integers(0, 10**20)), "kind": kind,
             "time": draw(st.floats(0, 2e9) | st.integers(0, 10**12)), "turn": draw(st.integers(0, 50))}
    if kind in ("user/message", "assistant/message", "tool/result") or _odds(draw) < 0.2:
        event["message"] = draw(messages())
    if kind == "turn/end":
        event["data"] = _some(draw, {"reason": "end_turn", "error": "boom", "cause": "x"}) | {"reason": "end_turn"}
    elif kind == "tool/call":
        event["data"] = {"call_id": "c1", "name": "lookup", "arguments": {"q": "x"}}
    elif _odds(draw) < 0.3:
        event["data"] = {"note": draw(_ANY)}
    if _odds(draw) < 0.1:
        event["extra"] = draw(_ANY)  # a newer version's key
    return _mutate(draw, event) if _odds(draw) < 0.75 else event


def _same(value) -> str:
    """``value`` for comparing (NaN, which an unchecked field may hold, is never equal to itself)."""
    return json.dumps(value, sort_keys=True, allow_nan=True)


def old_way(line: bytes):
    try:
        return ("ok", _same(check_event(json.loads(line))))
    except (ValueError, UnicodeDecodeError) as error:
        return (type(error).__name__, str(error))


def new_way(line: bytes):
    try:
        return ("ok", _same(read_event_line(line)))
    except (ValueError, UnicodeDecodeError) as error:
        return (type(error).__name__, str(error))


@settings(max_examples=600, deadline=None)
@given(events())
def test_the_fast_check_accepts_only_what_check_event_accepts_and_reads_the_same(event):
    line = json.dumps(event, allow_nan=True).encode()
    try:
        fast = EVENT_LINE.validate_json(line)
    except pydantic.ValidationError:
        fast = None
    if fast is not None:
        assert old_way(line) == ("ok", _same(fast))
    assert new_way(line) == old_way(line)


def engine_lines():
    return [json.dumps(e).encode() for e in [
        {"seq": 0, "kind": "turn/start", "time": 1765000000.25, "turn": 1},
        {"seq": 1, "kind": "user/message", "time": 1765000000.5, "turn": 1,
         "message": {"role": "user", "content": [{"type": "text", "text": "Find the capital of France."}],
                     "id": "msg-1", "source": {"kind": "user"}}},
        {"seq": 2, "kind": "tool/call", "time": 1765000001.0, "turn": 1,
         "data": {"call_id": "call-1", "name": "lookup", "arguments": {"q": "capital of France"}}},
        {"seq": 3, "kind": "tool/result", "time": 1765000001.5, "turn": 1,
         "message": {"role": "tool", "content": [{"type": "tool-result", "call_id": "call-1", "name": "lookup",
                                                  "text": "Paris", "is_error": False}]}},
        {"seq": 4, "kind": "assistant/message", "time": 1765000002, "turn": 1,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Paris."}],
                     "usage": {"input_tokens": 120, "output_tokens": 4, "estimated": True}}},
        {"seq": 5, "kind": "turn/end", "time": 1765000002.5, "turn": 1, "data": {"reason": "end_turn"}},
    ]]


@pytest.mark.parametrize("line", engine_lines())
def test_the_engines_own_lines_take_the_fast_path(line):
    assert EVENT_LINE.validate_json(line) == json.loads(line) == read_event_line(line)


@pytest.mark.parametrize(("line", "error"), [
    (b'{"seq": 1, "kind": "user/message", "time": 1, "message": {"role": "x", "content": []}}',
     "message.role: expected one of user, assistant, tool, got a string ('x')"),
    (b'{"seq": true, "kind": "turn/start", "time": 1, "turn": 1}', "seq: expected an integer >= 0, got a boolean (True)"),
    (b'{"seq": -1, "kind": "turn/start", "time": 1, "turn": 1}', "seq: expected an integer >= 0, got an integer (-1)"),
    (b'{"seq": 1, "kind": "turn/start", "time": 1, "turn": -2}', "turn: expected an integer >= 0 or null, got an integer (-2)"),
    (b'{"seq": 1, "kind": "turn/start", "time": NaN, "turn": 1}', "time: expected a number, got a number (nan)"),
    (b'{"seq": 1, "kind": "turn/end", "time": 1, "turn": 1}', "data: expected the data of a turn/end event, but it is missing"),
    (b'{"seq": 1, "kind": "turn/end", "time": 1, "turn": 1, "data": {"reason": 7}}',
     "data.reason: expected a string, got an integer (7)"),
    (b'{"seq": 1, "kind": "tool/result", "time": 1, "message": {"role": "tool", "content": [{"type": "tool-result", '
     b'"call_id": "c", "name": "n", "text": "t", "is_error": "no"}]}}',
     "message.content[0].is_error: expected a boolean, got a string ('no')"),
    (b'{"seq": 1, "kind": "assistant/message", "time": 1, "message": {"role": "assistant", "usage": '
     b'{"input_tokens": 1, "output_tokens": 2, "estimated": null}}}',
     "message.usage.estimated: expected true or false, got null"),
    (b'{"seq": 1, "kind": "user/message", "time": 1, "message": {"role": "user", "source": {"kind": "user", "x": "y"}}}',
     'message.source: unknown field "x"'),
    (b'{"seq": 1, "kind": "tool/call", "time": 1, "data": {"call_id": "c", "name": "n", "arguments": [1]}}',
     "data.arguments: expected an object, got an array"),
])
def test_a_refused_line_gets_the_hand_written_error(line, error):
    with pytest.raises(RecordError) as info:
        read_event_line(line)
    assert str(info.value) == error


def test_a_line_that_is_not_json_is_json_s_own_error():
    with pytest.raises(json.JSONDecodeError, match="Expecting value: line 1 column 1"):
        read_event_line(b"not json")
    with pytest.raises(UnicodeDecodeError):
        read_event_line(b'{"seq": 1, "kind": "\xff"}')


def test_a_line_jiter_refuses_but_json_reads_is_still_read():
    """A lone surrogate escape: ``validate_json`` refuses it, ``json.loads`` (the old way) reads it."""
    line = b'{"seq": 1, "kind": "user/message", "time": 1, "message": {"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}}'
    with pytest.raises(pydantic.ValidationError):
        EVENT_LINE.validate_json(line)
    assert read_event_line(line)["message"]["content"][0]["text"] == "\ud800"
