"""An agent's transcript as a readable conversation: the tree's chat view and its Markdown export.

``hub.transcript(id)`` is one row per logged event (turn markers, descriptor, messages, tool calls and
results), which is right for analysis and wrong for reading. :func:`chat_entries` folds those rows into
what a person reads: who said what, each tool call with its arguments and result folded under the
assistant message that made it, turn boundaries as thin separators, no ``None``/``False`` cells.
"""

from __future__ import annotations

from typing import Any

from ..core.session import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE


def chat_entries(rows: list[dict]) -> list[dict]:
    """Entries ``{"role": "user" | "assistant" | "turn", "text": str, ...}`` from transcript rows
    (:func:`toh_nb.snapshots.transcript`). An assistant entry carries ``calls``: ``[{"tool",
    "arguments", "result", "is_error"}]``; a user entry its ``source`` (``user``, ``notice``, …)."""
    entries: list[dict] = []
    # tool name -> its calls still waiting for a result, oldest first (results are logged in the order
    # the model made the calls, so parallel calls of one tool pair up first-in, first-out)
    pending: dict[str, list[dict]] = {}
    calls: list[dict] = []
    for row in rows:
        kind = row.get("kind")
        if kind == TURN_START:
            entries.append({"role": "turn", "text": f"turn {row.get('turn')}"})
        elif kind == TURN_END:
            reason = row.get("text") or ""
            if reason != "completed":
                entries.append({"role": "turn", "text": f"turn ended: {reason}"})
        elif kind == USER_MESSAGE:
            entries.append({"role": "user", "text": row.get("text") or "", "source": row.get("source") or "user"})
        elif kind == ASSISTANT_MESSAGE:
            calls = []
            entries.append({"role": "assistant", "text": row.get("text") or "", "calls": calls})
        elif kind == TOOL_CALL:
            call = {"tool": row.get("tool") or "", "arguments": row.get("text") or "", "result": None,
                    "is_error": False}
            calls.append(call)
            pending.setdefault(call["tool"], []).append(call)
        elif kind == TOOL_RESULT:
            waiting = pending.get(row.get("tool") or "")
            call = waiting.pop(0) if waiting else None
            if call is None:  # a result without its call (a repaired log): show it on its own
                call = {"tool": row.get("tool") or "", "arguments": "", "result": None, "is_error": False}
                calls.append(call)
            call["result"] = row.get("text") or ""
            call["is_error"] = bool(row.get("is_error"))
    return entries


def chat_markdown(agent_id: str, entries: list[dict], label: str | None = None) -> str:
    """The conversation as Markdown (the tree's transcript export)."""
    title = f"# {label} ({agent_id})" if label else f"# {agent_id}"
    lines = [title, ""]
    for entry in entries:
        role = entry["role"]
        if role == "turn":
            lines += [f"---  *{entry['text']}*", ""]
            continue
        who = "**user**" if role == "user" else "**assistant**"
        if role == "user" and entry.get("source") not in (None, "user"):
            who = f"**{entry['source']}**"
        lines += [f"{who}: {entry['text']}".rstrip(), ""]
        for call in entry.get("calls") or ():
            lines.append(f"- tool `{call['tool']}` {_code(call['arguments'])}")
            if call["result"] is not None:
                mark = "error" if call["is_error"] else "result"
                lines.append(f"  - {mark}: {_code(call['result'])}")
        if entry.get("calls"):
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _code(text: Any) -> str:
    text = str(text or "").replace("\n", " ")
    return f"`` {text} ``" if "`" in text else f"`{text}`"
