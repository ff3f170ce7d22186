"""``hub.transcript(id)``: the log folded into the conversation a person reads (toh_nb.conversation)."""

from __future__ import annotations

import pytest

import toh_nb as tn
from toh_nb.conversation import CONVERSATION_COLUMNS, conversation_rows
from toh_nb.core.content import Message, Source, Text, ToolCallBlock, ToolResultBlock, Usage
from toh_nb.core.session import Event, Session, SessionHeader, turn_end_data


def log(*events: tuple) -> Session:
    """A session of (time, kind, turn, message, data) events."""
    return Session(SessionHeader("agent-1", 100.0), [Event(i, kind, time, turn, message, data)
                                                      for i, (time, kind, turn, message, data) in enumerate(events)])


def assistant(text, *calls, usage=None):
    """An assistant message with its text and tool calls ``(call id, name, arguments)``."""
    content = [Text(text)] if text else []
    return Message("assistant", content + [ToolCallBlock(*call) for call in calls], usage=usage)

TWO_TURNS = log(
    (100.0, "subagent/descriptor", None, None, {"mode": "continuable"}),
    (100.5, "turn/start", 1, None, None),
    (100.5, "user/message", 1, Message("user", "Check both"), None),
    (101.0, "assistant/message", 1, assistant("", ("c1", "search", {"q": "a"}), ("c2", "search", {"q": "b"}),
                                               usage=Usage(120, 14)), None),
    (101.0, "tool/call", 1, None, {"call_id": "c1", "name": "search", "arguments": {"q": "a"}}),
    (101.0, "tool/call", 1, None, {"call_id": "c2", "name": "search", "arguments": {"q": "b"}}),
    (101.4, "tool/result", 1, Message("tool", [ToolResultBlock("c2", "search", "Error: b failed", True)]), None),
    (101.6, "tool/result", 1, Message("tool", [ToolResultBlock("c1", "search", "a found")]), None),
    (102.0, "assistant/message", 1, Message("assistant", "One of two", usage=Usage(150, 3)), None),
    (102.0, "turn/end", 1, None, turn_end_data("completed")),
    (110.0, "turn/start", 2, None, None),
    (110.0, "user/message", 2, Message("user", "job finished", source=Source("notice")), None),
    (110.5, "turn/end", 2, None, turn_end_data("error", "the model failed")),
)


def test_messages_tool_calls_with_their_results_and_tokens_per_call_and_per_turn():
    rows = conversation_rows(TWO_TURNS)
    assert all(list(row) == CONVERSATION_COLUMNS for row in rows)
    assert [(r["turn"], r["role"], r["source"], r["tool"], r["arguments"], r["text"], r["is_error"],
             r["input_tokens"], r["output_tokens"], r["elapsed_s"]) for r in rows] == [
        (1, "user", "user", None, None, "Check both", False, None, None, None),
        (1, "assistant", None, None, None, "", False, 120, 14, None),
        # parallel calls of one tool: each result on its own call's row (the second finished first)
        (1, "tool", None, "search", '{"q": "a"}', "a found", False, None, None, None),
        (1, "tool", None, "search", '{"q": "b"}', "Error: b failed", True, None, None, None),
        (1, "assistant", None, None, None, "One of two", False, 150, 3, None),
        (1, "turn", None, None, None, "completed", False, 270, 17, 1.5),
        (2, "user", "notice", None, None, "job finished", False, None, None, None),
        (2, "turn", None, None, None, "error: the model failed", False, 0, 0, 0.5)]


def test_a_call_still_running_has_no_result_and_a_lone_result_shows_on_its_own():
    running = conversation_rows(log(
        (1.0, "turn/start", 1, None, None),
        (1.0, "tool/call", 1, None, {"call_id": "c1", "name": "wait", "arguments": {}}),
        (2.0, "tool/result", 1, Message("tool", [ToolResultBlock("zz", "other", "late")]), None)))
    assert [(r["role"], r["tool"], r["arguments"], r["text"]) for r in running] == [
        ("tool", "wait", "{}", None), ("tool", "other", None, "late")]


def test_a_queued_follow_up_shows_until_its_turn_runs_it_and_a_dropped_one_says_so():
    with tn.Hub(tn.FunctionModel(lambda request: "ok"), ids="sequential") as hub:
        kid = hub.start("first", label="notes")
        kid.wait(timeout=5)
        kid.send("second")
        kid.wait(timeout=5)
        roles = [(r["turn"], r["role"], r["text"]) for r in hub.async_hub.view.transcript(kid.id)]
    assert roles == [(1, "user", "first"), (1, "assistant", "ok"), (1, "turn", "completed"),
                     (2, "user", "second"), (2, "assistant", "ok"), (2, "turn", "completed")]
    queued = {"id": "m1", "content": "later", "source": {"kind": "user"}}
    rows = conversation_rows(log((1.0, "message/queued", None, None, queued)))
    assert [(r["role"], r["source"], r["text"]) for r in rows] == [("queued", "user", "later")]
    rows = conversation_rows(log((1.0, "message/queued", None, None, queued),
                                 (2.0, "message/discarded", None, None, {"ids": ["m1"]})))
    assert [(r["role"], r["text"]) for r in rows] == [("discarded", "later")]


def test_both_faces_give_the_conversation_and_the_raw_log_one_argument_away():
    script = tn.ScriptedModel({"root": [[tn.ToolCall("subagent", {"description": "x", "prompt": "p1"})], "done"],
                               "x": ["x says hi"]})
    with tn.Hub(script, ids="sequential") as hub:
        hub.run("go")
        rows = hub.async_hub.view.transcript("root")
        raw = hub.async_hub.view.transcript("root", raw=True)
        frame, raw_frame = hub.transcript(hub.root), hub.transcript(hub.root, raw=True)
        with pytest.raises(tn.UsageError, match="^raw must be True or False, got 'yes'$"):
            hub.transcript(hub.root, raw="yes")
    assert [(r["role"], r["tool"], r["text"]) for r in rows] == [
        ("user", None, "go"), ("assistant", None, ""), ("tool", "subagent", "x says hi"),
        ("assistant", None, "done"), ("turn", None, "completed")]
    # a scripted model reports no usage: no token cells (not zeros); the turn's total is 0
    assert [(r["input_tokens"], r["output_tokens"]) for r in rows if r["role"] in ("assistant", "turn")] == [
        (None, None), (None, None), (0, 0)]
    assert [r["kind"] for r in raw][:3] == ["turn/start", "user/message", "assistant/message"]
    assert list(frame.columns) == CONVERSATION_COLUMNS
    assert frame[["role", "tool", "text"]].values.tolist() == [[r["role"], r["tool"], r["text"]] for r in rows]
    assert raw_frame.kind.tolist() == [r["kind"] for r in raw]


def test_columns_pick_what_both_faces_return():
    with tn.Hub(tn.FunctionModel(lambda request: "ok"), ids="sequential") as hub:
        hub.run("go")
        inner = hub.async_hub
        assert hub.portal.call(lambda: inner.transcript("root", columns=["role", "text"])) == [
            {"role": "user", "text": "go"}, {"role": "assistant", "text": "ok"}, {"role": "turn", "text": "completed"}]
        assert hub.portal.call(lambda: inner.agents(columns=["id", "turns"])) == [{"id": "root", "turns": 1}]
        assert hub.portal.call(lambda: inner.transcript("root", raw=True, columns=["kind"]))[0] == {"kind": "turn/start"}
        assert list(hub.transcript("root", columns=["text", "role"]).columns) == ["text", "role"]
        assert list(hub.agents(columns=["id"]).id) == ["root"]
        with pytest.raises(tn.UsageError) as error:
            hub.portal.call(lambda: inner.transcript("root", columns=["kind"]))
        assert str(error.value) == ("hub.transcript(): no column 'kind'; columns: turn, role, source, tool, arguments, "
                                    'text, is_error, input_tokens, output_tokens, elapsed_s (or columns="all")')
        with pytest.raises(tn.UsageError) as error:
            hub.transcript("root", columns="kind")
        assert str(error.value) == ('hub.transcript(): columns must be None, "all" or a list of column names, '
                                    "got 'kind'")
