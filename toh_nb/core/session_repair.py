"""Closing a session log a crash left mid-turn, before anything resumes from it.

A process that dies during a turn leaves a ``turn/start`` without its ``turn/end`` and possibly tool
calls without results. A model given that conversation would be asked to continue an invalid one, so a
resume (a restarted hub's root, a cold-resumed child) first appends what the log lacks: an errored
result for each unanswered call (``outcome unknown`` when it had been dispatched, ``aborted`` when not)
and ``turn/end`` with reason ``interrupted``. The log stays append-only.
"""

from __future__ import annotations

from .content import Message, ToolResultBlock
from .session import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, Session
from .tools import ABORTED_BEFORE_DISPATCH

UNKNOWN_OUTCOME = "Error: the session ended before this tool call finished; its outcome is unknown"


def repair_tail(session: Session) -> None:
    """Close a turn a crash left open: results for unanswered calls, then ``turn/end interrupted``."""
    events = session.events
    open_turn = None
    for event in reversed(events):
        if event.kind == TURN_END:
            break
        if event.kind == TURN_START:
            open_turn = event.turn
            break
    if open_turn is None:
        return
    turn_events = [e for e in events if e.turn == open_turn]
    answered = {e.message.tool_call_id for e in turn_events if e.kind == TOOL_RESULT}
    dispatched = {e.data["call_id"] for e in turn_events if e.kind == TOOL_CALL}
    # every call the model asked for gets a result, so the conversation stays valid for the next model
    for event in turn_events:
        if event.kind != ASSISTANT_MESSAGE:
            continue
        for block in event.message.content:
            if block.type == "tool-call" and block.id not in answered:
                text = (UNKNOWN_OUTCOME if block.id in dispatched else f"Error: {ABORTED_BEFORE_DISPATCH}")
                session.append(TOOL_RESULT, turn=open_turn,
                               message=Message("tool", [ToolResultBlock(block.id, block.name, text, True)]))
    session.append(TURN_END, turn=open_turn, data={"reason": "interrupted"})
