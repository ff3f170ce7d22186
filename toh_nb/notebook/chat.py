"""An agent's transcript as a readable conversation: the tree's chat view and its Markdown export.

``hub.transcript(id)`` is already the conversation (:mod:`toh_nb.conversation`: one row per message, tool
call and turn end). :func:`chat_entries` groups those rows the way a chat shows them: each tool call
folded under the assistant message that made it, turns as thin separators, no ``None``/``False`` cells.
"""

from __future__ import annotations

from typing import Any

from ..conversation import DISCARDED, QUEUED, TURN


def chat_entries(rows: list[dict]) -> list[dict]:
    """Entries ``{"role": "user" | "assistant" | "turn", "text": str, ...}`` from conversation rows
    (:func:`toh_nb.conversation.conversation_rows`). An assistant entry carries ``calls``: ``[{"tool",
    "arguments", "result", "is_error"}]``; a user entry its ``source`` (``user``, ``notice``, … and
    ``queued``/``discarded`` for a follow-up not run)."""
    entries: list[dict] = []
    calls: list[dict] | None = None  # the calls of the last assistant message, where tool rows fold
    turn = None
    for row in rows:
        role = row.get("role")
        if row.get("turn") is not None and row.get("turn") != turn:
            turn = row.get("turn")
            entries.append({"role": "turn", "text": f"turn {turn}"})
        if role == TURN:
            reason = row.get("text") or ""
            if reason != "completed":
                entries.append({"role": "turn", "text": f"turn ended: {reason}"})
        elif role in ("user", QUEUED, DISCARDED):
            source = role if role != "user" else row.get("source") or "user"
            entries.append({"role": "user", "text": row.get("text") or "", "source": source})
            calls = None
        elif role == "assistant":
            calls = []
            entries.append({"role": "assistant", "text": row.get("text") or "", "calls": calls})
        elif role == "tool":
            call = {"tool": row.get("tool") or "", "arguments": row.get("arguments") or "",
                    "result": row.get("text"), "is_error": bool(row.get("is_error"))}
            if calls is None:  # a result without its call (a repaired log): shown on its own
                calls = []
                entries.append({"role": "assistant", "text": "", "calls": calls})
            calls.append(call)
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
