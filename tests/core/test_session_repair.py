"""repair_tail: a log a crash left mid-turn is closed, append-only, before anything resumes from it."""

from __future__ import annotations

from toh_nb.core.content import Message, Text, ToolCallBlock, ToolResultBlock
from toh_nb.core.session import Session, SessionHeader
from toh_nb.core.session_repair import repair_tail


def crashed_log() -> Session:
    session = Session(SessionHeader("a1", 0.0))
    session.append("turn/start", turn=1)
    session.append("user/message", turn=1, message=Message("user", [Text("go")]))
    session.append("assistant/message", turn=1, message=Message("assistant", [
        ToolCallBlock("c1", "read", {}), ToolCallBlock("c2", "write", {}), ToolCallBlock("c3", "list", {})]))
    session.append("tool/call", turn=1, data={"call_id": "c1", "name": "read", "arguments": {}})
    session.append("tool/call", turn=1, data={"call_id": "c2", "name": "write", "arguments": {}})
    session.append("tool/result", turn=1, message=Message("tool", [ToolResultBlock("c2", "write", "ok")]))
    return session


def test_unanswered_calls_get_errored_results_then_the_turn_ends_interrupted():
    session = crashed_log()
    before = len(session.events)
    repair_tail(session)
    added = session.events[before:]
    assert [(e.kind, e.turn) for e in added] == [("tool/result", 1), ("tool/result", 1), ("turn/end", 1)]
    results = [e.message.content[0] for e in added[:2]]
    assert [(r.call_id, r.text, r.is_error) for r in results] == [
        ("c1", "Error: the session ended before this tool call finished; its outcome is unknown", True),
        ("c3", "Error: tool call aborted before dispatch", True)]
    assert added[2].data == {"reason": "interrupted"}


def test_a_closed_log_is_left_as_it_is():
    session = crashed_log()
    repair_tail(session)
    closed = len(session.events)
    repair_tail(session)
    assert len(session.events) == closed
