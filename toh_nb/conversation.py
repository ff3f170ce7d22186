"""An agent's log as the conversation people read: ``hub.transcript(id)``.

The log (``hub.transcript(id, raw=True)``) has one row per event: turn markers, the descriptor, every
message, each tool call and its result apart, external-agent notices. What a person expects from a
chat transcript is who said what, each tool call next to its result, and what each turn cost. This
module folds the events into those rows, one pass, no pandas (the async face and scripts read the
rows; :mod:`toh_nb.notebook.tables` makes the DataFrame, :mod:`toh_nb.notebook.chat` the tree's chat view).

Rows (:data:`CONVERSATION_COLUMNS`), in log order:

- ``user``: a prompt, a follow-up, a notice or report (``source`` says which: ``user``, ``notice`` …);
- ``assistant``: the model's text of one model call, with that call's ``input_tokens``/``output_tokens``
  (None when the model reported no usage; the tool calls it made follow as ``tool`` rows);
- ``tool``: one tool call: ``tool`` (its name), ``arguments`` (JSON), ``text`` (its result; None while it
  runs), ``is_error``;
- ``queued``: a follow-up accepted and not run yet; ``discarded``: one a kill dropped unread;
- ``turn``: the end of a turn: ``text`` says how it ended (``completed``, ``error: …``), the tokens are
  the turn's total, ``elapsed_s`` its duration.

Other events (descriptor, external-agent protocol notices, permissions) are in the raw log only.
"""

from __future__ import annotations

import json
from typing import Any

from .core.inbox_log import queued_message, queued_outcomes
from .core.session import (ASSISTANT_MESSAGE, MESSAGE_QUEUED, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START,
                           USER_MESSAGE)

CONVERSATION_COLUMNS = ["turn", "role", "source", "tool", "arguments", "text", "is_error", "input_tokens",
                        "output_tokens", "elapsed_s"]
#: the roles of conversation rows besides the messages' own (user, assistant, tool)
QUEUED = "queued"
DISCARDED = "discarded"
TURN = "turn"


def _row(turn: Any, role: str, **fields: Any) -> dict:
    row = dict.fromkeys(CONVERSATION_COLUMNS)
    row.update(turn=turn, role=role, is_error=False, **fields)
    return row


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the conversation shows them: compact JSON, keys sorted."""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def conversation_rows(session: Any) -> list[dict]:
    """The conversation rows of a session log (see the module docstring)."""
    rows: list[dict] = []
    fates = dict((id(event), fate) for event, fate in queued_outcomes(session.events))
    calls: dict[str, dict] = {}  # call id -> its row, waiting for the result
    by_name: dict[str, list[dict]] = {}  # tool name -> rows still waiting (a result with an unknown id)
    turn_start: dict[Any, float] = {}
    turn_tokens: dict[Any, list[int]] = {}
    for event in session.events:
        kind, turn, message = event.kind, event.turn, event.message
        if kind == TURN_START:
            turn_start[turn] = event.time
            turn_tokens[turn] = [0, 0]
        elif kind == USER_MESSAGE and message is not None:
            source = message.source.kind if message.source is not None else "user"
            rows.append(_row(turn, "user", source=source, text=message.text))
        elif kind == MESSAGE_QUEUED:
            fate = fates.get(id(event))
            if fate == "consumed":
                continue  # its turn logged it as that turn's user message
            queued = queued_message(event.data)
            rows.append(_row(turn, DISCARDED if fate == "discarded" else QUEUED, source=queued.source.kind if queued.source is not None else "user",
                             text=queued.text))
        elif kind == ASSISTANT_MESSAGE and message is not None:
            usage = message.usage  # None: the model reported none (a scripted step): no token cells
            inp, out = (usage.input_tokens, usage.output_tokens) if usage is not None else (None, None)
            if turn in turn_tokens and usage is not None:
                turn_tokens[turn][0] += inp
                turn_tokens[turn][1] += out
            rows.append(_row(turn, "assistant", text=message.text, input_tokens=inp, output_tokens=out))
        elif kind == TOOL_CALL and isinstance(event.data, dict):
            name = event.data.get("name") or ""
            row = _row(turn, "tool", tool=name, arguments=arguments_text(event.data.get("arguments")))
            rows.append(row)
            calls[event.data.get("call_id")] = row
            by_name.setdefault(name, []).append(row)
        elif kind == TOOL_RESULT and message is not None:
            row = calls.pop(message.tool_call_id, None)
            waiting = by_name.get(message.tool_name or "") or []
            if row is None and waiting:  # a log whose calls carry no id: pair results in call order
                row = waiting[0]
            if row is not None and row in waiting:
                waiting.remove(row)
            if row is None:  # a result without its call (a repaired log): show it on its own
                row = _row(turn, "tool", tool=message.tool_name)
                rows.append(row)
            row["text"] = message.text
            row["is_error"] = message.is_error
        elif kind == TURN_END:
            data = event.data if isinstance(event.data, dict) else {}
            text = data.get("reason") or ""
            if data.get("error"):
                text += f": {data['error']}"
            inp, out = turn_tokens.pop(turn, (0, 0))
            start = turn_start.pop(turn, None)
            rows.append(_row(turn, TURN, text=text, input_tokens=inp, output_tokens=out,
                             elapsed_s=None if start is None else max(0.0, event.time - start)))
    return rows
