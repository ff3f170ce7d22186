"""When an agent worked: its activations (turns) and, inside each, its model and tool calls as spans.

What the tree's waterfall draws (``AsyncHub.activations(id)``). A continuable child is not busy from
its creation to now: it works one turn at a time and sits idle between them. Each turn is one
activation, ``turn/start`` to ``turn/end``; inside it the log times each step:

- a model call ends when its ``assistant/message`` is logged and started at the event before it (the
  turn's start, a message, or the last tool result it answers);
- a tool call runs from its ``tool/call`` to its ``tool/result`` (matched by call id);
- a turn that ended while its model was answering (interrupted, timed out, the model failed) ends that
  call with it, marked ``is_error``.

A turn still running has ``end`` None; so has its call in flight (a model call when the last event
needs an answer, a tool call without its result). A stored log whose last turn never ended (the
process died) ends that turn at its last event. No pandas, no Jupyter: plain dicts.
"""

from __future__ import annotations

from typing import Any

from .conversation import arguments_text
from .core.session import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE

MODEL = "model"
TOOL = "tool"
#: characters of one message a span carries (the whole text is in ``hub.transcript``)
SPAN_TEXT = 1000
#: the most recent spans kept per agent (a long root log stays a small sync)
MAX_SPANS = 400


def _clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= SPAN_TEXT else text[:SPAN_TEXT] + "\u2026"


def _span(kind: str, name: str, start: float, end: float | None, **fields: Any) -> dict:
    span = {"kind": kind, "name": name, "start": start, "end": end, "input_tokens": 0, "output_tokens": 0,
            "is_error": False, "messages": []}
    span.update(fields)
    return span


def activation_rows(session: Any, live: bool = False) -> list[dict]:
    """The activations of a session's own events, oldest first: each ``{"turn", "start", "end", "reason",
    "input_tokens", "output_tokens", "spans"}``; a span is ``{"kind": "model" | "tool", "name", "start",
    "end", "input_tokens", "output_tokens", "is_error", "messages": [{"role", "text", "tool"}]}``.
    ``live``: the agent is in memory, so a turn without its end is still running (else it ended at
    its last event)."""
    activations: list[dict] = []
    current: dict | None = None
    last_time, last_kind = 0.0, None
    inputs: list[dict] = []  # messages a model call reads that no span shows yet (prompts, notices)
    open_calls: dict[Any, dict] = {}
    for event in session.own_events():
        kind, message = event.kind, event.message
        if kind == TURN_START:
            current = {"turn": event.turn, "start": event.time, "end": None, "reason": None, "input_tokens": 0,
                       "output_tokens": 0, "spans": []}
            activations.append(current)
            inputs, open_calls = [], {}
        elif current is None:
            continue  # seed events and anything logged outside a turn
        elif kind == USER_MESSAGE and message is not None:
            source = message.source.kind if message.source is not None else "user"
            inputs.append({"role": "user" if source == "user" else source, "text": _clip(message.text), "tool": None})
        elif kind == ASSISTANT_MESSAGE and message is not None:
            usage = message.usage
            inp, out = (usage.input_tokens, usage.output_tokens) if usage is not None else (0, 0)
            names = [call.name for call in message.tool_calls]
            said = {"role": "assistant", "text": _clip(message.text), "tool": ", ".join(names) or None}
            current["spans"].append(_span(MODEL, "model", last_time, event.time, input_tokens=inp, output_tokens=out,
                                          messages=[*inputs, said]))
            current["input_tokens"] += inp
            current["output_tokens"] += out
            inputs = []
        elif kind == TOOL_CALL and isinstance(event.data, dict):
            name = event.data.get("name") or ""
            span = _span(TOOL, name, event.time, None, messages=[
                {"role": "call", "text": _clip(arguments_text(event.data.get("arguments"))), "tool": name}])
            current["spans"].append(span)
            open_calls[event.data.get("call_id")] = span
        elif kind == TOOL_RESULT and message is not None:
            span = open_calls.pop(message.tool_call_id, None)
            if span is not None:
                span["end"] = event.time
                span["is_error"] = message.is_error
                span["messages"].append({"role": "error" if message.is_error else "result",
                                         "text": _clip(message.text), "tool": span["name"]})
        elif kind == TURN_END:
            data = event.data if isinstance(event.data, dict) else {}
            if not open_calls and last_kind != ASSISTANT_MESSAGE:  # the turn ended during a model call
                current["spans"].append(_span(MODEL, "model", last_time, event.time, is_error=True,
                                              messages=list(inputs)))
            current["end"] = event.time
            current["reason"] = data.get("reason")
            for span in open_calls.values():  # abandoned calls: drawn up to the turn's end
                span["end"] = event.time
            current, open_calls = None, {}
        last_time, last_kind = event.time, kind
    if current is not None:
        if live:
            if not open_calls and last_kind != ASSISTANT_MESSAGE:  # no tool runs: the model is answering
                current["spans"].append(_span(MODEL, "model", last_time, None, messages=list(inputs)))
        else:
            current["end"] = last_time
            for span in current["spans"]:
                if span["end"] is None:
                    span["end"] = last_time
    _keep_recent(activations)
    return activations


def _keep_recent(activations: list[dict]) -> None:
    """Drop the oldest spans beyond :data:`MAX_SPANS` (their activations stay, as bars)."""
    budget = MAX_SPANS
    for activation in reversed(activations):
        spans = activation["spans"]
        if len(spans) > budget:
            activation["spans"] = spans[len(spans) - budget:] if budget else []
            activation["dropped_spans"] = len(spans) - len(activation["spans"])
        budget = max(0, budget - len(spans))
